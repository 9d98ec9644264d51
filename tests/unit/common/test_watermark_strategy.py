"""WatermarkStrategy: the PyFlink-shaped builder, and the pure-Python runtime side with
Flink's generator semantics (bounded out-of-orderness, monotonous, none, idleness)."""

import pickle

import cloudpickle
import pytest

from flowray.common.clock import ManualClock
from flowray.common.constants import MIN_WATERMARK
from flowray.common.time import Duration, Time
from flowray.common.watermark_strategy import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    CheckedWatermarkOutput,
    FunctionTimestampAssigner,
    ListWatermarkOutput,
    NoWatermarksGenerator,
    TimestampAssigner,
    WatermarkAlignmentParams,
    WatermarkGenerator,
    WatermarkStrategy,
    WatermarksWithIdleness,
    extract_timestamps,
)


class FirstField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[0]


class Punctuated(WatermarkGenerator):
    """A user generator: emits the event's timestamp as watermark, whatever it is."""

    def on_event(self, event, event_timestamp, output):
        output.emit_watermark(event_timestamp)

    def on_periodic_emit(self, output):
        pass


# ---------------------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------------------

def test_bounded_out_of_orderness_watermark_is_max_minus_bound_minus_one():
    gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100)) \
        .create_watermark_generator()
    out = ListWatermarkOutput()
    gen.on_events(["a", "b", "c"], [1000, 3000, 2000], out)
    assert out.events == []                       # nothing emitted per event
    gen.on_periodic_emit(out)
    assert out.watermarks == [2899]
    gen.on_event("late", 500, out)                # an older event does not lower the max
    gen.on_periodic_emit(out)
    assert out.watermarks == [2899]               # and an unchanged watermark is not re-sent
    gen.on_events(["d"], [5000], out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [2899, 4899]


def test_bounded_out_of_orderness_uses_whole_milliseconds_of_the_bound():
    gen = BoundedOutOfOrdernessWatermarks(Duration.of_seconds(1, 999_999))  # 1000.999999 ms
    out = ListWatermarkOutput()
    gen.on_event(None, 10_000, out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [8999]


@pytest.mark.parametrize("strategy", [
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)),
    WatermarkStrategy.for_monotonous_timestamps(),
])
def test_no_watermark_before_the_first_event(strategy):
    gen = strategy.create_watermark_generator()
    out = ListWatermarkOutput()
    for _ in range(3):
        gen.on_periodic_emit(out)
    gen.on_events([], [], out)                    # an empty batch is no event either
    gen.on_periodic_emit(out)
    assert out.events == []


def test_monotonous_is_bounded_with_zero():
    gen = WatermarkStrategy.for_monotonous_timestamps().create_watermark_generator()
    assert isinstance(gen, AscendingTimestampsWatermarks)
    out = ListWatermarkOutput()
    gen.on_events([1, 2], [10, 20], out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [19]


def test_on_events_fast_path_matches_on_event_loop():
    timestamps = [7, 3, 42, 41, 0, 42]
    fast, slow = BoundedOutOfOrdernessWatermarks(Duration.of_millis(2)), \
        BoundedOutOfOrdernessWatermarks(Duration.of_millis(2))
    out_fast, out_slow = ListWatermarkOutput(), ListWatermarkOutput()
    fast.on_events(timestamps, timestamps, out_fast)
    WatermarkGenerator.on_events(slow, timestamps, timestamps, out_slow)   # the default loop
    fast.on_periodic_emit(out_fast)
    slow.on_periodic_emit(out_slow)
    assert out_fast.events == out_slow.events == [("watermark", 39)]


def test_no_watermarks_never_emits():
    strategy = WatermarkStrategy.no_watermarks()
    assert strategy.is_no_watermarks()
    gen = strategy.create_watermark_generator()
    assert isinstance(gen, NoWatermarksGenerator)
    out = ListWatermarkOutput()
    gen.on_events(["a"], [100], out)
    gen.on_event("b", 200, out)
    gen.on_periodic_emit(out)
    assert out.events == []


def test_default_on_events_calls_on_event_per_record():
    out = ListWatermarkOutput()
    Punctuated().on_events(["a", "b", "c"], [1, 5, 9], out)
    assert out.watermarks == [1, 5, 9]


# ---------------------------------------------------------------------------------------
# idleness
# ---------------------------------------------------------------------------------------

def idle_generator(timeout_ms=1000, start_ms=0):
    clock = ManualClock(start_ms)
    gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.ZERO) \
        .with_idleness(Duration.of_millis(timeout_ms)).create_watermark_generator(clock)
    return clock, gen, ListWatermarkOutput()


