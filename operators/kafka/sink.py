"""Writing Kafka as Flink's ``KafkaSink``, exactly once although a Python client cannot
resume another process's transaction.

Flink's Java sink pre-commits by flushing an open Kafka transaction and, after a crash,
resumes it by producer id and epoch. librdkafka cannot, so flowray's exactly-once sink is
the write-ahead-log sink published on checkpoint notification:

* between checkpoints, records are serialized and *staged* in the subtask (memory, spilled
  to a local file past ``flowray.sink.spill-threshold``); nothing reaches Kafka;
* at a checkpoint (pre-commit) the staged records become part of the pending transaction,
  which is in the sink's operator state, hence in the checkpoint: the log is durable;
* when the checkpoint completes, the records are written in **one Kafka transaction**
  under the transactional id ``<prefix>-<subtask>``, together with a *marker*: the
  checkpoint id committed as the offset of partition 0 of the marker topic
  (``__flowray_kafka_sink_markers``) for the consumer group
  ``<prefix>-<job id>-<subtask>`` (``send_offsets_to_transaction``), so the records and
  the marker commit atomically;
* a restore commits the pending transactions of the restored checkpoint again, unless the
  marker says their checkpoint was committed already; before that it calls
  ``init_transactions`` for the transactional id, which fences a zombie of an earlier
  attempt (its commit then fails) and aborts a transaction a crash left open.

The price: records are visible one checkpoint (plus the commit) later than with an open
transaction, and a checkpoint holds its epoch's records (state size = output of one
interval). ``AT_LEAST_ONCE`` sends at once and flushes at every checkpoint; ``NONE`` only
sends.

Keys of ``set_property`` go to the librdkafka producer (Java-only ones are dropped with a
note); ``transaction.timeout.ms`` is checked against the checkpoint interval at submission.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import msgpack

from flowray.common.serialization import SerializationSchema

from flowray.operators.kafka.client import (
    KafkaSinkError,
    connect_timeout_ms,
    describe_error,
    librdkafka_config,
)
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.staged_records import StagedRecords, spill_threshold_of
from flowray.operators.two_phase_commit import TwoPhaseCommitSink

__all__ = ["KafkaRecordSerializationSchema", "KafkaTopicSelector", "KafkaPartitioner",
           "FlinkFixedPartitioner", "KafkaSinkDefinition", "KafkaSinkBase", "WalTransaction",
           "MARKER_TOPIC", "marker_group", "transactional_id", "check_transaction_timeout",
           "Guarantee"]

log = logging.getLogger("flowray.kafka")

MARKER_TOPIC = "__flowray_kafka_sink_markers"
#: librdkafka's default transaction.timeout.ms
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000

Guarantee = str  # "exactly-once" | "at-least-once" | "none" (DeliveryGuarantee's values)


class KafkaTopicSelector:
    """Picks the topic of each record (``apply(record) -> str``)."""

    def apply(self, data: Any) -> str:
        raise NotImplementedError


class _FunctionTopicSelector(KafkaTopicSelector):
    def __init__(self, fn: Callable[[Any], str]) -> None:
        self.fn = fn

    def apply(self, data: Any) -> str:
        return self.fn(data)


class KafkaPartitioner:
    """Picks the partition of each record (Flink's ``FlinkKafkaPartitioner``):
    ``open(parallel_instance_id, parallel_instances)`` once per subtask, then
    ``partition(record, key, value, target_topic, partitions) -> int``."""

    def open(self, parallel_instance_id: int, parallel_instances: int) -> None:
        pass

    def partition(self, record: Any, key: Optional[bytes], value: bytes, target_topic: str,
                  partitions: Sequence[int]) -> int:
        raise NotImplementedError


class FlinkFixedPartitioner(KafkaPartitioner):
    """Each sink subtask writes to one partition: ``partitions[subtask % len]``.

    >>> p = FlinkFixedPartitioner(); p.open(3, 4)
    >>> p.partition("r", None, b"v", "t", [0, 1])
    1
    """

    def open(self, parallel_instance_id: int, parallel_instances: int) -> None:
        self.instance = parallel_instance_id

    def partition(self, record: Any, key: Optional[bytes], value: bytes, target_topic: str,
                  partitions: Sequence[int]) -> int:
        return partitions[self.instance % len(partitions)]


class KafkaRecordSerializationSchema:
    """Turns records into Kafka records: a fixed topic or a topic selector, an optional key
    schema, a value schema, an optional partitioner. Build it with
    :meth:`builder` (PyFlink's ``KafkaRecordSerializationSchema.builder()``).

    >>> from flowray.common.serialization import SimpleStringSchema
    >>> schema = (KafkaRecordSerializationSchema.builder().set_topic("out")
    ...           .set_value_serialization_schema(SimpleStringSchema()).build())
    >>> schema.serialize_batch(["a", "b"])
    ('out', None, [b'a', b'b'], None)
    """

    def __init__(self, topic: Optional[str] = None,
                 topic_selector: Optional[KafkaTopicSelector] = None,
                 key_serialization_schema: Optional[SerializationSchema] = None,
                 value_serialization_schema: Optional[SerializationSchema] = None,
                 partitioner: Optional[KafkaPartitioner] = None) -> None:
        if (topic is None) == (topic_selector is None):
            raise ValueError("KafkaRecordSerializationSchema: set exactly one of set_topic(...) "
                             "and set_topic_selector(...)")
        if value_serialization_schema is None:
            raise ValueError("KafkaRecordSerializationSchema: set_value_serialization_schema("
                             "...) is required")
        for what, schema in (("key", key_serialization_schema),
                             ("value", value_serialization_schema)):
            if schema is not None and not callable(getattr(schema, "serialize", None)):
                raise TypeError(f"KafkaRecordSerializationSchema: the {what} serialization "
                                f"schema must have serialize(), got {schema!r}")
        self.topic = topic
        self.topic_selector = topic_selector
        self.key_schema = key_serialization_schema
        self.value_schema = value_serialization_schema
        self.partitioner = partitioner

    @staticmethod
    def builder() -> "KafkaRecordSerializationSchemaBuilder":
        return KafkaRecordSerializationSchemaBuilder()

    @staticmethod
    def _many(schema: SerializationSchema, records: List[Any]) -> List[bytes]:
        batch = getattr(schema, "serialize_batch", None)
        if batch is not None:
            return batch(records)
        serialize = schema.serialize
        return [serialize(r) for r in records]

    def serialize_batch(self, records: List[Any]) -> Tuple[Union[str, List[str]],
                                                           Optional[List[bytes]],
                                                           List[bytes], None]:
        """``(topic or topics, keys or None, values, None)`` for ``records``; partitions
        are chosen by the sink (it knows the partition counts)."""
        values = self._many(self.value_schema, records)
        keys = self._many(self.key_schema, records) if self.key_schema is not None else None
        if self.topic is not None:
            topics: Union[str, List[str]] = self.topic
        else:
            apply = self.topic_selector.apply
            topics = [apply(r) for r in records]
        return topics, keys, values, None


class KafkaRecordSerializationSchemaBuilder:
    """PyFlink's builder: ``set_topic`` or ``set_topic_selector``,
    ``set_key_serialization_schema``, ``set_value_serialization_schema``, ``set_partitioner``,
    ``build``."""

    def __init__(self) -> None:
        self._topic: Optional[str] = None
        self._selector: Optional[KafkaTopicSelector] = None
        self._key: Optional[SerializationSchema] = None
        self._value: Optional[SerializationSchema] = None
        self._partitioner: Optional[KafkaPartitioner] = None

    def set_topic(self, topic: str) -> "KafkaRecordSerializationSchemaBuilder":
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"set_topic: expected a topic name, got {topic!r}")
        self._topic, self._selector = topic, None
        return self

    def set_topic_selector(self, topic_selector: Union[Callable[[Any], str],
                                                       KafkaTopicSelector]
                           ) -> "KafkaRecordSerializationSchemaBuilder":
        if not isinstance(topic_selector, KafkaTopicSelector) and not callable(topic_selector):
            raise TypeError("topic_selector must be KafkaTopicSelector or a callable")
        if not isinstance(topic_selector, KafkaTopicSelector):
            topic_selector = _FunctionTopicSelector(topic_selector)
        self._selector, self._topic = topic_selector, None
        return self

    def set_key_serialization_schema(self, key_serialization_schema: SerializationSchema
                                     ) -> "KafkaRecordSerializationSchemaBuilder":
        self._key = key_serialization_schema
        return self

    def set_value_serialization_schema(self, value_serialization_schema: SerializationSchema
                                       ) -> "KafkaRecordSerializationSchemaBuilder":
        self._value = value_serialization_schema
        return self

    def set_partitioner(self, partitioner: KafkaPartitioner
                        ) -> "KafkaRecordSerializationSchemaBuilder":
        if not isinstance(partitioner, KafkaPartitioner):
            raise TypeError(f"set_partitioner: expected a KafkaPartitioner (e.g. "
                            f"FlinkFixedPartitioner()), got {partitioner!r}")
        self._partitioner = partitioner
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._key,
                                              self._value, self._partitioner)


@dataclass
class KafkaSinkDefinition:
    bootstrap_servers: str
    serializer: KafkaRecordSerializationSchema
    guarantee: Guarantee = "none"
    transactional_id_prefix: Optional[str] = None
    properties: Dict[str, str] = field(default_factory=dict)


def transactional_id(prefix: str, subtask: int) -> str:
    """The Kafka transactional id of a sink subtask (stable across attempts and jobs)."""
    return f"{prefix}-{subtask}"


def marker_group(prefix: str, job_id: str, subtask: int) -> str:
    """The consumer group whose offset on the marker topic is the last committed checkpoint
    of one sink subtask of one job."""
    return f"{prefix}-{job_id}-{subtask}"


def check_transaction_timeout(properties: Mapping[str, Any],
                              checkpoint_interval_ms: Optional[int]) -> None:
    """Reject, at submission, a ``transaction.timeout.ms`` shorter than the checkpoint
    interval (an exactly-once sink's transactions must outlive an interval).

    >>> check_transaction_timeout({"transaction.timeout.ms": "5000"}, 10_000)
    Traceback (most recent call last):
    ...
    ValueError: KafkaSink: transaction.timeout.ms is 5000 ms, shorter than the checkpoint interval of 10000 ms; set it (set_property('transaction.timeout.ms', ...)) to at least the interval, below the broker's transaction.max.timeout.ms (15 min by default)
    >>> check_transaction_timeout({}, 10_000)
    """
    if not checkpoint_interval_ms:
        return
    raw = properties.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    try:
        timeout = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"KafkaSink: transaction.timeout.ms must be a number of ms, got "
                         f"{raw!r}") from None
    if timeout < checkpoint_interval_ms:
        raise ValueError(
            f"KafkaSink: transaction.timeout.ms is {timeout} ms, shorter than the checkpoint "
            f"interval of {checkpoint_interval_ms} ms; set it (set_property("
            f"'transaction.timeout.ms', ...)) to at least the interval, below the broker's "
            f"transaction.max.timeout.ms (15 min by default)")


class WalTransaction:
    """One checkpoint epoch of an exactly-once sink subtask: its records (msgpack chunks,
    staged until pre-commit, then held in the transaction and so in the checkpoint) and
    where it comes from (prefix, job, subtask), which names its transactional id and
    marker."""

    def __init__(self, prefix: str, job_id: str, subtask: int,
                 staged: Optional[StagedRecords]) -> None:
        self.prefix, self.job_id, self.subtask = prefix, job_id, subtask
        self.checkpoint_id: Optional[int] = None
        self.staged = staged
        self.chunks: Optional[List[bytes]] = None  # set at pre-commit
        self.count = 0

    def seal(self, checkpoint_id: Optional[int]) -> None:
        self.checkpoint_id = checkpoint_id
        if self.chunks is None:
            staged = self.staged
            self.chunks = [c for batch in staged.batches() for c in batch] if staged else []
            if staged is not None:
                staged.discard()
            self.staged = None

    def __getstate__(self) -> Dict[str, Any]:
        # staged (not pre-committed) records never go into a checkpoint: such a
        # transaction is aborted on restore and its records replayed
        state = dict(self.__dict__)
        state["staged"] = None
        return state

    def __repr__(self) -> str:
        return (f"WalTransaction({self.prefix!r}, job {self.job_id}, subtask {self.subtask}, "
                f"checkpoint {self.checkpoint_id}, {self.count} records)")


class _DeliveryErrors:
    """Collects delivery failures reported by the producer (errors only)."""

    def __init__(self) -> None:
        self.errors: List[str] = []

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {describe_error(err)}")

    def raise_if_any(self, what: str) -> None:
        if self.errors:
            first, n = self.errors[0], len(self.errors)
            self.errors = []
            raise KafkaSinkError(f"KafkaSink: {n} record(s) could not be {what}; first: "
                                 f"{first}")


class KafkaSinkBase(TwoPhaseCommitSink):
    """The sink a subtask runs (see the module docstring); the public ``KafkaSink``
    subclasses it with PyFlink's builder."""

    default_name = "KafkaSink"

    def __init__(self, definition: KafkaSinkDefinition) -> None:
        d = definition
        if d.guarantee == "exactly-once" and not d.transactional_id_prefix:
            raise ValueError("KafkaSink: EXACTLY_ONCE needs set_transactional_id_prefix(...), "
                             "unique per sink among the jobs that write to the same Kafka "
                             "cluster and stable across restarts (Flink requires the same)")
        self.definition = d
        self._producer: Any = None
        self._producer_id: Optional[str] = None

    # -- submission ----------------------------------------------------------------------
    def validate_job_config(self, checkpoint_interval_ms: Optional[int]) -> None:
        if self.definition.guarantee == "exactly-once":
            check_transaction_timeout(self.definition.properties, checkpoint_interval_ms)

    # -- lifecycle -----------------------------------------------------------------------
    def open(self, context: SinkWriterContext) -> None:
        self.context = context
        self._timeout_ms = connect_timeout_ms(context.config)
        self._threshold = spill_threshold_of(context.config)
        self._errors = _DeliveryErrors()
        self._partition_counts: Dict[str, List[int]] = {}
        partitioner = self.definition.serializer.partitioner
        if partitioner is not None:
            partitioner.open(context.subtask_index, context.parallelism)
        if self.definition.guarantee == "exactly-once":
            self._ensure_marker_topic()

    def _config(self, transactional: Optional[str]) -> Dict[str, Any]:
        d = self.definition
        config, dropped = librdkafka_config(
            {k: v for k, v in d.properties.items() if not k.startswith("flowray.")},
            consumer=False)
        if dropped:
            log.info("flowray: KafkaSink ignores Java client properties %s", dropped)
        config["bootstrap.servers"] = d.bootstrap_servers
        config.setdefault("partitioner", "murmur2_random")  # the Java client's partitioning
        config.setdefault("linger.ms", "5")
        config.setdefault("queue.buffering.max.messages", "1000000")
        config["delivery.report.only.error"] = True
        config["on_delivery"] = self._errors
        if transactional is not None:
            config["transactional.id"] = transactional
        elif d.guarantee == "at-least-once":
            config.setdefault("enable.idempotence", "true")
        return config

    def _new_producer(self, transactional: Optional[str]) -> Any:
        from confluent_kafka import Producer
        try:
            return Producer(self._config(transactional))
        except Exception as e:
            raise ValueError(f"KafkaSink: the Kafka producer rejected its properties: {e}") \
                from e

    def _ensure_marker_topic(self) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.definition.bootstrap_servers})
        deadline = time.monotonic() + self._timeout_ms / 1000.0
        while True:
            future = admin.create_topics([NewTopic(MARKER_TOPIC, 1, -1)],
                                         operation_timeout=10)[MARKER_TOPIC]
            try:
                future.result(15)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if time.monotonic() > deadline or not err.retriable():
                    raise KafkaSinkError(
                        f"KafkaSink: could not create the marker topic {MARKER_TOPIC!r} on "
                        f"{self.definition.bootstrap_servers}: {describe_error(err)}") from e
            time.sleep(0.2)

    # -- records -------------------------------------------------------------------------
    def begin_transaction(self) -> Any:
        if self.definition.guarantee != "exactly-once":
            return None
        c = self.context
        return WalTransaction(self.definition.transactional_id_prefix or "", c.job_id,
                              c.subtask_index, StagedRecords(self._threshold))

    def _partitions_of(self, topic: str) -> List[int]:
        found = self._partition_counts.get(topic)
        if found is None:
            md = self._current_producer().list_topics(topic, timeout=10)
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise KafkaSinkError(f"KafkaSink: topic {topic!r} does not exist on "
                                     f"{self.definition.bootstrap_servers}")
            found = self._partition_counts[topic] = sorted(meta.partitions)
        return found

    def _current_producer(self) -> Any:
        """The producer this subtask has (NONE/AT_LEAST_ONCE: the one that sends; with
        EXACTLY_ONCE the transactional one, or, before the first commit, a plain one that
        only answers metadata and is replaced by the transactional one)."""
        if self._producer is None:
            self._producer = self._new_producer(None)
        return self._producer

    def _chunk(self, records: List[Any]) -> Tuple[Any, Any, List[bytes], Any]:
        serializer = self.definition.serializer
        topics, keys, values, _ = serializer.serialize_batch(records)
        partitions = None
        partitioner = serializer.partitioner
        if partitioner is not None:
            partitions = []
            for i, r in enumerate(records):
                topic = topics if isinstance(topics, str) else topics[i]
                partitions.append(partitioner.partition(
                    r, keys[i] if keys is not None else None, values[i], topic,
                    self._partitions_of(topic)))
        return topics, keys, values, partitions

    def write(self, transaction: Any, records: List[Any]) -> None:
        if not records:
            return
        chunk = self._chunk(records)
        if transaction is not None:
            transaction.staged.append([msgpack.packb(chunk, use_bin_type=True)])
            transaction.count += len(records)
            return
        self._produce(self._current_producer(), chunk)
        self._errors.raise_if_any("sent")

    def _produce(self, producer: Any, chunk: Sequence[Any]) -> None:
        """Send one chunk ``(topic or topics, keys, values, partitions)``; a full local
        queue is waited out (``poll``), never dropped."""
        topics, keys, values, partitions = chunk
        produce = producer.produce
        if isinstance(topics, str) and keys is None and partitions is None:
            for value in values:  # the common case, without per-record arguments
                try:
                    produce(topics, value)
                except BufferError:
                    self._produce_when_room(producer, topics, value, None, None)
        else:
            n = len(values)
            topic_of = [topics] * n if isinstance(topics, str) else topics
            key_of = keys if keys is not None else [None] * n
            if partitions is None:
                for topic, value, key in zip(topic_of, values, key_of):
                    try:
                        produce(topic, value, key)
                    except BufferError:
                        self._produce_when_room(producer, topic, value, key, None)
            else:
                for topic, value, key, part in zip(topic_of, values, key_of, partitions):
                    try:
                        produce(topic, value, key, part)
                    except BufferError:
                        self._produce_when_room(producer, topic, value, key, part)
        producer.poll(0)

    @staticmethod
    def _produce_when_room(producer: Any, topic: str, value: bytes, key: Optional[bytes],
                           partition: Optional[int]) -> None:
        while True:
            producer.poll(0.05)
            try:
                if partition is None:
                    producer.produce(topic, value, key)
                else:
                    producer.produce(topic, value, key, partition)
                return
            except BufferError:
                continue

    # -- two-phase commit ------------------------------------------------------------------
    def pre_commit(self, transaction: Any) -> None:
        self.pre_commit_checkpoint(transaction, None)

    def pre_commit_checkpoint(self, transaction: Any, checkpoint_id: Optional[int]) -> None:
        if transaction is not None:  # exactly once: the log goes into the checkpoint
            transaction.seal(checkpoint_id)
            return
        if self.definition.guarantee == "at-least-once" and self._producer is not None:
            self._flush(self._producer, "acknowledged")

    def _flush(self, producer: Any, what: str) -> None:
        deadline = time.monotonic() + self._timeout_ms / 1000.0
        while producer.flush(1.0) > 0:
            if time.monotonic() > deadline:
                raise KafkaSinkError(
                    f"KafkaSink: records not acknowledged by Kafka at "
                    f"{self.definition.bootstrap_servers} within {self._timeout_ms / 1000:g} s "
                    f"(flowray.kafka.connect-timeout)")
        self._errors.raise_if_any(what)

    def commit(self, transaction: Any) -> None:
        if transaction is None or not transaction.count:
            return
        self._commit(transaction, check_marker=False)

    def recover_and_commit(self, transaction: Any) -> None:
        if transaction is None or not transaction.count:
            return
        self._commit(transaction, check_marker=True)

    def recover_and_abort(self, transaction: Any) -> None:
        """The transaction was never sent; fence the id of its subtask (a zombie of an
        earlier attempt can no longer commit, a transaction a crash left open is
        aborted)."""
        if transaction is not None:
            self._transactional_producer(transaction)

    def abort(self, transaction: Any) -> None:
        if transaction is not None and transaction.staged is not None:
            transaction.staged.discard()

    def _transactional_producer(self, txn: WalTransaction) -> Any:
        tid = transactional_id(txn.prefix, txn.subtask)
        if self._producer_id != tid:
            if self._producer_id is not None and self._producer is not None:
                self._producer.flush(5)
            self._producer = self._new_producer(tid)
            self._producer_id = tid
            self._retrying(lambda: self._producer.init_transactions(10),
                           f"initialize transactions of {tid!r}")
        return self._producer

    def _retrying(self, attempt: Callable[[], Any], what: str) -> Any:
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + self._timeout_ms / 1000.0
        while True:
            try:
                return attempt()
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise KafkaSinkError(f"KafkaSink: could not {what} on "
                                         f"{self.definition.bootstrap_servers}: "
                                         f"{describe_error(err)}") from e
                time.sleep(0.2)

    def _committed_marker(self, txn: WalTransaction) -> int:
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.definition.bootstrap_servers,
                             "group.id": marker_group(txn.prefix, txn.job_id, txn.subtask),
                             "enable.auto.commit": "false"})
        try:
            found = self._retrying(
                lambda: consumer.committed([TopicPartition(MARKER_TOPIC, 0)], timeout=10),
                "read the sink's commit marker")
            return found[0].offset if found and found[0].offset >= 0 else -1
        finally:
            consumer.close()

    def _commit(self, txn: WalTransaction, check_marker: bool) -> None:
        from confluent_kafka import Consumer, TopicPartition
        producer = self._transactional_producer(txn)
        if check_marker and txn.checkpoint_id is not None and \
                self._committed_marker(txn) >= txn.checkpoint_id:
            log.info("flowray: KafkaSink %s was committed before the failure", txn)
            return
        producer.begin_transaction()
        for chunk in txn.chunks or ():
            self._produce(producer, msgpack.unpackb(chunk, raw=False))
        if txn.checkpoint_id is not None:
            group = Consumer({"bootstrap.servers": self.definition.bootstrap_servers,
                              "group.id": marker_group(txn.prefix, txn.job_id, txn.subtask)})
            try:
                self._retrying(lambda: producer.send_offsets_to_transaction(
                    [TopicPartition(MARKER_TOPIC, 0, txn.checkpoint_id)],
                    group.consumer_group_metadata(), 30), "write the commit marker")
            finally:
                group.close()
        self._retrying(lambda: producer.commit_transaction(30),
                       f"commit the transaction of checkpoint {txn.checkpoint_id}")
        self._errors.raise_if_any("committed")

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            if self.definition.guarantee != "exactly-once":
                try:
                    producer.flush(5)
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
