"""A task's heartbeat payload (``StreamTask.stalled_ms``): how long its loop has gone
without a turn, except before the loop starts, after the task ended, and while a write
waits for credit (back-pressure is the consumer's stall, not this task's)."""

import threading
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


# -- a slow function is progress, frame by frame -----------------------------------------
_SLOW = {}  # the running job's clock and tasks, for the map below (one process)


def _slow_map(x):
    """5 ms of (manual) time per record; notes how stalled the map's task looks."""
    import tests.unit.runtime.task.test_task_stall as here  # (the function is pickled by value)

    slow = here._SLOW
    slow["submitted"].wait()
    slow["clock"].advance(5)
    for task in list(slow["job"].tasks.values()):
        if "Map" in task.tdd.vertex_name:
            slow["worst"] = max(slow.get("worst", 0.0), task.stalled_ms())
    return x


def test_a_slow_function_over_several_full_batches_is_not_a_stall():
    """A turn of the input loop moves up to FRAMES_PER_TURN batches: at 5 ms a record,
    8 batches of 200 take 8 s, and the heartbeat must not take that as 8 s without
    progress (a 50 s heartbeat.timeout declared a 5 ms/record map lost with 1,000-record
    batches). Progress is each frame taken, so the task never looks stalled longer than
    one batch takes."""
    from flowray.runtime.execution.local_executor import LocalExecutor
    from tests.support.environments import local_env

    clock = ManualClock(0)
    env = local_env(1, **{"flowray.channel.batch-size": 200,
                          "flowray.channel.debloat.enabled": False})
    executor = LocalExecutor(clock)
    env._executor = executor
    env.disable_operator_chaining()
    env.from_collection(list(range(4_000))).map(_slow_map).name("Map").add_sink(
        lambda v: None)
    job = env._prepare("slow", list(env._transformations))
    env._transformations.clear()
    _SLOW.clear()
    _SLOW.update(clock=clock, submitted=threading.Event())
    client = executor.submit(job)
    _SLOW["job"] = client._handle
    _SLOW["submitted"].set()
    client.get_job_execution_result()
    assert 0 < _SLOW["worst"] <= 200 * 5, _SLOW["worst"]
