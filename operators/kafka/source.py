"""Reading Kafka as Flink's ``KafkaSource`` does, with splits that are topic partitions.

* **Splits and owners.** A split is one partition with its next offset (and, bounded, its
  stopping offset). Which subtask reads a partition is Flink's owner function of topic and
  partition (:func:`split_owner`), so every reader finds its own partitions without a
  coordinator, and a partition discovered while the job runs goes to exactly one reader.
* **State.** Each reader's ``snapshot_state`` is the list of its splits, finished ones
  included. The splits live in union list state: on restore every reader sees all of
  them and keeps those it owns at the new parallelism (a rescale moves partitions with
  their offsets). A restore resumes right after the checkpointed offsets.
* **Starting offsets** apply to the partitions found when the job starts without state;
  partitions found later (discovery, or absent from the restored state) start from the
  earliest offset, as Flink's.
* **Discovery** every ``partition.discovery.interval.ms`` (default 5 min, off when
  bounded).
* **Committed offsets** go to the consumer group when a checkpoint completes
  (``commit.offsets.on.checkpoint``, with a group id), for monitoring only: recovery reads
  the checkpoint, never them.
* **Bounded** (``set_bounded``/``set_unbounded`` stopping offsets): a split ends at its
  stopping offset; the reader ends when all its splits have.

The reader is a :class:`~flowray.operators.sources.SplitOutputReader`: records come out per
partition with the Kafka record timestamps, so watermarks are generated per partition.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from flowray.common.serialization import DeserializationSchema

from flowray.operators.kafka.client import (
    KafkaConnectError,
    KafkaDeserializationError,
    KafkaTopicNotFoundError,
    connect_timeout_ms,
    describe_error,
    librdkafka_config,
    retry_until,
)
from flowray.operators.kafka.offsets import (
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
    OffsetLookup,
    resolve_offsets,
)
from flowray.operators.sources import (
    Boundedness,
    Source,
    SourceReaderContext,
    SplitBatch,
    SplitOutputReader,
)

__all__ = ["KafkaPartitionSplit", "KafkaRecord", "KafkaRecordDeserializationSchema",
           "KafkaSourceDefinition", "KafkaSourceDefinitionSource", "KafkaSourceReader", "split_owner", "java_string_hash",
           "DEFAULT_DISCOVERY_INTERVAL_MS", "FETCH_BYTES_PER_PARTITION"]

log = logging.getLogger("flowray.kafka")

DEFAULT_DISCOVERY_INTERVAL_MS = 300_000
#: ``max.partition.fetch.bytes`` unless the properties set it (librdkafka's default: 1 MiB)
FETCH_BYTES_PER_PARTITION = 8 << 20
#: the source's own properties (Flink's KafkaSourceOptions), not passed to librdkafka
SOURCE_OPTIONS = ("partition.discovery.interval.ms", "commit.offsets.on.checkpoint",
                  "client.id.prefix", "register.consumer.metrics")


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (UTF-16 code units, 32-bit overflow).

    >>> java_string_hash("orders"), java_string_hash("")
    (-1008770331, 0)
    """
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def split_owner(tp: KafkaTopicPartition, num_readers: int) -> int:
    """The subtask that reads ``tp``: Flink's ``KafkaSourceEnumerator.getSplitOwner``
    (partitions of a topic round-robin from a start index that depends on the topic).

    >>> [split_owner(KafkaTopicPartition("orders", p), 3) for p in range(4)]
    [0, 1, 2, 0]
    """
    start = ((java_string_hash(tp.topic) * 31) & 0x7FFFFFFF) % num_readers
    return (start + tp.partition) % num_readers


@dataclass(frozen=True)
class KafkaPartitionSplit:
    """A partition's progress: the next offset to read and the offset it stops at
    (exclusive; ``None``: never)."""

    topic: str
    partition: int
    next_offset: int
    stopping_offset: Optional[int] = None

    @property
    def tp(self) -> KafkaTopicPartition:
        return KafkaTopicPartition(self.topic, self.partition)

    @property
    def finished(self) -> bool:
        return self.stopping_offset is not None and self.next_offset >= self.stopping_offset


@dataclass(frozen=True)
class KafkaRecord:
    """A consumed record, as a :class:`KafkaRecordDeserializationSchema` sees it."""

    topic: str
    partition: int
    offset: int
    timestamp: Optional[int]
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Tuple[str, bytes], ...] = ()


