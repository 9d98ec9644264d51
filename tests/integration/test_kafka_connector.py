"""The Kafka source and sink against a real broker (the session's ``kafka_broker``) on the
shared local Ray: reading bounded topics, starting offsets, per-partition watermarks,
idle partitions, discovery, missing topics, bad records, and the three delivery
guarantees of the sink checked with a ``read_committed`` consumer."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import List, Tuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from flowray import JobExecutionError, StreamExecutionEnvironment
from flowray.common import Duration, WatermarkStrategy
from flowray.common.serialization import SimpleStringSchema
from flowray.datastream.connectors.base import DeliveryGuarantee
from flowray.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from flowray.testing import wait_until

pytestmark = pytest.mark.timeout(240)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(broker, topic: str, records: List[Tuple[int, str]], timestamps=None) -> None:
    """``(partition, value)`` pairs, in order, optionally with record timestamps."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i, (partition, value) in enumerate(records):
        kwargs = {"timestamp": timestamps[i]} if timestamps else {}
        producer.produce(topic, value.encode(), partition=partition, **kwargs)
    assert producer.flush(30) == 0


def read_all(broker, topic: str, committed_only: bool = True, expect: int = None,
             timeout_s: float = 60) -> List[str]:
    """Every value of ``topic`` (``read_committed`` by default), read to the end."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed" if committed_only
                         else "read_uncommitted",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    md = consumer.list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    values, at_end = [], set()
    result = {}

    def done():
        for m in consumer.consume(1000, timeout=0.2):
            if m.error():
                at_end.add(m.partition())
            else:
                at_end.discard(m.partition())
                values.append(m.value().decode())
        result["n"] = len(values)
        return len(at_end) == len(parts) and (expect is None or len(values) >= expect)

    wait_until(done, timeout_s, f"{expect} values in {topic}", poll_s=0)
    consumer.close()
    return values


def _env(parallelism=2, checkpoint_ms=None, tmp_path=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    if tmp_path is not None:
        env.get_configuration().set_string("execution.checkpointing.dir", str(tmp_path / "chk"))
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    return env


def _source(broker, *topics, bounded=True, starting=None, **props):
    builder = (KafkaSource.builder().set_bootstrap_servers(broker.bootstrap_servers)
               .set_topics(*topics).set_value_only_deserializer(SimpleStringSchema()))
    if starting is not None:
        builder.set_starting_offsets(starting)
    if bounded:
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    for k, v in props.items():
        builder.set_property(k.replace("_", "."), str(v))
    return builder.build()


def test_bounded_read_of_every_partition(ray_session, kafka_broker):
    topic = topic_name("bounded")
    kafka_broker.create_topic(topic, 3)
    records = [(i % 3, f"v{i}") for i in range(3000)]
    produce(kafka_broker, topic, records)
    env = _env(parallelism=2)
    out = list(env.from_source(_source(kafka_broker, topic), WatermarkStrategy.no_watermarks(),
                               "kafka").execute_and_collect("bounded-kafka"))
    assert Counter(out) == Counter(v for _, v in records)


def test_starting_offsets_specified_and_timestamp(ray_session, kafka_broker):
    topic = topic_name("offsets")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker, topic, [(i % 2, f"v{i}") for i in range(20)],
            timestamps=[1_000 + i for i in range(20)])
    tp0, tp1 = KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)
    env = _env(parallelism=1)
    out = list(env.from_source(
        _source(kafka_broker, topic,
                starting=KafkaOffsetsInitializer.offsets({tp0: 8, tp1: 3})),
        WatermarkStrategy.no_watermarks(), "kafka").execute_and_collect("specified"))
    # partition 0 holds v0, v2, ... (offset k = v2k); partition 1 holds v1, v3, ...
    assert sorted(out) == sorted([f"v{2 * k}" for k in range(8, 10)]
                                 + [f"v{2 * k + 1}" for k in range(3, 10)])
    out = list(_env(parallelism=1).from_source(
        _source(kafka_broker, topic, starting=KafkaOffsetsInitializer.timestamp(1_016)),
        WatermarkStrategy.no_watermarks(), "kafka").execute_and_collect("timestamp"))
    assert sorted(out) == sorted(f"v{i}" for i in range(16, 20))


def test_missing_topic_fails_once_naming_it(ray_session, kafka_broker):
    env = _env(parallelism=1)
    env.get_configuration().set_string("restart-strategy.type", "fixed-delay")
    env.get_configuration().set_string("restart-strategy.fixed-delay.attempts", "5")
    env.from_source(_source(kafka_broker, "no-such-topic-here"),
                    WatermarkStrategy.no_watermarks(), "kafka").print()
    with pytest.raises(JobExecutionError) as info:
        env.execute("missing-topic")
    assert "no-such-topic-here" in str(info.value)
    assert info.value.outcome.restarts == 0


def test_undeserializable_record_names_topic_partition_offset(ray_session, kafka_broker):
    topic = topic_name("bad")
    kafka_broker.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for value in (b"ok", b"\xff\xfe not utf-8", b"ok"):
        producer.produce(topic, value, partition=0)
    producer.flush(10)
    env = _env(parallelism=1)
    env.from_source(_source(kafka_broker, topic), WatermarkStrategy.no_watermarks(),
                    "kafka").print()
    with pytest.raises(JobExecutionError) as info:
        env.execute("bad-record")
    message = str(info.value)
    assert f"topic {topic!r}, partition 0, offset 1" in message
    assert info.value.outcome.restarts == 0


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE,
                                       DeliveryGuarantee.EXACTLY_ONCE,
                                       DeliveryGuarantee.NONE])
def test_kafka_to_kafka_each_guarantee(ray_session, kafka_broker, tmp_path, guarantee):
    src, dst = topic_name("in"), topic_name("out")
    kafka_broker.create_topic(src, 4)
    kafka_broker.create_topic(dst, 2)
    records = [(i % 4, json.dumps({"k": f"k{i % 10}", "v": i})) for i in range(5000)]
    produce(kafka_broker, src, records)
    env = _env(parallelism=2, checkpoint_ms=200, tmp_path=tmp_path)
    sink = (KafkaSink.builder().set_bootstrap_servers(kafka_broker.bootstrap_servers)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(dst)
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(guarantee)
            .set_transactional_id_prefix(f"t-{dst}")
            .build())
    (env.from_source(_source(kafka_broker, src), WatermarkStrategy.no_watermarks(), "in")
        .map(lambda s: json.loads(s)["v"])
        .map(lambda v: str(v * 2))
        .sink_to(sink))
    env.execute(f"kafka-{guarantee.name}")
    out = read_all(kafka_broker, dst, expect=len(records))
    assert Counter(out) == Counter(str(i * 2) for i in range(len(records)))


def test_transaction_timeout_shorter_than_interval_is_rejected(ray_session, kafka_broker):
    env = _env(parallelism=1, checkpoint_ms=120_000)
    sink = (KafkaSink.builder().set_bootstrap_servers(kafka_broker.bootstrap_servers)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic("x")
                                   .set_value_serialization_schema(SimpleStringSchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix("short-timeout")
            .set_property("transaction.timeout.ms", "60000")
            .build())
    env.from_collection(["a"]).sink_to(sink)
    with pytest.raises(ValueError, match="transaction.timeout.ms is 60000 ms, shorter than "
                                         "the checkpoint interval of 120000 ms"):
        env.execute("short-timeout")


def test_idle_partition_does_not_hold_back_event_time_windows(ray_session, kafka_broker):
    """Unbounded source, partition 1 never gets a record: with with_idleness the windows
    of partition 0's events still fire; the job is cancelled once they did."""
    from flowray.datastream.window import TumblingEventTimeWindows
    from flowray.common import Time
    topic = topic_name("idle")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker, topic, [(0, f"a,{t}") for t in (1_000, 2_000, 11_000, 25_000)])
    env = _env(parallelism=1)
    env.get_config().set_auto_watermark_interval(50)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
                .with_timestamp_assigner(lambda v, ts: int(v.split(",")[1]))
                .with_idleness(Duration.of_millis(300)))
    results = (env.from_source(_source(kafka_broker, topic, bounded=False), strategy, "k")
               .map(lambda v: (v.split(",")[0], 1))
               .key_by(lambda t: t[0])
               .window(TumblingEventTimeWindows.of(Time.seconds(10)))
               .reduce(lambda a, b: (a[0], a[1] + b[1]))
               .execute_and_collect("idle-partition"))
    got = []
    for item in results:
        got.append(item)
        if len(got) == 2:
            break
    results.close()
    # [0, 10 s) holds two events, [10 s, 20 s) one; [20 s, 30 s) waits for later events
    assert got == [("a", 2), ("a", 1)]


