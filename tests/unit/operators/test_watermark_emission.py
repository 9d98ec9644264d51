"""Event time at the edge of the job: TimestampsAndWatermarksOperator and SourceOperator
with a WatermarkStrategy, driven by a manual clock (periodic emission every
``auto_watermark_interval_ms``, idleness)."""

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.common.time import Duration
from flowray.common.watermark_strategy import WatermarkGenerator, WatermarkStrategy
from flowray.operators.base import CollectingOutput, UserFunctionError
from flowray.operators.sources import CollectionSource, NumberSequenceSource, SourceOperator
from flowray.operators.watermarks import (
    TimestampsAndWatermarksOperator,
    WatermarkEmission,
    check_watermark_strategy,
)
from tests.support.operator_harness import OperatorHarness

MONOTONOUS = WatermarkStrategy.for_monotonous_timestamps()


def second(value, record_timestamp):
    return value[1]


def stamping(strategy=None, **kwargs):
    strategy = (strategy or MONOTONOUS).with_timestamp_assigner(second)
    return OperatorHarness(TimestampsAndWatermarksOperator(strategy, name="stamp"), **kwargs)


# ---------------------------------------------------------------------------------------
# TimestampsAndWatermarksOperator
# ---------------------------------------------------------------------------------------

def test_assigner_stamps_records():
    h = stamping()
    h.process([("a", 5), ("b", 9)], timestamps=[100, None])
    assert h.stamped() == [(("a", 5), 5), (("b", 9), 9)]
    assert h.watermarks == []  # periodic only


def test_the_assigner_sees_the_previous_timestamp():
    seen = []

    def assigner(value, previous):
        seen.append(previous)
        return previous + value

    h = OperatorHarness(TimestampsAndWatermarksOperator(
        MONOTONOUS.with_timestamp_assigner(assigner)))
    h.process([1, 2], timestamps=[10, None])
    assert seen == [10, -(1 << 63)]
    assert h.timestamps == [11, -(1 << 63) + 2]


def test_periodic_emission_on_the_processing_time_service():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10))
    h = stamping(strategy, clock_ms=1000, auto_watermark_interval_ms=50)
    assert h.processing_time_service.next_deadline() == 1050
    h.process([("a", 100), ("b", 250), ("c", 200)])
    assert h.advance_clock(49) == 0 and h.watermarks == []
    h.advance_clock(1)
    assert h.watermarks == [239]  # highest - bound - 1
    assert h.processing_time_service.next_deadline() == 1100
    h.advance_clock(50)
    assert h.watermarks == [239]  # no advance: nothing emitted
    h.process([("d", 300)])
    h.advance_clock(50)
    assert h.watermarks == [239, 289]


def test_no_periodic_timer_when_the_interval_is_zero_or_in_batch():
    for h in (stamping(auto_watermark_interval_ms=0), stamping(batch_execution=True)):
        assert h.processing_time_service.next_deadline() is None
        h.process([("a", 5)])
        h.advance_clock(10 ** 6)
        assert h.watermarks == []
        h.watermark(MAX_WATERMARK)
        assert h.watermarks == [MAX_WATERMARK]


def test_upstream_watermarks_are_dropped_except_the_final_one():
    h = stamping(auto_watermark_interval_ms=100)
    h.process([("a", 50)])
    h.watermark(10 ** 9)
    h.watermark_status(True)
    assert h.watermarks == [] and h.statuses == []
    h.advance_clock(100)
    assert h.watermarks == [49]
    h.watermark(MAX_WATERMARK)
    assert h.watermarks == [49, MAX_WATERMARK]


def test_without_an_assigner_records_keep_their_timestamps():
    h = OperatorHarness(TimestampsAndWatermarksOperator(MONOTONOUS),
                        auto_watermark_interval_ms=10)
    h.process(["x", "y", "z"], timestamps=[30, None, 20])
    assert h.stamped() == [("x", 30), ("y", None), ("z", 20)]
    h.advance_clock(10)
    assert h.watermarks == [29]


