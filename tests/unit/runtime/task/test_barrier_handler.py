"""Checkpoint barrier handling of one task's inputs: aligned (exactly-once) and tracking
(at-least-once), driven event by event with a manual clock."""

import doctest
import itertools
import random

import pytest

import flowray.runtime.task.barrier_handler as barriers_module
from flowray.runtime.task.barrier_handler import (
    AbortCheckpoint,
    AbortReason,
    AlignedBarrierHandler,
    BarrierHandler,
    TrackingBarrierHandler,
    TriggerCheckpoint,
    create_barrier_handler,
)
from flowray.common.clock import ManualClock
from flowray.runtime.network.elements import CheckpointBarrier


def B(n, ts=None, savepoint=False):
    return CheckpointBarrier(n, 1000 * n if ts is None else ts, savepoint)


def aligned(channels, clock=None):
    return AlignedBarrierHandler(channels, clock or ManualClock())


def tracking(channels, clock=None):
    return TrackingBarrierHandler(channels, clock or ManualClock())


def triggers(actions):
    return [a for a in actions if isinstance(a, TriggerCheckpoint)]


def aborts(actions):
    return [(a.checkpoint_id, a.reason) for a in actions if isinstance(a, AbortCheckpoint)]


# -- factory and common contract -----------------------------------------------------------

def test_factory_picks_handler_by_mode():
    c = ManualClock()
    assert type(create_barrier_handler("EXACTLY_ONCE", ["a"], c)) is AlignedBarrierHandler
    assert type(create_barrier_handler("AT_LEAST_ONCE", ["a"], c)) is TrackingBarrierHandler
    assert type(create_barrier_handler("at-least-once", ["a"], c)) is TrackingBarrierHandler
    with pytest.raises(ValueError, match="mode"):
        create_barrier_handler("MOSTLY_ONCE", ["a"], c)


@pytest.mark.parametrize("cls", [AlignedBarrierHandler, TrackingBarrierHandler])
def test_initial_state(cls):
    h = cls(["a", "b"], ManualClock())
    assert isinstance(h, BarrierHandler)
    assert h.latest_checkpoint_id == -1
    assert h.pending_checkpoint is None
    assert h.blocked_channels == frozenset()
    assert not h.is_blocked("a") and not h.is_blocked("b")
    assert h.channel_ids == ("a", "b")


@pytest.mark.parametrize("cls", [AlignedBarrierHandler, TrackingBarrierHandler])
def test_bad_construction(cls):
    with pytest.raises(ValueError):
        cls([], ManualClock())
    with pytest.raises(ValueError, match="duplicate"):
        cls(["a", "a"], ManualClock())


@pytest.mark.parametrize("cls", [AlignedBarrierHandler, TrackingBarrierHandler])
def test_unknown_channel_is_an_error(cls):
    h = cls(["a", "b"], ManualClock())
    for call in (lambda: h.on_barrier("zz", B(1)), lambda: h.on_cancel_marker("zz", 1),
                 lambda: h.on_end_of_partition("zz"), lambda: h.is_blocked("zz")):
        with pytest.raises(ValueError, match="zz"):
            call()
    assert h.latest_checkpoint_id == -1


@pytest.mark.parametrize("cls", [AlignedBarrierHandler, TrackingBarrierHandler])
def test_events_on_ended_channel_are_an_error(cls):
    h = cls(["a", "b"], ManualClock())
    assert h.on_end_of_partition("a") == []
    with pytest.raises(ValueError, match="'a'"):
        h.on_barrier("a", B(1))
    with pytest.raises(ValueError, match="'a'"):
        h.on_cancel_marker("a", 1)
    with pytest.raises(ValueError, match="'a'"):
        h.on_end_of_partition("a")
    assert h.latest_checkpoint_id == -1 and h.pending_checkpoint is None
    assert h.open_channels == frozenset({"b"})


# -- aligned: interleavings -------------------------------------------------------------------

