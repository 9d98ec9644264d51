import datetime
import pickle

import pytest

from flowray.common.constants import MIN_WATERMARK
from flowray.operators.windowing.assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    MissingTimestampError,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from flowray.operators.windowing.triggers import (
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
)
from flowray.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow

from .fakes import ClockOnlyContext, FakeAssignerContext, Millis


def tw(*bounds):
    return [TimeWindow(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)]


# -- tumbling -----------------------------------------------------------------------------

@pytest.mark.parametrize("timestamp, offset, window", [
    (0, 0, (0, 5)), (4, 0, (0, 5)), (5, 0, (5, 10)), (-1, 0, (-5, 0)), (-5, 0, (-5, 0)),
    (1, 2, (-3, 2)), (2, 2, (2, 7)), (1, -2, (-2, 3)), (-3, -2, (-7, -2)),
])
def test_tumbling_event_time(timestamp, offset, window):
    assigner = TumblingEventTimeWindows.of(Millis(5), Millis(offset))
    assert assigner.assign_windows("x", timestamp, None) == tw(*window)


def test_tumbling_event_time_defaults():
    assigner = TumblingEventTimeWindows.of(datetime.timedelta(seconds=1))
    assert assigner.assign_windows("x", 1500, None) == tw(1000, 2000)
    assert assigner.is_event_time() is True
    assert isinstance(assigner.get_default_trigger(), EventTimeTrigger)
    assert repr(assigner) == "TumblingEventTimeWindows(1000, 0)"
    assert not isinstance(assigner, MergingWindowAssigner)


def test_tumbling_processing_time_reads_the_clock():
    assigner = TumblingProcessingTimeWindows.of(10, 3)
    assert assigner.assign_windows("x", None, FakeAssignerContext(now=25)) == tw(23, 33)
    assert assigner.assign_windows("x", 999, FakeAssignerContext(now=-1)) == tw(-7, 3)
    assert assigner.is_event_time() is False
    assert isinstance(assigner.get_default_trigger(None), ProcessingTimeTrigger)


@pytest.mark.parametrize("cls", [TumblingEventTimeWindows, TumblingProcessingTimeWindows])
def test_tumbling_validation(cls):
    with pytest.raises(ValueError, match=r"size must be > 0 ms, got 0"):
        cls.of(0)
    with pytest.raises(ValueError, match=r"size must be > 0 ms, got -5"):
        cls.of(-5)
    with pytest.raises(ValueError, match=r"offset=5 ms, size=5 ms"):
        cls.of(5, 5)
    with pytest.raises(ValueError, match=r"offset=-5 ms"):
        cls.of(5, -5)
    with pytest.raises(TypeError, match="size"):
        cls.of(1.5)
    with pytest.raises(TypeError, match="size"):
        cls.of(True)


# -- sliding ------------------------------------------------------------------------------

@pytest.mark.parametrize("size, slide, offset, timestamp, windows", [
    (10, 5, 0, 7, (5, 15, 0, 10)),
    (10, 5, 0, 5, (5, 15, 0, 10)),
    (10, 5, 0, -1, (-5, 5, -10, 0)),
    (10, 3, 0, 7, (6, 16, 3, 13, 0, 10)),
    (10, 5, 1, 7, (6, 16, 1, 11)),
    (10, 5, -1, 3, (-1, 9, -6, 4)),
    (3, 5, 0, 2, (0, 3)),
    (3, 5, 0, 4, ()),  # between two windows: in none
])
def test_sliding_event_time(size, slide, offset, timestamp, windows):
    assigner = SlidingEventTimeWindows.of(size, slide, offset)
    assert assigner.assign_windows("x", timestamp, None) == tw(*windows)


def test_sliding_processing_time_reads_the_clock():
    assigner = SlidingProcessingTimeWindows.of(Millis(10), Millis(5))
    assert assigner.assign_windows("x", None, FakeAssignerContext(now=12)) == tw(10, 20, 5, 15)
    assert assigner.is_event_time() is False
    assert isinstance(assigner.get_default_trigger(), ProcessingTimeTrigger)
    assert repr(assigner) == "SlidingProcessingTimeWindows(10, 5, 0)"


