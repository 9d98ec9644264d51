import datetime
import pickle

import pytest

from flowray.operators.windowing.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from flowray.operators.windowing.windows import GlobalWindow, TimeWindow

from .fakes import FakeTriggerContext, Millis, advance_watermark

C, F, P, FP = (TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE,
               TriggerResult.FIRE_AND_PURGE)
W0, W1, W2 = TimeWindow(0, 100), TimeWindow(100, 200), TimeWindow(0, 200)


def test_trigger_result_flags():
    assert [(r.is_fire(), r.is_purge()) for r in (C, F, P, FP)] == \
        [(False, False), (True, False), (False, True), (True, True)]


def test_trigger_is_abstract_and_generic():
    with pytest.raises(TypeError):
        Trigger()
    assert Trigger[int, TimeWindow] is not None

    class OnlyElements(Trigger[int, TimeWindow]):
        def on_element(self, element, timestamp, window, ctx):
            return C

        def on_processing_time(self, time, window, ctx):
            return C

        def on_event_time(self, time, window, ctx):
            return C

        def clear(self, window, ctx):
            pass

    trigger = OnlyElements()
    assert trigger.can_merge() is False
    with pytest.raises(NotImplementedError, match="OnlyElements does not support merging"):
        trigger.on_merge(W0, FakeTriggerContext())
    with pytest.raises(NotImplementedError):
        FakeTriggerContext().get_metric_group()


# -- event time ---------------------------------------------------------------------------

def test_event_time_trigger_registers_the_window_end_and_fires_there():
    trigger, ctx = EventTimeTrigger.create(), FakeTriggerContext(watermark=50)
    assert trigger.on_element("x", 60, W0, ctx.at(W0)) is C
    assert ctx.event_timers == {(W0, 99)}
    assert trigger.on_event_time(98, W0, ctx) is C
    assert trigger.on_event_time(99, W0, ctx) is F
    assert trigger.on_processing_time(99, W0, ctx) is C
    trigger.clear(W0, ctx)
    assert ctx.event_timers == set()


def test_event_time_trigger_fires_at_once_behind_the_watermark():
    trigger, ctx = EventTimeTrigger(), FakeTriggerContext(watermark=99)
    assert trigger.on_element("x", 5, W0, ctx.at(W0)) is F
    assert ctx.event_timers == set()


def test_event_time_trigger_on_merge_only_registers_a_future_end():
    trigger = EventTimeTrigger()
    ctx = FakeTriggerContext(watermark=150)
    assert trigger.can_merge()
    trigger.on_merge(W2, ctx.at(W2))
    trigger.on_merge(W0, ctx.at(W0))
    assert ctx.event_timers == {(W2, 199)}


# -- processing time ----------------------------------------------------------------------

def test_processing_time_trigger():
    trigger, ctx = ProcessingTimeTrigger.create(), FakeTriggerContext(processing_time=120)
    assert trigger.on_element("x", None, W0, ctx.at(W0)) is C
    assert ctx.processing_timers == {(W0, 99)}
    assert trigger.on_processing_time(99, W0, ctx) is F
    assert trigger.on_event_time(99, W0, ctx) is C
    trigger.on_merge(W2, ctx.at(W2))
    trigger.on_merge(TimeWindow(0, 120), ctx.at(TimeWindow(0, 120)))  # ends in the past
    assert ctx.processing_timers == {(W0, 99), (W2, 199)}
    trigger.clear(W0, ctx.at(W0))
    assert ctx.processing_timers == {(W2, 199)}


# -- count --------------------------------------------------------------------------------

def test_count_trigger_fires_every_count_elements_per_window():
    trigger, ctx = CountTrigger.of(3), FakeTriggerContext()
    results = [trigger.on_element(i, i, W0, ctx.at(W0)) for i in range(7)]
    assert results == [C, C, F, C, C, F, C]
    assert ctx.value("count", W0) == 1
    assert trigger.on_element("y", 0, W1, ctx.at(W1)) is C
    assert ctx.value("count", W1) == 1
    assert trigger.on_event_time(99, W0, ctx) is C and trigger.on_processing_time(9, W0, ctx) is C
    trigger.clear(W0, ctx.at(W0))
    assert ctx.value("count", W0) is None and ctx.value("count", W1) == 1