@pytest.mark.parametrize("channels", [["a", "b"], ["a", "b", "c"]])
def test_aligned_every_arrival_order_triggers_once(channels):
    for order in itertools.permutations(channels):
        clock = ManualClock()
        h = aligned(channels, clock)
        received = set()
        all_actions = []
        for i, ch in enumerate(order):
            assert not h.is_blocked(ch)
            clock.advance(10)
            actions = h.on_barrier(ch, B(7))
            all_actions += actions
            received.add(ch)
            if i < len(order) - 1:
                assert actions == []
                assert h.blocked_channels == frozenset(received), order
                assert all(h.is_blocked(c) == (c in received) for c in channels)
                assert h.pending_checkpoint == 7
            else:
                assert actions == [TriggerCheckpoint(B(7), 10.0 * (len(order) - 1))]
        assert len(triggers(all_actions)) == 1 and aborts(all_actions) == []
        assert h.blocked_channels == frozenset() and h.pending_checkpoint is None
        assert h.latest_checkpoint_id == 7


@pytest.mark.parametrize("channels", [["a", "b"], ["a", "b", "c"]])
def test_aligned_orders_with_one_channel_ending(channels):
    """Every order of (barriers on all but one channel, end of partition on the last)."""
    for ender in channels:
        events = [("bar", c) for c in channels if c != ender] + [("eop", ender)]
        for order in itertools.permutations(events):
            h = aligned(channels)
            all_actions = []
            for i, (kind, ch) in enumerate(order):
                if kind == "bar":
                    actions = h.on_barrier(ch, B(3))
                else:
                    actions = h.on_end_of_partition(ch)
                all_actions += actions
                if i < len(order) - 1:
                    assert actions == [], order
            assert triggers(all_actions) == [TriggerCheckpoint(B(3), 0.0)], order
            assert aborts(all_actions) == []
            assert h.blocked_channels == frozenset()


def test_aligned_single_input_triggers_immediately():
    clock = ManualClock(500)
    h = aligned(["only"], clock)
    assert h.on_barrier("only", B(1)) == [TriggerCheckpoint(B(1), 0.0)]
    assert not h.is_blocked("only")
    clock.advance(100)
    sp = B(2, savepoint=True)
    assert h.on_barrier("only", sp) == [TriggerCheckpoint(sp, 0.0)]


def test_aligned_alignment_time_from_manual_clock():
    clock = ManualClock(1_000)
    h = aligned(["a", "b", "c"], clock)
    h.on_barrier("b", B(1))
    clock.advance(30)
    h.on_barrier("a", B(1))
    clock.advance(12)
    [t] = h.on_barrier("c", B(1))
    assert t.alignment_ms == 42.0
    assert t.barrier == B(1)


def test_aligned_consecutive_checkpoints():
    h = aligned(["a", "b"])
    for n in (1, 2, 3):
        assert h.on_barrier("a", B(n)) == []
        assert h.blocked_channels == {"a"}
        assert triggers(h.on_barrier("b", B(n))) == [TriggerCheckpoint(B(n), 0.0)]
        assert h.blocked_channels == frozenset()
    assert h.latest_checkpoint_id == 3


# -- aligned: newer barriers, old barriers ------------------------------------------------------

def test_aligned_newer_barrier_aborts_older_alignment():
    clock = ManualClock()
    h = aligned(["a", "b", "c"], clock)
    h.on_barrier("a", B(1))
    h.on_barrier("b", B(1))
    assert h.blocked_channels == {"a", "b"}
    clock.advance(50)
    actions = h.on_barrier("c", B(2))
    assert actions == [AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER)]
    assert h.blocked_channels == {"c"}          # a and b unblocked, c aligning 2
    assert h.pending_checkpoint == 2 and h.latest_checkpoint_id == 2
    clock.advance(5)
    assert h.on_barrier("a", B(2)) == []
    clock.advance(5)
    assert h.on_barrier("b", B(2)) == [TriggerCheckpoint(B(2), 10.0)]


