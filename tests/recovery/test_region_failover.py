"""Region failover on a real local Ray: a failure restarts only what must restart.

* STREAMING, embarrassingly parallel (forward edges only): one region per pipeline. A task
  of one pipeline is killed; only that pipeline's 3 tasks restart, the other pipelines
  keep processing records while it is down, only the killed task has a new actor
  afterwards, and the committed output is exactly once.
* STREAMING, one region (a keyed exchange): the next attempt of each task runs in the
  actor its last attempt ran in (the same process, as Flink redeploys into the same
  slots), except a task whose process was killed; with
  ``flowray.failover.redeploy-in-place: false`` every task gets a new process. Exactly
  once either way.
* BATCH, two stages joined by a blocking exchange: killing a consumer does not run the
  producers again; deleting the producers' partitions first does; results are right.
"""

import os
from collections import Counter

import pytest
import ray

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream import RuntimeExecutionMode
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.datastream import MapFunction
from flowray.testing import (
    HOLD,
    PAUSE,
    CountRecords,
    DieOnceOnOpen,
    FailOnce,
    FaultInjector,
    RecordOpens,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
           "restart-strategy.fixed-delay.delay": "100 ms"}


def _actor_ids(names):
    return {key: ray.get_actor(name, namespace=NAMESPACE)._actor_id.hex()
            for key, name in names.items()}