def test_a_partition_added_while_the_job_runs_is_read_from_its_start(ray_session,
                                                                      kafka_broker):
    topic = topic_name("grow")
    kafka_broker.create_topic(topic, 1)
    produce(kafka_broker, topic, [(0, f"old{i}") for i in range(10)])
    env = _env(parallelism=2)
    source = _source(kafka_broker, topic, bounded=False,
                     partition_discovery_interval_ms=200)
    results = env.from_source(source, WatermarkStrategy.no_watermarks(),
                              "kafka").execute_and_collect("discovery")
    got = []
    for value in results:
        got.append(value)
        if len(got) == 10:
            # every record of the first partition is read: the topic grows
            kafka_broker.add_partitions(topic, 3)
            produce(kafka_broker, topic, [(p, f"new{p}-{i}") for p in (1, 2)
                                          for i in range(5)])
        if len(got) == 20:
            break
    results.close()
    assert sorted(got) == sorted([f"old{i}" for i in range(10)]
                                 + [f"new{p}-{i}" for p in (1, 2) for i in range(5)])


def test_offsets_are_committed_to_the_group_when_checkpoints_complete(ray_session,
                                                                       kafka_broker, tmp_path):
    topic = topic_name("commit")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker, topic, [(i % 2, f"v{i}") for i in range(200)])
    group = f"monitor-{topic}"
    env = _env(parallelism=1, checkpoint_ms=100, tmp_path=tmp_path)
    source = (KafkaSource.builder().set_bootstrap_servers(kafka_broker.bootstrap_servers)
              .set_topics(topic).set_group_id(group)
              .set_value_only_deserializer(SimpleStringSchema()).build())
    results = env.from_source(source, WatermarkStrategy.no_watermarks(),
                              "kafka").execute_and_collect("commit-offsets")
    got = []
    for value in results:
        got.append(value)
        if len(got) == 200:
            break
    watcher = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                        "group.id": group})

    def committed_to_the_end():
        found = watcher.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                  timeout=5)
        return [tp.offset for tp in found] == [100, 100]

    try:
        wait_until(committed_to_the_end, 60, "the group's offsets at the end", poll_s=0.1)
    finally:
        watcher.close()
        results.close()
    assert len(got) == 200


