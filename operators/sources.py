"""Sources written in Python: a picklable :class:`Source` definition and the per-subtask
:class:`SourceReader` it creates.

A reader hands out records a batch at a time; ``None`` means the input has ended (bounded
sources), an empty list means nothing is available right now.

>>> reader = NumberSequenceSource(1, 10).create_reader(SourceReaderContext(1, 2))
>>> reader.poll_next(100)
[6, 7, 8, 9, 10]
>>> reader.poll_next(100) is None
True
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from flowray.state.descriptors import ListStateDescriptor

from flowray.common.constants import MAX_WATERMARK
from flowray.common.watermark_strategy import WatermarkStrategy
from flowray.operators.base import (
    StateInitializationContext,
    StateSnapshotContext,
    StreamOperator,
    UserFunctionError,
)
from flowray.operators.watermarks import WatermarkEmission, check_watermark_strategy

_READER_STATE = "source-reader-state"

__all__ = [
    "Boundedness",
    "SourceReaderContext",
    "Source",
    "SourceReader",
    "CollectionSource",
    "NumberSequenceSource",
    "SourceOperator",
]


class Boundedness(enum.Enum):
    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


@dataclass(frozen=True)
class SourceReaderContext:
    subtask_index: int
    parallelism: int


class SourceReader(abc.ABC):
    @abc.abstractmethod
    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        """Up to ``max_records`` records; ``[]`` if none now; ``None`` once ended."""

    def snapshot_state(self) -> Any:
        """The reader's position (checkpointed from the checkpoint issue on)."""
        return None

    def restore_state(self, state: Any) -> None:
        pass

    def close(self) -> None:
        pass


class Source(abc.ABC):
    """A picklable source definition; each subtask gets its own reader."""

    default_name = "Custom Source"

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    @abc.abstractmethod
    def create_reader(self, context: SourceReaderContext) -> SourceReader: ...


def _split(n: int, parallelism: int, index: int) -> range:
    """Contiguous share ``index`` of ``range(n)`` split ``parallelism`` ways."""
    start = n * index // parallelism
    end = n * (index + 1) // parallelism
    return range(start, end)


class _ListReader(SourceReader):
    def __init__(self, items: Sequence[Any]) -> None:
        self._items = items
        self._pos = 0

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        if self._pos >= len(self._items):
            return None
        batch = list(self._items[self._pos:self._pos + max_records])
        self._pos += len(batch)
        return batch

    def snapshot_state(self) -> Any:
        return self._pos

    def restore_state(self, state: Any) -> None:
        self._pos = int(state)


class CollectionSource(Source):
    """The items of a Python collection, split in contiguous shares over subtasks."""

    default_name = "Collection Source"

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        share = _split(len(self.items), context.parallelism, context.subtask_index)
        return _ListReader(self.items[share.start:share.stop])


class _RangeReader(SourceReader):
    def __init__(self, start: int, end_exclusive: int) -> None:
        self._next = start
        self._end = end_exclusive

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        if self._next >= self._end:
            return None
        stop = min(self._end, self._next + max_records)
        batch = list(range(self._next, stop))
        self._next = stop
        return batch

    def snapshot_state(self) -> Any:
        return self._next

    def restore_state(self, state: Any) -> None:
        self._next = int(state)


class NumberSequenceSource(Source):
    """The integers ``start..end`` inclusive, as PyFlink's ``NumberSequenceSource``."""

    default_name = "Sequence Source"

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"NumberSequenceSource: end {end} < start {start}")
        self.start, self.end = int(start), int(end)

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        share = _split(self.end - self.start + 1, context.parallelism, context.subtask_index)
        return _RangeReader(self.start + share.start, self.start + share.stop)


class SourceOperator(StreamOperator):
    """Head of a source task: polls its reader and emits what it returns."""

    default_name = "Source"
    num_inputs = 0

    def __init__(self, source: Source, name: Optional[str] = None,
                 watermark_strategy: Optional[WatermarkStrategy] = None) -> None:
        super().__init__(name or f"Source: {getattr(source, 'default_name', 'Custom Source')}")
        if not isinstance(source, Source):
            raise TypeError(f"from_source expects a flowray Source, got {source!r}")
        self.source = source
        self.watermark_strategy = check_watermark_strategy(watermark_strategy, "from_source")
        self._watermarks = []

    def user_functions(self) -> List[Any]:
        return [self.source] + ([self.watermark_strategy] if self.watermark_strategy else [])

    def initialize_state(self, context: StateInitializationContext) -> None:
        """The reader's position lives in operator list state (one element per subtask)."""
        self._position = context.get_operator_state_store().get_list_state(
            ListStateDescriptor(_READER_STATE))
        restored = list(self._position.get()) if context.is_restored() else []
        self._restored_position = restored

    def open(self) -> None:
        self._emission: Optional[WatermarkEmission] = None
        strategy = self.watermark_strategy
        if strategy is not None and not strategy.is_no_watermarks() or (
                strategy is not None and strategy.has_timestamp_assigner()):
            ctx = self.ctx
            interval = 0 if ctx.batch_execution else ctx.auto_watermark_interval_ms
            self._emission = WatermarkEmission(strategy, self.name, self.output,
                                               ctx.processing_time_service.clock, interval)
            self._next_periodic = (ctx.processing_time_service.clock.monotonic_ms() + interval
                                   if interval > 0 else None)
        try:
            self.reader = self.source.create_reader(
                SourceReaderContext(self.ctx.subtask_index, self.ctx.parallelism))
            restored = getattr(self, "_restored_position", None)
            if restored:
                if len(restored) != 1:
                    raise ValueError(f"expected one reader position to restore, got "
                                     f"{len(restored)} (was the source rescaled?)")
                self.reader.restore_state(restored[0])
        except Exception as e:
            raise self.user_error(e) from e

    def snapshot_state(self, context: StateSnapshotContext) -> None:
        try:
            position = self.reader.snapshot_state()
        except Exception as e:
            raise self.user_error(e) from e
        self._position.update([position])

    def emit_next(self, max_records: int) -> Optional[int]:
        """Emit one batch; the number emitted, or ``None`` when the source has ended."""
        try:
            batch = self.reader.poll_next(max_records)
        except Exception as e:
            raise self.user_error(e) from e
        if batch is None:
            return None
        emission = self._emission
        if emission is None:
            if batch:
                self.output.emit(batch)
            return len(batch)
        try:
            emission.emit(batch, None)
            next_periodic = self._next_periodic
            if next_periodic is not None:
                now = self.ctx.processing_time_service.clock.monotonic_ms()
                if now >= next_periodic:
                    emission.periodic_emit()
                    self._next_periodic = now + emission.interval_ms
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e
        return len(batch)

    def end_of_input(self) -> None:
        """The reader ended: the final watermark (``MAX_WATERMARK``)."""
        if self._emission is not None:
            self._emission.end()
        else:
            self.output.emit_watermark(MAX_WATERMARK)

    def close(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.close()
