"""Real jobs on the shared local Ray: task actors, socket channels, driver sinks."""

import collections
import threading
import time

import pytest
import ray

from flowray import (
    CoMapFunction,
    Configuration,
    JobExecutionError,
    KeyedProcessFunction,
    NumberSequenceSource,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from flowray.runtime.execution.serialization import FunctionSerializationError

LINES = ["the quick brown fox", "jumps over the lazy dog", "the dog barks", "fox and dog"]


def _expected_counts():
    return collections.Counter(w for line in LINES for w in line.split())


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_word_count(env, parallelism):
    env.set_parallelism(parallelism)
    out = list(env.from_collection(LINES)
               .flat_map(lambda line: line.split())
               .map(lambda w: (w, 1))
               .key_by(lambda t: t[0])
               .sum(1)
               .execute_and_collect(f"wc-{parallelism}"))
    final = {}
    for word, count in out:
        final[word] = max(final.get(word, 0), count)
    assert final == dict(_expected_counts())
    assert len(out) == sum(_expected_counts().values())


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_keyed_running_sum_keeps_per_key_order(env, parallelism):
    n, keys = 3000, 7
    env.set_parallelism(parallelism)
    out = list(env.from_source(NumberSequenceSource(1, n))
               .map(lambda x: (x % keys, x))
               .key_by(lambda t: t[0])
               .reduce(lambda a, b: (a[0], a[1] + b[1]))
               .execute_and_collect(f"sum-{parallelism}"))
    assert len(out) == n
    by_key = collections.defaultdict(list)
    for k, s in out:
        by_key[k].append(s)
    for k, sums in by_key.items():
        # running sums of positive numbers in arrival order: strictly increasing per key
        assert sums == sorted(sums) and len(set(sums)) == len(sums)
        assert sums[-1] == sum(x for x in range(1, n + 1) if x % keys == k)


def test_union_and_connect(env):
    env.set_parallelism(2)
    a = env.from_collection([1, 2, 3])
    b = env.from_collection([10, 20])
    assert sorted(a.union(b).map(lambda x: x * 2).execute_and_collect("union")) == \
        [2, 4, 6, 20, 40]

    class Tag(CoMapFunction):
        def map1(self, value):
            return ("left", value)

        def map2(self, value):
            return ("right", value)

    out = env.from_collection([1, 2]).connect(env.from_collection(["x"])).map(Tag())
    assert sorted(out.execute_and_collect("connect")) == \
        [("left", 1), ("left", 2), ("right", "x")]


def test_generator_functions_and_keyed_state(env):
    class CountPerKey(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))

        def process_element(self, value, ctx):
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield ctx.get_current_key(), c

    def words(line):
        for w in line.split():
            yield w

    env.set_parallelism(2)
    out = (env.from_collection(LINES).flat_map(words)
           .key_by(lambda w: w).process(CountPerKey()).execute_and_collect("gen"))
    final = {}
    for k, c in out:
        final[k] = max(final.get(k, 0), c)
    assert final == dict(_expected_counts())


def test_user_error_names_operator_and_keeps_traceback(env):
    def explode(x):
        if x == 3:
            raise ZeroDivisionError(f"bad record {x}")
        return x

    env.from_collection([1, 2, 3, 4]).map(explode).name("Exploder").add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("failing job")
    err = info.value
    assert err.operator == "Exploder"
    assert err.cause_type == "ZeroDivisionError"
    assert "bad record 3" in str(err)
    assert "explode" in err.cause_traceback  # the user's frame is in the original traceback


def test_unpicklable_function_fails_before_deployment(env):
    lock = threading.Lock()
    env.from_collection([1]).map(lambda x: (lock, x)).name("Locked Map").print()
    with pytest.raises(FunctionSerializationError, match="Locked Map"):
        env.execute("never deployed")
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith("never deployed@")]


