"""A driver's pool of warm task actors on a real local Ray (flowray.task-actor-pool.*):
jobs run one after another in the same task processes, also after a job failed with an
exception in user code (its tasks closed their operators); an actor whose task failed
with an error of its process (MemoryError) or whose function's close() raised never hosts
another; a call meant for a task an actor hosted before does not reach its next task."""

import pytest
import ray

from flowray import Configuration, JobExecutionError, StreamExecutionEnvironment
from flowray.datastream import MapFunction
from flowray.runtime.execution.cluster import NAMESPACE

pytestmark = [pytest.mark.ray]


def _env(**settings):
    config = Configuration({"parallelism.default": 2, **settings})
    return StreamExecutionEnvironment.get_execution_environment(config)


def _run_and_pids(name, fail=None, close_raises=False):
    """Run a small job to its end; the (actor name, pid) of each of its task actors."""
    return _run(name, fail, close_raises)[0]


def _run(name, fail=None, close_raises=False, map_parallelism=2):
    """Run a small job to its end: the (actor name, pid) of each of its task actors, and
    the names of the map's actors. ``fail``: the exception the map raises at record 3;
    ``close_raises``: its close() raises too."""
    env = _env()

    class Double(MapFunction):
        def map(self, x):
            if fail is not None and x == 3:
                raise fail
            return 2 * x

        def close(self):
            if close_raises:
                raise RuntimeError("close failed")

    (env.from_collection(list(range(200))).rebalance()
        .map(Double()).name("double").set_parallelism(map_parallelism)
        .add_sink(lambda v: None).set_parallelism(map_parallelism))
    client = env.execute_async(name)
    master = client.job_master_actor()
    names, tasks = {}, {}
    try:
        while len(names) < 1 + map_parallelism \
                and client.get_job_status().value in ("CREATED", "RUNNING"):
            names = ray.get(master.task_actor_names.remote())
            tasks = ray.get(master.task_names.remote())
    except Exception:  # noqa: BLE001 - the job ended meanwhile
        pass
    try:
        client.wait(timeout_s=120)
    except JobExecutionError:
        if fail is None:
            raise
    pids = {}
    for n in names.values():
        try:
            pids[n] = ray.get(ray.get_actor(n, namespace=NAMESPACE).pid.remote(), timeout=10)
        except Exception:  # noqa: BLE001 - killed with its failed task
            pids[n] = None
    maps = {n for key, n in names.items() if "double" in tasks.get(key, "")}
    return pids, maps


def test_jobs_one_after_another_run_in_the_same_task_processes(ray_session):
    first = _run_and_pids("pool-a")
    second = _run_and_pids("pool-b")
    pooled = {n: p for n, p in first.items() if n.startswith("flowray-pool/")}
    assert pooled, f"no task actor came from the pool: {first}"
    # the second job's task actors include the first's, in the same processes
    reused = {n: p for n, p in second.items() if n in pooled}
    assert reused and all(pooled[n] == p for n, p in reused.items())


def test_a_job_failed_in_user_code_gives_its_actors_back(ray_session):
    failed = _run_and_pids("pool-fail", fail=ValueError("boom"))
    after = _run_and_pids("pool-after")
    pooled = {n: p for n, p in failed.items() if n.startswith("flowray-pool/")}
    reused = {n: p for n, p in after.items() if n in pooled}
    assert reused and all(pooled[n] == p for n, p in reused.items()), (failed, after)


@pytest.mark.parametrize("fail,close_raises", [(MemoryError(), False),
                                               (ValueError("boom"), True)],
                         ids=["memory-error", "close-raises"])
def test_an_actor_left_unfit_hosts_no_other_task(ray_session, fail, close_raises):
    failed, maps = _run("pool-unfit", fail=fail, close_raises=close_raises,
                        map_parallelism=1)
    after = _run_and_pids("pool-after-unfit")
    assert maps and not maps & set(after), ("an unfit actor hosted a new task",
                                            failed, after)
    # the source's task ended fit: its actor went back to the pool
    assert set(failed) - maps <= set(after) or not any(
        n.startswith("flowray-pool/") for n in set(failed) - maps), (failed, after)


def test_a_call_for_a_former_task_does_not_reach_the_next_one(ray_session):
    """A cancel the first job's master could have sent late (naming that task's epoch)
    arrives after the actor went back to the pool: the next job on it finishes."""
    first = _run_and_pids("pool-epoch-a")
    for name in first:
        if name.startswith("flowray-pool/"):
            actor = ray.get_actor(name, namespace=NAMESPACE)
            epoch = ray.get(actor.current_epoch.remote())
            ray.get(actor.cancel.remote(epoch=epoch - 1))   # the former task's epoch
    second = _run_and_pids("pool-epoch-b")   # raises if a task of it was cancelled
    assert set(first) & set(second)


def _collector_seen(name, threshold):
    """(pid, young threshold, objects frozen) in each map subtask's process, per record."""
    def probe(_):
        import gc
        import os
        return (os.getpid(), gc.get_threshold()[0], gc.get_freeze_count() > 0)

    env = _env(**{"flowray.task.gc-threshold": threshold})
    return set(env.from_collection(list(range(20))).rebalance().map(probe)
               .execute_and_collect(name))


def test_a_task_runs_with_the_collectors_threshold_and_its_actor_gets_it_back(ray_session):
    tuned = _collector_seen("gc-tuned", 50_000)
    assert {(t, f) for _, t, f in tuned} == {(50_000, True)}, tuned
    # the same pooled processes, with the collector as Python has it: nothing was left over
    plain = _collector_seen("gc-plain", 0)
    assert {p for p, _, _ in tuned} & {p for p, _, _ in plain}, (tuned, plain)
    assert {(t, f) for _, t, f in plain} == {(700, False)}, plain