class KafkaRecordDeserializationSchema:
    """Turns a :class:`KafkaRecord` into records (Flink's
    ``KafkaRecordDeserializationSchema``): override ``deserialize(record)`` to return one
    record, or a list of records (``None`` or ``[]``: none). ``value_only(schema)`` reads the
    value with a :class:`~flowray.common.serialization.DeserializationSchema`.

    >>> class KeyAndValue(KafkaRecordDeserializationSchema):
    ...     def deserialize(self, record):
    ...         return [(record.key.decode(), record.value.decode())]
    >>> KeyAndValue().deserialize(KafkaRecord("t", 0, 7, 0, b"k", b"v"))
    [('k', 'v')]
    """

    def deserialize(self, record: KafkaRecord) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement deserialize()")

    @staticmethod
    def value_only(deserialization_schema: DeserializationSchema) -> "_ValueOnly":
        return _ValueOnly(deserialization_schema)


class _ValueOnly(KafkaRecordDeserializationSchema):
    def __init__(self, schema: DeserializationSchema) -> None:
        if not callable(getattr(schema, "deserialize", None)):
            raise TypeError(f"set_value_only_deserializer: expected a DeserializationSchema "
                            f"(e.g. SimpleStringSchema()), got {schema!r}")
        self.schema = schema

    def deserialize(self, record: KafkaRecord) -> Any:
        return [self.schema.deserialize(record.value)]


@dataclass
class KafkaSourceDefinition:
    """Everything a reader needs, fixed when the source is built (picklable)."""

    bootstrap_servers: str
    topics: Tuple[str, ...] = ()
    topic_pattern: Optional[str] = None
    partitions: Tuple[KafkaTopicPartition, ...] = ()
    group_id: Optional[str] = None
    starting: KafkaOffsetsInitializer = KafkaOffsetsInitializer.earliest()
    stopping: Optional[KafkaOffsetsInitializer] = None
    bounded: bool = False
    deserializer: Optional[KafkaRecordDeserializationSchema] = None
    properties: Mapping[str, str] = ()  # type: ignore[assignment]
    client_id_prefix: Optional[str] = None

    def prop(self, key: str, default: Any = None) -> Any:
        return dict(self.properties).get(key, default)

    @property
    def discovery_interval_ms(self) -> Optional[int]:
        """``None``: no discovery (bounded, fixed partitions, or an interval <= 0)."""
        if self.bounded or self.partitions:
            return None
        value = int(self.prop("partition.discovery.interval.ms",
                                  DEFAULT_DISCOVERY_INTERVAL_MS))
        return value if value > 0 else None

    @property
    def commit_offsets_on_checkpoint(self) -> bool:
        return bool(self.group_id) and str(
            self.prop("commit.offsets.on.checkpoint", "true")).lower() == "true"

    def subscription(self) -> str:
        if self.partitions:
            return "partitions " + ", ".join(str(tp) for tp in self.partitions)
        if self.topic_pattern is not None:
            return f"topic pattern {self.topic_pattern!r}"
        return "topics " + ", ".join(repr(t) for t in self.topics)


class KafkaSourceDefinitionSource(Source):
    """The :class:`~flowray.operators.sources.Source` built from a definition (the public
    ``KafkaSource`` subclasses it)."""

    default_name = "KafkaSource"
    union_split_state = True

    def __init__(self, definition: KafkaSourceDefinition) -> None:
        self.definition = definition

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.definition.bounded else \
            Boundedness.CONTINUOUS_UNBOUNDED

    def create_splits(self, parallelism: int) -> List[Any]:
        return []  # readers find their partitions themselves (split_owner)

    def get_produced_type(self) -> Any:
        """The type of the records the deserializer produces, when it says (a JSON, CSV or
        Avro row schema); ``None`` otherwise."""
        deserializer = self.definition.deserializer
        schema = getattr(deserializer, "schema", deserializer)
        for name in ("get_produced_type", "get_type_info"):
            fn = getattr(schema, name, None)
            if callable(fn):
                try:
                    return fn()
                except Exception:  # noqa: BLE001 - a schema that cannot tell
                    return None
        return None

    def create_reader(self, context: SourceReaderContext) -> "KafkaSourceReader":
        return KafkaSourceReader(self.definition, context)