def test_idleness_marks_idle_after_the_timeout_and_active_on_the_next_event():
    clock, gen, out = idle_generator(timeout_ms=1000)
    assert isinstance(gen, WatermarksWithIdleness)
    gen.on_events(["a"], [100], out)
    gen.on_periodic_emit(out)                     # sees activity: emits, not idle
    assert out.events == [("watermark", 99)]
    clock.advance(200)
    gen.on_periodic_emit(out)                     # first quiet check: inactivity starts (t=200)
    clock.advance(1000)
    gen.on_periodic_emit(out)                     # 1000 ms since then: not more than the timeout
    assert out.events == [("watermark", 99)]
    clock.advance(1)
    gen.on_periodic_emit(out)                     # 1001 ms > 1000: idle
    assert out.events[-1] == "idle"
    clock.advance(5000)
    gen.on_periodic_emit(out)                     # idle is reported once
    assert out.events.count("idle") == 1 and gen.idle
    gen.on_events(["b"], [300], out)              # an event: active again at once
    assert out.events[-1] == "active" and not gen.idle
    gen.on_periodic_emit(out)
    assert out.events[-1] == ("watermark", 299)
    assert out.events == [("watermark", 99), "idle", "active", ("watermark", 299)]


def test_idleness_skips_the_wrapped_periodic_emit_while_idle():
    clock, gen, out = idle_generator(timeout_ms=10)
    gen.on_periodic_emit(out)                     # no event ever: inactivity starts at 0
    clock.advance(11)
    gen.on_periodic_emit(out)
    assert out.events == ["idle"]


def test_idleness_is_not_reached_while_events_keep_coming():
    clock, gen, out = idle_generator(timeout_ms=100)
    for i in range(20):
        gen.on_event(i, i, out)
        clock.advance(60)
        gen.on_periodic_emit(out)
    assert "idle" not in out.events


def test_an_empty_batch_is_not_activity():
    clock, gen, out = idle_generator(timeout_ms=10)
    gen.on_periodic_emit(out)
    clock.advance(11)
    gen.on_events([], [], out)
    gen.on_periodic_emit(out)
    assert out.events == ["idle"]


def test_idleness_wraps_no_watermarks_too():
    clock = ManualClock(0)
    gen = WatermarkStrategy.no_watermarks().with_idleness(Duration.of_millis(5)) \
        .create_watermark_generator(clock)
    out = ListWatermarkOutput()
    gen.on_periodic_emit(out)
    clock.advance(6)
    gen.on_periodic_emit(out)
    gen.on_event("x", 1, out)
    assert out.events == ["idle", "active"]


@pytest.mark.parametrize("bad", [Duration.ZERO, Duration.of_millis(-5), Duration.of_nanos(999)])
def test_idle_timeout_must_be_positive(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(").replace(")", r"\)")):
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(bad)
    with pytest.raises(ValueError):
        WatermarksWithIdleness(NoWatermarksGenerator(), bad, ManualClock())


# ---------------------------------------------------------------------------------------
# the strategy as a definition
# ---------------------------------------------------------------------------------------

def test_builders_return_new_strategies_and_leave_the_original_alone():
    base = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
    with_assigner = base.with_timestamp_assigner(FirstField())
    with_idle = base.with_idleness(Duration.of_seconds(5))
    aligned = base.with_watermark_alignment("g", Duration.of_seconds(2))
    assert with_assigner is not base and with_idle is not base and aligned is not base
    assert not base.has_timestamp_assigner()
    assert base.get_idle_timeout() is None and base.get_alignment_parameters() is None
    assert with_assigner.has_timestamp_assigner() and with_assigner.get_idle_timeout() is None
    assert with_idle.get_idle_timeout() == Duration.of_seconds(5)
    assert not with_idle.has_timestamp_assigner()
    both = with_idle.with_timestamp_assigner(FirstField())
    assert both.get_idle_timeout() == Duration.of_seconds(5) and both.has_timestamp_assigner()
    assert not isinstance(base.create_watermark_generator(ManualClock()), WatermarksWithIdleness)


def test_a_strategy_cannot_be_mutated_or_constructed_directly():
    s = WatermarkStrategy.no_watermarks()
    with pytest.raises(AttributeError, match="immutable"):
        s._idle_timeout = Duration.of_seconds(1)
    with pytest.raises(TypeError, match="static methods"):
        WatermarkStrategy()


def test_each_create_makes_a_fresh_generator():
    s = WatermarkStrategy.for_monotonous_timestamps()
    a, b = s.create_watermark_generator(), s.create_watermark_generator()
    assert a is not b
    a.on_event(None, 100, ListWatermarkOutput())
    out = ListWatermarkOutput()
    b.on_periodic_emit(out)
    assert out.events == []


