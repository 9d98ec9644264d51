"""Kafka -> parse JSON -> keyed running count -> Kafka: flowray's Kafka connector (both
delivery guarantees, parallelism 1 and 2) vs a confluent-kafka loop in one process, Bytewax,
Quix Streams and PyFlink, in one invocation, with every run's output checked (issue 29).

Workload: a topic with 8 partitions preloaded with N records ``{"key": "k<i % 1000>",
"value": i}`` (the Kafka key is the record's key). Each system parses the records, keeps a
running count per key and writes ``{"key": ..., "count": ...}`` (JSON) per input record to a
fresh output topic with 8 partitions. Runs:

  loop            confluent-kafka consume -> json.loads -> dict count -> json.dumps ->
                  produce, in one process (the limit); ``loop, transactional``: the same in
                  Kafka transactions, one per ~1 s, the consumer offsets sent with each
  flowray         KafkaSource (bounded: ``set_bounded(KafkaOffsetsInitializer.latest())``)
                  -> (key, 1) -> key_by -> reduce -> KafkaSink, AT_LEAST_ONCE and EXACTLY_ONCE,
                  checkpoints every 1 s, p=1 and p=2; the JSON is read by a value
                  schema whose ``deserialize_batch`` gives ``(key, 1)`` (the source's
                  batch fast path) and written by ``JsonRowSerializationSchema``, the
                  fastest measured (``--flowray-format``, ``--flowray-sink-format``)
  bytewax         Bytewax 0.21 KafkaSource -> map -> stateful_map -> KafkaSink, recovery on
                  with 1 s epochs (at-least-once: the only guarantee of its Kafka sink)
  quix            Quix Streams (``app.dataframe`` -> stateful apply -> ``to_topic``),
                  at-least-once and exactly-once, commit interval 1 s
  pyflink         PyFlink 2.3 with flink-sql-connector-kafka, p=1, checkpoints every 1 s,
                  both guarantees, on its own topic of ``--pyflink-records`` records
                  (PyFlink runs ~5k records/s)

records/s = N / wall time of the run (flowray: ``env.execute()``, deploy included; loop and
Bytewax: the run in this process; Quix: ``app.run()``; PyFlink: the job's net run time
(``get_net_runtime()``, JVM and cluster start-up excluded, which favours PyFlink). A run is
accepted only if its output topic, read with ``isolation.level=read_committed``, holds
exactly N records and, for every key, the counts 1..(its number of inputs) each once; a run
that fails the check is reported as WRONG, never as a figure.

Latency: a flowray job (unbounded source, AT_LEAST_ONCE, checkpoints every 1 s) runs at the
parallelism of flowray's top AT_LEAST_ONCE run of this invocation while another process (the
``latency`` worker) paces input at half of that run's rate into a fresh topic, each record
carrying its produce time (``"ts"``, us); a child process of the worker reads the output
(which carries ``ts``: the reader slices it off the JSON text, no parse) and takes its receive
time. After a 10 s warm-up (the broker's JIT settles) and ``--latency-records`` records: p50/p99 of receive - produce
time, and the p50 of each tenth of the run (a rising trend would be a backlog). When p=2 is
the top, a p=1 run at half of the p=1 rate follows.

Every peer's consumer gets the same properties (``CONSUMER_TUNING``: 64 MiB per fetch, 8 MiB
per partition); flowray's KafkaSource runs with its defaults (8 MiB per partition).

Medians of ``--rounds`` rounds (default 1: the default size takes ~15 min on 2 cores), the
systems alternating in order within each round (PyFlink: one run per guarantee, outside
the rounds). Prints a table with the ratios to the loop and to each peer's fastest run, and
the goal of issue 29 ("exactly-once p=1 >= 0.5x the loop and >= 3x each peer"), met or not;
writes JSON to ``benchmarks/results/kafka.json``.

    python benchmarks/kafka.py [--bootstrap host:port] [--records 5000000] [--rounds 1]
                               [--pyflink-records 200000] [--systems loop,flowray,...]
                               [--quick]

Without ``--bootstrap`` it starts its own broker (``tests.support.servers.KafkaBroker``:
Java 17 and the jars Maven resolves from ``tools/kafka/pom.xml``). Peers that are missing
are reported as "not available: <why>" rows:

* Bytewax: ``pip install bytewax==0.21.1`` into the project venv (the ``bench`` extra).
* Quix Streams pins confluent-kafka below the version flowray pins, so it lives in its own
  venv (``--quix-python``, default ``/work/quix-venv/bin/python``)::

      python3.11 -m venv /work/quix-venv && /work/quix-venv/bin/pip install quixstreams

* PyFlink (``--pyflink-python``, default ``/work/pyflink-venv/bin/python``; ``--pyflink-jar``,
  default ``/work/pyflink-jars/flink-sql-connector-kafka-5.0.0-2.2.jar``)::

      python3.11 -m venv /work/pyflink-venv
      /work/pyflink-venv/bin/pip install apache-flink==2.3.0
      mvn dependency:copy -Dartifact=org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2 \\
          -DoutputDirectory=/work/pyflink-jars

The Quix and PyFlink jobs run in those interpreters as this file with ``--worker quix|pyflink
<json>`` (it imports nothing of flowray at module level); this process makes their topics
and checks their output.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

KEYS = 1000
PARTITIONS = 8
#: the consumer properties every peer gets (librdkafka's and the Java client's names): larger
#: fetches than the 1 MiB per partition default, which leaves a Python consumer of small
#: records waiting on fetches (flowray's KafkaSource sets 8 MiB per partition itself)
CONSUMER_TUNING = {"fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- topics ---------------------------------------------------------------------------------
def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)  # (kept referenced while its futures run)
    for f in a.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    # wait until the metadata shows every partition with a leader
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)


def delete_topics(bootstrap: str, *topics: str) -> None:
    try:
        a = admin(bootstrap)
        for f in a.delete_topics(list(topics), operation_timeout=30).values():
            try:
                f.result(30)
            except Exception:  # noqa: BLE001 - cleanup: the topic may be gone already
                pass
    except Exception:  # noqa: BLE001 - cleanup only
        pass


def fresh(name: str) -> str:
    return f"bench-{name}-{uuid.uuid4().hex[:8]}"


def record_bytes(i: int) -> bytes:
    """``json.dumps({"key": f"k{i % 1000}", "value": i}).encode()``, faster."""
    return f'{{"key": "k{i % KEYS}", "value": {i}}}'.encode()


def preload(bootstrap: str, topic: str, n: int) -> float:
    """Write records 0..n-1 (Kafka key = the record's key); the seconds it took."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    produce, poll = p.produce, p.poll
    keys = [f"k{j}".encode() for j in range(KEYS)]
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, record_bytes(i), keys[i % KEYS])
                break
            except BufferError:
                poll(0.05)
        if i % 10000 == 0:
            poll(0)
    if p.flush(120):
        raise RuntimeError(f"preload of {topic}: records left unsent")
    return time.perf_counter() - t0


