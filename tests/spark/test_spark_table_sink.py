"""Exactly-once Spark table sink (RayDP), on the shared Spark session: round trip against
Spark SQL, task kills mid-run, overwrite, bad input, and BATCH's region failover that
must not commit a finished consumer's rows twice."""

import time
import uuid
from collections import Counter

import pytest

from flowray import JobExecutionError, NumberSequenceSource, StreamExecutionEnvironment
from flowray.common.typeinfo import Types
from flowray.datastream import MapFunction, RuntimeExecutionMode
from flowray.datastream.connectors.spark import SchemaMismatchError, SparkTableSink
from flowray.testing import FaultInjector, wait_until
from tests.support.batch_failover import DAMAGES, ConsumerOneFailsAfterConsumerZeroCommitted

RESTARTS = {"restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _name(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _env(tmp_path, parallelism=2, interval_ms=200):
    env = StreamExecutionEnvironment.get_execution_environment()
    for k, v in {**RESTARTS, "execution.checkpointing.dir": str(tmp_path / "chk")}.items():
        env.get_configuration().set_string(k, v)
    env.enable_checkpointing(interval_ms)
    env.set_parallelism(parallelism)
    return env


TOTALS = Types.ROW_NAMED(["user", "total"], [Types.STRING(), Types.LONG()])


def test_round_trip_keyed_reduce_equals_spark_sql(spark, tmp_path):
    src, out = _name("clicks"), _name("totals")
    (spark.range(0, 30_000)
        .selectExpr("concat('u', cast(id % 101 as string)) as user",
                    "cast(id % 7 as bigint) + 1 as amount")
        .repartition(4).createOrReplaceTempView(src))
    env = _env(tmp_path)
    (env.from_spark(src)
        .map(lambda r: (r.user, r.amount))
        .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(SparkTableSink(out, output_type=TOTALS)))
    env.execute("spark-round-trip")
    got = {r.user: r.total for r in spark.sql(
        f"select user, max(total) as total from {out} group by user").collect()}
    want = {r.user: r.total for r in spark.sql(
        f"select user, sum(amount) as total from {src} group by user").collect()}
    assert got == want
    # every running total once: as many rows as input records
    assert spark.table(out).count() == 30_000


class _Slow(MapFunction):
    """Doubles the amount; sleeps now and then so the job runs long enough to be hit."""

    def map(self, r):
        if r.id % 250 == 0:
            time.sleep(0.05)
        return (r.id, r.user, r.amount * 2)


def test_exactly_once_with_task_actors_killed_twice(spark, tmp_path):
    """Also with every epoch past the spill threshold: staged records go to spill files,
    which a killed task loses with its epoch (replayed) and a pre-commit reads back."""
    n, out = 40_000, _name("doubled")
    df = spark.range(0, n).selectExpr("id", "concat('u', cast(id % 31 as string)) as user",
                                      "cast(id % 5 as bigint) as amount").repartition(4)
    env = _env(tmp_path)
    env.get_configuration().set_string("flowray.sink.spill-threshold", "4 kb")
    sink = SparkTableSink(out, output_type=Types.ROW_NAMED(
        ["id", "user", "amount"], [Types.LONG(), Types.STRING(), Types.LONG()]))
    env.from_spark(df).map(_Slow()).sink_to(sink)
    client = env.execute_async("spark-exactly-once")
    injector = FaultInjector(client)

    def committed_metadata():
        import pyarrow.parquet as pq
        import os
        files = [f for f in os.listdir(sink.directory) if f.endswith(".parquet")]
        return [pq.read_metadata(os.path.join(sink.directory, f)) for f in files]

    def committed_rows():
        return sum(m.num_rows for m in committed_metadata())

    for threshold in (n // 5, n // 2):
        wait_until(lambda: committed_rows() >= threshold, 180, f"{threshold} committed rows",
                   poll_s=0.2)
        injector.kill_random_task()
    result = client.wait(timeout_s=300)
    assert result.outcome.restarts >= 2
    ids = Counter(r.id for r in spark.table(out).select("id").collect())
    assert ids == Counter(range(n)), (f"missing {len(set(range(n)) - set(ids))}, "
                                      f"duplicated {sum(c - 1 for c in ids.values() if c > 1)}")
    assert dict(spark.sql(f"select sum(amount) as s from {out}").first().asDict()) == \
        {"s": 2 * sum(i % 5 for i in range(n))}
    # epochs spilled: their files were written back piece by piece (several row groups)
    assert any(m.num_row_groups > 1 for m in committed_metadata())


def test_overwrite_replaces_and_append_adds(spark, tmp_path):
    out = _name("words")
    schema = Types.ROW_NAMED(["word"], [Types.STRING()])
    for mode, words in (("append", ["a", "b"]), ("append", ["c"]), ("overwrite", ["d"])):
        env = _env(tmp_path, parallelism=1)
        env.from_collection([(w,) for w in words]).sink_to(
            SparkTableSink(out, mode=mode, output_type=schema))
        env.execute(f"spark-{mode}")
    assert sorted(r.word for r in spark.table(out).collect()) == ["d"]


def test_a_new_table_without_output_type_takes_the_records_schema(spark, tmp_path):
    out = _name("inferred")
    env = _env(tmp_path, parallelism=1)
    env.from_collection([{"user": "a", "n": 1}, {"user": "b", "n": 2}]).sink_to(
        SparkTableSink(out))
    env.execute("spark-inferred")
    assert sorted((r.user, r.n) for r in spark.table(out).collect()) == [("a", 1), ("b", 2)]


def test_output_type_that_does_not_match_the_table_is_refused(spark):
    out = _name("existing")
    spark.sql(f"create table {out} (user string, total bigint) using parquet")
    with pytest.raises(SchemaMismatchError, match="has columns"):
        SparkTableSink(out, output_type=Types.ROW_NAMED(["who", "total"],
                                                        [Types.STRING(), Types.LONG()]))
    with pytest.raises(SchemaMismatchError, match="'total' is int32"):
        SparkTableSink(out, output_type=Types.ROW_NAMED(["user", "total"],
                                                        [Types.STRING(), Types.INT()]))


def test_records_that_do_not_fit_fail_the_job_with_the_record(spark, tmp_path):
    out = _name("strict")
    env = _env(tmp_path, parallelism=1)
    env.get_configuration().set_string("restart-strategy.type", "none")
    env.from_collection([("a", 1), ("b", "two")]).sink_to(
        SparkTableSink(out, output_type=TOTALS))
    with pytest.raises(JobExecutionError) as info:
        env.execute("spark-mismatch")
    assert "SchemaMismatchError" in str(info.value) and "'two'" in str(info.value)
    assert spark.table(out).count() == 0


def test_a_view_is_not_a_sink_table(spark):
    view = _name("view")
    spark.range(3).createOrReplaceTempView(view)
    with pytest.raises(ValueError, match="is a view"):
        SparkTableSink(view)


def _to_row(n):
    return (n,)


@pytest.mark.parametrize("damage", DAMAGES)
def test_batch_a_finished_consumers_table_output_is_committed_once(spark, tmp_path, damage):
    """Issue 32's BATCH scenario on Ray (tests/support/batch_failover.py): consumer 0
    committed its part of the table; consumer 1's subpartition from producer 0 is then
    truncated or deleted, and producer 0 runs again. Consumer 0 must not, or its rows are
    in the table twice."""
    n, out = 20_000, _name("batch_once")
    partitions, ledger = tmp_path / "partitions", tmp_path / "ledger"
    ledger.mkdir()
    env = StreamExecutionEnvironment.get_execution_environment()
    for k, v in {**RESTARTS, "flowray.blocking-partitions.dir": str(partitions)}.items():
        env.get_configuration().set_string(k, v)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    (env.from_source(NumberSequenceSource(0, n - 1), source_name="numbers")
        .key_by(lambda x: x % 16)
        .map(ConsumerOneFailsAfterConsumerZeroCommitted(
            str(ledger), str(partitions), damage, job_name="spark-batch-committed-once"))
        .name("consumer")
        .map(_to_row, output_type=Types.ROW_NAMED(["n"], [Types.LONG()]))
        .sink_to(SparkTableSink(out, output_type=Types.ROW_NAMED(["n"], [Types.LONG()]))))
    result = env.execute("spark-batch-committed-once")
    counts = Counter(r.n for r in spark.table(out).collect())
    assert counts == Counter(range(n)), (
        f"{sum(counts.values()) - n:+d} rows, "
        f"{sum(1 for c in counts.values() if c > 1)} of them more than once")
    assert ConsumerOneFailsAfterConsumerZeroCommitted.closes_of_consumer_0(str(ledger)) == 1
    assert result.outcome.restarts >= 1
