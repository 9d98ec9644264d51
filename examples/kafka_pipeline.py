"""Kafka in, exactly once, Kafka out: page views counted per page.

Start a broker first (``make kafka`` keeps one on 127.0.0.1:9092 until Ctrl-C; it needs
Java 17 and Maven), then, from the repository root in another shell::

    .venv/bin/python examples/kafka_pipeline.py [--bootstrap 127.0.0.1:9092] [--views 20000]

It needs the Kafka extra, ``pip install 'flowray[kafka]'`` (the repository's ``.venv``,
which ``make`` installs with ``.[test]``, has it).

The example creates two topics, writes page views as JSON into the first, and runs a job
that reads them (bounded: up to the offsets at its start), counts views per page in keyed
state with checkpoints every second, and writes each new count as JSON to the second
topic with an exactly-once sink. It then reads the output back as a ``read_committed``
consumer would and prints each page's final count next to the expected one.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from flowray import StreamExecutionEnvironment
from flowray.common import Types, WatermarkStrategy
from flowray.datastream.connectors.kafka import (
    DeliveryGuarantee,
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from flowray.datastream.formats.json import (
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
)

PAGES = ["/", "/docs", "/pricing", "/blog", "/about"]


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 4, 1) for n in names]).values():
        future.result(30)


def write_views(bootstrap: str, topic: str, n: int) -> Counter:
    rng = random.Random(29)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    expected: Counter = Counter()
    for i in range(n):
        page = rng.choice(PAGES)
        expected[page] += 1
        producer.produce(topic, json.dumps({"page": page, "user": f"u{i % 97}"}).encode())
    producer.flush(30)
    return expected


def read_counts(bootstrap: str, topic: str) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    final, at_end = {}, set()
    while len(at_end) < len(parts):
        for m in consumer.consume(1000, timeout=1.0):
            if m.error():
                at_end.add(m.partition())
                continue
            row = json.loads(m.value())
            final[row["page"]] = max(final.get(row["page"], 0), row["views"])
    consumer.close()
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--views", type=int, default=20_000)
    args = parser.parse_args()
    run = uuid.uuid4().hex[:6]
    views_topic, counts_topic = f"page-views-{run}", f"page-counts-{run}"
    create_topics(args.bootstrap, views_topic, counts_topic)
    expected = write_views(args.bootstrap, views_topic, args.views)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    view = Types.ROW_NAMED(["page", "user"], [Types.STRING(), Types.STRING()])
    count = Types.ROW_NAMED(["page", "views"], [Types.STRING(), Types.LONG()])
    source = (KafkaSource.builder()
              .set_bootstrap_servers(args.bootstrap)
              .set_topics(views_topic)
              .set_group_id(f"page-counts-{run}")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(
                  JsonRowDeserializationSchema.builder().type_info(view).build())
              .build())
    sink = (KafkaSink.builder()
            .set_bootstrap_servers(args.bootstrap)
            .set_record_serializer(
                KafkaRecordSerializationSchema.builder()
                .set_topic(counts_topic)
                .set_value_serialization_schema(
                    JsonRowSerializationSchema.builder().with_type_info(count).build())
                .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(f"page-counts-{run}")
            .build())
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "page views").uid("views")
        .map(lambda v: (v["page"], 1),
             output_type=Types.TUPLE([Types.STRING(), Types.LONG()])).uid("page")
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("count per page")
        .map(lambda t: (t[0], t[1]), output_type=count).uid("as row")
        .sink_to(sink).uid("page counts"))
    env.execute("kafka page counts")

    final = read_counts(args.bootstrap, counts_topic)
    print(f"{'page':10} {'counted':>8} {'expected':>8}")
    for page in PAGES:
        print(f"{page:10} {final.get(page, 0):>8} {expected[page]:>8}")
    print("exactly once:", "yes" if final == dict(expected) else "NO")


if __name__ == "__main__":
    main()