def expected_counts(n: int) -> Dict[str, int]:
    """How many of records 0..n-1 each key has."""
    return {f"k{j}": (n - j + KEYS - 1) // KEYS for j in range(min(n, KEYS))}


def verify(bootstrap: str, topic: str, expected: Dict[str, int],
           timeout_s: float = 120.0) -> Dict[str, Any]:
    """Read ``topic`` to its end (read_committed): ``ok`` if it holds exactly the running
    counts 1..expected[key] of every key, each once (so sum(expected) records)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20})
    md = c.list_topics(topic, timeout=10).topics[topic]
    parts = sorted(md.partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    seen: Dict[str, bytearray] = {k: bytearray(v + 1) for k, v in expected.items()}
    total = dups = bad = 0
    strays: Dict[str, int] = {}
    at_end: set = set()
    loads = json.loads
    deadline = time.monotonic() + timeout_s
    EOF = KafkaError._PARTITION_EOF
    while len(at_end) < len(parts) and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            err = m.error()
            if err is not None:
                if err.code() == EOF and m.offset() >= ends[m.partition()]:
                    at_end.add(m.partition())
                continue
            total += 1
            try:
                rec = loads(m.value())
                key, count = rec["key"], rec["count"]
                bits = seen.get(key)
                if bits is None:
                    strays[key] = strays.get(key, 0) + 1
                elif not 1 <= count < len(bits):
                    bad += 1
                elif bits[count]:
                    dups += 1
                else:
                    bits[count] = 1
            except Exception:  # noqa: BLE001 - an unreadable message counts as bad
                bad += 1
    c.close()
    missing = sum(bits.count(0) - 1 for bits in seen.values())
    want = sum(expected.values())
    ok = (total == want and not dups and not bad and not strays and not missing
          and len(at_end) == len(parts))
    detail = (f"{total:,} records (expected {want:,}); {missing:,} running counts missing, "
              f"{dups:,} duplicated, {bad:,} out of range or unreadable, "
              f"{sum(strays.values()):,} of unknown keys"
              + ("" if len(at_end) == len(parts) else
                 f"; {len(parts) - len(at_end)} partition(s) not read to the end in "
                 f"{timeout_s:.0f} s"))
    return {"ok": ok, "records": total, "detail": detail}


# -- (a) the loop -----------------------------------------------------------------------------
def run_loop(bootstrap: str, src: str, dst: str, transactional: bool,
             txn_interval_s: float = 1.0) -> Dict[str, Any]:
    """consume -> json.loads -> count -> json.dumps -> produce, one process; bounded by the
    end offsets at the start (as ``set_bounded(latest())``)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    t0 = time.perf_counter()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"loop-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  **CONSUMER_TUNING})
    parts = sorted(c.list_topics(src, timeout=10).topics[src].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(src, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(src, p, 0) for p in parts])
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5,
              "queue.buffering.max.messages": 1_000_000}
    if transactional:
        config["transactional.id"] = f"loop-{uuid.uuid4().hex}"
    else:
        config["enable.idempotence"] = True
    p = Producer(config)
    produce, poll = p.produce, p.poll
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    last_commit = time.monotonic()
    remaining = {q for q in parts if ends[q] > 0}
    counts: Dict[str, int] = {}
    loads, dumps = json.loads, json.dumps
    transactions = 0

    def commit() -> None:
        positions = c.position([TopicPartition(src, q) for q in parts])
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        p.commit_transaction(60)

    while remaining:
        for m in c.consume(10000, 0.1):
            if m.error() is not None:
                continue
            key = loads(m.value())["key"]
            n = counts.get(key, 0) + 1
            counts[key] = n
            value = dumps({"key": key, "count": n}).encode()
            while True:
                try:
                    produce(dst, value)
                    break
                except BufferError:
                    poll(0.01)
            if m.offset() + 1 >= ends[m.partition()]:
                remaining.discard(m.partition())
        poll(0)
        if transactional and time.monotonic() - last_commit >= txn_interval_s:
            commit()
            transactions += 1
            p.begin_transaction()
            last_commit = time.monotonic()
    if transactional:
        commit()
        transactions += 1
    elif p.flush(120):
        raise RuntimeError("loop: records left unsent")
    wall = time.perf_counter() - t0
    c.close()
    return {"wall_s": wall, "transactions": transactions}


# -- flowray ----------------------------------------------------------------------------------
class JsonKeyOne:
    """A value deserializer with the batch fast path: each message -> ``(key, 1)``
    (``deserialize_batch`` is called once per consumed run of records)."""

    def deserialize(self, message: bytes) -> Tuple[str, int]:
        return (json.loads(message.decode())["key"], 1)

    def deserialize_batch(self, messages: List[bytes]) -> List[Tuple[str, int]]:
        loads = json.loads  # (str is faster than bytes: no encoding detection)
        return [(loads(m.decode())["key"], 1) for m in messages]

    def is_end_of_stream(self, next_element: Any) -> bool:
        return False


