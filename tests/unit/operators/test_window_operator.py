"""WindowOperator through the operator harness (manual clock, heap and RocksDB): window
kinds and functions, triggers, lateness, merging sessions, and snapshot/restore mid-window.
Outputs carry ``window.max_timestamp()``."""

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.base import UserFunctionError
from flowray.operators.functions import AggregateFunction
from flowray.operators.output_tag import OutputTag
from flowray.operators.window_operator import PaneContents, WindowOperator
from flowray.operators.windowing.assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from flowray.operators.windowing.functions import (
    ProcessWindowFunction,
    WindowFunction,
    internal_window_function,
)
from flowray.operators.windowing.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    PurgingTrigger,
)
from flowray.operators.windowing.windows import CountWindow, TimeWindow
from flowray.state.descriptors import ValueStateDescriptor
from tests.support.operator_harness import BACKENDS, Harnesses

LATE = OutputTag("late")


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    h = Harnesses(request.param, tmp_path)
    yield h
    h.close()


def key_of(record):
    return record[0]


def add(a, b):
    return a[0], a[1] + b[1]


class Mean(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Listing(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window, sorted(v for _, v in inputs)


class Describe(ProcessWindowFunction):
    """(key, window, values, watermark, fires of this window, evaluations of this key)."""

    def process(self, key, context, elements):
        fires = context.window_state().get_state(ValueStateDescriptor("fires"))
        fires.update((fires.value() or 0) + 1)
        total = context.global_state().get_state(ValueStateDescriptor("total"))
        total.update((total.value() or 0) + 1)
        yield (key, context.window(), sorted(v for _, v in elements),
               context.current_watermark(), fires.value(), total.value())

    def clear(self, context):
        context.window_state().get_state(ValueStateDescriptor("fires")).clear()


class DescribeSession(ProcessWindowFunction):
    """Describe for merging windows, which have no per-window state (as in Flink)."""

    def process(self, key, context, elements):
        total = context.global_state().get_state(ValueStateDescriptor("total"))
        total.update((total.value() or 0) + 1)
        yield (key, context.window(), sorted(v for _, v in elements),
               context.current_watermark(), total.value())


def window_op(assigner, kind="list", fn=None, window_fn=None, trigger=None, lateness=0,
              late_tag=None, style=None):
    if kind == "list" and window_fn is None:
        window_fn = Listing()
    internal = internal_window_function(window_fn, keyed=True, single_value=kind != "list",
                                        style=style)
    return WindowOperator(assigner, trigger or assigner.get_default_trigger(),
                          PaneContents(kind, fn), internal, key_of, lateness, late_tag,
                          name="win")


def feed(h, stamped):
    """``(record, timestamp)`` pairs one batch."""
    h.process([r for r, _ in stamped], timestamps=[t for _, t in stamped])


TW = TimeWindow
EVENTS = [(("a", 1), 1), (("b", 2), 3), (("a", 3), 8), (("a", 4), 12), (("b", 5), 19)]


# ---------------------------------------------------------------------------------------
# window kinds and functions
# ---------------------------------------------------------------------------------------

def test_tumbling_event_time_reduce(make):
    h = make(window_op(TumblingEventTimeWindows.of(10), "reduce", add))
    feed(h, EVENTS)
    h.watermark(8)
    assert h.records == [] and h.watermarks == [8]
    h.watermark(9)
    assert h.stamped() == [(("a", 4), 9), (("b", 2), 9)]
    assert h.watermarks == [8, 9]
    h.watermark(MAX_WATERMARK)
    assert h.stamped()[2:] == [(("a", 4), 19), (("b", 5), 19)]


def test_sliding_event_time_aggregate(make):
    h = make(window_op(SlidingEventTimeWindows.of(10, 5), "aggregate", Mean()))
    feed(h, [(("a", 1), 1), (("a", 3), 6), (("a", 8), 12)])
    h.watermark(MAX_WATERMARK)
    # [-5,5): 1 | [0,10): 1,3 | [5,15): 3,8 | [10,20): 8
    assert h.stamped() == [(1.0, 4), (2.0, 9), (5.5, 14), (8.0, 19)]


def test_apply_and_reduce_with_a_window_function(make):
    h = make(window_op(TumblingEventTimeWindows.of(10)))
    feed(h, EVENTS)
    h.watermark(19)
    assert h.stamped() == [(("a", TW(0, 10), [1, 3]), 9), (("b", TW(0, 10), [2]), 9),
                           (("a", TW(10, 20), [4]), 19), (("b", TW(10, 20), [5]), 19)]
    r = make(window_op(TumblingEventTimeWindows.of(10), "reduce", add,
                       window_fn=lambda k, w, xs: [(k, w.start, list(xs))], style="apply"))
    feed(r, EVENTS)
    r.watermark(9)
    assert r.records == [("a", 0, [("a", 4)]), ("b", 0, [("b", 2)])]


def test_process_window_function_context_and_per_window_state(make):
    h = make(window_op(TumblingEventTimeWindows.of(10), window_fn=Describe(), lateness=10))
    feed(h, EVENTS)
    h.watermark(15)
    assert h.stamped() == [(("a", TW(0, 10), [1, 3], 15, 1, 1), 9),
                           (("b", TW(0, 10), [2], 15, 1, 1), 9)]
    feed(h, [(("a", 6), 5)])  # late, within the lateness: fires [0, 10) again
    assert h.records[2] == ("a", TW(0, 10), [1, 3, 6], 15, 2, 2)
    h.watermark(19)  # [10, 20) fires; [0, 10) is cleaned up: clear() drops its state
    assert h.records[3:] == [("a", TW(10, 20), [4], 19, 1, 3), ("b", TW(10, 20), [5], 19, 1, 2)]
    assert sorted(h.backend.get_keys("window-state/fires")) == ["a", "b"]
    h.watermark(29)
    assert list(h.backend.get_keys("window-state/fires")) == []
    assert list(h.backend.get_keys("window-contents")) == []


# ---------------------------------------------------------------------------------------
# lateness
# ---------------------------------------------------------------------------------------

def test_allowed_lateness_refires_then_late_data_goes_to_the_side_output(make):
    h = make(window_op(TumblingEventTimeWindows.of(10), "reduce", add, lateness=5,
                       late_tag=LATE), side_tags=[LATE])
    feed(h, [(("a", 1), 2)])
    h.watermark(9)
    feed(h, [(("a", 10), 4)])          # late but within lateness: fires again, accumulated
    h.watermark(13)
    feed(h, [(("a", 100), 7), (("b", 1), 9)])
    assert h.stamped() == [(("a", 1), 9), (("a", 11), 9), (("a", 111), 9), (("b", 1), 9)]
    h.watermark(14)                    # 9 + 5: the window is gone
    feed(h, [(("a", 1000), 8), (("a", 5), 15)])
    assert h.side(LATE).records == [("a", 1000)] and h.side(LATE).timestamps == [8]
    h.watermark(MAX_WATERMARK)
    assert h.stamped()[4:] == [(("a", 5), 19)]
    assert h.operator.late_records_dropped == 0


def test_late_data_without_a_tag_is_dropped_and_counted(make):
    h = make(window_op(TumblingEventTimeWindows.of(10), "reduce", add))
    feed(h, [(("a", 1), 2)])
    h.watermark(10)
    feed(h, [(("a", 2), 9), (("a", 3), 0), (("a", 4), 10)])
    assert h.operator.late_records_dropped == 2
    h.watermark(MAX_WATERMARK)
    assert h.stamped() == [(("a", 1), 9), (("a", 4), 19)]


def test_event_time_window_without_timestamps_names_the_operator(make):
    h = make(window_op(TumblingEventTimeWindows.of(10)))
    with pytest.raises(UserFunctionError, match="'win'.*MissingTimestampError.*no timestamp"):
        h.process([("a", 1)])


# ---------------------------------------------------------------------------------------
# sessions
# ---------------------------------------------------------------------------------------

def test_sessions_merge_with_a_bridging_record(make):
    h = make(window_op(EventTimeSessionWindows.with_gap(5), window_fn=DescribeSession()))
    feed(h, [(("a", 1), 0), (("a", 2), 3), (("a", 3), 12), (("b", 9), 1)])
    h.watermark(6)  # b's [1, 6) is complete; a's [0, 8) (0 and 3 merged) is not
    assert h.stamped() == [(("b", TW(1, 6), [9], 6, 1), 5)]
    feed(h, [(("a", 4), 7)])  # [7, 12) bridges [0, 8) and [12, 17)
    h.watermark(15)
    assert len(h.records) == 1
    h.watermark(16)
    assert h.stamped()[1:] == [(("a", TW(0, 17), [1, 2, 3, 4], 16, 1), 16)]
    assert list(h.backend.get_keys("window-merging-set")) == []
    assert list(h.backend.get_keys("window-contents")) == []


def test_per_window_state_of_session_windows_is_rejected(make):
    h = make(window_op(EventTimeSessionWindows.with_gap(5), window_fn=Describe()))
    feed(h, [(("a", 1), 0)])
    with pytest.raises(UserFunctionError, match="per-window state"):
        h.watermark(MAX_WATERMARK)


def test_sessions_with_reduce(make):
    h = make(window_op(EventTimeSessionWindows.with_gap(5), "reduce", add))
    feed(h, [(("a", 1), 0), (("a", 10), 20), (("a", 100), 2), (("a", 1000), 16)])
    h.watermark(MAX_WATERMARK)
    assert h.stamped() == [(("a", 101), 6), (("a", 1010), 24)]


def test_count_trigger_on_sessions_counts_across_merges(make):
    """The trigger merges its state into the result before the merged windows are cleared
    (Flink's order): the counts of merged sessions add up."""
    h = make(window_op(EventTimeSessionWindows.with_gap(5), trigger=CountTrigger.of(2)))
    feed(h, [(("a", 1), 0)])
    feed(h, [(("a", 2), 3)])  # merges into [0, 8): two elements, the trigger fires
    assert h.records == [("a", TW(0, 8), [1, 2])]
    feed(h, [(("a", 3), 20)])  # a session of its own: count 1
    feed(h, [(("a", 4), 10), (("a", 5), 15)])  # [10, 15) and [15, 20) bridge to [20, 25)
    assert h.records[1:] == [("a", TW(10, 25), [3, 4, 5])]  # 1 + 1 merged, + 1
    assert list(h.backend.get_keys("window-trigger/count")) == []  # a fire resets it
    feed(h, [(("a", 6), 24)])
    assert len(h.records) == 2


# ---------------------------------------------------------------------------------------
# count and processing-time windows, triggers
# ---------------------------------------------------------------------------------------

def test_count_tumbling_windows(make):
    h = make(window_op(CountTumblingWindowAssigner.of(3), "reduce", add))
    h.process([("a", 1), ("b", 10), ("a", 2), ("a", 3), ("b", 20), ("a", 4)])
    assert h.stamped() == [(("a", 6), MAX_WATERMARK)]
    h.process([("b", 30), ("a", 5), ("a", 6)])
    assert h.records == [("a", 6), ("b", 60), ("a", 15)]


def test_count_sliding_windows(make):
    h = make(window_op(CountSlidingWindowAssigner.of(3, 2)))
    h.process([("a", i) for i in range(7)])
    assert h.records == [("a", CountWindow(0), [0, 1, 2]), ("a", CountWindow(1), [2, 3, 4]),
                         ("a", CountWindow(2), [4, 5, 6])]


def test_processing_time_tumbling_windows(make):
    h = make(window_op(TumblingProcessingTimeWindows.of(10)), clock_ms=3)
    h.process([("a", 1), ("b", 2)])
    h.advance_clock(5)   # 8
    h.process([("a", 3)])
    h.advance_clock(4)   # 12: [0, 10) fires
    h.process([("a", 4)])
    assert h.stamped() == [(("a", TW(0, 10), [1, 3]), 9), (("b", TW(0, 10), [2]), 9)]
    h.watermark(10 ** 6)  # event time does not matter
    assert len(h.records) == 2
    h.advance_clock(8)
    assert h.records[2:] == [("a", TW(10, 20), [4])]
    assert list(h.backend.get_keys("window-contents")) == []


def test_count_trigger_and_purging_trigger(make):
    keep = make(window_op(TumblingEventTimeWindows.of(100), trigger=CountTrigger.of(2)))
    purge = make(window_op(TumblingEventTimeWindows.of(100),
                           trigger=PurgingTrigger.of(CountTrigger.of(2))))
    for h in (keep, purge):
        feed(h, [(("a", i), i) for i in range(5)])
        h.watermark(MAX_WATERMARK)  # a CountTrigger does not fire at the window's end
    assert keep.records == [("a", TW(0, 100), [0, 1]), ("a", TW(0, 100), [0, 1, 2, 3])]
    assert purge.records == [("a", TW(0, 100), [0, 1]), ("a", TW(0, 100), [2, 3])]
    assert keep.timestamps == purge.timestamps == [99, 99]


def test_continuous_event_time_trigger(make):
    h = make(window_op(TumblingEventTimeWindows.of(20), "reduce", add,
                       trigger=ContinuousEventTimeTrigger.of(5)))
    feed(h, [(("a", 1), 1), (("a", 2), 7)])
    h.watermark(5)
    feed(h, [(("a", 4), 12)])
    h.watermark(12)
    h.watermark(MAX_WATERMARK)
    # fires at 5 (1 + 2), at 10 and 15 (the 12 arrived before 10 fired) and at the end
    assert h.stamped() == [(("a", 3), 19), (("a", 7), 19), (("a", 7), 19), (("a", 7), 19)]


# ---------------------------------------------------------------------------------------
# snapshot and restore mid-window
# ---------------------------------------------------------------------------------------

SCENARIOS = {
    "tumbling-process-lateness": (
        lambda: window_op(TumblingEventTimeWindows.of(10), window_fn=Describe(), lateness=10),
        [[(("a", 1), 1), (("b", 2), 3)], 5, [(("a", 3), 8), (("a", 4), 12)], 11,
         [(("a", 5), 4)], 15, [(("b", 6), 22)], 25]),
    "sessions": (
        lambda: window_op(EventTimeSessionWindows.with_gap(5), window_fn=DescribeSession()),
        [[(("a", 1), 0), (("a", 3), 12)], 2, [(("b", 2), 1)], 4,
         [(("a", 4), 7)], 6, [(("a", 5), 30), (("b", 6), 3)], 20]),
    "continuous-trigger": (
        lambda: window_op(TumblingEventTimeWindows.of(20), "reduce", add,
                          trigger=ContinuousEventTimeTrigger.of(5)),
        [[(("a", 1), 1), (("b", 1), 2)], 3, [(("a", 2), 7)], 6, [(("a", 4), 13)], 11,
         [(("b", 8), 18)], 16]),
    "count-sliding": (
        lambda: window_op(CountSlidingWindowAssigner.of(3, 2)),
        [[(("a", 0), 1), (("a", 1), 1)], 1, [(("a", 2), 1), (("a", 3), 1)], 2,
         [(("a", 4), 1), (("b", 0), 1)], 3, [(("a", 5), 1), (("a", 6), 1)], 4]),
}


def play(h, steps):
    for i in range(0, len(steps), 2):
        feed(h, steps[i])
        h.watermark(steps[i + 1])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("cut", [1, 2, 3])
def test_snapshot_restore_mid_window_equals_the_run_without_failure(make, scenario, cut):
    build, steps = SCENARIOS[scenario]
    full = make(build())
    play(full, steps)
    full.watermark(MAX_WATERMARK)
    assert full.records

    h = make(build())
    play(h, steps[:2 * cut])
    handles = h.snapshot()
    before = h.stamped()
    play(h, steps[2 * cut:2 * cut + 2])  # lost with the failure
    r = make.restore(h, handles)
    r.watermark(steps[2 * cut - 1])      # the watermark comes back with the replay
    play(r, steps[2 * cut:])
    r.watermark(MAX_WATERMARK)
    assert before + r.stamped() == full.stamped()


def test_processing_time_window_due_while_down_fires_after_restore(make):
    h = make(window_op(TumblingProcessingTimeWindows.of(10)), clock_ms=3)
    h.process([("a", 1), ("b", 2)])
    handles = h.snapshot()
    r = make.restore(h, handles, clock_ms=25)
    r.process([("a", 3)])  # [20, 30): its own window
    r.fire_due()
    assert r.stamped() == [(("a", TW(0, 10), [1]), 9), (("b", TW(0, 10), [2]), 9)]
    r.advance_clock(5)
    assert r.records[2:] == [("a", TW(20, 30), [3])]


@pytest.mark.parametrize("source, target", [("heap", "rocksdb"), ("rocksdb", "heap")])
def test_window_state_moves_between_backends(tmp_path, source, target):
    build, steps = SCENARIOS["sessions"]
    make = Harnesses(source, tmp_path)
    try:
        full = make(build())
        play(full, steps)
        full.watermark(MAX_WATERMARK)
        h = make(build())
        play(h, steps[:4])
        r = make.restore(h, h.snapshot(), backend=target)
        assert r.backend_kind == target
        r.watermark(steps[3])
        play(r, steps[4:])
        r.watermark(MAX_WATERMARK)
        assert h.stamped() + r.stamped() == full.stamped()
    finally:
        make.close()
