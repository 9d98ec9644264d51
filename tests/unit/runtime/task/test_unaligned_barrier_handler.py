"""UnalignedBarrierHandler: the first barrier triggers an unaligned checkpoint at once, the
inputs still owing it are recorded until it comes; savepoints align; with a timeout a
checkpoint starts aligned and switches. Pure: a manual clock."""

import pytest

from flowray.common.clock import ManualClock
from flowray.runtime.network.elements import CheckpointBarrier
from flowray.runtime.task.barrier_handler import (
    AbortCheckpoint,
    AbortReason,
    ChannelStateComplete,
    TriggerCheckpoint,
    UnalignedBarrierHandler,
    create_barrier_handler,
)


def _h(channels=("a", "b", "c"), timeout_ms=0, clock=None):
    return UnalignedBarrierHandler(list(channels), clock or ManualClock(10_000), timeout_ms)


def _b(n, ts=10_000, savepoint=False):
    return CheckpointBarrier(n, ts, savepoint)


def test_the_first_barrier_triggers_unaligned_and_records_the_others():
    h = _h()
    (t,) = h.on_barrier("b", _b(1))
    assert isinstance(t, TriggerCheckpoint) and t.unaligned
    assert t.recording == {"a", "c"} and t.barrier.checkpoint_id == 1
    assert h.blocked_channels == frozenset() and h.pending_checkpoint == 1
    assert h.on_barrier("a", _b(1)) == []
    assert h.recording_channels == {"c"}
    assert h.on_barrier("c", _b(1)) == [ChannelStateComplete(1)]
    assert h.pending_checkpoint is None and h.latest_checkpoint_id == 1
    assert h.on_barrier("a", _b(1)) == []          # trailing: nothing


def test_one_input_triggers_and_completes_at_once():
    h = _h(["a"])
    t, done = h.on_barrier("a", _b(3))
    assert t.unaligned and t.recording == frozenset() and done == ChannelStateComplete(3)


def test_an_input_that_ends_owes_no_barrier():
    h = _h(["a", "b"])
    h.on_barrier("a", _b(1))
    assert h.on_end_of_partition("b") == [ChannelStateComplete(1)]
    # the next checkpoint needs only the open input
    t, done = h.on_barrier("a", _b(2))
    assert t.recording == frozenset() and done == ChannelStateComplete(2)


def test_a_cancellation_marker_aborts_the_recording_checkpoint():
    h = _h(["a", "b"])
    h.on_barrier("a", _b(1))
    assert h.on_cancel_marker("b", 1) == [AbortCheckpoint(1, AbortReason.CANCELLATION_MARKER)]
    assert h.pending_checkpoint is None and h.recording_channels == frozenset()
    assert h.on_barrier("b", _b(1)) == []          # its late barrier does nothing


def test_a_newer_barrier_aborts_the_recording_checkpoint_and_triggers():
    h = _h(["a", "b"])
    h.on_barrier("a", _b(1))
    abort, t = h.on_barrier("a", _b(2))
    assert abort == AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER)
    assert t.barrier.checkpoint_id == 2 and t.recording == {"b"}
    assert h.on_barrier("b", _b(1)) == []          # the older one is over
    assert h.on_barrier("b", _b(2)) == [ChannelStateComplete(2)]


def test_savepoints_stay_aligned():
    h = _h(["a", "b"])
    assert h.on_barrier("a", _b(5, savepoint=True)) == []
    assert h.is_blocked("a") and not h.is_blocked("b")
    (t,) = h.on_barrier("b", _b(5, savepoint=True))
    assert not t.unaligned and t.barrier.is_savepoint
    assert h.blocked_channels == frozenset() and h.pending_checkpoint is None


def test_with_a_timeout_a_checkpoint_aligns_then_switches():
    clock = ManualClock(10_000)
    h = _h(["a", "b", "c"], timeout_ms=200, clock=clock)
    assert h.on_barrier("a", _b(1, ts=10_000)) == []
    assert h.is_blocked("a") and h.on_time() == []
    clock.advance(150)
    assert h.on_barrier("b", _b(1, ts=10_000)) == []
    clock.advance(50)                              # the barrier is 200 ms old
    (t,) = h.on_time()
    assert t.unaligned and t.recording == {"c"} and t.alignment_ms == 200.0
    assert h.blocked_channels == frozenset()       # a and b are read again
    assert h.on_barrier("c", _b(1, ts=10_000)) == [ChannelStateComplete(1)]


def test_with_a_timeout_a_quick_alignment_stays_aligned():
    clock = ManualClock(10_000)
    h = _h(["a", "b"], timeout_ms=200, clock=clock)
    h.on_barrier("a", _b(1))
    clock.advance(10)
    (t,) = h.on_barrier("b", _b(1))
    assert not t.unaligned and h.pending_checkpoint is None


def test_a_barrier_already_older_than_the_timeout_switches_at_once():
    clock = ManualClock(10_000)
    h = _h(["a", "b"], timeout_ms=200, clock=clock)
    (t,) = h.on_barrier("a", _b(1, ts=9_000))      # waited 1 s upstream already
    assert t.unaligned and t.recording == {"b"}


def test_a_direct_trigger_with_every_input_ended_completes_at_once():
    h = _h(["a"])
    h.on_end_of_partition("a")
    t, done = h.on_direct_trigger(4, 10_000)
    assert t.unaligned and done == ChannelStateComplete(4)


def test_create_barrier_handler_picks_it_for_exactly_once_only():
    clock = ManualClock()
    assert isinstance(create_barrier_handler("EXACTLY_ONCE", ["a"], clock, unaligned=True),
                      UnalignedBarrierHandler)
    assert not isinstance(create_barrier_handler("AT_LEAST_ONCE", ["a"], clock,
                                                 unaligned=True), UnalignedBarrierHandler)
    with pytest.raises(ValueError, match="must not be negative"):
        UnalignedBarrierHandler(["a"], clock, -1)
