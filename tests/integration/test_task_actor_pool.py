"""A driver's pool of warm task actors on a real local Ray (flowray.task-actor-pool.*):
jobs run one after another in the same task processes; a task that failed never hosts
another; a call meant for a task an actor hosted before does not reach its next task."""

import pytest
import ray

from flowray import Configuration, JobExecutionError, StreamExecutionEnvironment
from flowray.runtime.execution.cluster import NAMESPACE

pytestmark = [pytest.mark.ray]


def _env(**settings):
    config = Configuration({"parallelism.default": 2, **settings})
    return StreamExecutionEnvironment.get_execution_environment(config)


def _run_and_pids(name, fail=False):
    """Run a small job to its end; the (actor name, pid) of each of its task actors."""
    env = _env()

    def double(x):
        if fail and x == 3:
            raise ValueError("boom")
        return 2 * x

    env.from_collection(list(range(200))).rebalance().map(double).add_sink(lambda v: None)
    client = env.execute_async(name)
    master = client.job_master_actor()
    names = {}
    try:
        while len(names) < 3 and client.get_job_status().value in ("CREATED", "RUNNING"):
            names = ray.get(master.task_actor_names.remote())
    except Exception:  # noqa: BLE001 - the job ended meanwhile
        pass
    try:
        client.wait(timeout_s=120)
    except JobExecutionError:
        if not fail:
            raise
    pids = {}
    for n in names.values():
        try:
            pids[n] = ray.get(ray.get_actor(n, namespace=NAMESPACE).pid.remote(), timeout=10)
        except Exception:  # noqa: BLE001 - killed with its failed task
            pids[n] = None
    return pids


def test_jobs_one_after_another_run_in_the_same_task_processes(ray_session):
    first = _run_and_pids("pool-a")
    second = _run_and_pids("pool-b")
    pooled = {n: p for n, p in first.items() if n.startswith("flowray-pool/")}
    assert pooled, f"no task actor came from the pool: {first}"
    # the second job's task actors include the first's, in the same processes
    reused = {n: p for n, p in second.items() if n in pooled}
    assert reused and all(pooled[n] == p for n, p in reused.items())


def test_the_actors_of_a_failed_task_are_not_reused(ray_session):
    failed = _run_and_pids("pool-fail", fail=True)
    after = _run_and_pids("pool-after")
    assert not set(failed) & set(after), "an actor of the failed job hosted a new task"


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
