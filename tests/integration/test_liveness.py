"""Hangs and a lost job master on the shared local Ray (issue 14): a user function that
never returns is failed over within heartbeat.timeout through the normal failover path,
with a cause naming the task; a client whose job master is gone for good gets a clear
error instead of waiting forever."""

import os

import pytest
import ray

from flowray import (
    Configuration,
    JobExecutionError,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from flowray.testing import HOLD, HangOnce, TestingSource

N = 2_000
HEARTBEATS = {"heartbeat.interval": "200 ms", "heartbeat.timeout": "2 s"}


def _env(extra):
    return StreamExecutionEnvironment.get_execution_environment(Configuration(
        {**HEARTBEATS, **extra}))


def test_a_hung_map_fails_the_job_with_a_cause_naming_the_task(ray_session, tmp_path):
    env = _env({"restart-strategy.type": "none"})
    env.set_parallelism(1)
    (env.from_collection(list(range(N)))
        .map(HangOnce(str(tmp_path / "hung"), 500)).name("slow lookup")
        .map(lambda x: x + 1)
        .print())
    with pytest.raises(JobExecutionError) as e:
        env.execute("hangs")
    assert os.path.exists(tmp_path / "hung")  # it did hang
    message = str(e.value)
    assert "made no progress" in message and "heartbeat.timeout" in message, message
    assert "slow lookup" in message or "Map" in message, message


def test_a_hung_map_is_failed_over_and_the_job_finishes(ray_session, tmp_path):
    env = _env({"restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": "0 ms"})
    env.set_parallelism(2)
    out = (env.from_collection(list(range(N)))
           .key_by(lambda x: x % 7)
           .map(HangOnce(str(tmp_path / "hung"), 700))
           .execute_and_collect("hangs-once"))
    got = list(out)
    assert os.path.exists(tmp_path / "hung")
    # no checkpoints: the whole job ran again, and collect is at-least-once across it
    assert set(got) == set(range(N))
    assert out._client.wait().outcome.restarts == 1


def test_collect_ends_with_an_error_when_the_job_master_is_gone(ray_session, tmp_path):
    env = _env({"restart-strategy.type": "none"})
    env.set_parallelism(1)
    # the source holds after 20 records: the job never ends by itself
    source = TestingSource([*range(20), HOLD(), *range(20, 40)],
                           ledger_dir=str(tmp_path / "faults"))
    it = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
          .map(lambda x: x * 2)
          .execute_and_collect("master-dies"))
    assert next(it) == 0  # running
    ray.kill(it._client.job_master_actor(), no_restart=True)
    with pytest.raises(JobExecutionError) as e:
        for _ in it:
            pass
    assert "job master" in str(e.value) and "gone" in str(e.value), str(e.value)