@pytest.mark.parametrize("pool_size", [0, 4])
def test_actors_are_named_in_flowray_namespace(ray_session, pool_size):
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("flowray.task-actor-pool.size", str(pool_size)))
    env.set_parallelism(2)
    stream = env.from_source(NumberSequenceSource(1, 10_000_000), source_name="numbers") \
        .map(lambda x: x + 1)
    it = stream.execute_and_collect("named job")
    try:
        next(it)  # the job runs; the unconsumed collect channel holds it back
        names = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a["namespace"] == "flowray"}
        # the job's master is named "<job name>@<job id prefix>/jobmaster" and its task
        # actors under the same prefix; or, with the driver's pool, the master is the
        # driver's spare (if one was started) and the task actors the pool's
        prefix = f"named job@{it._client.get_job_id()[:8]}"
        master = ray.get(it._client.job_master_actor().info.remote())["master"]
        assert master in names
        if pool_size == 0:
            assert master == f"{prefix}/jobmaster"
        else:
            assert master == f"{prefix}/jobmaster" or (
                master.startswith("flowray-pool/") and master.endswith("/jobmaster"))
        tasks = ray.get(it._client.job_master_actor().task_actor_names.remote())
        assert len(tasks) == 3   # two of the source and map, the collect sink
        if pool_size == 0:
            assert set(tasks.values()) == {f"{prefix}/Source: numbers -> Map/0",
                                           f"{prefix}/Source: numbers -> Map/1",
                                           f"{prefix}/Sink: Collect/0"}
        else:
            assert all(n.startswith("flowray-pool/") for n in tasks.values())
        assert set(tasks.values()) <= names
    finally:
        it.close()
    assert it._client.get_job_status().value == "CANCELED"


def test_slow_sink_bounds_in_flight_batches(ray_session):
    credits = 2
    config = (Configuration().set_string("flowray.channel.credits", str(credits))
              .set_string("flowray.channel.batch-size", "10"))
    env = StreamExecutionEnvironment.get_execution_environment(config)

    def slow_sink(value):
        time.sleep(0.0005)  # a slow external system; the test asserts a bound, not a time

    env.from_source(NumberSequenceSource(1, 4000)).rebalance().map(lambda x: x) \
        .set_parallelism(1).add_sink(slow_sink)
    result = env.execute("slow sink")
    channels = [c for m in result.task_metrics for c in m["channels"].values()]
    assert channels
    assert all(c["max_in_flight"] <= credits for c in channels)
    assert any(c["blocked"] > 0 for c in channels)  # back-pressure engaged
    assert sum(c["records"] for c in channels) == 4000


def test_same_job_name_runs_twice_and_async_client(env):
    for _ in range(2):
        env.from_collection([1, 2, 3]).map(lambda x: x * 2).add_sink(lambda v: None)
        client = env.execute_async("same name")
        result = client.wait()
        assert client.get_job_status().value == "FINISHED"
        assert result.source_records == 3


def test_print_and_collect_in_one_job(env, capsys):
    env.set_parallelism(2)
    ds = env.from_collection([1, 2, 3]).map(lambda x: x * 10)
    ds.print()
    assert sorted(ds.execute_and_collect("print and collect")) == [10, 20, 30]
    printed = sorted(line.split("> ")[1] for line in capsys.readouterr().out.splitlines()
                     if "> " in line)
    assert printed == ["10", "20", "30"]


def test_progress_counts_the_records_of_tasks_that_already_finished(env, tmp_path):
    """A short source finishes while a paused one still runs: the progress figures keep
    the finished task's records (they used to drop to 0 once it stopped running)."""
    from flowray.common import WatermarkStrategy
    from flowray.testing import PAUSE, FaultInjector, TestingSource, wait_until

    env.set_parallelism(1)
    quick = env.from_collection(list(range(100)))
    slow = env.from_source(TestingSource([PAUSE(30), 1], ledger_dir=str(tmp_path)),
                           WatermarkStrategy.no_watermarks(), "slow")
    quick.union(slow).add_sink(lambda r: None)
    client = env.execute_async("progress")
    injector = FaultInjector(client)
    try:
        # all three are deployed at once; then the quick source finishes
        wait_until(lambda: len(injector.task_actor_names()) == 2, 60,
                   "the quick source to finish")
        progress = client._handle.progress()
        assert progress["source_records"] == 100 and progress["records_in"] >= 100
    finally:
        client.cancel()
        with pytest.raises(JobExecutionError):
            client.wait(timeout_s=60)