def test_idleness_marks_idle_then_active_again():
    strategy = MONOTONOUS.with_idleness(Duration.of_millis(100))
    h = stamping(strategy, auto_watermark_interval_ms=50)
    h.process([("a", 10)])
    h.advance_clock(50)    # activity since the last check: a watermark
    assert h.watermarks == [9] and h.statuses == []
    h.advance_clock(50)    # nothing new: the inactivity clock starts (at 100)
    h.advance_clock(50)    # 150: 50 ms idle
    h.advance_clock(50)    # 200: 100 ms, not more than the timeout
    assert h.statuses == []
    h.advance_clock(50)    # 250: idle
    assert h.statuses == [True]
    h.advance_clock(500)
    assert h.statuses == [True]  # reported once
    h.process([("b", 20)])
    assert h.statuses == [True, False]
    assert h.records == [("a", 10), ("b", 20)]
    h.advance_clock(50)
    assert h.watermarks == [9, 19]


class Scripted(WatermarkGenerator):
    """Emits the values of ``script`` in turn, one per batch (punctuated)."""

    script = []

    def __init__(self):
        self.values = list(self.script)

    def on_event(self, event, event_timestamp, output):
        pass

    def on_events(self, events, timestamps, output):
        output.emit_watermark(self.values.pop(0))

    def on_periodic_emit(self, output):
        pass


def scripted(*values):
    return type("Script", (Scripted,), {"script": list(values)})


class HighestSeen(WatermarkGenerator):
    """Punctuated: after each event, the highest timestamp seen so far."""

    def __init__(self):
        self.highest = None

    def on_event(self, event, event_timestamp, output):
        if self.highest is None or event_timestamp > self.highest:
            self.highest = event_timestamp
        output.emit_watermark(self.highest)

    def on_periodic_emit(self, output):
        pass


class EveryTenth(HighestSeen):
    """Punctuated, but only when an event passes the next multiple of 10."""

    def on_event(self, event, event_timestamp, output):
        if self.highest is None or event_timestamp // 10 > self.highest // 10:
            output.emit_watermark(event_timestamp - event_timestamp % 10)
        self.highest = max(event_timestamp, self.highest or event_timestamp)


def test_punctuated_watermarks_follow_the_records_that_caused_them():
    h = stamping(WatermarkStrategy.for_generator(HighestSeen), auto_watermark_interval_ms=0)
    h.process([("a", 1), ("b", 12)])
    assert h.events == [("records", [("a", 1)], [1]), ("watermark", 1),
                        ("records", [("b", 12)], [12]), ("watermark", 12)]


def test_records_between_punctuated_watermarks_stay_together():
    h = stamping(WatermarkStrategy.for_generator(EveryTenth), auto_watermark_interval_ms=0)
    h.process([("a", 3), ("b", 5), ("c", 11), ("d", 12), ("e", 13), ("f", 30), ("g", 31)])
    assert h.events == [("records", [("a", 3)], [3]), ("watermark", 0),
                        ("records", [("b", 5), ("c", 11)], [5, 11]), ("watermark", 10),
                        ("records", [("d", 12), ("e", 13), ("f", 30)], [12, 13, 30]),
                        ("watermark", 30), ("records", [("g", 31)], [31])]


def test_a_generator_taking_whole_batches_emits_after_the_batch():
    class Batched(HighestSeen):
        def on_events(self, events, timestamps, output):
            output.emit_watermark(max(timestamps))

    h = stamping(WatermarkStrategy.for_generator(Batched), auto_watermark_interval_ms=0)
    h.process([("a", 1), ("b", 12)])
    assert h.events == [("records", [("a", 1), ("b", 12)], [1, 12]), ("watermark", 12)]


