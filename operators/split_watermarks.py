"""Watermarks generated per split, as Flink's per-partition watermarks in a ``KafkaSource``
(``SourceOutputWithWatermarks`` + ``WatermarkOutputMultiplexer``).

A source subtask that reads several splits (Kafka partitions) whose event times advance at
different speeds must not let the fastest split move the watermark past events still to
come from a slower one. So each split gets a generator of its own (from the same
:class:`~flowray.common.watermark_strategy.WatermarkStrategy`), and the subtask's watermark
is the minimum over its splits that are not idle. A split marked idle by ``with_idleness``
no longer holds the watermark back; when every split is idle (or the subtask has no split
at all) the subtask is idle, so downstream operators ignore it. A finished split leaves the
minimum.

>>> from flowray.common.watermark_strategy import WatermarkStrategy
>>> from flowray.operators.base import CollectingOutput
>>> out = CollectingOutput()
>>> mux = SplitWatermarkMultiplexer(WatermarkStrategy.for_monotonous_timestamps(), "src",
...                                 out, None)
>>> mux.set_splits(["p0", "p1"])
>>> mux.emit("p0", ["a", "b"], [10, 20])
>>> mux.periodic_emit()           # p1 has no watermark yet: none goes out
>>> out.watermarks
[]
>>> mux.emit("p1", ["c"], [15])
>>> mux.periodic_emit()           # min(19, 14)
>>> out.watermarks
[14]
>>> mux.split_finished("p1")      # a finished split no longer holds p0 back
>>> out.watermarks
[14, 19]
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

from flowray.common.constants import MAX_WATERMARK
from flowray.common.watermark_strategy import (
    CheckedWatermarkOutput,
    WatermarkOutput,
    WatermarkStrategy,
    extract_timestamps,
)

from flowray.operators.base import Output
from flowray.operators.watermarks import EmitTimes, _OperatorWatermarkOutput

__all__ = ["SplitWatermarkMultiplexer"]


class _SplitOutput(WatermarkOutput):
    """One split's generator output: remembers its watermark and idleness."""

    __slots__ = ("watermark", "idle", "_changed")

    def __init__(self, changed: Any) -> None:
        self.watermark: Optional[int] = None
        self.idle = False
        self._changed = changed

    def emit_watermark(self, timestamp: int) -> None:
        if self.watermark is None or timestamp > self.watermark or self.idle:
            if self.watermark is None or timestamp > self.watermark:
                self.watermark = timestamp
            self.idle = False
            self._changed()

    def mark_idle(self) -> None:
        if not self.idle:
            self.idle = True
            self._changed()

    def mark_active(self) -> None:
        if self.idle:
            self.idle = False
            self._changed()


class SplitWatermarkMultiplexer:
    """Stamps a source subtask's records and combines per-split watermarks.

    ``set_splits(ids)`` declares the splits the subtask reads now (new ones get a
    generator; ones no longer listed are dropped); ``emit(split, records, timestamps)``
    stamps ``records`` (the strategy's assigner sees each record with its ``timestamps``
    entry, e.g. the Kafka record's timestamp) and emits them, then shows them to the split's
    generator; ``periodic_emit()`` asks every generator for its periodic watermark;
    ``split_finished(split)`` drops a split that has ended; ``end()`` emits the final
    watermark. ``clock`` drives idleness (``None``: the system clock).
    """

    def __init__(self, strategy: WatermarkStrategy, operator_name: str, output: Output,
                 clock: Any) -> None:
        self.strategy = strategy
        self.operator_name = operator_name
        self.output = output
        self.clock = clock
        self._assigner = strategy.create_timestamp_assigner()
        self._custom = strategy.has_custom_generator()
        self._generators: Dict[Any, Any] = {}
        self._outputs: Dict[Any, _SplitOutput] = {}
        self._gen_outputs: Dict[Any, WatermarkOutput] = {}
        self._out = _OperatorWatermarkOutput(output)
        self._combining = False
        self.emit_times = EmitTimes(clock)

    @property
    def output_watermark(self) -> Optional[int]:
        """The last watermark emitted (``None``: none yet)."""
        return self._out.current

    # -- splits --------------------------------------------------------------------------
    def set_splits(self, split_ids: Iterable[Any]) -> None:
        wanted = list(split_ids)
        for sid in wanted:
            if sid not in self._generators:
                self._generators[sid] = self.strategy.create_watermark_generator(self.clock)
                out = _SplitOutput(self._combine)
                self._outputs[sid] = out
                self._gen_outputs[sid] = (CheckedWatermarkOutput(out, self.operator_name)
                                          if self._custom else out)
        keep = set(wanted)
        for sid in [s for s in self._generators if s not in keep]:
            self._drop(sid)
        self._combine()

    def split_finished(self, split_id: Any) -> None:
        if split_id in self._generators:
            self._drop(split_id)
            self._combine()

    def _drop(self, split_id: Any) -> None:
        del self._generators[split_id]
        del self._outputs[split_id]
        del self._gen_outputs[split_id]

    @property
    def split_ids(self) -> List[Any]:
        return list(self._generators)

    # -- records and watermarks ----------------------------------------------------------
    def emit(self, split_id: Any, records: List[Any], timestamps: Optional[List[Any]]) -> None:
        if not records:
            return
        if self._assigner is not None:
            timestamps = extract_timestamps(self._assigner, records, timestamps,
                                            self.operator_name)
        self.output.emit(records, timestamps)
        self.emit_times.record(timestamps)
        generator = self._generators.get(split_id)
        if generator is None:  # a split the reader did not announce: track it from now on
            self.set_splits(list(self._generators) + [split_id])
            generator = self._generators[split_id]
        if timestamps is not None:
            generator.on_events(records, timestamps, self._gen_outputs[split_id])

    def periodic_emit(self) -> None:
        self._combining = True  # one combination after every generator has spoken
        try:
            for sid, generator in list(self._generators.items()):
                generator.on_periodic_emit(self._gen_outputs[sid])
        finally:
            self._combining = False
        self._combine()

    def end(self) -> None:
        self._out.emit_watermark(MAX_WATERMARK)

    def _combine(self) -> None:
        if self._combining:
            return
        active = [o for o in self._outputs.values() if not o.idle]
        if not active:
            self._out.mark_idle()  # every split idle, or none assigned
            return
        lowest = None
        for o in active:
            if o.watermark is None:
                if self._out.idle:
                    self._out.mark_active()
                return
            if lowest is None or o.watermark < lowest:
                lowest = o.watermark
        if lowest is not None:
            if self._out.idle:
                self._out.mark_active()
            self._out.emit_watermark(lowest)
