"""The event-time DataStream API end to end on the in-process LocalExecutor (no Ray):
timestamps and watermarks, windows, side outputs and late data, BATCH equal to STREAMING,
and the errors of the API when the graph is built."""

import pytest

from flowray.common.time import Duration
from flowray.common.watermark_strategy import WatermarkGenerator, WatermarkStrategy
from flowray.datastream.execution_mode import RuntimeExecutionMode
from flowray.operators.functions import KeyedProcessFunction, ProcessFunction
from flowray.operators.output_tag import OutputTag
from flowray.operators.windowing.assigners import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from flowray.operators.windowing.functions import ProcessAllWindowFunction, ProcessWindowFunction
from flowray.runtime.graph.transformations import GraphError
from tests.support.environments import local_env

pytestmark = pytest.mark.timeout(60)

LATE = OutputTag("late")
ERRORS = OutputTag("errors")
SIDE = OutputTag("side")

# (key, value, timestamp), in timestamp order (no record is late whatever the watermarks)
EVENTS = [("a", 1, 1), ("b", 2, 3), ("a", 3, 8), ("b", 4, 9), ("a", 5, 12), ("c", 6, 14),
          ("a", 7, 19), ("b", 8, 20), ("c", 9, 25), ("a", 10, 31)]


def event_time(e, record_timestamp):
    return e[2]


def stamped(env, events=EVENTS, strategy=None, parallelism=None):
    strategy = strategy or WatermarkStrategy.for_monotonous_timestamps()
    out = env.from_collection(events).set_parallelism(1) \
        .assign_timestamps_and_watermarks(strategy.with_timestamp_assigner(event_time))
    return out if parallelism is None else out.set_parallelism(parallelism)


def add(x, y):
    return x[0], x[1] + y[1], max(x[2], y[2])


def window_sums(events, size, key=None):
    out = {}
    for k, v, t in events:
        w = (k if key is None else key, t - t % size)
        out[w] = out.get(w, 0) + v
    return out


def tumbling_sums(env):
    return sorted(stamped(env).key_by(lambda e: e[0])
                  .window(TumblingEventTimeWindows.of(10))
                  .reduce(add, lambda k, w, xs: [(k, w.start, next(iter(xs))[1])])
                  .execute_and_collect("tumbling"))


@pytest.mark.parametrize("parallelism", [1, 3])
def test_tumbling_window_reduce_end_to_end(parallelism):
    got = tumbling_sums(local_env(parallelism))
    assert got == sorted((k, start, s) for (k, start), s in window_sums(EVENTS, 10).items())
    assert got[:3] == [("a", 0, 4), ("a", 10, 12), ("a", 30, 10)]


class AtMarker(WatermarkGenerator):
    """Punctuated: the watermark 19 when the marker record (key "m") comes by, else none."""

    def on_event(self, event, event_timestamp, output):
        if event[0] == "m":
            output.emit_watermark(19)

    def on_periodic_emit(self, output):
        pass


def one_record_batches(parallelism):
    """Sources emit one record per batch: a punctuated watermark then falls between the
    records exactly where the generator emitted it, whatever the emission does within a
    batch."""
    return local_env(parallelism, **{"flowray.channel.batch-size": 1})


def test_late_data_of_a_window_through_get_side_output():
    env = one_record_batches(2)
    events = [("a", 1, 20), ("b", 2, 21), ("m", 0, 50), ("a", 3, 5), ("b", 4, 12),
              ("a", 5, 25), ("b", 6, 19), ("a", 7, 29)]
    windows = stamped(env, events, WatermarkStrategy.for_generator(AtMarker), parallelism=1) \
        .key_by(lambda e: e[0]) \
        .window(TumblingEventTimeWindows.of(10)) \
        .side_output_late_data(LATE) \
        .reduce(add)
    late = windows.get_side_output(LATE).map(lambda e: ("late", e))
    got = sorted(windows.map(lambda e: ("window", e)).union(late).execute_and_collect("late"))
    # after the watermark 19, [0, 10) and [10, 20) are gone: 5, 12 and 19 are late
    assert got == [("late", ("a", 3, 5)), ("late", ("b", 4, 12)), ("late", ("b", 6, 19)),
                   ("window", ("a", 13, 29)), ("window", ("b", 2, 21)),
                   ("window", ("m", 0, 50))]