def test_count_trigger_merges_counts():
    trigger, ctx = CountTrigger.of(4), FakeTriggerContext()
    trigger.on_element("a", 0, W0, ctx.at(W0))
    trigger.on_element("b", 0, W1, ctx.at(W1))
    trigger.on_element("c", 0, W1, ctx.at(W1))
    ctx.merged_windows = [W0, W1]
    trigger.on_merge(W2, ctx.at(W2))
    assert ctx.value("count", W2) == 3
    assert ctx.value("count", W0) is None and ctx.value("count", W1) is None
    assert trigger.on_element("d", 0, W2, ctx) is F


@pytest.mark.parametrize("count, error", [(0, ValueError), (-2, ValueError), ("3", TypeError)])
def test_count_trigger_rejects_bad_counts(count, error):
    with pytest.raises(error, match="count"):
        CountTrigger.of(count)


# -- purging ------------------------------------------------------------------------------

class Scripted(Trigger):
    """Returns the given result from every callback; records clear/on_merge."""

    def __init__(self, result, merges=True):
        self.result, self.merges, self.calls = result, merges, []

    def on_element(self, element, timestamp, window, ctx):
        return self.result

    def on_processing_time(self, time, window, ctx):
        return self.result

    def on_event_time(self, time, window, ctx):
        return self.result

    def can_merge(self):
        return self.merges

    def on_merge(self, window, ctx):
        self.calls.append(("merge", window))

    def clear(self, window, ctx):
        self.calls.append(("clear", window))


@pytest.mark.parametrize("nested, purging", [(C, C), (F, FP), (P, P), (FP, FP)])
def test_purging_trigger_turns_fires_into_fire_and_purge(nested, purging):
    trigger, ctx = PurgingTrigger.of(Scripted(nested)), FakeTriggerContext()
    assert trigger.on_element("x", 1, W0, ctx) is purging
    assert trigger.on_event_time(1, W0, ctx) is purging
    assert trigger.on_processing_time(1, W0, ctx) is purging


def test_purging_trigger_delegates_merge_and_clear():
    nested = Scripted(C, merges=False)
    trigger, ctx = PurgingTrigger.of(nested), FakeTriggerContext()
    assert trigger.get_nested_trigger() is nested and trigger.can_merge() is False
    trigger.on_merge(W2, ctx)
    trigger.clear(W0, ctx)
    assert nested.calls == [("merge", W2), ("clear", W0)]
    assert PurgingTrigger.of(CountTrigger.of(2)).can_merge() is True
    assert repr(PurgingTrigger.of(CountTrigger.of(2))) == "PurgingTrigger(CountTrigger(2))"
    with pytest.raises(TypeError):
        PurgingTrigger.of(lambda: None)


def test_purging_count_trigger():
    trigger, ctx = PurgingTrigger.of(CountTrigger.of(2)), FakeTriggerContext()
    assert [trigger.on_element(i, 0, W0, ctx.at(W0)) for i in range(4)] == [C, FP, C, FP]


# -- continuous event time ----------------------------------------------------------------

def test_continuous_event_time_trigger_fires_every_interval_then_at_the_end():
    trigger, ctx = ContinuousEventTimeTrigger.of(Millis(10)), FakeTriggerContext()
    assert trigger.on_element("a", 13, W0, ctx.at(W0)) is C
    assert ctx.event_timers == {(W0, 99), (W0, 20)}
    assert ctx.value("fire-time", W0) == 20
    assert trigger.on_element("b", 37, W0, ctx.at(W0)) is C  # a fire time is already set
    assert ctx.event_timers == {(W0, 99), (W0, 20)}
    assert [t for _, t, r in advance_watermark(trigger, ctx, 45)] == [20, 30, 40]
    fired = advance_watermark(trigger, ctx, 200)
    assert [(t, r) for _, t, r in fired] == [(50, F), (60, F), (70, F), (80, F), (90, F), (99, F)]
    assert ctx.value("fire-time", W0) == 99
    trigger.clear(W0, ctx.at(W0))
    assert ctx.value("fire-time", W0) is None and ctx.event_timers == set()