def test_built_in_generators_see_the_batch_after_it_was_emitted():
    h = stamping(auto_watermark_interval_ms=10)
    h.process([("a", 1), ("b", 12)])
    h.advance_clock(10)
    assert h.events == [("records", [("a", 1), ("b", 12)], [1, 12]), ("watermark", 11)]


def test_punctuated_watermark_does_not_make_its_own_batch_late():
    from flowray.operators.window_operator import PaneContents, WindowOperator
    from flowray.operators.windowing.assigners import TumblingEventTimeWindows
    from flowray.operators.windowing.functions import internal_window_function
    from flowray.operators.windowing.triggers import EventTimeTrigger

    stamp = TimestampsAndWatermarksOperator(
        WatermarkStrategy.for_generator(HighestSeen).with_timestamp_assigner(second))
    window = WindowOperator(TumblingEventTimeWindows.of(10), EventTimeTrigger(),
                            PaneContents("reduce", lambda a, b: (a[0], a[1] + b[1])),
                            internal_window_function(None, single_value=True),
                            lambda r: r[0])
    h = OperatorHarness([stamp, window], auto_watermark_interval_ms=0)
    h.process([("a", 1), ("a", 3), ("a", 25)])  # one batch: nothing in it is late
    assert window.late_records_dropped == 0
    assert h.stamped() == [(("a", 4), 9)]


def test_custom_generator_watermarks_go_downstream_once_each():
    h = stamping(WatermarkStrategy.for_generator(scripted(5, 5, 8)))
    for t in (1, 2, 3):
        h.process([("a", t)])
    assert h.watermarks == [5, 8]


@pytest.mark.parametrize("values, message", [
    ((-5,), r"operator 'stamp': watermark -5 is out of range"),
    ((10, 7), r"operator 'stamp': watermark 7 is lower than the previous one, 10"),
    ((2.5,), r"operator 'stamp': watermark 2\.5 \(float\) is not an int"),
])
def test_custom_generator_bad_watermarks_raise_a_user_error(values, message):
    h = stamping(WatermarkStrategy.for_generator(scripted(*values)))
    with pytest.raises(UserFunctionError, match=message) as info:
        for t in range(len(values)):
            h.process([("a", t)])
    assert info.value.operator_name == "stamp" and info.value.cause_type == "ValueError"


def test_custom_generator_bad_periodic_watermark_raises_a_user_error():
    class Negative(Scripted):
        def on_events(self, events, timestamps, output):
            pass

        def on_periodic_emit(self, output):
            output.emit_watermark(-1)

    h = stamping(WatermarkStrategy.for_generator(Negative), auto_watermark_interval_ms=10)
    with pytest.raises(UserFunctionError, match="'stamp'.*watermark -1 is out of range"):
        h.advance_clock(10)


def test_assigner_returning_a_float_names_the_value():
    h = OperatorHarness(TimestampsAndWatermarksOperator(
        MONOTONOUS.with_timestamp_assigner(lambda v, ts: v if v % 2 == 0 else v / 2),
        name="stamp"))
    with pytest.raises(UserFunctionError, match=r"'stamp'.*returned 1\.5 \(float\) for record 3"):
        h.process([2, 3])
    assert h.records == []


def test_a_strategy_is_required():
    with pytest.raises(TypeError, match="assign_timestamps_and_watermarks.*WatermarkStrategy"):
        TimestampsAndWatermarksOperator("monotonous")
    assert check_watermark_strategy(None, "x") is None


def test_watermark_emission_end_emits_the_final_watermark_once():
    out = CollectingOutput()
    emission = WatermarkEmission(MONOTONOUS, "e", out, None, 0)
    emission.emit([1], [7])
    emission.end()
    emission.periodic_emit()  # nothing passes MAX_WATERMARK
    assert out.watermarks == [MAX_WATERMARK] and out.timestamps == [7]


# ---------------------------------------------------------------------------------------
# SourceOperator with a strategy
# ---------------------------------------------------------------------------------------