def test_streaming_failure_restarts_only_the_failed_pipeline(ray_session, tmp_path):
    # a back-off of 1 s: the failed pipeline is down for at least that long
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(
        {"execution.checkpointing.dir": str(tmp_path / "chk"), **RESTART,
         "restart-strategy.fixed-delay.delay": "1 s"}))
    env.enable_checkpointing(100)
    env.set_parallelism(3)
    n = 6_000
    items = []
    for i in range(n):
        if i % 100 == 0:
            items.append(PAUSE(0.1))  # each pipeline runs for ~6 s
        items.append(i)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    progress = str(tmp_path / "progress")  # records each source subtask passed on
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(CountRecords(progress)).name("count")      # chained with the source
        .map(lambda x: x * 10).name("times ten").disable_chaining()
        .sink_to(sink))
    client = env.execute_async("parallel-pipelines")
    injector = FaultInjector(client)
    wait_until(lambda: len(sink.committed()) > n // 10, 120, "committed output")
    before = _actor_ids(injector.task_actor_names())
    assert len(before) == 9  # 3 pipelines x (source, map, sink): chaining disabled
    vertices = sorted({k.split(":")[0] for k in before}, key=lambda v: int(v[1:]))
    victim = f"{vertices[1]}:1"  # the map of pipeline 1
    at_kill = CountRecords.counts(progress)
    injector.kill(victim)

    after = {}
    at_recovery = {}

    def recovered():
        # the running tasks at the moment the victim is back; a task of another pipeline
        # that has finished meanwhile is simply no longer listed
        names = injector.task_actor_names()
        try:  # the dead actor may still be listed until the job master notices
            ids = _actor_ids(names)
        except ValueError:
            return False
        if victim not in ids or ids[victim] == before[victim]:
            return False
        after.update(ids)
        at_recovery.update(CountRecords.counts(progress))
        return True
    wait_until(recovered, 120, "the failed pipeline to be redeployed")
    result = client.wait(timeout_s=180)

    untouched = {k for k in after if not k.endswith(":1")}
    assert untouched, "pipelines 0 and 2 finished before the failed one came back"
    # only the killed task has a new actor: the other pipelines ran on, and the failed
    # pipeline's other tasks were redeployed into the actors they ran in
    assert {k for k in after if before.get(k) != after[k]} == {victim}
    [event] = client.get_job_info()["restart_events"]
    assert event["decision"].startswith("restarting 3 of 9 tasks"), event
    # while pipeline 1 was down, the pipelines still running went on processing
    for pipeline in {int(k.split(":")[1]) for k in untouched}:
        assert at_recovery[pipeline] > at_kill[pipeline], (pipeline, at_kill, at_recovery)
    assert result.outcome.restarts == 1
    assert Counter(sink.committed()) == Counter(10 * i for i in range(n))


class RecordPids(MapFunction):
    """Passes records through; each open appends ``<subtask> <pid>`` to ``path``: which
    process each attempt of each subtask ran in."""

    def __init__(self, path):
        self.path = path

    def open(self, runtime_context):
        with open(self.path, "a") as f:
            f.write(f"{runtime_context.get_index_of_this_subtask()} {os.getpid()}\n")

    def map(self, value):
        return value

    @staticmethod
    def attempts(path):
        """subtask index -> the pids of its attempts, in order."""
        pids = {}
        with open(path) as f:
            for line in f:
                index, pid = line.split()
                pids.setdefault(int(index), []).append(int(pid))
        return pids


@pytest.mark.parametrize("fault,in_place", [("kill", True), ("kill", False), ("fail", True)])
def test_a_failover_redeploys_into_the_actors_the_tasks_ran_in(ray_session, tmp_path, fault,
                                                               in_place):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(
        {"execution.checkpointing.dir": str(tmp_path / "chk"), **RESTART,
         "flowray.failover.redeploy-in-place": str(in_place).lower()}))
    env.enable_checkpointing(100)
    env.set_parallelism(2)
    n = 2_000
    # two source subtasks, each holding in the middle of its share until the restart
    # (kill: the kill comes while both hold)
    share = list(range(n // 2))
    hold = [HOLD()] if fault == "kill" else []
    items = [*share[:500], *hold, *share[500:], *[x + n // 2 for x in share[:500]], *hold,
             *[x + n // 2 for x in share[500:]]]
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    sources, keyed = str(tmp_path / "source-pids"), str(tmp_path / "keyed-pids")
    stream = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
              .map(RecordPids(sources)).name("source pids")
              .key_by(lambda x: x % 7)
              .map(RecordPids(keyed)).name("keyed pids"))
    if fault == "fail":  # keyed subtask 0 raises once, in user code
        stream = stream.map(FailOnce(str(tmp_path / "failed"), after=300)).name("fail once")
    stream.map(lambda x: x * 10).sink_to(sink)
    client = env.execute_async("in-place")
    if fault == "kill":
        injector = FaultInjector(client)
        wait_until(lambda: len(source.fired_markers()) == 2
                   and client.get_checkpoint_stats()["counts"].get("completed", 0) > 0,
                   120, "both sources holding and a completed checkpoint")
        [victim] = [k for k in injector.subtasks("keyed pids") if k.endswith(":0")]
        injector.kill(victim)
    result = client.wait(timeout_s=180)

    assert result.outcome.restarts == 1
    assert Counter(sink.committed()) == Counter(10 * i for i in range(n))
    attempts = {"source": RecordPids.attempts(sources), "keyed": RecordPids.attempts(keyed)}
    for vertex, per_subtask in attempts.items():
        for index, pids in per_subtask.items():
            assert len(pids) == 2, (vertex, index, pids)  # one restart of the one region
            killed = fault == "kill" and vertex == "keyed" and index == 0
            same = in_place and not killed
            assert (pids[0] == pids[1]) is same, (vertex, index, pids, attempts)


def _batch_job(tmp_path, delete_partitions):
    partitions = tmp_path / "partitions"
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(
        {"flowray.blocking-partitions.dir": str(partitions), **RESTART}))
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    runs = tmp_path / "producer-runs.txt"
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    words = [f"w{i % 7}" for i in range(7_000)]
    (env.from_collection(words).set_parallelism(1)
        .map(RecordOpens(str(runs))).name("producer").set_parallelism(2)
        .map(lambda w: (w, 1))
        .key_by(lambda t: t[0])
        .map(DieOnceOnOpen(str(tmp_path / "died"), str(partitions) if delete_partitions else None))
        .name("consumer")
        .key_by(lambda t: t[0]).sum(1)
        .sink_to(sink))
    result = env.execute("two-stages")
    final = {}
    for k, c in sink.committed():
        final[k] = max(final.get(k, 0), c)
    return result, runs.read_text().split(), sink, final


def test_batch_consumer_failure_does_not_rerun_the_producer(ray_session, tmp_path):
    result, runs, sink, final = _batch_job(tmp_path, delete_partitions=False)
    assert sorted(runs) == ["0", "1"]  # each producer subtask ran once
    assert result.outcome.restarts == 1
    assert final == {f"w{i}": 1_000 for i in range(7)}
    assert len(sink.committed()) == 7  # BATCH: one final count per word, once each


def test_batch_lost_partition_reruns_the_producer(ray_session, tmp_path):
    result, runs, sink, final = _batch_job(tmp_path, delete_partitions=True)
    assert sorted(runs) == ["0", "0", "1", "1"]  # the producers ran again
    assert result.outcome.restarts >= 1
    assert final == {f"w{i}": 1_000 for i in range(7)}
    assert len(sink.committed()) == 7
