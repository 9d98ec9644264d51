"""The failure handler decides and returns; it never cancels or deploys anything."""

from flowray.common.clock import ManualClock
from flowray.runtime.jobmaster.failover import (
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
)
from flowray.runtime.jobmaster.failure_handler import (
    ExecutionFailureHandler,
    PendingFailover,
    merge_failover,
    root_cause,
    task_lost,
)
from flowray.runtime.jobmaster.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
)
from flowray.runtime.messages import TaskFailure
from flowray.testing.jobmaster import TestingTopology


def _two_pipelines():
    #  a1 -> b1      a2 -> b2   (pipelined; two regions)
    t = TestingTopology()
    for v in ("a1", "b1", "a2", "b2"):
        t.add_vertex(v)
    t.connect("a1", "b1")
    t.connect("a2", "b2")
    return t


def test_region_failover_restarts_only_the_failed_region_after_the_backoff():
    t = _two_pipelines()
    h = ExecutionFailureHandler(RestartPipelinedRegionFailoverStrategy(t),
                                FixedDelayRestartStrategy(2, 1_000), ManualClock())
    r = h.handle_task_failure("b2", task_lost("b2", "died"))
    assert r.can_restart and r.tasks_to_restart == {"a2", "b2"}
    assert r.restart_delay_ms == 1_000 and "fixed-delay" in r.restart_strategy


def test_full_failover_restarts_every_task():
    t = _two_pipelines()
    h = ExecutionFailureHandler(RestartAllFailoverStrategy(t), FixedDelayRestartStrategy(1, 0),
                                ManualClock())
    assert h.handle_task_failure("a1", task_lost("a1", "x")).tasks_to_restart == \
        {"a1", "b1", "a2", "b2"}


def test_tasks_not_deployed_are_left_out_but_the_failed_one_is_kept():
    t = _two_pipelines()
    h = ExecutionFailureHandler(RestartAllFailoverStrategy(t), FixedDelayRestartStrategy(1, 0),
                                ManualClock())
    r = h.handle_task_failure("a1", task_lost("a1", "x"), not_deployed={"a2", "b2", "a1"})
    assert r.tasks_to_restart == {"a1", "b1"}


def test_every_failure_counts_and_the_strategy_can_say_no():
    t = _two_pipelines()
    h = ExecutionFailureHandler(RestartPipelinedRegionFailoverStrategy(t),
                                FixedDelayRestartStrategy(1, 10), ManualClock())
    assert h.handle_task_failure("a1", task_lost("a1", "x")).can_restart
    second = h.handle_task_failure("b2", task_lost("b2", "y"))
    assert not second.can_restart and second.failure.message == "y"
    h2 = ExecutionFailureHandler(RestartAllFailoverStrategy(t), NoRestartStrategy(),
                                 ManualClock())
    assert not h2.handle_global_failure(task_lost("a1", "z"), ["a1"]).can_restart


def test_backoff_grows_with_the_exponential_strategy_on_the_injected_clock():
    t = _two_pipelines()
    clock = ManualClock()
    h = ExecutionFailureHandler(RestartAllFailoverStrategy(t), ExponentialDelayRestartStrategy(
        initial_backoff_ms=100, max_backoff_ms=1_000, multiplier=2.0,
        reset_threshold_ms=60_000, jitter_factor=0.0, attempts_before_reset=10), clock)
    delays = []
    for _ in range(3):
        delays.append(h.handle_global_failure(task_lost("a1", "x"), ["a1"]).restart_delay_ms)
        clock.advance(delays[-1] + 1)  # restarted; fails again at once
    assert delays[0] == 100 and delays[0] < delays[1] < delays[2] <= 1_000


def test_overlapping_failovers_merge_and_keep_the_latest_restart_time():
    merged = merge_failover([PendingFailover({"a", "b"}, 100), PendingFailover({"x"}, 50)],
                            PendingFailover({"b", "c"}, 300))
    assert sorted((sorted(f.tasks), f.restart_at, f.count) for f in merged) == \
        [(["a", "b", "c"], 300, 2), (["x"], 50, 1)]


def test_root_cause_skips_broken_connections():
    broken = TaskFailure("b[0]", None, "ChannelClosedError", "peer gone", "", False)
    real = TaskFailure("a[0]", "Map", "ValueError", "bad record", "", True)
    assert root_cause([broken, real]) is real
    assert root_cause([broken]) is broken and root_cause([]) is None
