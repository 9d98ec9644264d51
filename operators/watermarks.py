"""Event time at the edge of the job: timestamps from a ``WatermarkStrategy``'s assigner and
watermarks from its generator, in a source (``from_source(source, strategy)``) or after one
(``assign_timestamps_and_watermarks(strategy)``).

The generator sees every batch (``on_events``) and is asked for its periodic watermark
every ``pipeline.auto-watermark-interval`` of processing time, as in Flink.

>>> from flowray.common.watermark_strategy import WatermarkStrategy
>>> from flowray.operators.base import CollectingOutput
>>> out = CollectingOutput()
>>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
...     lambda value, ts: value[1])
>>> emission = WatermarkEmission(strategy, "ts", out, None, 0)
>>> emission.emit([("a", 5), ("b", 9)], None)
>>> emission.periodic_emit()
>>> out.timestamps, out.watermarks
([5, 9], [8])
"""

from __future__ import annotations

import time
from typing import Any, Callable, List, Optional

from flowray.common.constants import MAX_WATERMARK
from flowray.common.watermark_strategy import (
    CheckedWatermarkOutput,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
    extract_timestamps,
)

from flowray.operators.base import OneInputOperator, Output, UserFunctionError

__all__ = ["EmitTimes", "WatermarkEmission", "TimestampsAndWatermarksOperator",
           "check_watermark_strategy"]


def check_watermark_strategy(strategy: Any, where: str) -> Optional[WatermarkStrategy]:
    """``strategy`` if it is a :class:`WatermarkStrategy` (or ``None``), else a clear
    ``TypeError`` naming ``where``."""
    if strategy is None or isinstance(strategy, WatermarkStrategy):
        return strategy
    raise TypeError(f"{where}: expected a WatermarkStrategy (e.g. WatermarkStrategy."
                    f"for_bounded_out_of_orderness(Duration.of_seconds(1))), got {strategy!r}")


def _per_event(generator: Any) -> bool:
    """Whether ``generator`` (or the one an idleness wrapper holds) sees events one at a
    time (``on_event``) rather than overriding ``on_events`` for whole batches."""
    inner = getattr(generator, "watermarks", generator)
    return type(inner).on_events is WatermarkGenerator.on_events


class _OperatorWatermarkOutput(WatermarkOutput):
    """The generator's output: watermarks that advance, and idleness, go downstream."""

    def __init__(self, output: Output) -> None:
        self._output = output
        self.current: Optional[int] = None
        self.idle = False
        #: called before a watermark goes out (emits the records it was generated from)
        self.before_watermark: Optional[Callable[[], None]] = None

    def emit_watermark(self, timestamp: int) -> None:
        if self.current is not None and timestamp <= self.current:
            return
        self.current = timestamp
        if self.before_watermark is not None:
            self.before_watermark()
        if self.idle:
            self.mark_active()
        self._output.emit_watermark(timestamp)

    def mark_idle(self) -> None:
        if not self.idle:
            self.idle = True
            self._output.emit_watermark_status(True)

    def mark_active(self) -> None:
        if self.idle:
            self.idle = False
            self._output.emit_watermark_status(False)


class EmitTimes:
    """When a source last emitted a record with an event time, and that time (for Flink's
    ``currentEmitEventTimeLag``); updated once per batch, from its last record."""

    __slots__ = ("last_event_ms", "last_emit_ms", "_clock")

    def __init__(self, clock: Any) -> None:
        self.last_event_ms: Optional[int] = None
        self.last_emit_ms = 0
        self._clock = clock

    def record(self, timestamps: Optional[List[Any]]) -> None:
        if timestamps:
            last = timestamps[-1]
            if last is not None:
                self.last_event_ms = last
                self.last_emit_ms = (self._clock.now_ms() if self._clock is not None
                                     else int(time.time() * 1000))