def test_aligned_old_barriers_are_ignored_and_do_not_block():
    h = aligned(["a", "b"])
    h.on_barrier("a", B(1))
    h.on_barrier("b", B(2))                     # aborts 1, aligns 2
    assert h.on_barrier("a", B(1)) == []        # superseded: ignored
    assert h.blocked_channels == {"b"}
    h.on_barrier("a", B(2))                     # completes 2
    assert h.on_barrier("a", B(2)) == []        # completed: ignored
    assert h.on_barrier("b", B(1)) == []
    assert h.blocked_channels == frozenset() and h.pending_checkpoint is None
    assert h.latest_checkpoint_id == 2


def test_aligned_barrier_after_all_others_ended():
    h = aligned(["a", "b", "c"])
    h.on_end_of_partition("a")
    h.on_end_of_partition("c")
    assert h.on_barrier("b", B(4)) == [TriggerCheckpoint(B(4), 0.0)]


# -- aligned: end of partition ------------------------------------------------------------------

def test_aligned_end_of_partition_during_alignment_counts_as_aligned():
    clock = ManualClock()
    h = aligned(["a", "b", "c"], clock)
    h.on_barrier("a", B(1))
    clock.advance(7)
    assert h.on_end_of_partition("b") == []
    assert h.blocked_channels == {"a"}
    clock.advance(3)
    assert h.on_end_of_partition("c") == [TriggerCheckpoint(B(1), 10.0)]
    assert h.blocked_channels == frozenset()
    assert h.open_channels == {"a"}


def test_aligned_channel_that_delivered_barrier_then_ends():
    h = aligned(["a", "b"])
    h.on_barrier("a", B(1))
    assert h.on_end_of_partition("a") == []     # a was aligned already; still waiting for b
    assert h.blocked_channels == frozenset()
    assert h.on_barrier("b", B(1)) == [TriggerCheckpoint(B(1), 0.0)]


def test_aligned_end_of_partition_before_any_barrier():
    h = aligned(["a", "b"])
    assert h.on_end_of_partition("b") == []
    assert h.pending_checkpoint is None
    assert h.on_barrier("a", B(1)) == [TriggerCheckpoint(B(1), 0.0)]


def test_aligned_all_channels_ended_nothing_to_align():
    h = aligned(["a", "b"])
    assert h.on_end_of_partition("a") == []
    assert h.on_end_of_partition("b") == []
    assert h.pending_checkpoint is None and h.blocked_channels == frozenset()


# -- aligned: cancellation markers --------------------------------------------------------------

def test_aligned_cancel_marker_aborts_current_alignment():
    h = aligned(["a", "b", "c"])
    h.on_barrier("a", B(1))
    assert h.on_cancel_marker("b", 1) == [AbortCheckpoint(1, AbortReason.CANCELLATION_MARKER)]
    assert h.blocked_channels == frozenset() and h.pending_checkpoint is None
    assert h.on_barrier("c", B(1)) == []        # the rest of checkpoint 1 is ignored
    assert h.on_cancel_marker("c", 1) == []     # trailing markers too
    assert h.blocked_channels == frozenset()
    assert h.latest_checkpoint_id == 1
    h.on_barrier("a", B(2))
    h.on_barrier("b", B(2))
    assert triggers(h.on_barrier("c", B(2))) == [TriggerCheckpoint(B(2), 0.0)]


def test_aligned_cancel_marker_for_newer_checkpoint_is_remembered():
    h = aligned(["a", "b"])
    assert h.on_cancel_marker("a", 5) == [AbortCheckpoint(5, AbortReason.CANCELLATION_MARKER)]
    assert h.latest_checkpoint_id == 5 and h.pending_checkpoint is None
    assert h.on_barrier("b", B(5)) == []        # from the other channel: ignored
    assert not h.is_blocked("b")
    assert h.on_barrier("b", B(4)) == []