def test_continuous_event_time_trigger_details():
    trigger = ContinuousEventTimeTrigger.of(5)
    ctx = FakeTriggerContext(watermark=-20)
    window = TimeWindow(-10, 10)
    trigger.on_element("a", -3, window, ctx.at(window))  # -3 rounds down to -5: next fire 0
    assert ctx.value("fire-time", window) == 0
    assert trigger.on_event_time(3, window, ctx) is C  # not the fire time, not the end
    ctx.watermark = 9
    assert trigger.on_element("late", 1, window, ctx) is F  # watermark past the end
    assert trigger.on_processing_time(0, window, ctx) is C


def test_continuous_event_time_trigger_merges_to_the_earliest_fire_time():
    trigger, ctx = ContinuousEventTimeTrigger.of(10), FakeTriggerContext()
    trigger.on_element("a", 25, W0, ctx.at(W0))
    trigger.on_element("b", 105, W1, ctx.at(W1))
    ctx.merged_windows = [W0, W1]
    trigger.on_merge(W2, ctx.at(W2))
    assert ctx.value("fire-time", W2) == 30
    assert (W2, 30) in ctx.event_timers
    assert trigger.can_merge()


# -- continuous processing time -----------------------------------------------------------

def test_continuous_processing_time_trigger():
    trigger = ContinuousProcessingTimeTrigger.of(datetime.timedelta(milliseconds=10))
    ctx = FakeTriggerContext(processing_time=13)
    assert trigger.on_element("a", None, W0, ctx.at(W0)) is C
    assert ctx.processing_timers == {(W0, 20)} and ctx.value("fire-time", W0) == 20
    assert trigger.on_processing_time(25, W0, ctx) is C
    assert trigger.on_processing_time(20, W0, ctx) is F
    assert ctx.value("fire-time", W0) == 30
    ctx.state[("fire-time", W0)] = 90
    assert trigger.on_processing_time(90, W0, ctx) is F
    assert ctx.value("fire-time", W0) == 99  # capped at the window's end
    assert trigger.on_event_time(99, W0, ctx) is C
    trigger.clear(W0, ctx)
    assert ctx.value("fire-time", W0) is None and (W0, 99) not in ctx.processing_timers


def test_continuous_processing_time_trigger_merge():
    trigger, ctx = ContinuousProcessingTimeTrigger.of(10), FakeTriggerContext(processing_time=42)
    trigger.on_element("a", None, W1, ctx.at(W1))
    ctx.merged_windows = [W0, W1]
    trigger.on_merge(W2, ctx.at(W2))
    assert ctx.value("fire-time", W2) == 50 and (W2, 50) in ctx.processing_timers


@pytest.mark.parametrize("make", [ContinuousEventTimeTrigger.of,
                                  ContinuousProcessingTimeTrigger.of])
def test_continuous_triggers_reject_bad_intervals(make):
    with pytest.raises(ValueError, match="interval must be > 0 ms, got 0"):
        make(0)
    with pytest.raises(TypeError, match="interval"):
        make("10s")


# -- never --------------------------------------------------------------------------------

def test_never_trigger():
    trigger, ctx = NeverTrigger(), FakeTriggerContext()
    window = GlobalWindow.get()
    assert trigger.on_element(1, 1, window, ctx) is C
    assert trigger.on_event_time(1, window, ctx) is C
    assert trigger.on_processing_time(1, window, ctx) is C
    trigger.clear(window, ctx)
    assert trigger.can_merge() is False and ctx.event_timers == set()


def test_triggers_pickle():
    trigger = pickle.loads(pickle.dumps(PurgingTrigger.of(CountTrigger.of(2))))
    ctx = FakeTriggerContext()
    assert [trigger.on_element(i, 0, W0, ctx.at(W0)) for i in range(2)] == [C, FP]
    continuous = pickle.loads(pickle.dumps(ContinuousEventTimeTrigger.of(10)))
    assert continuous.interval == 10
