"""Spark as a blocking stage in the middle of a BATCH program: flowray -> Spark SQL (a join
with a Spark table) -> flowray. A downstream failure re-reads the Spark stage's data
without running the producer again; if the stage's files are gone, the producer runs again."""

import os
import uuid
from collections import Counter

import pytest

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.typeinfo import Types
from flowray.datastream import MapFunction, RuntimeExecutionMode
from flowray.testing import DieOnceOnOpen, RecordOpens, TransactionalTestingSink

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
           "restart-strategy.fixed-delay.delay": "100 ms"}
CLICKS = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.LONG()])


def _batch_env(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(
        {"flowray.blocking-partitions.dir": str(tmp_path / "partitions"), **RESTART}))
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    return env


def _program(spark, tmp_path, names):
    env = _batch_env(tmp_path)
    runs = tmp_path / "producer-runs.txt"
    clicks = (env.from_collection([(f"u{i % 10}", i) for i in range(2_000)])
              .map(RecordOpens(str(runs))).name("producer"))
    df = clicks.to_spark_dataframe(CLICKS)
    joined = (df.groupBy("user").sum("n").withColumnRenamed("sum(n)", "total")
              .join(spark.table(names), "user"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_spark(joined)
        .map(DieOnceOnOpen(str(tmp_path / "died")))
        .map(lambda r: (r.user, r.name, r.total))
        .sink_to(sink))
    return env, sink, runs, df


def _expected():
    totals = Counter()
    for i in range(2_000):
        totals[f"u{i % 10}"] += i
    return Counter((u, f"Name {u}", t) for u, t in totals.items() if u != "u9")


def _names_table(spark):
    names = f"names_{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([(f"u{i}", f"Name u{i}") for i in range(9)],  # u9 has no name
                          "user string, name string").createOrReplaceTempView(names)
    return names


def test_a_failure_after_the_spark_stage_does_not_run_the_producer_again(spark, tmp_path):
    env, sink, runs, df = _program(spark, tmp_path, _names_table(spark))
    result = env.execute("spark-stage")
    assert Counter(sink.committed()) == _expected()
    assert result.outcome.restarts == 1                     # the killed consumer
    assert sorted(runs.read_text().split()) == ["0", "1"]   # the producer ran once
    # the stage's DataFrame stays usable after the job, as often as needed
    assert df.count() == 2_000 and df.count() == 2_000


def test_a_program_reading_a_stream_from_before_the_stage_is_refused(spark, tmp_path):
    from flowray.spark.stage import SparkStageError
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    before = env.from_collection([("a", 1)])
    df = before.to_spark_dataframe(CLICKS)
    after = env.from_spark(df)
    after.union(before.map(lambda t: t)).print()
    with pytest.raises(SparkStageError, match="from before the Spark stage"):
        env.execute("crossing")


def test_to_spark_dataframe_needs_a_schema(spark):
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(TypeError, match="needs output_type"):
        env.from_collection([1]).to_spark_dataframe(None)


def test_the_producer_runs_again_when_the_stage_files_are_gone(spark, tmp_path, monkeypatch):
    from flowray.spark import stage as spark_stages
    real = spark_stages.record_stage_output
    lost = []

    def record_then_lose_a_file(stage):  # e.g. the folder was cleaned up under the job
        real(stage)
        if not lost and stage.files:
            lost.append(stage.files[0])
            os.remove(os.path.join(stage.folder, stage.files[0]))
    monkeypatch.setattr(spark_stages, "record_stage_output", record_then_lose_a_file)

    env, sink, runs, _ = _program(spark, tmp_path, _names_table(spark))
    env.execute("spark-stage-lost")
    assert lost
    assert sorted(runs.read_text().split()) == ["0", "0", "1", "1"]  # the producer, twice
    assert Counter(sink.committed()) == _expected()


class _LoseBlocksAndDieOnce(MapFunction):
    """The first time subtask 0 opens: the object store loses the converted blocks (their
    holder is killed), then this process dies. The restarted tasks must still read them."""

    def __init__(self, ledger):
        self.ledger = ledger

    def open(self, runtime_context):
        if runtime_context.get_index_of_this_subtask() != 0:
            return
        try:
            os.close(os.open(self.ledger, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        import ray
        from ray.util import list_named_actors
        for actor in list_named_actors(all_namespaces=True):
            if actor["name"].startswith("flowray-spark-blocks-"):
                ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]))
        os._exit(1)

    def map(self, value):
        return value


def test_blocks_lost_from_the_object_store_are_read_from_the_stage(spark, tmp_path):
    env = _batch_env(tmp_path)
    runs = tmp_path / "producer-runs.txt"
    df = (env.from_collection([(f"u{i % 10}", i) for i in range(2_000)])
          .map(RecordOpens(str(runs))).to_spark_dataframe(CLICKS))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_spark(df.where("n % 2 = 0"))
        .map(_LoseBlocksAndDieOnce(str(tmp_path / "died")))
        .map(lambda r: (r.user, r.n))
        .sink_to(sink))
    result = env.execute("spark-stage-lost-blocks")
    assert Counter(sink.committed()) == Counter((f"u{i % 10}", i) for i in range(0, 2_000, 2))
    assert result.outcome.restarts == 1
    assert sorted(runs.read_text().split()) == ["0", "1"]
    from ray.util import list_named_actors
    assert not [a for a in list_named_actors(all_namespaces=True)
                if a["name"].startswith("flowray-spark-blocks-")]  # the blocks were lost