def test_aligned_cancel_marker_newer_than_pending_aborts_both():
    h = aligned(["a", "b", "c"])
    h.on_barrier("a", B(1))
    assert h.on_cancel_marker("b", 2) == [
        AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER),
        AbortCheckpoint(2, AbortReason.CANCELLATION_MARKER)]
    assert h.blocked_channels == frozenset() and h.latest_checkpoint_id == 2
    assert h.on_barrier("c", B(1)) == [] and h.on_barrier("c", B(2)) == []


def test_aligned_old_cancel_marker_is_ignored():
    h = aligned(["a", "b"])
    h.on_barrier("a", B(1))
    h.on_barrier("b", B(1))                     # completed
    assert h.on_cancel_marker("a", 1) == []
    h.on_barrier("a", B(3))
    assert h.on_cancel_marker("b", 2) == []     # older than the alignment in progress
    assert h.pending_checkpoint == 3 and h.blocked_channels == {"a"}


# -- aligned: direct trigger --------------------------------------------------------------------

def test_aligned_direct_trigger_all_ended_triggers_immediately():
    h = aligned(["a", "b"])
    h.on_end_of_partition("a")
    h.on_end_of_partition("b")
    assert h.on_direct_trigger(9, 123) == [TriggerCheckpoint(CheckpointBarrier(9, 123), 0.0)]
    assert h.latest_checkpoint_id == 9
    assert h.on_direct_trigger(9, 123) == []    # already completed
    assert h.on_direct_trigger(8, 100) == []    # older


def test_aligned_direct_trigger_waits_for_remaining_channels_to_end():
    clock = ManualClock()
    h = aligned(["a", "b", "c"], clock)
    h.on_end_of_partition("a")
    assert h.on_direct_trigger(4, 77, is_savepoint=True) == []
    assert h.pending_checkpoint == 4
    assert h.blocked_channels == frozenset()    # the rest must be read to their end
    clock.advance(20)
    assert h.on_end_of_partition("b") == []
    clock.advance(5)
    assert h.on_end_of_partition("c") == [
        TriggerCheckpoint(CheckpointBarrier(4, 77, True), 25.0)]


def test_aligned_direct_trigger_subsumes_older_alignment_and_skips_aborted():
    h2 = aligned(["a", "b"])
    h2.on_barrier("a", B(1))
    assert h2.on_direct_trigger(2, 5) == [AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER)]
    assert h2.pending_checkpoint == 2 and h2.blocked_channels == frozenset()
    h2.on_end_of_partition("a")
    assert h2.on_end_of_partition("b") == [TriggerCheckpoint(CheckpointBarrier(2, 5), 0.0)]
    h3 = aligned(["a", "b"])
    h3.on_cancel_marker("a", 3)
    assert h3.on_direct_trigger(3, 0) == []     # aborted here already


# -- tracking (at-least-once) -------------------------------------------------------------------

@pytest.mark.parametrize("channels", [["a", "b"], ["a", "b", "c"]])
def test_tracking_never_blocks_and_triggers_on_last_barrier(channels):
    for order in itertools.permutations(channels):
        clock = ManualClock()
        h = tracking(channels, clock)
        for i, ch in enumerate(order):
            clock.advance(4)
            actions = h.on_barrier(ch, B(2))
            assert h.blocked_channels == frozenset()
            assert not any(h.is_blocked(c) for c in channels)
            if i < len(order) - 1:
                assert actions == [] and h.pending_checkpoint == 2
            else:
                # alignment time: first barrier to last (records kept flowing meanwhile)
                assert actions == [TriggerCheckpoint(B(2), 4.0 * (len(order) - 1))]
        assert h.pending_checkpoint is None and h.latest_checkpoint_id == 2


def test_tracking_single_input_triggers_immediately():
    h = tracking(["a"])
    assert h.on_barrier("a", B(1)) == [TriggerCheckpoint(B(1), 0.0)]


