"""The window operator's batch path for aligned event-time windows (AlignedPanes) against
its per-record path: random streams (out of order, behind the watermark, late, with and
without allowed lateness and a late-data tag) give the same output, side output and
snapshots on both backends, also with a snapshot pending while batches are folded."""

import random

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.functions import TimeDomain
from flowray.operators.output_tag import OutputTag
from flowray.operators.window_operator import PaneContents, WindowOperator
from flowray.operators.windowing.aligned_panes import AlignedPanes
from flowray.operators.windowing.assigners import (
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from flowray.operators.windowing.functions import internal_window_function
from flowray.operators.windowing.triggers import EventTimeTrigger
from tests.support.operator_harness import BACKENDS, Harnesses
from tests.unit.operators.test_window_operator import Describe, Mean, add, key_of

LATE = OutputTag("late")


class PerRecordTrigger(EventTimeTrigger):
    """EventTimeTrigger's behaviour under another type: the operator takes its per-record
    path (the reference)."""


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    h = Harnesses(request.param, tmp_path)
    yield h
    h.close()


ASSIGNERS = {
    "tumbling": lambda: TumblingEventTimeWindows.of(10),
    "tumbling-offset": lambda: TumblingEventTimeWindows.of(10, 3),
    "sliding": lambda: SlidingEventTimeWindows.of(10, 5),
    "sliding-offset": lambda: SlidingEventTimeWindows.of(9, 3, 1),
}
KINDS = {
    "reduce": lambda: (PaneContents("reduce", add), None, False),
    "aggregate": lambda: (PaneContents("aggregate", Mean()), None, False),
    "process": lambda: (PaneContents("list"), Describe(), True),
}


def build(assigner, kind, lateness, tagged, per_record):
    contents, window_fn, style_process = KINDS[kind]()
    internal = internal_window_function(window_fn, keyed=True,
                                        single_value=contents.kind != "list",
                                        style="process" if style_process else None)
    trigger = PerRecordTrigger() if per_record else EventTimeTrigger()
    return WindowOperator(ASSIGNERS[assigner](), trigger, contents, internal, key_of,
                          lateness, LATE if tagged else None, name="win")


def random_steps(seed, batches=40):
    """Batches of (record, timestamp) and a watermark after each; some records behind the
    watermark (late, or within the allowed lateness), some batches all behind it."""
    rng = random.Random(seed)
    steps, now, value = [], 0, 0
    for _ in range(batches):
        batch = []
        for _ in range(rng.randint(0, 12)):
            value += 1
            back = rng.choice([0, 0, 0, 2, 5, 9, 15, 30])
            batch.append(((rng.choice("abcde"), value), max(0, now - back + rng.randint(0, 3))))
        now += rng.randint(0, 6)
        steps.append((batch, now - rng.randint(0, 4)))
    return steps


def play(h, steps):
    for batch, watermark in steps:
        h.process([r for r, _ in batch], timestamps=[t for _, t in batch])
        h.watermark(watermark)


def by_time(stamped):
    return sorted(stamped, key=lambda e: (e[1], repr(e[0])))


def outputs(h):
    late = h.side(LATE)
    return h.stamped(), list(zip(late.records, late.timestamps)), h.operator.late_records_dropped


@pytest.mark.parametrize("assigner", sorted(ASSIGNERS))
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("lateness, tagged", [(0, False), (0, True), (7, True)])
@pytest.mark.parametrize("seed", [1, 2])
def test_batches_give_what_the_per_record_path_gives(make, assigner, kind, lateness, tagged,
                                                     seed):
    steps = random_steps(seed)
    runs = []
    for per_record in (True, False):
        h = make(build(assigner, kind, lateness, tagged, per_record), side_tags=[LATE])
        assert (h.operator._aligned is None) is per_record
        play(h, steps)
        h.watermark(MAX_WATERMARK)
        runs.append(outputs(h))
    reference, batched = runs
    assert reference[0], "the stream produced no windows"
    assert batched == reference


@pytest.mark.parametrize("assigner", ["tumbling", "sliding"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_snapshot_pending_while_batches_fold_keeps_its_state(make, assigner, kind):
    """Copy-on-write: the snapshot taken before more batches are folded restores to the
    state of that moment (the batch path writes the heap's dicts directly)."""
    steps = random_steps(7)
    full = make(build(assigner, kind, 0, True, per_record=True), side_tags=[LATE])
    play(full, steps)
    full.watermark(MAX_WATERMARK)

    cut = 20
    h = make(build(assigner, kind, 0, True, per_record=False), side_tags=[LATE])
    play(h, steps[:cut])
    writer = h.backend.snapshot(99)          # held, not yet written
    before, watermark = h.stamped(), h.operator.current_watermark
    play(h, steps[cut:cut + 5])              # folded while the snapshot is pending
    handle = writer.write(h.storage.write_file, "chk-99/keyed")
    r = make.restore(h, [handle])
    r.watermark(watermark)                   # comes back with the replay
    play(r, steps[cut:])
    r.watermark(MAX_WATERMARK)
    # (restored timers of one timestamp fire in key order, not registration order)
    assert by_time(before + r.stamped()) == by_time(full.stamped())


@pytest.mark.parametrize("assigner", ["tumbling", "sliding"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("lateness", [0, 7])
def test_windows_fired_while_a_snapshot_is_pending_are_in_it(make, assigner, kind, lateness):
    """Copy-on-write when windows fire: a pane fired (and cleaned up) after the snapshot
    was taken, of a key with no record since, is still in the snapshot."""
    h = make(build(assigner, kind, lateness, False, per_record=False))
    h.process([("a", 1), ("b", 2), ("a", 3)], timestamps=[1, 2, 3])
    writer = h.backend.snapshot(1)           # held, not yet written
    h.watermark(MAX_WATERMARK)               # fires and cleans up every pane
    fired = h.stamped()
    assert fired
    handle = writer.write(h.storage.write_file, "chk-1/keyed")
    r = make.restore(h, [handle])
    r.watermark(MAX_WATERMARK)
    assert by_time(r.stamped()) == by_time(fired)


def test_one_timer_per_pane(tmp_path):
    """A pane's timer is registered when the pane is created, not per record."""
    h = Harnesses("heap", tmp_path)
    try:
        op = build("sliding", "reduce", 0, False, per_record=False)
        harness = h(op)
        registered = []
        service = op.timer_service
        original = service.register_event_time_timers

        def counting(timers):
            registered.extend((k, ns, ts) for k, _, ns, ts in timers)
            original(timers)

        service.register_event_time_timers = counting
        harness.process([("a", 1), ("a", 2), ("b", 3), ("a", 4)], timestamps=[1, 2, 3, 12])
        # sliding 10/5: 1, 2 and 3 are in [-5, 5) and [0, 10); 12 in [5, 15) and [10, 20)
        assert sorted(registered) == sorted([
            ("a", (-5, 5), 4), ("a", (0, 10), 9), ("b", (-5, 5), 4), ("b", (0, 10), 9),
            ("a", (10, 20), 19), ("a", (5, 15), 14)])
        assert service.num_timers(TimeDomain.EVENT_TIME) == 6
    finally:
        h.close()


def test_applies_only_to_aligned_event_time_windows_under_their_default_trigger():
    from flowray.operators.windowing.assigners import (
        EventTimeSessionWindows,
        TumblingProcessingTimeWindows,
    )
    from flowray.operators.windowing.triggers import CountTrigger

    tumbling = TumblingEventTimeWindows.of(10)
    assert AlignedPanes.applies(tumbling, EventTimeTrigger())
    assert AlignedPanes.applies(SlidingEventTimeWindows.of(10, 5), EventTimeTrigger())
    assert not AlignedPanes.applies(tumbling, PerRecordTrigger())
    assert not AlignedPanes.applies(tumbling, CountTrigger.of(3))
    assert not AlignedPanes.applies(TumblingProcessingTimeWindows.of(10), EventTimeTrigger())
    assert not AlignedPanes.applies(EventTimeSessionWindows.with_gap(5), EventTimeTrigger())


@pytest.mark.parametrize("assigner", ["tumbling", "sliding"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("source, target", [("heap", "rocksdb"), ("rocksdb", "heap"),
                                            ("heap", "heap")])
def test_panes_kept_window_first_restore_on_either_backend_and_rescale(
        tmp_path, assigner, kind, source, target):
    """The heap keeps panes window first (NamespaceFirstTable) and writes them key first:
    a snapshot of either backend restores on the other, and split over two key-group
    ranges (rescaled), with the output of an uninterrupted run."""
    from flowray.state.heap_table import NamespaceFirstTable
    from flowray.state.key_groups import KeyGroupRange

    steps = random_steps(11)
    cut = 20
    make = Harnesses(source, tmp_path)
    try:
        full = make(build(assigner, kind, 7, True, per_record=False), side_tags=[LATE])
        play(full, steps)
        full.watermark(MAX_WATERMARK)
        h = make(build(assigner, kind, 7, True, per_record=False), side_tags=[LATE])
        play(h, steps[:cut])
        if source == "heap":
            assert isinstance(h.backend._tables[WindowOperator.CONTENTS], NamespaceFirstTable)
        handle = h.backend.snapshot(5).write(h.storage.write_file, "chk-5/keyed")
        before, watermark = h.stamped(), h.operator.current_watermark
        restored = []
        for rng in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
            r = make.restore(h, [handle], key_group_range=rng, backend=target)
            if target == "heap":
                table = r.backend._tables[WindowOperator.CONTENTS]
                assert isinstance(table, NamespaceFirstTable)
            r.watermark(watermark)
            for batch, wm in steps[cut:]:   # each range gets its own keys' records
                mine = [(rec, ts) for rec, ts in batch
                        if r.backend._assign(key_of(rec)) in rng]
                r.process([rec for rec, _ in mine], timestamps=[ts for _, ts in mine])
                r.watermark(wm)
            r.watermark(MAX_WATERMARK)
            restored.append(r)
        assert by_time(before + [e for r in restored for e in r.stamped()]) == \
            by_time(full.stamped())
    finally:
        make.close()