_RETRIABLE_CODES = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT",
                    "_TIMED_OUT_QUEUE", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE",
                    "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "REQUEST_TIMED_OUT",
                    "_WAIT_COORD", "COORDINATOR_LOAD_IN_PROGRESS")


def _retriable(e: BaseException) -> bool:
    err = e.args[0] if e.args else None
    name = getattr(err, "name", None)
    if callable(name):
        try:
            return name() in _RETRIABLE_CODES or bool(err.retriable())
        except Exception:  # noqa: BLE001 - not a KafkaError: not retriable
            return False
    return isinstance(e, (OSError, TimeoutError))


class KafkaSourceReader(SplitOutputReader):
    """One subtask's reader (see the module docstring). ``consumer_factory`` builds the
    librdkafka consumer from its config (tests may wrap it)."""

    def __init__(self, definition: KafkaSourceDefinition, context: SourceReaderContext,
                 consumer_factory: Optional[Callable[[Dict[str, str]], Any]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.d = definition
        self.context = context
        self._clock = clock
        self._consumer_factory = consumer_factory
        self._consumer: Any = None
        self._splits: Dict[Tuple[str, int], KafkaPartitionSplit] = {}
        self._known: set = set()  # partitions this reader has seen (owned or not)
        self._next_discovery: Optional[float] = None
        self._pending_commits: Dict[int, List[KafkaPartitionSplit]] = {}
        self._trouble_since: Optional[float] = None
        self._trouble: str = ""
        self._next_probe = 0.0
        self._timeout_ms = connect_timeout_ms(context.config)
        deserializer = definition.deserializer
        self._value_schema = deserializer.schema if isinstance(deserializer, _ValueOnly) \
            else None
        self._batch_values = getattr(self._value_schema, "deserialize_batch", None)
        self._deserializer = deserializer
        self._started = False
        self.splits_version = 0
        if context.metric_group is not None:
            context.metric_group.gauge("pendingRecords", self.pending_records)

    # -- the consumer --------------------------------------------------------------------
    def _config(self) -> Dict[str, str]:
        d = self.d
        props = {k: v for k, v in dict(d.properties).items() if k not in SOURCE_OPTIONS}
        config, dropped = librdkafka_config(props, consumer=True)
        if dropped:
            log.info("flowray: KafkaSource ignores Java client properties %s", dropped)
        config["bootstrap.servers"] = d.bootstrap_servers
        if d.group_id:
            config["group.id"] = d.group_id
        else:
            config.setdefault("group.id", "flowray-kafka-source")  # never joins: assign()
        prefix = d.client_id_prefix or d.prop("client.id.prefix") or "flowray-source"
        config.setdefault("client.id", f"{prefix}-{self.context.subtask_index}")
        config["enable.auto.commit"] = "false"
        config["enable.auto.offset.store"] = "false"
        config["enable.partition.eof"] = "true"
        config.setdefault("auto.offset.reset", "earliest")
        # librdkafka fetches 1 MiB per partition per request by default; with small records
        # the source then waits on fetches (benchmarks/kafka.py: 8 MiB reads ~1.45x faster)
        config.setdefault("max.partition.fetch.bytes", str(FETCH_BYTES_PER_PARTITION))
        return config

    def _open_consumer(self) -> Any:
        if self._consumer is None:
            config = self._config()
            try:
                if self._consumer_factory is not None:
                    self._consumer = self._consumer_factory(config)
                else:
                    from confluent_kafka import Consumer
                    self._consumer = Consumer(config)
            except Exception as e:
                raise ValueError(f"KafkaSource: the Kafka consumer rejected its properties "
                                 f"({e}); properties: {sorted(config)}") from e
        return self._consumer

    def _lookup(self) -> OffsetLookup:
        from confluent_kafka import TopicPartition
        consumer = self._consumer

        def watermarks(tp: KafkaTopicPartition) -> Tuple[int, int]:
            return tuple(self._retry(
                lambda: consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition),
                                                       timeout=5),
                f"read the offsets of {tp}"))

        def committed(tps: List[KafkaTopicPartition]) -> Dict[KafkaTopicPartition,
                                                              Optional[int]]:
            found = self._retry(lambda: consumer.committed(
                [TopicPartition(t.topic, t.partition) for t in tps], timeout=10),
                f"read the committed offsets of group {self.d.group_id!r}")
            return {KafkaTopicPartition(f.topic, f.partition):
                    (f.offset if f.offset >= 0 else None) for f in found}

        def for_times(tps: List[KafkaTopicPartition], ms: int) -> Dict[KafkaTopicPartition,
                                                                       Optional[int]]:
            found = self._retry(lambda: consumer.offsets_for_times(
                [TopicPartition(t.topic, t.partition, ms) for t in tps], timeout=10),
                f"look up offsets for timestamp {ms}")
            return {KafkaTopicPartition(f.topic, f.partition):
                    (f.offset if f.offset >= 0 else None) for f in found}

        return OffsetLookup(watermarks, committed, for_times)

    def _retry(self, attempt: Callable[[], Any], what: str) -> Any:
        return retry_until(attempt, self._timeout_ms, what, self.d.bootstrap_servers,
                           _retriable)

    # -- partitions ----------------------------------------------------------------------
    def _list_partitions(self) -> List[KafkaTopicPartition]:
        """Every partition of the subscription now (topics that must exist do)."""
        d = self.d
        if d.partitions:
            return list(d.partitions)
        consumer = self._consumer

        def fetch() -> Any:
            md = consumer.list_topics(timeout=5)
            if not md.brokers:
                raise KafkaConnectError("no broker in the metadata")
            return md

        md = self._retry(fetch, "list topics")
        found: List[KafkaTopicPartition] = []
        if d.topic_pattern is not None:
            pattern = re.compile(d.topic_pattern)
            names = [t for t in md.topics if pattern.fullmatch(t) and not t.startswith("__")]
        else:
            missing = [t for t in d.topics if t not in md.topics
                       or md.topics[t].error is not None]
            if missing:
                raise KafkaTopicNotFoundError(
                    f"KafkaSource: Kafka topic(s) {', '.join(repr(t) for t in missing)} do not "
                    f"exist on {d.bootstrap_servers} (create them first; flowray does not "
                    f"create the topics a source reads)")
            names = list(d.topics)
        for name in names:
            for p in md.topics[name].partitions:
                found.append(KafkaTopicPartition(name, p))
        return sorted(found)

    def _discover(self, initial: bool) -> None:
        """Take the partitions this reader owns that it does not know yet."""
        n = self.context.parallelism
        me = self.context.subtask_index
        new = [tp for tp in self._list_partitions()
               if (tp.topic, tp.partition) not in self._known and split_owner(tp, n) == me]
        if not new:
            return
        d = self.d
        lookup = self._lookup()
        start_with = d.starting if initial else KafkaOffsetsInitializer.earliest()
        starts = resolve_offsets(start_with, new, lookup, bool(d.group_id))
        stops = (resolve_offsets(d.stopping, new, lookup, bool(d.group_id))
                 if d.stopping is not None else {})
        added = []
        for tp in new:
            split = KafkaPartitionSplit(tp.topic, tp.partition, starts[tp], stops.get(tp))
            self._known.add((tp.topic, tp.partition))
            self._splits[(tp.topic, tp.partition)] = split
            added.append(split)
        if not initial:
            log.info("flowray: KafkaSource subtask %d found new partition(s) %s",
                     me, ", ".join(str(s.tp) for s in added))
        self._assign([s for s in added if not s.finished])

    def _assign(self, splits: Sequence[KafkaPartitionSplit]) -> None:
        if splits:
            from confluent_kafka import TopicPartition
            self._consumer.incremental_assign(
                [TopicPartition(s.topic, s.partition, s.next_offset) for s in splits])
        self.splits_version += 1

    def _unassign(self, split: KafkaPartitionSplit) -> None:
        from confluent_kafka import TopicPartition
        try:
            self._consumer.incremental_unassign([TopicPartition(split.topic,
                                                                split.partition)])
        except Exception:  # noqa: BLE001 - the partition may be unassigned already
            pass
        self.splits_version += 1

    def add_splits(self, splits: List[Any]) -> None:
        """The restored splits (all of the job's: union state) or ``[]`` on a fresh start.
        Keeps the owned ones, assigns them, then discovers the rest of its partitions."""
        n, me = self.context.parallelism, self.context.subtask_index
        self._open_consumer()
        mine = []
        for split in splits:
            if not isinstance(split, KafkaPartitionSplit):
                raise TypeError(f"KafkaSource: unexpected split state {split!r}")
            key = (split.topic, split.partition)
            if split_owner(split.tp, n) != me or key in self._known:
                continue
            self._known.add(key)
            self._splits[key] = split
            mine.append(split)
        self._assign([s for s in mine if not s.finished])
        self._discover(initial=not self.context.restored)
        self._started = True
        interval = self.d.discovery_interval_ms
        self._next_discovery = (self._clock() + interval / 1000.0) if interval else None

    def pending_records(self) -> int:
        """Flink's ``pendingRecords`` (the consumer lag): over this reader's unfinished
        partitions, the high watermark librdkafka last fetched (cached: no broker call)
        minus the next offset to read, up to the stopping offset. A partition nothing has
        been fetched from yet counts 0."""
        from confluent_kafka import KafkaException, TopicPartition
        consumer = self._consumer
        if consumer is None:
            return 0
        total = 0
        for split in list(self._splits.values()):
            if split.finished or split.next_offset < 0:
                continue
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(split.topic, split.partition), cached=True)
            except KafkaException:  # (a partition the consumer no longer has)
                continue
            if high is None or high < 0:
                continue
            if split.stopping_offset is not None:
                high = min(high, split.stopping_offset)
            total += max(0, high - split.next_offset)
        return total

    def split_ids(self) -> List[Any]:
        return [f"{t}-{p}" for (t, p), s in self._splits.items() if not s.finished]

    # -- reading -------------------------------------------------------------------------
    def poll_split_batches(self, max_records: int) -> Optional[List[SplitBatch]]:
        if not self._started:
            self.add_splits([])
        now = self._clock()
        if self._next_discovery is not None and now >= self._next_discovery:
            self._discover(initial=False)
            self._next_discovery = now + (self.d.discovery_interval_ms or 0) / 1000.0
        if self.d.stopping is not None and all(s.finished for s in self._splits.values()):
            return None
        messages = self._consumer.consume(num_messages=max_records, timeout=0)
        if not messages:
            self._check_trouble(now)
            return []
        batches: List[SplitBatch] = []
        run: List[Any] = []
        key = None
        for m in messages:
            err = m.error()
            if err is not None:
                if run:
                    batches.extend(self._finish_run(key, run))
                    run = []
                self._on_error(m, err, batches)
                key = None
                continue
            k = (m.topic(), m.partition())
            if k != key:
                if run:
                    batches.extend(self._finish_run(key, run))
                run = [m]
                key = k
            else:
                run.append(m)
        if run:
            batches.extend(self._finish_run(key, run))
        if self._trouble_since is not None:
            self._trouble_since = None
        return batches

    def _finish_run(self, key: Tuple[str, int], run: List[Any]) -> List[SplitBatch]:
        split = self._splits.get(key)
        if split is None:  # not (or no longer) ours: a late message after unassign
            return []
        stop = split.stopping_offset
        if stop is not None and run[-1].offset() >= stop:
            run = [m for m in run if m.offset() < stop]
        if not run:
            return self._maybe_finish(split, split.next_offset)
        records, timestamps = self._deserialize(key, run)
        next_offset = run[-1].offset() + 1
        self._splits[key] = KafkaPartitionSplit(key[0], key[1], next_offset, stop)
        split_id = f"{key[0]}-{key[1]}"
        finished = stop is not None and next_offset >= stop
        if finished:
            self._unassign(self._splits[key])
        return [SplitBatch(split_id, records, timestamps, finished)]

    def _maybe_finish(self, split: KafkaPartitionSplit, position: int) -> List[SplitBatch]:
        stop = split.stopping_offset
        if stop is None or position < stop:
            return []
        key = (split.topic, split.partition)
        if not split.finished:
            self._splits[key] = KafkaPartitionSplit(split.topic, split.partition, stop, stop)
        self._unassign(split)
        return [SplitBatch(f"{split.topic}-{split.partition}", [], None, True)]

    def _deserialize(self, key: Tuple[str, int], run: List[Any]) -> Tuple[List[Any],
                                                                           List[Any]]:
        timestamps = [m.timestamp()[1] for m in run]
        schema = self._value_schema
        try:
            if self._batch_values is not None:
                records = self._batch_values([m.value() for m in run])
            elif schema is not None:
                deserialize = schema.deserialize
                records = [deserialize(m.value()) for m in run]
            else:
                records = None
            if records is not None:
                if None in records:  # a message that gives no record (Flink drops it)
                    kept = [(r, t) for r, t in zip(records, timestamps) if r is not None]
                    return [r for r, _ in kept], [t for _, t in kept]
                return records, timestamps
        except Exception:  # noqa: BLE001 - find the record that failed, below
            pass
        records: List[Any] = []
        stamps: List[Any] = []
        for m, ts in zip(run, timestamps):
            try:
                if schema is not None:
                    value = schema.deserialize(m.value())
                    out: Any = [] if value is None else [value]
                else:
                    out = self._deserializer.deserialize(KafkaRecord(
                        m.topic(), m.partition(), m.offset(), ts, m.key(), m.value(),
                        tuple(m.headers() or ())))
                    if out is None:
                        out = []
                    elif not isinstance(out, (list, tuple)):
                        out = [out]
            except Exception as e:
                value = m.value()
                shown = repr(value[:100]) + ("..." if value and len(value) > 100 else "")
                raise KafkaDeserializationError(
                    f"KafkaSource: the record at topic {m.topic()!r}, partition "
                    f"{m.partition()}, offset {m.offset()} could not be deserialized by "
                    f"{type(self._value_schema or self._deserializer).__name__}: "
                    f"{type(e).__name__}: {e} (value {shown})") from e
            records.extend(out)
            stamps.extend([ts] * len(out))
        return records, stamps

    def _on_error(self, m: Any, err: Any, batches: List[SplitBatch]) -> None:
        from confluent_kafka import KafkaError
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            split = self._splits.get((m.topic(), m.partition()))
            if split is not None:
                batches.extend(self._maybe_finish(split, m.offset()))
            return
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC) and \
                self.d.topics and m.topic() in self.d.topics:
            raise KafkaTopicNotFoundError(
                f"KafkaSource: Kafka topic {m.topic()!r} does not exist (any more) on "
                f"{self.d.bootstrap_servers}")
        if err.fatal():
            raise RuntimeError(f"KafkaSource: fatal Kafka consumer error: "
                               f"{describe_error(err)}")
        # a broker outage: librdkafka reconnects; fail only if it lasts too long
        if self._trouble_since is None:
            self._trouble_since = self._clock()
            self._next_probe = self._trouble_since + 1.0
        self._trouble = describe_error(err)

    def _check_trouble(self, now: float) -> None:
        """While the broker seemed unreachable: probe it every second; fail after
        ``flowray.kafka.connect-timeout`` without contact."""
        since = self._trouble_since
        if since is None or now < self._next_probe:
            return
        self._next_probe = now + 1.0
        try:
            md = self._consumer.list_topics(timeout=0.5)
            if md.brokers:
                self._trouble_since = None
                return
        except Exception as e:  # noqa: BLE001 - reported if the trouble lasts
            self._trouble = f"{type(e).__name__}: {e}"
        if (now - since) * 1000.0 >= self._timeout_ms:
            raise KafkaConnectError(
                f"KafkaSource: lost Kafka at {self.d.bootstrap_servers} for more than "
                f"{self._timeout_ms / 1000:g} s (flowray.kafka.connect-timeout): "
                f"{self._trouble}")

    # -- checkpoints ---------------------------------------------------------------------
    def snapshot_state(self) -> List[KafkaPartitionSplit]:
        return list(self._splits.values())

    def checkpoint_taken(self, checkpoint_id: int, state: Any) -> None:
        if self.d.commit_offsets_on_checkpoint:
            self._pending_commits[checkpoint_id] = list(state)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit the offsets of ``checkpoint_id`` to the consumer group (monitoring only;
        asynchronous, a failure is logged, never fatal)."""
        done = [c for c in self._pending_commits if c <= checkpoint_id]
        if not done:
            return
        splits = self._pending_commits[max(done)]
        for c in done:
            del self._pending_commits[c]
        if not splits or self._consumer is None:
            return
        from confluent_kafka import TopicPartition
        try:
            self._consumer.commit(offsets=[TopicPartition(s.topic, s.partition, s.next_offset)
                                           for s in splits], asynchronous=True)
        except Exception as e:  # noqa: BLE001 - committing offsets to Kafka is best effort
            log.warning("flowray: KafkaSource could not commit offsets of checkpoint %d to "
                        "group %r: %s", checkpoint_id, self.d.group_id, e)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