class WatermarkEmission:
    """Stamps records and drives one subtask's watermark generator.

    ``emit(records, timestamps)`` assigns timestamps (records keep the ones they carry when
    the strategy has no assigner), feeds the generator and emits the records;
    ``periodic_emit()`` is the periodic hook; ``end()`` emits the final watermark.
    ``clock`` drives idleness (``None``: the system clock).
    """

    def __init__(self, strategy: WatermarkStrategy, operator_name: str, output: Output,
                 clock: Any, interval_ms: int) -> None:
        self.operator_name = operator_name
        self.output = output
        self.interval_ms = interval_ms
        self._assigner = strategy.create_timestamp_assigner()
        self._generator = strategy.create_watermark_generator(clock)
        self._wm_output = _OperatorWatermarkOutput(output)
        self.emit_times = EmitTimes(clock)
        #: a user's generator may emit from on_event (punctuated): records one by one,
        #: unless it takes whole batches (overrides on_events)
        self._punctuated = strategy.has_custom_generator() and _per_event(self._generator)
        self._gen_output: WatermarkOutput = (
            CheckedWatermarkOutput(self._wm_output, operator_name)
            if strategy.has_custom_generator() else self._wm_output)

    def emit(self, records: List[Any], timestamps: Optional[List[Any]]) -> None:
        """Stamp and emit ``records``, then show them to the generator: a watermark it
        emits for them follows them downstream (as Flink's emit-then-``onEvent``)."""
        if not records:
            return
        if self._assigner is not None:
            timestamps = extract_timestamps(self._assigner, records, timestamps,
                                            self.operator_name)
        self.emit_times.record(timestamps)
        if self._punctuated and timestamps is not None:
            self._emit_record_by_record(records, timestamps)
            return
        if self._assigner is not None:
            self.output.emit(records, timestamps)
            self._generator.on_events(records, timestamps, self._gen_output)
            return
        self.output.emit(records, timestamps)
        if timestamps is not None:
            stamped = [(r, t) for r, t in zip(records, timestamps) if t is not None]
            if stamped:
                self._generator.on_events([r for r, _ in stamped], [t for _, t in stamped],
                                          self._gen_output)

    @property
    def output_watermark(self) -> Optional[int]:
        """The last watermark emitted (``None``: none yet)."""
        return self._wm_output.current

    def _emit_record_by_record(self, records: List[Any], timestamps: List[Any]) -> None:
        """A user's generator may emit a watermark from ``on_event``: it must follow
        exactly the records before it, so records go out in runs between watermarks."""
        pending: List[Any] = []
        pending_ts: List[Any] = []

        def flush() -> None:
            if pending:
                self.output.emit(list(pending), list(pending_ts))
                pending.clear()
                pending_ts.clear()

        self._wm_output.before_watermark = flush
        try:
            on_event, out = self._generator.on_event, self._gen_output
            for r, t in zip(records, timestamps):
                pending.append(r)
                pending_ts.append(t)
                if t is not None:
                    on_event(r, t, out)
            flush()
        finally:
            self._wm_output.before_watermark = None

    def periodic_emit(self) -> None:
        self._generator.on_periodic_emit(self._gen_output)

    def end(self) -> None:
        """The input ended: the final watermark (every event-time timer fires)."""
        self._wm_output.emit_watermark(MAX_WATERMARK)


class TimestampsAndWatermarksOperator(OneInputOperator):
    """``DataStream.assign_timestamps_and_watermarks(strategy)``: upstream watermarks are
    dropped (this operator's generator decides event time from here on), except the final
    one of a bounded input."""

    default_name = "Timestamps/Watermarks"

    def __init__(self, strategy: WatermarkStrategy, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.strategy = check_watermark_strategy(strategy, "assign_timestamps_and_watermarks")

    def user_functions(self) -> List[Any]:
        return [self.strategy]

    def open(self) -> None:
        ctx = self.ctx
        interval = 0 if ctx.batch_execution else ctx.auto_watermark_interval_ms
        self._emission = WatermarkEmission(self.strategy, self.name, self.output,
                                           ctx.processing_time_service.clock, interval)
        self._pts = ctx.processing_time_service
        if interval > 0:
            self._pts.register_timer(self._pts.current_processing_time() + interval,
                                     self._on_periodic)

    def _on_periodic(self, timestamp: int) -> None:
        try:
            self._emission.periodic_emit()
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e
        self._pts.register_timer(self._pts.current_processing_time()
                                 + self._emission.interval_ms, self._on_periodic)

    def process_batch(self, records, key_groups, timestamps=None):
        try:
            self._emission.emit(records, timestamps)
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def process_watermark(self, timestamp: int, input_index: int = 0) -> None:
        if timestamp == MAX_WATERMARK:
            self._emission.end()

    def process_watermark_status(self, idle: bool, input_index: int = 0) -> None:
        pass  # this operator's generator decides idleness
