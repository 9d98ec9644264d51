"""Spark tables and DataFrames as flowray sources (RayDP), on the shared Spark session."""

from collections import Counter

import pytest

from flowray import StreamExecutionEnvironment
from flowray.common.types import Row
from flowray.spark import SparkTableNotFoundError
from flowray.testing import TransactionalTestingSink


def _clicks(spark, n=20_000, users=97):
    return spark.range(0, n).selectExpr(f"concat('u', cast(id % {users} as string)) as user",
                                        "cast(id % 13 as int) + 1 as amount", "id")


def test_a_spark_table_keyed_and_reduced_equals_spark_sql(spark, tmp_path):
    _clicks(spark).repartition(3).createOrReplaceTempView("clicks_src")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_spark("clicks_src")
        .map(lambda r: (r.user, r.amount))
        .key_by(lambda t: t[0]).sum(1)
        .sink_to(sink))
    env.execute("spark-source-sum")
    final = {}
    for user, total in sink.committed():
        final[user] = max(final.get(user, 0), total)
    expected = {r.user: r.total for r in spark.sql(
        "select user, sum(amount) as total from clicks_src group by user").collect()}
    assert final == expected


def test_rows_are_named_and_each_comes_exactly_once(spark, tmp_path):
    df = _clicks(spark, n=5_000).repartition(4)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    env.from_spark(df).sink_to(sink)
    env.execute("spark-source-rows")
    rows = sink.committed()
    assert all(isinstance(r, Row) and r.as_dict().keys() == {"user", "amount", "id"}
               for r in rows)
    assert Counter(r.id for r in rows) == Counter(range(5_000))


def test_a_missing_table_is_a_clear_error(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(SparkTableNotFoundError, match="'no_such_table' does not exist"):
        env.from_spark("no_such_table")


def test_from_spark_refuses_what_is_not_a_dataframe(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(TypeError, match="Spark DataFrame or a table name"):
        env.from_spark([1, 2, 3])


def test_a_running_session_is_reused_and_an_adopted_one_is_never_stopped(spark):
    from flowray.spark.session import SparkSessionManager
    from flowray.spark import get_or_create_spark
    assert get_or_create_spark() is spark
    adopting = SparkSessionManager()  # as if the user had started Spark with raydp.init_spark
    assert adopting.get_or_create() is spark
    assert not adopting.owns_session
    adopting.stop()
    assert spark.range(3).count() == 3  # still running


def test_a_parquet_table_is_read_in_place_and_equals_spark_sql(spark, tmp_path):
    from flowray.spark.parquet_table import ParquetTableBlockStore
    from flowray.spark.source import RayBlockStore, spark_source

    _clicks(spark).repartition(3).write.mode("overwrite").saveAsTable("clicks_in_place")
    assert isinstance(spark_source(spark, "clicks_in_place").store, ParquetTableBlockStore)
    snapshot = spark_source(spark, "clicks_in_place", snapshot=True).store
    assert isinstance(snapshot, RayBlockStore)  # copied by RayDP, as a DataFrame is
    snapshot.release()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_spark("clicks_in_place", columnar=True)
        .key_by("user").sum("amount")
        .to_rows()
        .map(lambda r: (r.user, r.amount))
        .sink_to(sink))
    env.execute("spark-table-in-place")
    final = {}
    for user, total in sink.committed():
        final[user] = max(final.get(user, 0), total)
    expected = {r.user: r.total for r in spark.sql(
        "select user, sum(amount) as total from clicks_in_place group by user").collect()}
    assert final == expected


def test_a_table_overwritten_before_the_job_read_it_fails_the_job_saying_so(spark, tmp_path):
    from flowray.runtime.execution.client import JobExecutionError

    _clicks(spark, n=1_000).write.mode("overwrite").saveAsTable("clicks_overwritten")
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_spark("clicks_overwritten")  # lists the table's files now
    _clicks(spark, n=10).write.mode("overwrite").saveAsTable("clicks_overwritten")
    stream.sink_to(TransactionalTestingSink(str(tmp_path / "out")))
    with pytest.raises(JobExecutionError, match="clicks_overwritten' is gone.*snapshot=True"):
        env.execute("spark-table-overwritten")
