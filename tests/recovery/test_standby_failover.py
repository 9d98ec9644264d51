"""Warm standby task actors on a real local Ray (``flowray.failover.standby-tasks``).

The job master keeps an idle task actor started; a failover deploys into it instead of
starting a new process, and a new standby is started once the job has recovered. A
standby that dies is replaced and never used. The source holds (``HOLD()``) at fixed
places, so every kill happens while the job runs, whatever the machine's speed; the
committed output is exactly once.
"""

import pytest
import ray

from flowray import Configuration, JobExecutionError, JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.testing import (
    HOLD,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
           "restart-strategy.fixed-delay.delay": "0 ms",
           "flowray.failover.standby-tasks": 1,
           # the master's own standbys (the driver's pool would serve failovers instead)
           "flowray.task-actor-pool.size": 0}


def test_failovers_deploy_into_standby_actors_and_a_dead_standby_is_replaced(
        ray_session, tmp_path, caplog):
    caplog.set_level("WARNING", logger="flowray.runtime.execution.client")
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(
        {"execution.checkpointing.dir": str(tmp_path / "chk"), **RESTART}))
    env.enable_checkpointing(100)
    env.set_parallelism(1)
    items = list(range(0, 300)) + [HOLD()] + list(range(300, 600)) + [HOLD()] \
        + list(range(600, 900)) + [HOLD()]
    source = TestingSource(items, ledger_dir=str(tmp_path / "ledger"))
    holds = [i for i, item in enumerate(items) if not isinstance(item, int)]
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers") \
        .map(lambda x: x + 1).sink_to(sink)
    client = env.execute_async("standby-failover")
    master = client.job_master_actor()
    injector = FaultInjector(client)

    def standbys():
        return set(ray.get(master.standby_names.remote(), timeout=30))

    def held(n):
        return lambda: len(source.fired_markers()) >= n

    # the first standby starts once a checkpoint completed
    wait_until(lambda: bool(standbys()), 120, "a standby task actor")
    [first] = standbys()
    # a standby that dies is dropped and replaced
    ray.kill(ray.get_actor(first, namespace=NAMESPACE), no_restart=True)
    wait_until(lambda: bool(standbys() - {first}), 120, "a standby replacing the dead one")
    [second] = standbys()
    wait_until(held(1), 120, "the source at its first hold")
    [key] = injector.task_actor_names()
    injector.kill(key)
    # the failover deploys into the standby; a new standby is started afterwards
    wait_until(lambda: injector.task_actor_names().get(key) == second, 120,
               "the task in the standby actor")
    wait_until(held(2), 120, "the source at its second hold")
    wait_until(lambda: bool(standbys() - {second}), 120, "a new standby")
    [third] = standbys()
    injector.kill(key)
    wait_until(lambda: injector.task_actor_names().get(key) == third, 120,
               "the task in the new standby actor")
    wait_until(held(3), 120, "the source at its last hold")
    expected = [x + 1 for x in range(900)]
    wait_until(lambda: sorted(sink.committed()) == expected, 120, "every record committed")
    assert source.fired_markers() == holds
    assert client.get_job_info()["restarts"] == 2
    client.cancel()
    with pytest.raises(JobExecutionError) as info:
        client.wait(timeout_s=120)
    assert info.value.outcome.status is JobStatus.CANCELED
    # the client answers after the end, from the job's final info (its master is gone)
    final = client.get_job_info()
    assert final["status"] == "CANCELED" and final["restarts"] == 2, final
    # each restart was told on the driver's console (its master runs elsewhere): which
    # task, what, and what the job master decided
    told = [r.getMessage() for r in caplog.records if " restarts: " in r.getMessage()]
    assert len(told) == 2 and all("failed" in t and "restarting" in t for t in told), told
    assert len(final["restart_events"]) == 2
    assert all(t.endswith(e["decision"]) for t, e in zip(told, final["restart_events"]))
    assert sorted(sink.committed()) == expected  # exactly once

    def standbys_left():
        return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith("standby-failover/standby/")]
    wait_until(lambda: not standbys_left(), 60, "the standbys gone with the job")
    sink.cleanup()
    source.cleanup()