def test_an_unreachable_broker_fails_after_the_connect_timeout(ray_session):
    from tests.support.servers import free_port
    env = _env(parallelism=1)
    env.get_configuration().set_string("flowray.kafka.connect-timeout", "2 s")
    env.get_configuration().set_string("restart-strategy.type", "none")
    address = f"127.0.0.1:{free_port()}"
    source = (KafkaSource.builder().set_bootstrap_servers(address).set_topics("t")
              .set_value_only_deserializer(SimpleStringSchema()).build())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka").print()
    with pytest.raises(JobExecutionError) as info:
        env.execute("unreachable")
    assert "KafkaConnectError" in str(info.value) or "KafkaConnectError" in \
        info.value.cause_type
    assert address in str(info.value) and "flowray.kafka.connect-timeout" in str(info.value)


def _slow_identity(value):
    import time
    time.sleep(0.002)
    return value


def test_the_source_reports_its_pending_records(ray_session, kafka_broker):
    """``pendingRecords`` (Flink's consumer lag) of a source in front of a slow map: above
    0 while the topic is read, 0 with every record emitted once the bounded job ends."""
    from urllib.parse import quote

    from tests.support.rest import get_json, until_served

    n = 3000
    topic = topic_name("lag")
    kafka_broker.create_topic(topic, 2)
    produce(kafka_broker, topic, [(i % 2, f"v{i}") for i in range(n)])
    env = _env(parallelism=1)
    env.get_configuration().set_string("heartbeat.interval", "1 s")
    env.get_configuration().set_string("rest.port", "0")
    (env.from_source(_source(kafka_broker, topic), WatermarkStrategy.no_watermarks(), "kafka")
     .disable_chaining().map(_slow_identity).name("slow").add_sink(lambda v: None))
    client = env.execute_async("kafka-lag")
    url, jid = client.get_web_url(), client.get_job_id()
    source = next(v["id"] for v in get_json(f"{url}/jobs/{jid}")["vertices"]
                  if v["name"].startswith("Source: kafka"))
    names = None

    def lagging(metrics):
        nonlocal names
        names = names or [m["id"] for m in get_json(
            f"{url}/jobs/{jid}/vertices/{source}/metrics") if m["id"].endswith("pendingRecords")]
        values = {m["id"]: int(float(m["value"])) for m in metrics}
        pending = sum(values.get(name, 0) for name in names or [])
        return 0 < pending <= n and pending

    until_served(lambda: get_json(f"{url}/jobs/{jid}/vertices/{source}/metrics?get="
                                  + quote(",".join(names or ["0.numRecordsOut"]))),
                 lagging, "the source's pendingRecords above 0")
    result = client.wait(timeout_s=180)
    final = next(m["metrics"] for m in result.task_metrics if m.get("is_source"))
    pending = {k: v for k, v in final.items() if k.endswith("pendingRecords")}
    assert pending and set(pending.values()) == {0}, pending
    assert final["numRecordsOut"] == n
