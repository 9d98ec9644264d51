"""``WindowedStream`` (``key_by(...).window(assigner)``) and ``AllWindowedStream``
(``window_all(assigner)``), as PyFlink's: set the trigger, allowed lateness and late-data side
output, then evaluate with ``reduce``, ``aggregate``, ``apply`` or ``process``.

>>> from flowray.common import Configuration, WatermarkStrategy
>>> from flowray.datastream import StreamExecutionEnvironment
>>> from flowray.datastream.window import TumblingEventTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> events = env.from_collection([("a", 1), ("a", 4), ("b", 6), ("a", 7)])
>>> stamped = events.assign_timestamps_and_watermarks(
...     WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
...         lambda e, ts: e[1]))
>>> sums = stamped.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(5)) \\
...     .reduce(lambda x, y: (x[0], x[1] + y[1]))
>>> sorted(sums.execute_and_collect())
[('a', 5), ('a', 7), ('b', 6)]
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Optional

from flowray.operators.output_tag import OutputTag
from flowray.operators.window_operator import PaneContents, WindowOperator
from flowray.operators.windowing.assigners import WindowAssigner
from flowray.operators.windowing.functions import internal_window_function
from flowray.operators.windowing.triggers import Trigger
from flowray.datastream.function_checks import check_reduce_function
from flowray.runtime.graph.transformations import GraphError

if TYPE_CHECKING:
    from flowray.datastream.data_stream import DataStream

__all__ = ["WindowedStream", "AllWindowedStream", "all_window_key"]


def all_window_key(record: Any) -> int:
    """The one key of ``window_all``: every record in one group (parallelism 1)."""
    return 0


def _lateness_ms(value: Any) -> int:
    ms = value.to_milliseconds() if callable(getattr(value, "to_milliseconds", None)) else value
    if isinstance(ms, bool) or not isinstance(ms, numbers.Integral):
        raise TypeError(f"allowed_lateness expects milliseconds (an int) or a Time, got "
                        f"{value!r}")
    if ms < 0:
        raise ValueError(f"allowed_lateness must not be negative, got {ms} ms")
    return int(ms)


class _Windowed:
    """What ``WindowedStream`` and ``AllWindowedStream`` share."""

    _keyed = True

    def __init__(self, input_stream: "DataStream", key_selector: Any,
                 window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(f"window() expects a WindowAssigner (e.g. TumblingEventTimeWindows"
                            f".of(Time.seconds(5))), got {window_assigner!r}")
        self._input = input_stream
        self._key_selector = key_selector
        self._assigner = window_assigner
        self._trigger: Optional[Trigger] = None
        self._allowed_lateness = 0
        self._late_tag: Optional[OutputTag] = None

    def get_execution_environment(self) -> Any:
        return self._input._env

    def get_input_type(self) -> Any:
        """The declared type of the windowed stream's records."""
        return self._input.get_type()

    def trigger(self, trigger: Trigger) -> Any:
        if not isinstance(trigger, Trigger):
            raise TypeError(f"trigger() expects a Trigger (e.g. CountTrigger.of(3)), got "
                            f"{trigger!r}")
        self._trigger = trigger
        return self

    def allowed_lateness(self, time_ms: Any) -> Any:
        """Keep windows ``time_ms`` past their end for late records (each re-fires the
        window); later records are late data."""
        lateness = _lateness_ms(time_ms)
        if lateness and not self._assigner.is_event_time():
            raise GraphError(f"allowed_lateness applies to event-time windows; "
                             f"{self._assigner!r} is a processing-time assigner")
        self._allowed_lateness = lateness
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> Any:
        """Send records that arrive after their windows were cleaned up to ``output_tag``
        (read it with ``get_side_output(output_tag)`` on the result)."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data expects an OutputTag, got {output_tag!r}")
        self._late_tag = output_tag
        return self

    def _build(self, contents: PaneContents, window_function: Any, style: Optional[str],
               name: str, output_type: Any = None) -> "DataStream":
        single_value = contents.kind != "list"
        internal = internal_window_function(window_function, keyed=self._keyed,
                                            single_value=single_value, style=style)
        trigger = self._trigger or self._assigner.get_default_trigger(self._input._env)
        op = WindowOperator(self._assigner, trigger, contents, internal, self._key_selector,
                            self._allowed_lateness, self._late_tag,
                            name=f"Window({self._assigner!r}, {trigger!r}, {name})")
        keeps_type = output_type is None and window_function is None \
            and contents.kind == "reduce"   # a plain reduce emits its input's type
        result = self._input._one_input(op, output_type, keeps_type)
        if not self._keyed:
            result._t.parallelism = 1
        return result

    def reduce(self, reduce_function: Any, window_function: Any = None,
               output_type: Any = None) -> "DataStream":
        """Reduce each pane incrementally; ``window_function`` (optional) gets the one
        reduced value with the window."""
        check_reduce_function(reduce_function, "reduce()")
        return self._build(PaneContents("reduce", reduce_function), window_function, None,
                           "reduce", output_type)

    def aggregate(self, aggregate_function: Any, window_function: Any = None,
                  accumulator_type: Any = None, output_type: Any = None) -> "DataStream":
        """Aggregate each pane incrementally with an ``AggregateFunction``."""
        for m in ("create_accumulator", "add", "get_result"):
            if not callable(getattr(aggregate_function, m, None)):
                raise TypeError(f"aggregate() expects an AggregateFunction; "
                                f"{aggregate_function!r} has no {m}()")
        return self._build(PaneContents("aggregate", aggregate_function), window_function,
                           None, "aggregate", output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> "DataStream":
        return self._build(PaneContents("list"), window_function, "apply", "apply",
                           output_type)

    def process(self, process_window_function: Any, output_type: Any = None) -> "DataStream":
        return self._build(PaneContents("list"), process_window_function, "process",
                           "process", output_type)


class WindowedStream(_Windowed):
    """A keyed stream grouped into windows (``KeyedStream.window(assigner)``)."""


class AllWindowedStream(_Windowed):
    """A non-keyed stream grouped into windows (``DataStream.window_all(assigner)``); runs
    at parallelism 1, as in Flink."""

    _keyed = False