def test_tracking_overlapping_checkpoints():
    h = tracking(["a", "b"])
    assert h.on_barrier("a", B(1)) == []
    assert h.on_barrier("a", B(2)) == []        # not blocked: a runs ahead
    assert h.tracked_checkpoints == [1, 2] and h.pending_checkpoint == 2
    assert h.on_barrier("b", B(1)) == [TriggerCheckpoint(B(1), 0.0)]
    assert h.on_barrier("b", B(2)) == [TriggerCheckpoint(B(2), 0.0)]
    assert h.tracked_checkpoints == []


def test_tracking_completion_aborts_older_pending_ids():
    h = tracking(["a", "b"])
    h.on_barrier("a", B(1))
    h.on_barrier("a", B(2))
    h.on_barrier("b", B(3))                     # b skipped 1 and 2 (e.g. its producer restarted)
    actions = h.on_barrier("a", B(3))
    assert actions == [AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER),
                       AbortCheckpoint(2, AbortReason.SUBSUMED_BY_NEWER_BARRIER),
                       TriggerCheckpoint(B(3), 0.0)]
    assert h.tracked_checkpoints == []
    assert h.on_barrier("b", B(2)) == []        # older than the latest: ignored
    assert h.tracked_checkpoints == []


def test_tracking_end_of_partition_completes_pending():
    clock = ManualClock()
    h = tracking(["a", "b", "c"], clock)
    h.on_barrier("a", B(1))
    clock.advance(8)
    h.on_barrier("b", B(1))
    clock.advance(2)
    assert h.on_end_of_partition("c") == [TriggerCheckpoint(B(1), 10.0)]


def test_tracking_end_of_partition_completes_newest_and_drops_older():
    h = tracking(["a", "b", "c"])
    h.on_barrier("a", B(1))
    h.on_barrier("a", B(2))
    h.on_barrier("b", B(2))
    assert h.on_end_of_partition("c") == [
        AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER), TriggerCheckpoint(B(2), 0.0)]


def test_tracking_end_of_partition_before_any_barrier():
    h = tracking(["a", "b"])
    assert h.on_end_of_partition("a") == []
    assert h.on_barrier("b", B(1)) == [TriggerCheckpoint(B(1), 0.0)]


def test_tracking_cancel_marker_aborts_id_once():
    h = tracking(["a", "b", "c"])
    h.on_barrier("a", B(1))
    assert h.on_cancel_marker("b", 1) == [AbortCheckpoint(1, AbortReason.CANCELLATION_MARKER)]
    assert h.pending_checkpoint is None
    assert h.on_barrier("c", B(1)) == []        # aborted: never triggers
    assert h.tracked_checkpoints == []          # all channels accounted for: forgotten
    assert h.on_cancel_marker("c", 1) == []


def test_tracking_cancel_marker_for_new_id_and_older_pending():
    h = tracking(["a", "b"])
    h.on_barrier("a", B(1))
    assert h.on_cancel_marker("b", 2) == [
        AbortCheckpoint(1, AbortReason.SUBSUMED_BY_NEWER_BARRIER),
        AbortCheckpoint(2, AbortReason.CANCELLATION_MARKER)]
    assert h.latest_checkpoint_id == 2
    assert h.on_barrier("a", B(2)) == []        # remembered as aborted
    assert h.on_barrier("b", B(1)) == []
    assert h.tracked_checkpoints == []
    h.on_barrier("a", B(3))
    assert h.on_barrier("b", B(3)) == [TriggerCheckpoint(B(3), 0.0)]


def test_tracking_direct_trigger():
    h = tracking(["a", "b"])
    h.on_end_of_partition("a")
    assert h.on_direct_trigger(5, 50) == []     # b has not ended yet
    assert h.pending_checkpoint == 5
    assert h.on_end_of_partition("b") == [TriggerCheckpoint(CheckpointBarrier(5, 50), 0.0)]
    assert h.on_direct_trigger(5, 50) == []
    assert h.on_direct_trigger(6, 60) == [TriggerCheckpoint(CheckpointBarrier(6, 60), 0.0)]
    h2 = tracking(["a"])
    h2.on_cancel_marker("a", 3)
    assert h2.on_direct_trigger(3, 0) == [] and h2.on_direct_trigger(2, 0) == []