def test_watermark_alignment_is_stored_with_the_default_interval():
    s = WatermarkStrategy.for_monotonous_timestamps() \
        .with_watermark_alignment("group-1", Duration.of_seconds(20))
    assert s.get_alignment_parameters() == WatermarkAlignmentParams(
        "group-1", Duration.of_seconds(20), Duration.of_seconds(1))
    s2 = s.with_watermark_alignment("group-1", Duration.of_seconds(20), Duration.of_millis(50))
    assert s2.get_alignment_parameters().update_interval == Duration.of_millis(50)
    with pytest.raises(TypeError, match="watermark_group"):
        s.with_watermark_alignment(1, Duration.of_seconds(20))


def test_strategies_pickle():
    s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(3)) \
        .with_idleness(Duration.of_minutes(1)) \
        .with_watermark_alignment("g", Duration.of_seconds(2)) \
        .with_timestamp_assigner(FirstField())
    back = pickle.loads(pickle.dumps(s))
    assert back.get_idle_timeout() == Duration.of_minutes(1)
    assert back.get_alignment_parameters() == s.get_alignment_parameters()
    assert back.create_timestamp_assigner().extract_timestamp((12, "x"), MIN_WATERMARK) == 12
    out = ListWatermarkOutput()
    gen = back.create_watermark_generator(ManualClock())
    gen.on_event(None, 10_000, out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [6999]
    for plain in (WatermarkStrategy.no_watermarks(), WatermarkStrategy.for_monotonous_timestamps()):
        assert pickle.loads(pickle.dumps(plain)) == plain


def test_a_strategy_with_a_lambda_assigner_pickles_with_cloudpickle():
    s = WatermarkStrategy.for_monotonous_timestamps() \
        .with_timestamp_assigner(lambda event, ts: event["t"] * 1000)
    back = cloudpickle.loads(cloudpickle.dumps(s))
    assigner = back.create_timestamp_assigner()
    assert assigner.extract_timestamp({"t": 3}, MIN_WATERMARK) == 3000


def test_a_custom_generator_strategy_pickles_with_cloudpickle():
    s = WatermarkStrategy.for_generator(lambda: Punctuated())
    gen = cloudpickle.loads(cloudpickle.dumps(s)).create_watermark_generator()
    assert isinstance(gen, Punctuated)


def test_no_assigner_means_records_keep_their_timestamps():
    s = WatermarkStrategy.for_monotonous_timestamps()
    assert not s.has_timestamp_assigner()
    assert s.create_timestamp_assigner() is None


def test_a_function_assigner_is_wrapped():
    s = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda v, ts: ts + v)
    assigner = s.create_timestamp_assigner()
    assert isinstance(assigner, TimestampAssigner)
    assert assigner.extract_timestamp(5, 100) == 105


@pytest.mark.parametrize("bad,message", [
    (FirstField, "needs an instance"),
    (42, "42"),
    (lambda v: v, "must take two arguments"),
])
def test_bad_assigners_are_refused_when_given(bad, message):
    with pytest.raises(TypeError, match=message):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(bad)


@pytest.mark.parametrize("bad,message", [
    (Duration.of_millis(-1), "cannot be negative, got Duration.of_millis\\(-1\\)"),
])
def test_negative_out_of_orderness_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        WatermarkStrategy.for_bounded_out_of_orderness(bad)
    with pytest.raises(ValueError, match=message):
        BoundedOutOfOrdernessWatermarks(bad)


@pytest.mark.parametrize("bad", [5000, Time.seconds(5), None])
def test_out_of_orderness_must_be_a_duration(bad):
    with pytest.raises(TypeError, match="must be a Duration, got " + repr(bad).replace(
            "(", r"\(").replace(")", r"\)")):
        WatermarkStrategy.for_bounded_out_of_orderness(bad)


def test_zero_out_of_orderness_is_allowed():
    gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.ZERO).create_watermark_generator()
    out = ListWatermarkOutput()
    gen.on_event(None, 50, out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [49]


def test_repr_reads_as_the_builder_chain():
    s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20)) \
        .with_idleness(Duration.of_minutes(1)).with_timestamp_assigner(FirstField())
    assert repr(s) == ("WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20))"
                       ".with_idleness(Duration.of_minutes(1))"
                       ".with_timestamp_assigner(FirstField())")


# ---------------------------------------------------------------------------------------
# user-defined generators and the checked output
# ---------------------------------------------------------------------------------------

def test_for_generator_builds_one_generator_per_call():
    s = WatermarkStrategy.for_generator(Punctuated)
    assert s.has_custom_generator() and not s.is_no_watermarks()
    assert not WatermarkStrategy.for_monotonous_timestamps().has_custom_generator()
    a, b = s.create_watermark_generator(), s.create_watermark_generator()
    assert isinstance(a, Punctuated) and a is not b