class JsonKeyOneTs(JsonKeyOne):
    """:class:`JsonKeyOne` for the latency job: each message -> ``(key, 1, ts)``, ``ts`` the
    produce time the message carries."""

    def deserialize(self, message: bytes) -> Tuple[str, int, int]:
        r = json.loads(message.decode())
        return (r["key"], 1, r["ts"])

    def deserialize_batch(self, messages: List[bytes]) -> List[Tuple[str, int, int]]:
        loads = json.loads
        out = []
        for m in messages:
            r = loads(m.decode())
            out.append((r["key"], 1, r["ts"]))
        return out


# Measured while writing this (one core, per record, min of 7: deserialize + map to (key, 1);
# serialize): string 1.61 us, json-row 2.19 us, batch 1.45 us (and no map operator: in the
# job, 3M records at p=1 AT_LEAST_ONCE, batch ran 141-142k records/s, string 120-136k);
# sink json-row 0.69 us, string 2.17 us. The defaults are the fastest.
FORMATS = {
    # source: what the KafkaSource deserializes, then the map to (key, 1)
    "string": "SimpleStringSchema value-only + map(json.loads)",
    "json-row": "JsonRowDeserializationSchema(key STRING, value LONG) + map",
    "batch": "a DeserializationSchema with deserialize_batch -> (key, 1), no map",
}
SINK_FORMATS = {
    "json-row": "JsonRowSerializationSchema(key STRING, count LONG) on the (key, count) tuples",
    "string": "map(json.dumps) + SimpleStringSchema",
}


def flowray_job(env, bootstrap: str, src: str, dst: str, guarantee: str, fmt: str,
                sink_fmt: str, bounded: bool = True, with_ts: bool = False) -> None:
    """Build the job on ``env``: Kafka -> (key, 1[, ts]) -> key_by -> reduce -> Kafka."""
    from flowray.common import WatermarkStrategy
    from flowray.common.serialization import SimpleStringSchema
    from flowray.common.typeinfo import Types
    from flowray.datastream.connectors.base import DeliveryGuarantee
    from flowray.datastream.connectors.kafka import (KafkaOffsetsInitializer,
                                                     KafkaRecordSerializationSchema,
                                                     KafkaSink, KafkaSource)
    from flowray.datastream.formats.json import (JsonRowDeserializationSchema,
                                                 JsonRowSerializationSchema)
    builder = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(src)
               .set_starting_offsets(KafkaOffsetsInitializer.earliest()))
    if bounded:
        builder.set_bounded(KafkaOffsetsInitializer.latest())
    if with_ts:  # latency: the produce time travels with the record
        builder.set_value_only_deserializer(JsonKeyOneTs())
        parse = None
    elif fmt == "string":
        builder.set_value_only_deserializer(SimpleStringSchema())
        loads = json.loads

        def parse(s):
            return (loads(s)["key"], 1)
    elif fmt == "json-row":
        builder.set_value_only_deserializer(
            JsonRowDeserializationSchema.builder()
            .type_info(Types.ROW_NAMED(["key", "value"], [Types.STRING(), Types.LONG()]))
            .build())

        def parse(r):
            return (r[0], 1)
    elif fmt == "batch":
        builder.set_value_only_deserializer(JsonKeyOne())
        parse = None
    else:
        raise ValueError(f"unknown --flowray-format {fmt!r}")
    stream = env.from_source(builder.build(), WatermarkStrategy.no_watermarks(),
                             "kafka").uid("kafka-source")
    if parse is not None:
        stream = stream.map(parse).uid("parse")
    if with_ts:
        counted = stream.key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
        names, types = ["key", "count", "ts"], [Types.STRING(), Types.LONG(), Types.LONG()]
    else:
        counted = stream.key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
        names, types = ["key", "count"], [Types.STRING(), Types.LONG()]
    counted = counted.uid("count")
    if sink_fmt == "json-row":
        value_schema = (JsonRowSerializationSchema.builder()
                        .with_type_info(Types.ROW_NAMED(names, types)).build())
    else:
        dumps = json.dumps
        counted = counted.map(lambda t: dumps(dict(zip(names, t)))).uid("to-json")
        value_schema = SimpleStringSchema()
    sink = (KafkaSink.builder().set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(dst)
                                   .set_value_serialization_schema(value_schema).build())
            .set_delivery_guarantee(getattr(DeliveryGuarantee, guarantee))
            .set_transactional_id_prefix(f"bench-{uuid.uuid4().hex[:12]}")
            .build())
    counted.sink_to(sink).uid("kafka-sink")


def flowray_env(parallelism: int, checkpoint_ms: int, checkpoints: str):
    from flowray import Configuration, StreamExecutionEnvironment
    config = Configuration({"parallelism.default": parallelism,
                            "execution.checkpointing.dir": checkpoints,
                            "execution.checkpointing.interval": f"{checkpoint_ms} ms",
                            "execution.checkpointing.mode": "EXACTLY_ONCE"})
    return StreamExecutionEnvironment.get_execution_environment(config)


def run_flowray(bootstrap: str, src: str, dst: str, guarantee: str, parallelism: int,
                fmt: str, sink_fmt: str, checkpoint_ms: int) -> Dict[str, Any]:
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-kafka-chk-")
    try:
        env = flowray_env(parallelism, checkpoint_ms, checkpoints)
        flowray_job(env, bootstrap, src, dst, guarantee, fmt, sink_fmt)
        t0 = time.perf_counter()
        result = env.execute(f"bench-kafka-{guarantee.lower()}-p{parallelism}")
        wall = time.perf_counter() - t0
        metrics = result.task_metrics
        stats = result.get_checkpoint_stats()
        return {"wall_s": wall,
                "running_s": max(m["duration_ms"] for m in metrics) / 1000.0,
                "tasks": [{"task": m["task"], "records_in": m["records_in"],
                           "records_out": m["records_out"],
                           "duration_s": m["duration_ms"] / 1000.0,
                           "blocked_ms": round(sum(ch.get("blocked_ms", 0.0)
                                                   for ch in m["channels"].values()), 1)}
                          for m in metrics],
                "checkpoints": (stats.get("counts") or {}).get("completed")}
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)