def source(src, strategy=None, **kwargs):
    h = OperatorHarness(SourceOperator(src, watermark_strategy=strategy), **kwargs)
    return h, h.operator


def test_source_stamps_records_and_emits_periodically_from_emit_next():
    h, op = source(NumberSequenceSource(1, 10),
                   MONOTONOUS.with_timestamp_assigner(lambda v, ts: v * 10),
                   auto_watermark_interval_ms=100)
    assert op.emit_next(3) == 3
    assert h.stamped() == [(1, 10), (2, 20), (3, 30)] and h.watermarks == []
    h.advance_clock(100)
    assert op.emit_next(3) == 3
    assert h.watermarks == [59]  # after the batch
    assert op.emit_next(100) == 4 and h.watermarks == [59]
    assert op.emit_next(100) is None
    op.end_of_input()
    assert h.watermarks == [59, MAX_WATERMARK]
    assert h.timestamps == [10 * i for i in range(1, 11)]


def test_source_without_a_strategy_emits_plain_records_and_the_final_watermark():
    h, op = source(CollectionSource(["a", "b"]))
    assert op.emit_next(10) == 2 and op.emit_next(10) is None
    op.end_of_input()
    assert h.stamped() == [("a", None), ("b", None)] and h.watermarks == [MAX_WATERMARK]


def test_source_with_no_watermarks_but_an_assigner_stamps_only():
    h, op = source(CollectionSource([3, 4]),
                   WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda v, t: v),
                   auto_watermark_interval_ms=1)
    op.emit_next(10)
    h.advance_clock(10)
    op.emit_next(10)
    op.end_of_input()
    assert h.stamped() == [(3, 3), (4, 4)] and h.watermarks == [MAX_WATERMARK]


def test_source_generator_error_names_the_source():
    h, op = source(CollectionSource([1]), WatermarkStrategy.for_generator(scripted(-3))
                   .with_timestamp_assigner(lambda v, ts: v))
    with pytest.raises(UserFunctionError, match="'Source: Collection Source'.*watermark -3"):
        op.emit_next(1)


def test_source_in_batch_has_no_periodic_watermarks():
    h, op = source(NumberSequenceSource(1, 4), MONOTONOUS.with_timestamp_assigner(
        lambda v, ts: v), batch_execution=True, auto_watermark_interval_ms=1)
    op.emit_next(2)
    h.advance_clock(1000)
    op.emit_next(2)
    op.end_of_input()
    assert h.watermarks == [MAX_WATERMARK] and h.timestamps == [1, 2, 3, 4]


def test_a_source_reports_its_emit_event_time_lag_and_output_watermark():
    from flowray.metrics.groups import MetricRegistry

    registry = MetricRegistry()
    group = registry.task_group("job", "id", "Source: numbers", 0)
    h, op = source(NumberSequenceSource(1, 10),
                   MONOTONOUS.with_timestamp_assigner(lambda v, ts: v * 10),
                   clock_ms=1_000, auto_watermark_interval_ms=100, metrics=group)
    values = group.operator_group(op.name).values
    assert values() == {"currentEmitEventTimeLag": -1,             # nothing emitted yet
                        "currentOutputWatermark": -(1 << 63)}
    op.emit_next(3)                    # event times 10, 20, 30, emitted at 1000
    assert values()["currentEmitEventTimeLag"] == 1_000 - 30
    h.advance_clock(100)
    op.emit_next(2)                    # 40, 50 at 1100; then the periodic watermark
    assert values() == {"currentEmitEventTimeLag": 1_100 - 50, "currentOutputWatermark": 49}
    h.advance_clock(5_000)             # the lag is the one at emission: it does not grow
    assert values()["currentEmitEventTimeLag"] == 1_050


def test_a_source_without_event_times_has_no_lag():
    h, op = source(NumberSequenceSource(1, 10))
    op.emit_next(5)
    assert op.emit_event_time_lag_ms() == -1 and op.output_watermark() == -(1 << 63)