def test_for_generator_refuses_an_instance_and_a_factory_returning_junk():
    with pytest.raises(TypeError, match="pass its class"):
        WatermarkStrategy.for_generator(Punctuated())
    with pytest.raises(TypeError, match="not a WatermarkGenerator"):
        WatermarkStrategy.for_generator(lambda: 42).create_watermark_generator()


def test_for_generator_with_idleness_wraps_the_user_generator():
    clock = ManualClock()
    gen = WatermarkStrategy.for_generator(Punctuated).with_idleness(Duration.of_millis(10)) \
        .create_watermark_generator(clock)
    assert isinstance(gen, WatermarksWithIdleness) and isinstance(gen.watermarks, Punctuated)


def test_checked_output_forwards_advancing_watermarks_and_idleness():
    inner = ListWatermarkOutput()
    out = CheckedWatermarkOutput(inner, "src")
    Punctuated().on_events(list("abcd"), [0, 5, 5, 9], out)
    out.mark_idle()
    out.mark_active()
    assert inner.events == [("watermark", 0), ("watermark", 5), ("watermark", 9),
                            "idle", "active"]


def test_checked_output_refuses_a_watermark_going_back():
    out = CheckedWatermarkOutput(ListWatermarkOutput(), "my source")
    gen = WatermarkStrategy.for_generator(Punctuated).create_watermark_generator()
    gen.on_event("a", 100, out)
    with pytest.raises(ValueError, match="'my source'.*watermark 99 .*previous one, 100"):
        gen.on_event("b", 99, out)


@pytest.mark.parametrize("bad,message", [
    (-1, "watermark -1 is out of range"),
    (1 << 63, f"watermark {1 << 63} is out of range"),
    (1.5, r"watermark 1\.5 \(float\) is not an int"),
    (True, r"watermark True \(bool\) is not an int"),
    ("7", r"watermark '7' \(str\) is not an int"),
    (None, r"watermark None \(NoneType\) is not an int"),
])
def test_checked_output_refuses_bad_values_naming_operator_and_value(bad, message):
    inner = ListWatermarkOutput()
    out = CheckedWatermarkOutput(inner, "op-x")
    with pytest.raises(ValueError, match="operator 'op-x': " + message):
        out.emit_watermark(bad)
    assert inner.events == []


def test_checked_output_accepts_integral_types():
    class MyInt(int):
        pass
    inner = ListWatermarkOutput()
    CheckedWatermarkOutput(inner, "op").emit_watermark(MyInt(4))
    assert inner.events == [("watermark", 4)] and type(inner.events[0][1]) is int


# ---------------------------------------------------------------------------------------
# extract_timestamps
# ---------------------------------------------------------------------------------------

def test_extract_timestamps_passes_previous_timestamps_or_min():
    seen = []

    def assigner(value, record_timestamp):
        seen.append(record_timestamp)
        return value

    a = FunctionTimestampAssigner(assigner)
    assert extract_timestamps(a, [1, 2, 3], [10, None, 30], "op") == [1, 2, 3]
    assert seen == [10, MIN_WATERMARK, 30]
    seen.clear()
    assert extract_timestamps(a, [4, 5], None, "op") == [4, 5]
    assert seen == [MIN_WATERMARK, MIN_WATERMARK]


def test_extract_timestamps_with_a_class_assigner():
    assert extract_timestamps(FirstField(), [(5, "a"), (-3, "b")], None, "op") == [5, -3]


@pytest.mark.parametrize("bad,expect", [
    (1.0, r"returned 1\.0 \(float\) for record \(1\.0, 'r'\).*wrap it in int"),
    (True, r"returned True \(bool\) for record \(True, 'r'\)"),
    (None, r"returned None \(NoneType\) for record \(None, 'r'\)"),
    ("12", r"returned '12' \(str\) for record \('12', 'r'\)"),
])
def test_extract_timestamps_refuses_non_ints_naming_operator_record_and_value(bad, expect):
    records = [(1, "ok"), (bad, "r")]
    with pytest.raises(TypeError, match="operator 'parse'.*FirstField.*" + expect):
        extract_timestamps(FirstField(), records, None, "parse")


def test_extract_timestamps_converts_integral_types():
    class MyInt(int):
        pass
    got = extract_timestamps(FunctionTimestampAssigner(lambda v, ts: MyInt(v)), [7], None, "op")
    assert got == [7] and type(got[0]) is int


def test_extract_timestamps_names_a_lambda_assigner():
    a = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda v, ts: str(v)) \
        .create_timestamp_assigner()
    with pytest.raises(TypeError, match="timestamp assigner .*<lambda> returned '1'"):
        extract_timestamps(a, [1], None, "op")


def test_extract_timestamps_needs_one_previous_timestamp_per_record():
    with pytest.raises(ValueError, match="2 records but 1 previous"):
        extract_timestamps(FirstField(), [(1,), (2,)], [5], "op")
