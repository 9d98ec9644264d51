"""Kafka -> keyed state -> Kafka, exactly once, against the real broker: task actors and
the job master are killed mid-stream, the broker is stopped and started, a job is
rescaled 2 -> 3 from a savepoint, and the committed output, read back with a
``read_committed`` consumer, is compared with the expected output exactly.

Each input record ``"k<j>,<i>"`` adds one to key ``k<j>``'s count; the job writes
``"k<j>,<count>"`` after every record. Exactly once means the committed output holds, for
each key with ``n`` records, exactly ``"k<j>,1" ... "k<j>,<n>"``: a lost record removes
one, a duplicate repeats one, and a replay that was not rolled back shows up twice.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from typing import Dict, List

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from flowray import StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.common.serialization import SimpleStringSchema
from flowray.datastream import CheckpointingMode
from flowray.datastream.connectors.base import DeliveryGuarantee
from flowray.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from flowray.testing import FaultInjector, wait_until

pytestmark = pytest.mark.timeout(300)

N = 20_000
KEYS = 25
RESTARTS = {"restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "20",
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _records() -> List[str]:
    return [f"k{i % KEYS},{i}" for i in range(N)]


def _expected() -> Counter:
    per_key = Counter(f"k{i % KEYS}" for i in range(N))
    return Counter(f"{k},{c}" for k, n in per_key.items() for c in range(1, n + 1))


def _preload(broker, topic: str, partitions: int = 4) -> None:
    broker.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i, value in enumerate(_records()):
        producer.produce(topic, value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


class CommittedOutput:
    """Reads ``topic`` with ``read_committed`` incrementally; ``count()`` polls for more."""

    def __init__(self, broker, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                  "group.id": f"check-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed",
                                  "enable.partition.eof": True,
                                  "auto.offset.reset": "earliest"})
        parts = sorted(self.consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        self.parts = parts
        self.consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        self.values: List[str] = []
        self.at_end: set = set()

    def poll(self) -> int:
        for m in self.consumer.consume(2000, timeout=0.1):
            if m.error():
                self.at_end.add(m.partition())
            else:
                self.at_end.discard(m.partition())
                self.values.append(m.value().decode())
        return len(self.values)

    def read_to_end(self, expect: int, timeout_s: float = 60) -> Counter:
        wait_until(lambda: self.poll() >= expect and len(self.at_end) == len(self.parts),
                   timeout_s, f"{expect} committed records", poll_s=0)
        # drain: anything more would be a duplicate
        for _ in range(5):
            self.poll()
        self.consumer.close()
        return Counter(self.values)


def _slow(value: str) -> str:
    time.sleep(0.0004)  # keeps the job running long enough to be hit mid-stream
    return value


def _count(a, b):
    return (a[0], a[1] + b[1])


def _job(broker, src: str, dst: str, tmp_path, parallelism: int = 2, savepoint: str = None,
         backend: str = "hashmap", uid_suffix: str = "", settings=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env.get_configuration()
    for key, value in {**RESTARTS, **(settings or {})}.items():
        config.set_string(key, value)
    config.set_string("execution.checkpointing.dir", str(tmp_path / "checkpoints"))
    config.set_string("state.backend.type", backend)
    if savepoint:
        config.set_string("execution.savepoint.path", savepoint)
    env.enable_checkpointing(250, CheckpointingMode.EXACTLY_ONCE)
    env.set_parallelism(parallelism)
    source = (KafkaSource.builder().set_bootstrap_servers(broker.bootstrap_servers)
              .set_topics(src).set_group_id(f"g-{src}")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(broker.bootstrap_servers)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(dst)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(f"eo-{dst}")
            .build())
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka in").uid("kafka-in")
        .map(_slow).uid("slow")
        .map(lambda v: (v.split(",")[0], 1)).uid("parse")
        .key_by(lambda t: t[0])
        .reduce(_count).uid("count")
        .map(lambda t: f"{t[0]},{t[1]}").uid("format")
        .sink_to(sink).uid("kafka-out"))
    return env.execute_async(f"kafka-eo-{dst}")


def _topics(broker) -> Dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    src, dst = f"eo-in-{tag}", f"eo-out-{tag}"
    _preload(broker, src)
    broker.create_topic(dst, 3)
    return {"src": src, "dst": dst}


def _wait_for_output(client, output: CommittedOutput, at_least: int) -> None:
    def reached():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended before the fault was injected")
        return output.poll() >= at_least
    wait_until(reached, 180, f"{at_least} committed records", poll_s=0)


def _assert_exactly_once(got: Counter) -> None:
    want = _expected()
    extra, missing = got - want, want - got
    assert not extra and not missing, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
        f"{sum(extra.values())} duplicated (e.g. {list(extra)[:5]})")


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_task_kills_commit_every_record_exactly_once(ray_session, kafka_broker, tmp_path,
                                                      backend):
    t = _topics(kafka_broker)
    output = CommittedOutput(kafka_broker, t["dst"])
    client = _job(kafka_broker, t["src"], t["dst"], tmp_path, backend=backend)
    injector = FaultInjector(client, random.Random(29))
    for fraction in (0.15, 0.45, 0.7):
        _wait_for_output(client, output, int(fraction * N))
        injector.kill_random_task()
    result = client.wait(timeout_s=240)
    assert result.outcome.restarts >= 3
    _assert_exactly_once(output.read_to_end(N))


def test_job_master_kill_commits_every_record_exactly_once(ray_session, kafka_broker,
                                                            tmp_path):
    t = _topics(kafka_broker)
    output = CommittedOutput(kafka_broker, t["dst"])
    client = _job(kafka_broker, t["src"], t["dst"], tmp_path)
    injector = FaultInjector(client, random.Random(7))
    _wait_for_output(client, output, N // 4)
    injector.kill_job_master()
    _wait_for_output(client, output, N // 2)
    injector.kill_random_task()
    client.wait(timeout_s=240)
    _assert_exactly_once(output.read_to_end(N))


def test_broker_restart_mid_job(ray_session, kafka_broker, tmp_path):
    t = _topics(kafka_broker)
    output = CommittedOutput(kafka_broker, t["dst"])
    # a sink whose commit hangs in librdkafka across the restart (send_offsets_to_
    # transaction does not return) is restarted once it made no progress for
    # heartbeat.timeout (50 s by default)
    client = _job(kafka_broker, t["src"], t["dst"], tmp_path,
                  settings={"heartbeat.timeout": "15 s", "heartbeat.interval": "2 s"})
    _wait_for_output(client, output, N // 3)
    kafka_broker.stop()
    kafka_broker.start()
    client.wait(timeout_s=240)
    _assert_exactly_once(output.read_to_end(N))


def test_rescale_2_to_3_from_a_savepoint(ray_session, kafka_broker, tmp_path):
    t = _topics(kafka_broker)
    output = CommittedOutput(kafka_broker, t["dst"])
    client = _job(kafka_broker, t["src"], t["dst"], tmp_path, parallelism=2)
    _wait_for_output(client, output, N // 3)
    savepoint = client.stop_with_savepoint(str(tmp_path / "savepoints"), timeout_s=120)
    before = output.poll()
    assert before < N, "the first run read everything before the savepoint"
    client = _job(kafka_broker, t["src"], t["dst"], tmp_path, parallelism=3,
                  savepoint=savepoint)
    client.wait(timeout_s=240)
    _assert_exactly_once(output.read_to_end(N))
