"""A task's heartbeat payload (``StreamTask.stalled_ms``): how long its loop has gone
without a turn, except before the loop starts, after the task ended, and while a write
waits for credit (back-pressure is the consumer's stall, not this task's)."""

from types import SimpleNamespace

from flowray.common.clock import ManualClock
from flowray.runtime.network.channel import ChannelStats
from flowray.runtime.task.stream_task import StreamTask


def _task(clock, writers=(), driver=()):
    task = StreamTask.__new__(StreamTask)  # the loop's bookkeeping only
    task.clock = clock
    task._loop_turn_ms = None
    task._finished = 0.0
    task.record_writers = {"e1": SimpleNamespace(writers=list(writers))}
    task._driver_channels = [SimpleNamespace(writer=w) for w in driver]
    return task


def test_nothing_is_a_stall_before_the_loop_starts():
    clock = ManualClock(1_000)
    task = _task(clock)
    clock.advance(60_000)
    assert task.stalled_ms() == 0


def test_time_since_the_last_turn():
    clock = ManualClock(1_000)
    task = _task(clock)
    task._loop_turn_ms = clock.monotonic_ms()
    clock.advance(2_500)
    assert task.stalled_ms() == 2_500


def test_a_write_waiting_for_credit_is_not_a_stall():
    clock = ManualClock(1_000)
    stats = ChannelStats()
    task = _task(clock, writers=[SimpleNamespace(stats=stats)])
    task._loop_turn_ms = clock.monotonic_ms()
    clock.advance(5_000)
    stats.blocked_since = 2.0
    assert task.stalled_ms() == 0
    stats.blocked_since = None
    assert task.stalled_ms() == 5_000


def test_a_driver_channel_waiting_for_the_driver_is_not_a_stall():
    clock = ManualClock(0)
    stats = ChannelStats(blocked_since=1.0)
    task = _task(clock, driver=[SimpleNamespace(stats=stats)])
    task._loop_turn_ms = 0
    clock.advance(9_000)
    assert task.stalled_ms() == 0


def test_an_ended_task_is_not_stalled():
    clock = ManualClock(0)
    task = _task(clock)
    task._loop_turn_ms = 0
    task._finished = 123.0
    clock.advance(9_000)
    assert task.stalled_ms() == 0
