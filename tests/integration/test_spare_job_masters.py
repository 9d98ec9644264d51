"""A driver's spare job masters on a real local Ray (spare_masters.py): an attached job
takes the spare started for it and runs there; the job is listed under its own name while
idle spares are not; a spare that is gone is replaced by a master of the job's own; a
restartable job's spare master that dies is restarted by Ray with the same job, which ends
exactly once."""

from collections import Counter

import pytest
import ray

from flowray import Configuration, JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.common.options import JOB_MASTER_MAX_RESTARTS
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import (
    MASTER_SUFFIX,
    is_spare_master_name,
    list_jobs,
    live_display_names,
)
from flowray.runtime.execution.master_assignment import read_assignment
from flowray.runtime.execution.spare_masters import driver_spares
from flowray.testing import PAUSE, FaultInjector, TestingSource, TransactionalTestingSink, \
    wait_until

pytestmark = [pytest.mark.ray]

N = 20_000
KEYS = 100


def _master_name(client) -> str:
    return ray.get(client.job_master_actor().info.remote(), timeout=30)["master"]


def _spare_for(restarts: int) -> str:
    """The name of this driver's idle spare for ``restarts`` (started if there is none)."""
    spares = driver_spares()
    spares.replenish(restarts, force=True)
    name = spares.idle_name(restarts)
    assert name is not None
    return name


def _small_job(name, values):
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"parallelism.default": 2}))
    return env.from_collection(values).rebalance().map(lambda x: x * 3) \
        .execute_and_collect(name)


def test_an_attached_job_runs_on_the_spare_started_for_it(ray_session):
    spare = _spare_for(0)   # (jobs without checkpoints: Ray never restarts their master)
    with _small_job("on-a-spare", list(range(1000))) as results:
        client = results._client
        assert _master_name(client) == spare
        # listed under its own name; no idle spare is listed
        jobs = {j["master"]: j for j in list_jobs()}
        assert jobs[spare]["name"] == "on-a-spare"
        assert not [m for m, j in jobs.items() if j.get("spare")]
        assert all(not is_spare_master_name(m) or m == spare or
                   jobs[m]["status"] != "UNKNOWN" for m in jobs)
        got = sorted(results)
    assert got == sorted(x * 3 for x in range(1000))
    assert spare not in driver_spares().idle_names()   # taken
    # from the driver's second job on, each job starts a spare for the next one
    with _small_job("after-the-spare", [1]) as results:
        assert list(results) == [3]
    assert driver_spares().idle_name(0) is not None


def test_a_second_job_of_the_same_name_on_spares_is_shown_with_a_number(ray_session):
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"parallelism.default": 1}))
    source = TestingSource([1, PAUSE(120), 2])   # runs until cancelled
    env.from_source(source, WatermarkStrategy.no_watermarks(), "held").add_sink(lambda v: None)
    _spare_for(0)
    first = env.execute_async("same-name")
    try:
        assert is_spare_master_name(_master_name(first))
        wait_until(lambda: first.get_job_status() is JobStatus.RUNNING, 60, "the job to run")
        assert live_display_names("same-name") == {"same-name"}
        with _small_job("same-name", [1, 2, 3]) as results:
            info = ray.get(results._client.job_master_actor().info.remote(), timeout=30)
            assert info["name"] == "same-name#2"
            assert sorted(results) == [3, 6, 9]
    finally:
        first.cancel()
        try:
            first.wait(timeout_s=60)
        except Exception:  # noqa: BLE001 - cancelled
            pass


def test_a_spare_that_is_gone_leaves_the_job_a_master_of_its_own(ray_session):
    spare = _spare_for(0)
    ray.kill(ray.get_actor(spare, namespace=NAMESPACE), no_restart=True)
    with _small_job("spare-gone", list(range(100))) as results:
        client = results._client
        name = _master_name(client)
        assert not is_spare_master_name(name)
        assert name == f"spare-gone@{client.get_job_id()[:8]}{MASTER_SUFFIX}"
        assert sorted(results) == sorted(x * 3 for x in range(100))


def _records():
    items = []
    for i in range(N):
        if i and i % 500 == 0:
            items.append(PAUSE(0.05))
        items.append((f"k{i % KEYS}", 1))
    return items


def _expected():
    per_key = Counter(f"k{i % KEYS}" for i in range(N))
    return Counter((k, c) for k, n in per_key.items() for c in range(1, n + 1))


def test_a_killed_spare_master_is_restarted_with_its_job_exactly_once(ray_session, tmp_path):
    restarts = Configuration().get(JOB_MASTER_MAX_RESTARTS)
    spare = _spare_for(restarts)
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    conf.set_string("execution.checkpointing.dir", str(tmp_path / "checkpoints"))
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.delay", "200 ms")
    env.enable_checkpointing(200)
    env.set_parallelism(2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(TestingSource(_records(), ledger_dir=str(tmp_path / "faults")),
                     WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda t: t[0]).sum(1).name("running sum").sink_to(sink))
    client = env.execute_async("spare-restarted")
    master = client.job_master_actor()
    assert _master_name(client) == spare
    actor_id = master._actor_id.hex()
    assert read_assignment(actor_id) is not None   # kept for Ray's restart

    def progressed():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended before its master was killed")
        stats = client.get_checkpoint_stats()["counts"]
        return len(sink.committed()) >= N // 4 and stats.get("completed", 0) >= 1
    wait_until(progressed, 120, "a quarter committed after a checkpoint", poll_s=0.1)
    FaultInjector(client).kill_job_master()
    result = client.wait(timeout_s=300)

    assert result.outcome.status is JobStatus.FINISHED
    assert result.outcome.job_master_restarts == 1
    committed = Counter(sink.committed())
    assert committed == _expected()
    assert sink.pending() == []
    assert read_assignment(actor_id) is None   # the driver's release deleted it