def test_tracking_bounds_the_number_of_tracked_ids():
    h = tracking(["a", "b"])
    limit = TrackingBarrierHandler.MAX_CHECKPOINTS_TO_TRACK
    for n in range(1, limit + 1):
        assert h.on_barrier("a", B(n)) == []
    assert h.on_barrier("a", B(limit + 1)) == [
        AbortCheckpoint(1, AbortReason.TOO_MANY_PENDING_CHECKPOINTS)]
    assert len(h.tracked_checkpoints) == limit


def test_abort_reasons_have_human_text():
    for reason in AbortReason:
        assert isinstance(reason.value, str) and reason.value


def test_module_doctest():
    result = doctest.testmod(barriers_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# -- randomized: a task loop over FIFO channels -------------------------------------------------

def _run_task_loop(handler, streams, rng):
    """Read random non-blocked channels frame by frame until all have ended; return actions."""
    positions = {ch: 0 for ch in streams}
    live = set(streams)
    actions = []
    while live:
        readable = sorted(ch for ch in live if not handler.is_blocked(ch))
        assert readable, f"deadlock: {handler!r}"
        ch = rng.choice(readable)
        kind, n = streams[ch][positions[ch]]
        positions[ch] += 1
        if kind == "bar":
            actions += handler.on_barrier(ch, B(n))
        elif kind == "cancel":
            actions += handler.on_cancel_marker(ch, n)
        else:
            live.discard(ch)
            actions += handler.on_end_of_partition(ch)
    return actions


@pytest.mark.parametrize("mode", ["EXACTLY_ONCE", "AT_LEAST_ONCE"])
@pytest.mark.parametrize("seed", range(40))
def test_random_interleavings_keep_invariants(mode, seed):
    rng = random.Random(seed)
    channels = [f"ch{i}" for i in range(rng.randint(1, 4))]
    ids = range(1, 8)
    cancelled = {n for n in ids if rng.random() < 0.2}
    streams = {}
    for ch in channels:
        last = rng.choice([7, 7, rng.randint(0, 7)])  # some channels end early
        frames = []
        for n in ids:
            if n > last:
                break
            # an upstream that declined n sends a cancel marker instead of the barrier
            frames.append(("cancel" if n in cancelled and rng.random() < 0.5 else "bar", n))
        streams[ch] = frames + [("eop", None)]
    h = create_barrier_handler(mode, channels, ManualClock())
    actions = _run_task_loop(h, streams, rng)

    triggered = [a.barrier.checkpoint_id for a in actions if isinstance(a, TriggerCheckpoint)]
    aborted = [a.checkpoint_id for a in actions if isinstance(a, AbortCheckpoint)]
    assert triggered == sorted(set(triggered))           # each at most once, in order
    assert len(set(aborted)) == len(aborted)              # each abort once
    assert not set(triggered) & set(aborted)
    cancel_seen = {n for fr in streams.values() for k, n in fr if k == "cancel"}
    assert not set(triggered) & cancel_seen
    # an id delivered as a barrier by every channel and never cancelled triggers; at least
    # once, a channel may run ahead and its cancel marker for a newer id drops the older id
    # (as in Flink's CheckpointBarrierTracker), so there only without newer cancellations
    complete = [n for n in ids if n not in cancel_seen
                and all(("bar", n) in fr for fr in streams.values())
                and (mode == "EXACTLY_ONCE" or not any(c > n for c in cancel_seen))]
    for n in complete:
        assert n in triggered, (n, streams, actions)
    assert h.blocked_channels == frozenset() and h.pending_checkpoint is None
