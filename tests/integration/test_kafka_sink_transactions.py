"""The exactly-once Kafka sink driven by hand against the real broker (no Ray): a commit
retried after a crash writes nothing twice (the marker), a zombie of an earlier attempt is
fenced and cannot commit, and a transaction a crash left open is aborted at restore."""

from __future__ import annotations

import pickle
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from flowray.common.serialization import SimpleStringSchema
from flowray.datastream.connectors.base import DeliveryGuarantee
from flowray.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from flowray.operators.kafka.client import KafkaSinkError
from flowray.operators.kafka.sink import transactional_id
from flowray.operators.sinks import SinkWriterContext


def _sink(broker, topic, prefix):
    return (KafkaSink.builder().set_bootstrap_servers(broker.bootstrap_servers)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(prefix)
            .build())


def _opened(broker, topic, prefix, attempt, restored=None):
    sink = _sink(broker, topic, prefix)
    sink.open(SinkWriterContext(0, 1, attempt, {}, job_id="job-1", operator_uid="out",
                                restored_checkpoint_id=restored))
    return sink


def _committed(broker, topic):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": uuid.uuid4().hex, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    while True:
        m = consumer.poll(10)
        assert m is not None, "no end of partition within 10 s"
        if m.error():
            break
        values.append(m.value().decode())
    consumer.close()
    return values


@pytest.fixture
def topic(kafka_broker):
    name = f"txn-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, 1)
    return name


def _epoch(sink, records, checkpoint_id):
    txn = sink.begin_transaction()
    sink.write(txn, records)
    sink.pre_commit_checkpoint(txn, checkpoint_id)
    return pickle.loads(pickle.dumps(txn))  # as the checkpoint keeps it


def test_a_commit_retried_after_a_crash_writes_nothing_twice(kafka_broker, topic):
    prefix = f"p-{topic}"
    first = _opened(kafka_broker, topic, prefix, attempt=0)
    txn = _epoch(first, ["a", "b"], 1)
    first.commit(txn)                    # committed, then the task dies
    restored = _opened(kafka_broker, topic, prefix, attempt=1, restored=1)
    restored.recover_and_commit(txn)     # the restore commits checkpoint 1 again
    restored.finish_recovering_state()
    assert _committed(kafka_broker, topic) == ["a", "b"]


def test_a_pending_transaction_not_yet_committed_is_committed_by_the_restore(kafka_broker,
                                                                              topic):
    prefix = f"p-{topic}"
    first = _opened(kafka_broker, topic, prefix, attempt=0)
    txn = _epoch(first, ["x", "y", "z"], 4)  # the task died before the notification
    restored = _opened(kafka_broker, topic, prefix, attempt=1, restored=4)
    restored.recover_and_commit(txn)
    assert _committed(kafka_broker, topic) == ["x", "y", "z"]


def test_a_zombie_of_an_earlier_attempt_cannot_commit(kafka_broker, topic):
    prefix = f"p-{topic}"
    zombie = _opened(kafka_broker, topic, prefix, attempt=0)
    zombie.commit(_epoch(zombie, ["one"], 1))
    late = _epoch(zombie, ["late"], 2)      # checkpoint 2 never completed for the job
    current = _opened(kafka_broker, topic, prefix, attempt=1, restored=1)
    current.recover_and_abort(_epoch(current, [], 2))   # fences the transactional id
    with pytest.raises(Exception) as info:
        zombie.commit(late)
    assert isinstance(info.value, KafkaSinkError) or "fenced" in str(info.value).lower()
    assert _committed(kafka_broker, topic) == ["one"]


def test_a_transaction_a_crash_left_open_is_aborted_at_restore(kafka_broker, topic):
    prefix = f"p-{topic}"
    crashed = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                        "transactional.id": transactional_id(prefix, 0)})
    crashed.init_transactions(10)
    crashed.begin_transaction()
    crashed.produce(topic, b"half-written")
    crashed.flush(10)                    # sent, never committed: the process died here
    restored = _opened(kafka_broker, topic, prefix, attempt=1, restored=3)
    restored.recover_and_abort(_epoch(restored, [], 4))
    restored.commit(_epoch(restored, ["after"], 4))
    assert _committed(kafka_broker, topic) == ["after"]