# -- (c) Bytewax ------------------------------------------------------------------------------
def run_bytewax(bootstrap: str, src: str, dst: str) -> Dict[str, Any]:
    try:
        from datetime import timedelta

        import bytewax.operators as op
        from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
        from bytewax.dataflow import Dataflow
        from bytewax.recovery import RecoveryConfig, init_db_dir
        from bytewax.testing import run_main
    except ImportError as e:
        return {"skipped": f"bytewax not installed (pip install bytewax==0.21.1): {e}"}
    db = tempfile.mkdtemp(prefix="bytewax-bench-")
    try:
        from pathlib import Path
        init_db_dir(Path(db), 1)
        loads, dumps = json.loads, json.dumps

        def count(state, _):
            n = (state or 0) + 1
            return n, n

        flow = Dataflow("kafka-bench")
        inp = op.input("in", flow, KafkaSource([bootstrap], [src], tail=False,
                                              add_config={k: str(v) for k, v in
                                                          CONSUMER_TUNING.items()}))
        keyed = op.key_on("key", inp, lambda m: loads(m.value)["key"])
        counted = op.stateful_map("count", keyed, count)
        out = op.map("json", counted, lambda kv: KafkaSinkMessage(
            None, dumps({"key": kv[0], "count": kv[1]}).encode()))
        op.output("out", out, KafkaSink([bootstrap], dst))
        t0 = time.perf_counter()
        run_main(flow, epoch_interval=timedelta(seconds=1),
                 recovery_config=RecoveryConfig(Path(db)))
        return {"wall_s": time.perf_counter() - t0}
    finally:
        shutil.rmtree(db, ignore_errors=True)