@pytest.mark.parametrize("cls", [SlidingEventTimeWindows, SlidingProcessingTimeWindows])
def test_sliding_validation(cls):
    with pytest.raises(ValueError, match=r"size must be > 0 ms, got 0"):
        cls.of(0, 5)
    with pytest.raises(ValueError, match=r"slide must be > 0 ms, got -1"):
        cls.of(10, -1)
    with pytest.raises(ValueError, match=r"offset=5 ms, slide=5 ms"):
        cls.of(10, 5, 5)
    assert cls.of(10, 5, 4) is not None


# -- missing timestamps -------------------------------------------------------------------

@pytest.mark.parametrize("assigner", [
    TumblingEventTimeWindows.of(5), SlidingEventTimeWindows.of(10, 5),
    EventTimeSessionWindows.with_gap(5), DynamicEventTimeSessionWindows.with_dynamic_gap(
        lambda e: 5)])
@pytest.mark.parametrize("timestamp", [None, MIN_WATERMARK])
def test_event_time_assigners_need_a_timestamp(assigner, timestamp):
    with pytest.raises(MissingTimestampError, match="assign_timestamps_and_watermarks") as info:
        assigner.assign_windows("x", timestamp, None)
    assert type(assigner).__name__ in str(info.value)


# -- sessions -----------------------------------------------------------------------------

def test_event_time_sessions():
    assigner = EventTimeSessionWindows.with_gap(Millis(5))
    assert isinstance(assigner, MergingWindowAssigner)
    assert assigner.assign_windows("x", 3, None) == tw(3, 8)
    assert assigner.is_event_time() is True
    assert isinstance(assigner.get_default_trigger(), EventTimeTrigger)
    assert repr(assigner) == "EventTimeSessionWindows(5)"
    calls = []

    class Callback(MergingWindowAssigner.MergeCallback):
        def merge(self, to_be_merged, merge_result):
            calls.append((list(to_be_merged), merge_result))

    assigner.merge_windows(tw(0, 5, 4, 9, 20, 25), Callback())
    assert calls == [(tw(0, 5, 4, 9), TimeWindow(0, 9))]


def test_processing_time_sessions_read_the_clock():
    assigner = ProcessingTimeSessionWindows.with_gap(datetime.timedelta(milliseconds=30))
    assert assigner.assign_windows("x", 1, FakeAssignerContext(now=100)) == tw(100, 130)
    assert assigner.is_event_time() is False
    assert isinstance(assigner.get_default_trigger(), ProcessingTimeTrigger)


@pytest.mark.parametrize("cls", [EventTimeSessionWindows, ProcessingTimeSessionWindows])
def test_session_gap_validation(cls):
    with pytest.raises(ValueError, match="gap must be > 0 ms, got 0"):
        cls.with_gap(0)
    with pytest.raises(ValueError, match="got -3"):
        cls.with_gap(Millis(-3))


class GapField(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element["gap"]


def test_dynamic_event_time_sessions():
    assigner = EventTimeSessionWindows.with_dynamic_gap(GapField())
    assert isinstance(assigner, DynamicEventTimeSessionWindows)
    assert isinstance(assigner, MergingWindowAssigner) and assigner.is_event_time()
    assert assigner.assign_windows({"gap": 7}, 10, None) == tw(10, 17)
    assert assigner.assign_windows({"gap": Millis(2)}, 10, None) == tw(10, 12)
    with pytest.raises(ValueError, match="0 < gap, got 0 ms"):
        assigner.assign_windows({"gap": 0}, 10, None)
    callable_gap = DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: e * 2)
    assert callable_gap.assign_windows(4, 1, None) == tw(1, 9)


def test_dynamic_processing_time_sessions():
    assigner = ProcessingTimeSessionWindows.with_dynamic_gap(lambda e: e)
    assert isinstance(assigner, DynamicProcessingTimeSessionWindows)
    assert assigner.assign_windows(5, None, FakeAssignerContext(now=40)) == tw(40, 45)
    assert assigner.is_event_time() is False
    assert isinstance(assigner.get_default_trigger(), ProcessingTimeTrigger)
    with pytest.raises(ValueError, match="got -1 ms"):
        assigner.assign_windows(-1, None, FakeAssignerContext())
    with pytest.raises(TypeError, match="gap extractor"):
        DynamicProcessingTimeSessionWindows.with_dynamic_gap(5)