class SeeWatermark(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value[1], ctx.timer_service().current_watermark()


class Route(ProcessFunction):
    """Everything to the main output, or everything to the side output ``SIDE``."""

    def __init__(self, to_side):
        self.to_side = to_side

    def process_element(self, value, ctx):
        yield (SIDE, value) if self.to_side else value


def watermarks_seen(to_side):
    env = one_record_batches(1)
    events = [("a", 1, 10), ("m", 0, 50), ("a", 2, 60)]
    stream = stamped(env, events, WatermarkStrategy.for_generator(AtMarker), parallelism=1) \
        .process(Route(to_side))
    if to_side:
        stream = stream.get_side_output(SIDE)
    return dict(stream.key_by(lambda e: e[0]).process(SeeWatermark())
                .execute_and_collect("watermarks"))


def test_watermarks_reach_the_consumers_of_the_main_output():
    assert watermarks_seen(to_side=False)[2] == 19  # 2@60 comes after the marker's 19


def test_watermarks_reach_the_consumers_of_a_side_output():
    assert watermarks_seen(to_side=True)[2] == 19


class Validate(ProcessFunction):
    def process_element(self, value, ctx):
        if value[1] % 3 == 0:
            yield ERRORS, (value, ctx.timestamp())
        else:
            yield value[1]


def test_side_output_of_a_process_function_end_to_end():
    env = local_env(2)
    processed = stamped(env).process(Validate())
    errors = sorted(processed.get_side_output(ERRORS).execute_and_collect("errors"))
    assert errors == [(e, e[2]) for e in EVENTS if e[1] % 3 == 0]
    env = local_env(2)
    main = sorted(stamped(env).process(Validate()).execute_and_collect("main"))
    assert main == [e[1] for e in EVENTS if e[1] % 3 != 0]


def test_get_side_output_needs_an_operator_and_a_tag():
    env = local_env(1)
    with pytest.raises(TypeError, match="OutputTag"):
        env.from_collection([1]).process(Validate()).get_side_output("errors")
    with pytest.raises(GraphError, match="get_side_output applies to the output of an operator"):
        env.from_collection([1]).rebalance().get_side_output(ERRORS)


class Everything(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield context.window().start, sorted(e[1] for e in elements)


def test_window_all_runs_at_parallelism_one():
    env = local_env(3)
    result = stamped(env).window_all(TumblingEventTimeWindows.of(10)).process(Everything())
    assert result._t.parallelism == 1
    got = sorted(result.execute_and_collect("all"))
    assert got == [(0, [1, 2, 3, 4]), (10, [5, 6, 7]), (20, [8, 9]), (30, [10])]


def test_count_window():
    env = local_env(2)
    got = sorted(env.from_collection(EVENTS).set_parallelism(1)
                 .key_by(lambda e: e[0]).count_window(2)
                 .reduce(lambda x, y: (x[0], x[1] + y[1], y[2]))
                 .execute_and_collect("count"))
    # a: 1,3 | 5,7 | (10 waits); b: 2,4 | (8 waits); c: 6,9
    assert got == [("a", 4, 8), ("a", 12, 19), ("b", 6, 9), ("c", 15, 25)]
    env = local_env(1)
    sliding = sorted(env.from_collection(EVENTS).key_by(lambda e: e[0])
                     .count_window(3, 2).apply(lambda k, w, xs: [(k, [x[1] for x in xs])])
                     .execute_and_collect("count-sliding"))
    assert sliding == [("a", [1, 3, 5]), ("a", [5, 7, 10]), ("b", [2, 4, 8])]  # c: 2 only


@pytest.mark.parametrize("method, args", [
    ("trigger", (object(),)), ("allowed_lateness", (10,)), ("side_output_late_data", (LATE,))])
def test_window_settings_on_a_plain_stream_raise(method, args):
    stream = local_env(1).from_collection([1]).map(lambda x: x)
    with pytest.raises(GraphError, match=rf"{method}\(\) applies to a windowed stream"):
        getattr(stream, method)(*args)


def test_allowed_lateness_must_be_a_non_negative_int():
    windowed = local_env(1).from_collection([("a", 1)]).key_by(lambda e: e[0]) \
        .window(TumblingEventTimeWindows.of(10))
    with pytest.raises(ValueError, match="must not be negative, got -1 ms"):
        windowed.allowed_lateness(-1)
    with pytest.raises(TypeError, match="allowed_lateness expects milliseconds"):
        windowed.allowed_lateness(1.5)
    assert windowed.allowed_lateness(0) is windowed
    processing = local_env(1).from_collection([("a", 1)]).key_by(lambda e: e[0]) \
        .window(TumblingProcessingTimeWindows.of(10))
    with pytest.raises(GraphError, match="allowed_lateness applies to event-time windows"):
        processing.allowed_lateness(5)
    assert processing.allowed_lateness(0) is processing


class KeyedDescribe(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key


def test_window_all_with_a_keyed_process_window_function_raises():
    stream = local_env(1).from_collection([("a", 1)])
    with pytest.raises(TypeError, match="KeyedDescribe cannot evaluate window_all"):
        stream.window_all(TumblingEventTimeWindows.of(10)).process(KeyedDescribe())


def test_trigger_needs_a_trigger():
    windowed = local_env(1).from_collection([("a", 1)]).key_by(lambda e: e[0]) \
        .window(EventTimeSessionWindows.with_gap(5))
    with pytest.raises(TypeError, match="trigger\\(\\) expects a Trigger"):
        windowed.trigger("count")


def batch_and_streaming(tmp_path, build):
    results = []
    for mode in (RuntimeExecutionMode.STREAMING, RuntimeExecutionMode.BATCH):
        env = local_env(2, **{"flowray.blocking-partitions.dir": str(tmp_path / mode.name)})
        env.set_runtime_mode(mode)
        results.append(sorted(build(env).execute_and_collect(mode.name)))
    return results


@pytest.mark.parametrize("shape", ["tumbling", "sliding", "sessions"])
def test_batch_window_results_equal_streaming(tmp_path, shape):
    assigner = {"tumbling": TumblingEventTimeWindows.of(10),
                "sliding": SlidingEventTimeWindows.of(10, 5),
                "sessions": EventTimeSessionWindows.with_gap(4)}[shape]

    def build(env):
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(3))
        return stamped(env, strategy=strategy).key_by(lambda e: e[0]).window(assigner) \
            .reduce(add, lambda k, w, xs: [(k, w.start, w.end, next(iter(xs))[1])])

    streaming, batch = batch_and_streaming(tmp_path, build)
    assert batch == streaming
    if shape == "sessions":
        assert ("a", 8, 16, 8) in batch  # 3@8 and 5@12 in one session
    else:
        assert ("a", 0, 10, 4) in batch