# -- workers in other interpreters (Quix Streams, PyFlink) ----------------------------------------
def quix_worker(a: Dict[str, Any]) -> Dict[str, Any]:
    from quixstreams import Application
    state_dir = tempfile.mkdtemp(prefix="quix-bench-")
    try:
        app = Application(broker_address=a["bootstrap"], consumer_group=a["group"],
                          auto_offset_reset="earliest", commit_interval=1.0,
                          processing_guarantee=a["guarantee"], state_dir=state_dir,
                          loglevel="WARNING", consumer_extra_config=dict(a["consumer"]))
        tin = app.topic(a["input"], value_deserializer="json")
        tout = app.topic(a["output"], value_serializer="json")
        sdf = app.dataframe(tin)

        def count(value, state):
            n = state.get("n", 0) + 1
            state.set("n", n)
            return {"key": value["key"], "count": n}

        sdf = sdf.apply(count, stateful=True)
        sdf.to_topic(tout)
        t0 = time.perf_counter()
        app.run(count=a["records"], timeout=60, collect=False)  # timeout: idle for 60 s
        return {"wall_s": time.perf_counter() - t0}
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def pyflink_worker(a: Dict[str, Any]) -> Dict[str, Any]:
    """The job of /work/pyflink-bench/pyflink_kafka_bench.py, to our output topic."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (KafkaOffsetsInitializer,
                                                     KafkaRecordSerializationSchema,
                                                     KafkaSink, KafkaSource)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_jars("file://" + os.path.abspath(a["jar"]))
    env.set_parallelism(1)
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
    source = (KafkaSource.builder().set_bootstrap_servers(a["bootstrap"])
              .set_topics(a["input"]).set_group_id(f"pyflink-bench-{uuid.uuid4().hex}")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(SimpleStringSchema()))
    for k, v in a["consumer"].items():
        source = source.set_property(k, str(v))
    source = source.build()
    guarantee = getattr(DeliveryGuarantee, a["guarantee"])
    builder = (KafkaSink.builder().set_bootstrap_servers(a["bootstrap"])
               .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                      .set_topic(a["output"])
                                      .set_value_serialization_schema(SimpleStringSchema())
                                      .build())
               .set_delivery_guarantee(guarantee))
    if a["guarantee"] == "EXACTLY_ONCE":
        builder = (builder.set_transactional_id_prefix(f"pyflink-{uuid.uuid4().hex[:8]}")
                   .set_property("transaction.timeout.ms", "600000"))

    def parse(line):
        return json.loads(line)["key"], 1

    (env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka")
     .map(parse, output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
     .key_by(lambda t: t[0], key_type=Types.STRING())
     .reduce(lambda x, y: (x[0], x[1] + y[1]))
     .map(lambda t: json.dumps({"key": t[0], "count": t[1]}), output_type=Types.STRING())
     .sink_to(builder.build()))
    t0 = time.perf_counter()
    result = env.execute(f"pyflink-kafka-bench-{a['guarantee'].lower()}")
    return {"wall_s": time.perf_counter() - t0, "net_s": result.get_net_runtime() / 1000.0}


WORKERS: Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
    "quix": quix_worker, "pyflink": pyflink_worker}
# (the latency worker is added below, where it is defined)


def run_worker(python: str, kind: str, args: Dict[str, Any], timeout_s: float,
               env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Run ``kind``'s job in ``python``; its RESULT line, or why it failed."""
    # (not `python benchmarks/kafka.py`: benchmarks/ on sys.path would shadow the stdlib's
    # `types` with benchmarks/types.py)
    cmd = [python, "-c", "import runpy, sys; sys.argv = sys.argv[1:]; "
           "runpy.run_path(sys.argv[0], run_name='__main__')",
           os.path.abspath(__file__), "--worker", kind, json.dumps(args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=env, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"{kind} did not finish in {timeout_s:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stdout[-1500:] + proc.stderr[-2500:]).strip()
    return {"error": f"{kind} exited with {proc.returncode}: {tail}"}


def quix_available(python: str) -> Optional[str]:
    """``None`` if Quix Streams imports in ``python``, else why not."""
    if not os.path.exists(python):
        return (f"no Quix Streams venv at {python} (python3.11 -m venv /work/quix-venv && "
                f"/work/quix-venv/bin/pip install quixstreams; its confluent-kafka pin "
                f"conflicts with the project's)")
    proc = subprocess.run([python, "-c", "import quixstreams; print(quixstreams.__version__)"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"quixstreams does not import in {python}: {proc.stderr.strip()[-300:]}"
    return None


def quix_version(python: str) -> str:
    proc = subprocess.run([python, "-c", "import quixstreams; print(quixstreams.__version__)"],
                          capture_output=True, text=True)
    return proc.stdout.strip()


def pyflink_available(python: str, jar: str) -> Optional[str]:
    if not os.path.exists(python):
        return (f"no PyFlink venv at {python} (python3.11 -m venv /work/pyflink-venv; pip "
                f"install apache-flink==2.3.0 confluent-kafka)")
    if not os.path.exists(jar):
        return (f"no Kafka connector jar at {jar} (mvn dependency:copy -Dartifact=org.apache."
                f"flink:flink-sql-connector-kafka:5.0.0-2.2 -DoutputDirectory="
                f"{os.path.dirname(jar)})")
    if shutil.which("java") is None:
        return "PyFlink needs Java on PATH"
    proc = subprocess.run([python, "-c", "import pyflink"], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"pyflink does not import in {python}: {proc.stderr.strip()[-300:]}"
    return None


# -- latency ----------------------------------------------------------------------------------
# The input is paced and the output read in a process of their own (the "latency" worker, with
# the reader in a child process), never in this one: the pacing loop and the reader then
# compete with nothing but the job for a core and the GIL. The reader takes each record's
# produce time from the end of its JSON text ('..., "ts": <us>}') without parsing it.

def _latency_reader(bootstrap: str, topic: str, measure_from: Any, received: Any, stop: Any,
                    wanted: int, out: Any) -> None:
    """Child process of the latency worker: read ``topic`` from the start; for every record
    produced at or after ``measure_from`` (us), receive time - produce time (ms); stop after
    ``wanted`` of them or at ``stop``; send them through ``out``."""
    from array import array

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  # a fetch waits for 16 KB or 5 ms: not one request per record
                  "fetch.min.bytes": 16 << 10, "fetch.wait.max.ms": 5})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    lat = array("d")
    n = 0
    while not stop.is_set() and len(lat) < wanted:
        first = c.poll(0.05)  # (consume(n, timeout) would wait to fill its batch)
        if first is None:
            continue
        msgs = [first] + c.consume(1000, 0)
        now = time.time_ns() // 1000
        since = measure_from.value
        for m in msgs:
            if m.error() is None:
                v = m.value()
                ts = int(v[v.rindex(b":") + 1:-1])
                n += 1
                if ts >= since:
                    lat.append((now - ts) / 1000.0)
        received.value = n
    c.close()
    out.send_bytes(lat.tobytes())


def latency_worker(a: Dict[str, Any]) -> Dict[str, Any]:
    """Pace ``a["rate"]`` records/s into ``a["input"]`` (warm-up, then ``a["records"]``
    measured ones) while a child process reads ``a["output"]``; the latencies' summary."""
    import multiprocessing
    from array import array

    from confluent_kafka import Producer
    ctx = multiprocessing.get_context("spawn")
    measure_from = ctx.Value("q", 1 << 62, lock=False)
    received = ctx.Value("q", 0, lock=False)
    stop = ctx.Event()
    mine, theirs = ctx.Pipe()
    reader = ctx.Process(target=_latency_reader, daemon=True, args=(
        a["bootstrap"], a["output"], measure_from, received, stop, a["records"], theirs))
    reader.start()
    rate, src = a["rate"], a["input"]
    p = Producer({"bootstrap.servers": a["bootstrap"], "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    produce, poll = p.produce, p.poll
    keys = [f"k{j}".encode() for j in range(KEYS)]
    now_us = time.time_ns

    def paced(first: int, count: int) -> float:
        t0 = time.perf_counter()
        i = 0
        while i < count:
            due = min(count, int((time.perf_counter() - t0) * rate) + 1)
            if i >= due:
                time.sleep(0.0002)
                continue
            while i < due:
                j = first + i
                value = f'{{"key": "k{j % KEYS}", "value": {j}, "ts": {now_us() // 1000}}}'
                try:
                    produce(src, value.encode(), keys[j % KEYS])
                except BufferError:  # the broker is behind: wait, and pace on from here
                    poll(0.01)
                    continue
                i += 1
            poll(0)
        return time.perf_counter() - t0

    try:
        warm = int(rate * a["warmup_s"])
        paced(0, warm)
        deadline = time.monotonic() + 120
        while received.value < warm and time.monotonic() < deadline:
            time.sleep(0.02)
        if received.value < warm:
            return {"error": f"the job wrote {received.value:,} of {warm:,} warm-up records "
                             f"in 120 s"}
        measure_from.value = now_us() // 1000
        produce_s = paced(warm, a["records"])
        p.flush(30)
        if not mine.poll(60 + 5 * a["checkpoint_ms"] / 1000.0):
            stop.set()
            mine.poll(30)
        lat = array("d")
        lat.frombytes(mine.recv_bytes())
    finally:
        stop.set()
        reader.join(30)
    got = len(lat)
    tenths = [sorted(lat[i * got // 10:(i + 1) * got // 10]) for i in range(10)] \
        if got >= 10 else []
    ordered = sorted(lat)

    def pct(q: float) -> float:
        return ordered[min(got - 1, int(q * got))] if got else float("nan")

    return {"rate": rate, "records": a["records"], "received": got,
            "achieved_rate": a["records"] / produce_s, "p50_ms": pct(0.50),
            "p99_ms": pct(0.99), "max_ms": ordered[-1] if got else float("nan"),
            # p50 of each tenth of the run, in arrival order: a rising trend = a backlog
            "p50_ms_by_tenth": [round(t[len(t) // 2], 1) for t in tenths if t],
            "ok": got >= a["records"]}


def run_latency(bootstrap: str, rate: float, records: int, parallelism: int, fmt: str,
                sink_fmt: str, checkpoint_ms: int, warmup_s: float = 10.0) -> Dict[str, Any]:
    """p50/p99 of output receive time - input produce time: flowray AT_LEAST_ONCE at
    ``parallelism``, unbounded, with input paced at ``rate`` records/s by the latency
    worker (another process)."""
    src, dst = fresh("lat-in"), fresh("lat-out")
    create_topic(bootstrap, src)
    create_topic(bootstrap, dst)
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-kafka-lat-")
    client = None
    try:
        env = flowray_env(parallelism, checkpoint_ms, checkpoints)
        flowray_job(env, bootstrap, src, dst, "AT_LEAST_ONCE", fmt, sink_fmt, bounded=False,
                    with_ts=True)
        client = env.execute_async("bench-kafka-latency")
        result = run_worker(sys.executable, "latency",
                            {"bootstrap": bootstrap, "input": src, "output": dst,
                             "rate": rate, "records": records, "warmup_s": warmup_s,
                             "checkpoint_ms": checkpoint_ms},
                            timeout_s=300 + 2 * records / rate)
        status = client.get_job_status()
        if status.is_globally_terminal_state():
            result.setdefault("error", f"the job ended ({status.value}) during the run")
        result["parallelism"] = parallelism
        return result
    finally:
        if client is not None:
            try:
                client.cancel()
                client.wait(60)
            except Exception:  # noqa: BLE001 - cleanup: the job may have ended already
                pass
        shutil.rmtree(checkpoints, ignore_errors=True)
        delete_topics(bootstrap, src, dst)


WORKERS["latency"] = latency_worker


# -- main -------------------------------------------------------------------------------------
def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # a job in another interpreter (see the docstring)
        print("RESULT " + json.dumps(WORKERS[argv[1]](json.loads(argv[2]))), flush=True)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="a Kafka broker (default: start one for the run)")
    ap.add_argument("--records", type=int, default=5_000_000, help="records in the topic (N)")
    ap.add_argument("--pyflink-records", type=int, default=200_000,
                    help="records of PyFlink's own topic (it runs ~5k records/s)")
    ap.add_argument("--latency-records", type=int, default=1_000_000,
                    help="measured records of each latency run (after a 10 s warm-up)")
    ap.add_argument("--latency-rate", type=float, default=0.0,
                    help="input records/s of the latency run (default: half of flowray's top "
                         "AT_LEAST_ONCE rate of this invocation)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--checkpoint-ms", type=int, default=1000)
    ap.add_argument("--flowray-format", choices=sorted(FORMATS), default="batch",
                    help="how flowray's source reads the JSON: " + "; ".join(
                        f"{k}: {v}" for k, v in FORMATS.items()))
    ap.add_argument("--flowray-sink-format", choices=sorted(SINK_FORMATS), default="json-row",
                    help="how flowray's sink writes the JSON: " + "; ".join(
                        f"{k}: {v}" for k, v in SINK_FORMATS.items()))
    ap.add_argument("--systems", default="all",
                    help="comma-separated subset of loop,loop-txn,flowray,bytewax,quix,"
                         "pyflink,latency")
    ap.add_argument("--quix-python", default="/work/quix-venv/bin/python")
    ap.add_argument("--pyflink-python", default="/work/pyflink-venv/bin/python")
    ap.add_argument("--pyflink-jar",
                    default="/work/pyflink-jars/flink-sql-connector-kafka-5.0.0-2.2.jar")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 200,000 records, PyFlink 30,000, latency 50,000, 1 round")
    ap.add_argument("--json", default=os.path.join(REPO, "benchmarks", "results", "kafka.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.pyflink_records, args.latency_records, args.rounds = \
            200_000, 30_000, 50_000, 1
    wanted = {"loop", "loop-txn", "flowray", "bytewax", "quix", "pyflink", "latency"} \
        if args.systems == "all" else set(args.systems.split(","))
    logging.basicConfig(level=logging.WARNING)
    n = args.records
    t_start = time.perf_counter()

    broker = None
    bootstrap = args.bootstrap
    if not bootstrap:
        sys.path.insert(0, REPO)
        from tests.support.servers import KafkaBroker
        print("starting a Kafka broker (tests.support.servers.KafkaBroker) ...", flush=True)
        broker = KafkaBroker(quick_start=False).start()  # full JIT: its CPU counts
        bootstrap = broker.bootstrap_servers
    try:
        run_all(args, wanted, n, bootstrap, t_start)
    finally:
        if broker is not None:
            broker.close()


def run_all(args, wanted: set, n: int, bootstrap: str, t_start: float) -> None:
    from flowray import Configuration
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing

    src = fresh("in")
    create_topic(bootstrap, src)
    secs = preload(bootstrap, src, n)
    print(f"preloaded {n:,} records into {src} ({PARTITIONS} partitions) in {secs:.1f} s",
          flush=True)
    expected = expected_counts(n)

    # every system/mode: (name, peer group, runner(dst) -> result)
    runs: List[Tuple[str, str, Callable[[str], Dict[str, Any]]]] = []
    skipped: Dict[str, str] = {}
    if "loop" in wanted:
        runs.append(("loop (confluent-kafka, one process)", "loop",
                     lambda dst: run_loop(bootstrap, src, dst, False)))
    if "loop-txn" in wanted:
        runs.append(("loop, transactional (1 txn/s)", "loop-txn",
                     lambda dst: run_loop(bootstrap, src, dst, True)))
    if "flowray" in wanted:
        for guarantee in ("AT_LEAST_ONCE", "EXACTLY_ONCE"):
            for p in (1, 2):
                runs.append((f"flowray {guarantee} p={p}", "flowray",
                             lambda dst, g=guarantee, p=p: run_flowray(
                                 bootstrap, src, dst, g, p, args.flowray_format,
                                 args.flowray_sink_format, args.checkpoint_ms)))
    if "bytewax" in wanted:
        try:
            import bytewax  # noqa: F401
            from importlib.metadata import version
            runs.append((f"bytewax {version('bytewax')} (at-least-once, 1 s epochs)",
                         "bytewax", lambda dst: run_bytewax(bootstrap, src, dst)))
        except ImportError:
            skipped["bytewax"] = "not available: bytewax not installed (pip install " \
                                 "bytewax==0.21.1, the project's bench extra)"
    if "quix" in wanted:
        why = quix_available(args.quix_python)
        if why:
            skipped["quix streams"] = f"not available: {why}"
        else:
            qv = quix_version(args.quix_python)
            for guarantee in ("at-least-once", "exactly-once"):
                runs.append((f"quix streams {qv} {guarantee}", "quix",
                             lambda dst, g=guarantee: run_worker(
                                 args.quix_python, "quix",
                                 {"bootstrap": bootstrap, "input": src, "output": dst,
                                  "records": n, "guarantee": g, "consumer": CONSUMER_TUNING,
                                  "group": f"quix-{uuid.uuid4().hex[:8]}"},
                                 timeout_s=300 + n / 2000)))

    rates: Dict[str, List[float]] = {name: [] for name, _, _ in runs}
    details: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _, _ in runs}
    wrong: Dict[str, str] = {}
    failed: Dict[str, str] = {}
    group_of = {name: group for name, group, _ in runs}
    for rnd in range(args.rounds):
        order = runs if rnd % 2 == 0 else list(reversed(runs))
        for name, group, runner in order:
            dst = fresh("out")
            create_topic(bootstrap, dst)
            try:
                try:
                    r = runner(dst)
                except Exception as e:  # noqa: BLE001 - a failed run is a row, not the end
                    r = {"error": f"{type(e).__name__}: {e}"}
                if "skipped" in r:
                    skipped[name] = f"not available: {r['skipped']}"
                    continue
                if "error" in r:
                    failed[name] = r["error"][-600:]
                    print(f"  round {rnd + 1}  {name:<46} FAILED: {r['error'][-600:]}",
                          flush=True)
                    continue
                check = verify(bootstrap, dst, expected, timeout_s=120 + n / 20_000)
                r["verify"] = check
                details[name].append(r)
                if not check["ok"]:
                    wrong[name] = check["detail"]
                    print(f"  round {rnd + 1}  {name:<46} WRONG OUTPUT: {check['detail']}",
                          flush=True)
                    continue
                rate = n / r["wall_s"]
                rates[name].append(rate)
                extra = (f"  (tasks ran {r['running_s']:.1f} s)" if "running_s" in r else "")
                print(f"  round {rnd + 1}  {name:<46} {n:>10,} records {r['wall_s']:7.1f} s "
                      f"{rate:>10,.0f} rec/s  ok{extra}", flush=True)
            finally:
                delete_topics(bootstrap, dst)

    # PyFlink: its own (smaller) topic, one run per guarantee
    pyflink_names: List[str] = []
    if "pyflink" in wanted:
        why = pyflink_available(args.pyflink_python, args.pyflink_jar)
        if why:
            skipped["pyflink 2.3"] = f"not available: {why}"
        else:
            m = args.pyflink_records
            psrc = fresh("pyflink-in")
            create_topic(bootstrap, psrc)
            preload(bootstrap, psrc, m)
            env = dict(os.environ)
            env["PATH"] = os.path.dirname(args.pyflink_python) + os.pathsep + env["PATH"]
            for guarantee in ("AT_LEAST_ONCE", "EXACTLY_ONCE"):
                name = f"pyflink 2.3 {guarantee} p=1"
                pyflink_names.append(name)
                dst = fresh("pyflink-out")
                create_topic(bootstrap, dst)
                try:
                    r = run_worker(args.pyflink_python, "pyflink",
                                   {"bootstrap": bootstrap, "input": psrc, "output": dst,
                                    "guarantee": guarantee, "jar": args.pyflink_jar,
                                    "consumer": CONSUMER_TUNING},
                                   timeout_s=300 + m / 500, env=env)
                    group_of[name] = "pyflink"
                    if "error" in r:
                        failed[name] = r["error"][-600:]
                        print(f"  pyflink  {name:<46} FAILED: {r['error'][-600:]}", flush=True)
                        continue
                    check = verify(bootstrap, dst, expected_counts(m))
                    r["verify"] = check
                    r["records"] = m
                    details[name] = [r]
                    if not check["ok"]:
                        wrong[name] = check["detail"]
                        print(f"  pyflink  {name:<46} WRONG OUTPUT: {check['detail']}",
                              flush=True)
                        continue
                    rates[name] = [m / r["net_s"]]
                    print(f"  pyflink  {name:<46} {m:>10,} records {r['net_s']:7.1f} s "
                          f"{m / r['net_s']:>10,.0f} rec/s  ok  (env.execute() "
                          f"{r['wall_s']:.1f} s: {m / r['wall_s']:,.0f} rec/s)", flush=True)
                finally:
                    delete_topics(bootstrap, dst)
            delete_topics(bootstrap, psrc)
    delete_topics(bootstrap, src)

    med = {name: statistics.median(v) for name, v in rates.items() if v}
    # latency at half of flowray's top AT_LEAST_ONCE rate, at the parallelism that ran it (and
    # at half of the p=1 rate with p=1, when p=2 is the top)
    latencies: List[Dict[str, Any]] = []
    if "latency" in wanted:
        targets: List[Tuple[float, int, str]] = []
        if args.latency_rate:
            targets.append((args.latency_rate, 1, "--latency-rate"))
        else:
            alo = {p: med[f"flowray AT_LEAST_ONCE p={p}"] for p in (1, 2)
                   if f"flowray AT_LEAST_ONCE p={p}" in med}
            if alo:
                top = max(alo, key=alo.get)
                targets.append((alo[top] / 2, top, f"half of the top AT_LEAST_ONCE rate "
                                                   f"(p={top})"))
                if top != 1 and 1 in alo:
                    targets.append((alo[1] / 2, 1, "half of the AT_LEAST_ONCE p=1 rate"))
            else:
                print("latency: skipped (no flowray AT_LEAST_ONCE figure)", flush=True)
        for rate, p, why in targets:
            print(f"latency: flowray AT_LEAST_ONCE p={p}, unbounded, input paced at "
                  f"{rate:,.0f} records/s ({why}), {args.latency_records:,} records ...",
                  flush=True)
            try:
                lat = run_latency(bootstrap, rate, args.latency_records, p,
                                  args.flowray_format, args.flowray_sink_format,
                                  args.checkpoint_ms)
            except Exception as e:  # noqa: BLE001 - a failed run is a row, not the end
                lat = {"error": f"{type(e).__name__}: {e}"}
            lat.update(rate=rate, parallelism=p, why=why)
            latencies.append(lat)

    # -- the table ------------------------------------------------------------------------
    peers = [("pyflink", "pyflink"), ("bytewax", "bytewax"), ("quix", "quix")]
    best: Dict[str, float] = {}
    for name, r in med.items():
        g = group_of[name]
        best[g] = max(best.get(g, 0.0), r)
    loop = med.get("loop (confluent-kafka, one process)")
    print(f"\nKafka -> JSON parse -> keyed running count ({KEYS} keys) -> Kafka, {n:,} records "
          f"in {PARTITIONS} partitions (PyFlink: {args.pyflink_records:,}), checkpoints every "
          f"{args.checkpoint_ms} ms, median of {args.rounds} round(s)\n")
    header = (f"{'run':<48}{'records':>11}{'records/s':>12}{'vs loop':>9}"
              + "".join(f"{'vs ' + label:>12}" for label, _ in peers))
    print(header)
    print("-" * len(header))
    for name in [name for name, _, _ in runs] + pyflink_names:
        records = args.pyflink_records if group_of.get(name) == "pyflink" else n
        if name in skipped:
            print(f"{name:<48}{'':>11}  {skipped[name]}")
            continue
        if name in wrong:
            print(f"{name:<48}{records:>11,}  WRONG OUTPUT: {wrong[name]}")
            continue
        if name not in med:
            why = failed.get(name) or skipped.get(name) or "no figure"
            print(f"{name:<48}{records:>11,}  FAILED: {why[:300]}")
            continue
        r = med[name]
        vs_loop = f"{r / loop:.2f}x" if loop else "-"
        cols = "".join(f"{(f'{r / best[g]:.2f}x' if g in best else '-'):>12}"
                       for _, g in peers)
        print(f"{name:<48}{records:>11,}{r:>12,.0f}{vs_loop:>9}{cols}")
    for name, why in skipped.items():
        if name in group_of:
            continue
        print(f"{name:<48}{'':>11}  {why}")
    if latencies:
        print(f"\nend-to-end latency (input produce time -> output read), flowray "
              f"AT_LEAST_ONCE, unbounded source, {args.latency_records:,} records after a 10 s "
              f"warm-up; input paced and output read by other processes:")
    for lat in latencies:
        head = f"  p={lat['parallelism']} at {lat['rate']:>9,.0f} records/s ({lat['why']}"
        if "error" in lat:
            print(f"{head}): FAILED: {lat['error']}")
            continue
        print(f"{head}; achieved {lat['achieved_rate']:,.0f}): p50 {lat['p50_ms']:,.0f} ms, "
              f"p99 {lat['p99_ms']:,.0f} ms, max {lat['max_ms']:,.0f} ms; p50 by tenth of "
              f"the run {lat['p50_ms_by_tenth']}"
              + ("" if lat["ok"] else f"  (INCOMPLETE: {lat['received']:,} of "
                                      f"{lat['records']:,} records arrived)"))

    # -- the goal of issue 29 ---------------------------------------------------------------
    eo = med.get("flowray EXACTLY_ONCE p=1")
    checks: List[Tuple[str, Optional[bool], str]] = []
    if eo is None:
        checks.append(("exactly-once p=1 has a figure", False,
                       wrong.get("flowray EXACTLY_ONCE p=1")
                       or failed.get("flowray EXACTLY_ONCE p=1") or "not run"))
    else:
        if loop:
            checks.append((">= 0.5x the loop", eo >= 0.5 * loop,
                           f"{eo:,.0f} vs 0.5 x {loop:,.0f} = {0.5 * loop:,.0f} "
                           f"({eo / loop:.2f}x)"))
        else:
            checks.append((">= 0.5x the loop", None, "no loop figure"))
        for label, g in peers:
            if g in best:
                checks.append((f">= 3x {label}", eo >= 3 * best[g],
                               f"{eo:,.0f} vs 3 x {best[g]:,.0f} = {3 * best[g]:,.0f} "
                               f"({eo / best[g]:.2f}x)"))
            else:
                checks.append((f">= 3x {label}", None, "no figure for it"))
    if any(ok is False for _, ok, _ in checks):
        met, verdict = False, "NOT MET"
    elif any(ok is None for _, ok, _ in checks):
        met, verdict = None, "NOT FULLY EVALUATED (met where evaluated)"
    else:
        met, verdict = True, "MET"
    print("\ngoal (issue 29): exactly-once p=1 >= 0.5x the loop and >= 3x each peer: "
          + verdict)
    for what, ok, why in checks:
        state = "met" if ok else ("not met" if ok is False else "not evaluated")
        print(f"  {what:<20} {state:<14} {why}")
    print(f"\nrecords/s: N / wall time of the run (flowray: env.execute(), deploy included); "
          f"PyFlink: N / the job's net run time; vs <peer>: ratio to the peer's fastest run. "
          f"flowray formats: source {args.flowray_format} ({FORMATS[args.flowray_format]}), "
          f"sink {args.flowray_sink_format} "
          f"({SINK_FORMATS[args.flowray_sink_format]}). Total time "
          f"{time.perf_counter() - t_start:,.0f} s.")

    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"records": n, "pyflink_records": args.pyflink_records,
                   "partitions": PARTITIONS, "keys": KEYS, "rounds": args.rounds,
                   "checkpoint_ms": args.checkpoint_ms,
                   "flowray_format": args.flowray_format,
                   "flowray_sink_format": args.flowray_sink_format,
                   "records_per_s": rates, "median": med, "runs": details,
                   "wrong": wrong, "failed": failed, "skipped": skipped,
                   "latency": latencies,
                   "goal": {"met": met, "checks": [
                       {"check": w, "met": ok, "detail": d} for w, ok, d in checks]}},
                  f, indent=1, default=str)


if __name__ == "__main__":
    main()