# -- global and count ---------------------------------------------------------------------

def test_global_windows():
    assigner = GlobalWindows.create()
    assert assigner.assign_windows("x", None, None) == [GlobalWindow.get()]
    assert isinstance(assigner.get_default_trigger(), NeverTrigger)
    assert assigner.is_event_time() is False


def test_count_tumbling_counts_per_key_in_keyed_state():
    assigner, ctx = CountTumblingWindowAssigner.of(3), FakeAssignerContext()
    ids = []
    for key in "aaaabaaa":
        ctx.runtime_context.key = key
        ids.append((key, [w.id for w in assigner.assign_windows(key, None, ctx)]))
    assert ids == [("a", [0]), ("a", [0]), ("a", [0]), ("a", [1]), ("b", [0]), ("a", [1]),
                   ("a", [1]), ("a", [2])]
    assert ctx.runtime_context.store == {("tumble-count-assigner", "a"): 7,
                                         ("tumble-count-assigner", "b"): 1}
    trigger = assigner.get_default_trigger()
    assert isinstance(trigger, PurgingTrigger)
    assert isinstance(trigger.get_nested_trigger(), CountTrigger)
    assert repr(trigger) == "PurgingTrigger(CountTrigger(3))"
    assert assigner.is_event_time() is False


@pytest.mark.parametrize("size, slide, expected", [
    (3, 2, [[0], [0], [1, 0], [1], [2, 1], [2], [3, 2]]),
    (2, 3, [[0], [0], [], [1], [1], [], [2]]),
    (2, 2, [[0], [0], [1], [1]]),
])
def test_count_sliding(size, slide, expected):
    assigner, ctx = CountSlidingWindowAssigner.of(size, slide), FakeAssignerContext()
    got = [[w.id for w in assigner.assign_windows(i, None, ctx)] for i in range(len(expected))]
    assert got == expected
    assert all(isinstance(w, CountWindow) for w in assigner.assign_windows(0, None, ctx))
    assert ctx.runtime_context.store[("slide-count-assigner", None)] == len(expected) + 1
    assert repr(assigner.get_default_trigger()) == f"PurgingTrigger(CountTrigger({size}))"


def test_count_assigners_validate_and_need_a_runtime_context():
    with pytest.raises(ValueError, match="window_size must be > 0, got 0"):
        CountTumblingWindowAssigner.of(0)
    with pytest.raises(ValueError, match="window_slide must be > 0, got 0"):
        CountSlidingWindowAssigner.of(3, 0)
    with pytest.raises(TypeError, match="window_size"):
        CountSlidingWindowAssigner.of(2.5, 1)
    with pytest.raises(NotImplementedError, match="count window assigners need one"):
        CountTumblingWindowAssigner.of(2).assign_windows("x", None, ClockOnlyContext())


def test_assigners_are_abstract_generic_and_picklable():
    with pytest.raises(TypeError):
        WindowAssigner()
    assert WindowAssigner[int, TimeWindow] is not None
    assert WindowAssigner.WindowAssignerContext is type(ClockOnlyContext()).__mro__[1]
    for assigner in (SlidingEventTimeWindows.of(10, 5, 1), EventTimeSessionWindows.with_gap(5),
                     CountSlidingWindowAssigner.of(3, 1), GlobalWindows.create(),
                     DynamicEventTimeSessionWindows.with_dynamic_gap(GapField())):
        copy = pickle.loads(pickle.dumps(assigner))
        assert repr(copy).split("(")[0] == repr(assigner).split("(")[0]
    copy = pickle.loads(pickle.dumps(SlidingEventTimeWindows.of(10, 5, 1)))
    assert copy.assign_windows("x", 7, None) == tw(6, 16, 1, 11)


def test_tumbling_reuses_the_window_of_consecutive_records_and_pickles_without_it():
    import pickle

    assigner = TumblingEventTimeWindows.of(10)
    first = assigner.assign_windows("x", 3, None)[0]
    assert assigner.assign_windows("x", 7, None)[0] is first
    assert assigner.assign_windows("x", 12, None) == [TimeWindow(10, 20)]
    copy = pickle.loads(pickle.dumps(assigner))
    assert copy.assign_windows("x", -1, None) == [TimeWindow(-10, 0)]
