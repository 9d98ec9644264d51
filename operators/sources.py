"""Sources written in Python: a picklable :class:`Source` definition and the per-subtask
:class:`SourceReader` it creates.

A reader hands out records a batch at a time; ``None`` means the input has ended (bounded
sources), an empty list means nothing is available right now.

Split-based sources (Flink's FLIP-27 shape) can be restored at another parallelism:
:meth:`Source.create_splits` cuts the input into splits when a job starts without state,
each subtask's reader gets some through :meth:`SourceReader.add_splits`, and its
``snapshot_state()`` returns the splits it still holds, each carrying its own progress.
Those split states are what a checkpoint keeps; on restore they are dealt to the new
subtasks (even split), so nothing is read twice or lost. A source that does not override
``create_splits`` keeps one opaque position per subtask and must be restored at the
parallelism it ran with.

>>> source = NumberSequenceSource(1, 10)
>>> reader = source.create_reader(SourceReaderContext(1, 2))
>>> reader.add_splits(source.create_splits(2)[1::2])
>>> reader.poll_next(100)
[6, 7, 8, 9, 10]
>>> reader.poll_next(100) is None
True
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence

from flowray.state.descriptors import ListStateDescriptor

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.common.watermark_strategy import WatermarkStrategy
from flowray.operators.base import (
    StateInitializationContext,
    StateSnapshotContext,
    StreamOperator,
    UserFunctionError,
)
from flowray.operators.split_watermarks import SplitWatermarkMultiplexer
from flowray.operators.watermarks import WatermarkEmission, check_watermark_strategy

_READER_STATE = "source-reader-state"
_SPLIT_STATE = "source-splits"

__all__ = [
    "Boundedness",
    "SourceReaderContext",
    "Source",
    "SourceReader",
    "SplitBatch",
    "SplitOutputReader",
    "SourceRescaleError",
    "ShareOrSplitReader",
    "IndexRangeSplit",
    "CollectionSource",
    "NumberSequenceSource",
    "SourceOperator",
]


class Boundedness(enum.Enum):
    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


@dataclass(frozen=True)
class SourceReaderContext:
    """``restored``: the subtask restores a checkpoint (its splits come through
    ``add_splits``); ``config``: the job's configuration (Flink keys -> values);
    ``metric_group``: the source operator's metric group, where a reader registers its
    own metrics (Flink's ``SourceReaderContext.metricGroup()``, e.g. ``pendingRecords``),
    or ``None`` when metrics are off."""

    subtask_index: int
    parallelism: int
    restored: bool = False
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)
    metric_group: Optional[Any] = field(default=None, compare=False)


class SourceRescaleError(ValueError):
    """A source's checkpointed position cannot be given to the subtasks of a restore."""


class SourceReader(abc.ABC):
    """Reads one subtask's share of a source.

    Contract: ``poll_next`` is called from the task thread only; ``snapshot_state`` is
    called between two ``poll_next`` calls and must describe exactly what the next
    ``poll_next`` would return (records before it are in the checkpoint, records after it
    are not). For a split-based source it returns a list with one picklable element per
    split the reader still holds (finished splits may be left out); otherwise any
    picklable position, given back to :meth:`restore_state`.
    """

    @abc.abstractmethod
    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        """Up to ``max_records`` records; ``[]`` if none now; ``None`` once ended."""

    def add_splits(self, splits: List[Any]) -> None:
        """Split-based sources: read ``splits`` (new ones, or split states restored from a
        checkpoint, as ``snapshot_state`` returned them)."""
        raise NotImplementedError(
            f"{type(self).__name__}.add_splits: the source creates splits, so its reader "
            "must accept them")

    def snapshot_state(self) -> Any:
        """The reader's position (split-based: a list of split states)."""
        return None

    def restore_state(self, state: Any) -> None:
        """Not split-based: rewind to a position ``snapshot_state`` returned."""

    def close(self) -> None:
        pass


@dataclass
class SplitBatch:
    """Records of one split, in the split's order, with their timestamps (``None``: the
    records carry none); ``finished``: the split has ended with these records."""

    split_id: Any
    records: List[Any]
    timestamps: Optional[List[Any]] = None
    finished: bool = False


class SplitOutputReader(SourceReader):
    """A reader whose records say which split they come from, so the source can generate
    watermarks per split (Kafka partitions) and carry the records' own timestamps.

    ``poll_split_batches`` replaces ``poll_next``: ``None`` once every split has ended,
    ``[]`` when nothing is available now, else one :class:`SplitBatch` per split that had
    records (or ended). ``split_ids()`` lists the splits the reader reads now, and
    ``splits_version`` changes whenever that list does.
    """

    splits_version = 0

    @abc.abstractmethod
    def poll_split_batches(self, max_records: int) -> Optional[List[SplitBatch]]: ...

    @abc.abstractmethod
    def split_ids(self) -> List[Any]: ...

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        batches = self.poll_split_batches(max_records)
        if batches is None:
            return None
        return [r for b in batches for r in b.records]

    def checkpoint_taken(self, checkpoint_id: int, state: Any) -> None:
        """``state`` (what ``snapshot_state`` just returned) is in checkpoint
        ``checkpoint_id``."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed."""


class Source(abc.ABC):
    """A picklable source definition; each subtask gets its own reader.

    ``union_split_state = True``: on restore every subtask's reader is given every
    checkpointed split (union redistribution) and keeps the ones it owns; the source then
    decides ownership itself (Kafka: Flink's owner function of topic and partition), which
    keeps a split discovered at run time with exactly one reader across rescaling.
    """

    default_name = "Custom Source"
    union_split_state = False

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_splits(self, parallelism: int) -> Optional[List[Any]]:
        """The splits of a job that starts without state; split ``j`` goes to subtask
        ``j % parallelism``. ``None`` (the default): not split-based."""
        return None

    @abc.abstractmethod
    def create_reader(self, context: SourceReaderContext) -> SourceReader: ...


class ShareOrSplitReader(SourceReader):
    """A reader that reads the splits given to it, or, when its first call is not
    ``add_splits``, the share its source computed for its subtask (readers used directly,
    and positions saved before the source had splits). The first call decides;
    ``_read_own_share()`` sets the reader up for its share."""

    #: the source's name in error messages
    source_label = "source"
    _split_based: Optional[bool] = None

    def _read_own_share(self) -> None:
        raise NotImplementedError

    def _mode(self, split_based: bool, what: str) -> None:
        if self._split_based is None:
            self._split_based = split_based
            if not split_based:
                self._read_own_share()
        elif self._split_based != split_based:
            raise RuntimeError(
                f"{self.source_label}: {what} on a reader that "
                + ("was given splits (restore it through add_splits)" if self._split_based
                   else "already reads its share without splits"))


@dataclass(frozen=True)
class IndexRangeSplit:
    """Items ``next..end - 1`` of an indexed input (a collection, a number sequence);
    ``next`` is the progress."""

    next: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.next)


def index_range_splits(n: int, parallelism: int) -> List[IndexRangeSplit]:
    """``range(n)`` cut in ``parallelism`` contiguous splits as even as possible."""
    return [IndexRangeSplit(r.start, r.stop) for r in
            (_split(n, parallelism, i) for i in range(parallelism))]


class IndexRangeReader(SourceReader):
    """Reads its :class:`IndexRangeSplit` s in the order they were added; ``item(i)`` is
    the record at index ``i``. Subclasses may override :meth:`read` to read a run."""

    def __init__(self) -> None:
        self._splits: List[List[int]] = []  # [next, end] per split, in order

    def add_splits(self, splits: List[Any]) -> None:
        for split in splits:
            if not isinstance(split, IndexRangeSplit):
                raise TypeError(f"{type(self).__name__}: expected IndexRangeSplit, got "
                                f"{split!r}")
            self._splits.append([split.next, split.end])

    def read(self, start: int, stop: int) -> List[Any]:
        raise NotImplementedError

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        splits = self._splits
        while splits and splits[0][0] >= splits[0][1]:
            splits.pop(0)
        if not splits:
            return None
        head = splits[0]
        stop = min(head[1], head[0] + max_records)
        batch = self.read(head[0], stop)
        head[0] = stop
        return batch

    def snapshot_state(self) -> List[IndexRangeSplit]:
        return [IndexRangeSplit(a, b) for a, b in self._splits if a < b]


def _split(n: int, parallelism: int, index: int) -> range:
    """Contiguous share ``index`` of ``range(n)`` split ``parallelism`` ways."""
    start = n * index // parallelism
    end = n * (index + 1) // parallelism
    return range(start, end)


class _ListReader(IndexRangeReader):
    def __init__(self, items: Sequence[Any]) -> None:
        super().__init__()
        self._items = items

    def read(self, start: int, stop: int) -> List[Any]:
        return list(self._items[start:stop])


class CollectionSource(Source):
    """The items of a Python collection, split in contiguous shares over subtasks."""

    default_name = "Collection Source"

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def create_splits(self, parallelism: int) -> List[IndexRangeSplit]:
        return index_range_splits(len(self.items), parallelism)

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return _ListReader(self.items)


class _RangeReader(IndexRangeReader):
    def __init__(self, start: int) -> None:
        super().__init__()
        self._start = start

    def read(self, start: int, stop: int) -> List[Any]:
        return list(range(self._start + start, self._start + stop))


class NumberSequenceSource(Source):
    """The integers ``start..end`` inclusive, as PyFlink's ``NumberSequenceSource``."""

    default_name = "Sequence Source"

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"NumberSequenceSource: end {end} < start {start}")
        self.start, self.end = int(start), int(end)

    def create_splits(self, parallelism: int) -> List[IndexRangeSplit]:
        return index_range_splits(self.end - self.start + 1, parallelism)

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return _RangeReader(self.start)


@dataclass(frozen=True)
class _SubtaskPosition:
    """The position of a reader of a source that is not split-based, with the subtask
    and parallelism it belongs to (so a rescaled restore is refused, not misread)."""

    subtask_index: int
    parallelism: int
    position: Any


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
        """The reader's position lives in operator list state: one element per split
        (split-based sources, dealt out again on rescale) or one per subtask."""
        store = context.get_operator_state_store()
        self._split_state = (
            store.get_union_list_state(ListStateDescriptor(_SPLIT_STATE))
            if getattr(self.source, "union_split_state", False)
            else store.get_list_state(ListStateDescriptor(_SPLIT_STATE)))
        self._position = store.get_list_state(ListStateDescriptor(_READER_STATE))
        restored = context.is_restored()
        self._restored_splits = list(self._split_state.get()) if restored else None
        self._restored_position = list(self._position.get()) if restored else []

    def open(self) -> None:
        self._emission: Optional[WatermarkEmission] = None
        self._split_mux: Optional[SplitWatermarkMultiplexer] = None
        ctx = self.ctx
        group = ctx.metrics.operator_group(self.name) if ctx.metrics is not None else None
        if group is not None:
            group.gauge("currentEmitEventTimeLag", self.emit_event_time_lag_ms)
            group.gauge("currentOutputWatermark", self.output_watermark)
        try:
            restored = (getattr(self, "_restored_splits", None) is not None
                        or bool(getattr(self, "_restored_position", None)))
            self.reader = self.source.create_reader(
                SourceReaderContext(ctx.subtask_index, ctx.parallelism, restored,
                                    dict(ctx.config), group))
        except Exception as e:
            raise self.user_error(e) from e
        self._per_split = isinstance(self.reader, SplitOutputReader)
        self._splits_version = None
        strategy = self.watermark_strategy
        if strategy is not None and not strategy.is_no_watermarks() or (
                strategy is not None and strategy.has_timestamp_assigner()):
            interval = 0 if ctx.batch_execution else ctx.auto_watermark_interval_ms
            clock = ctx.processing_time_service.clock
            if self._per_split:
                self._split_mux = SplitWatermarkMultiplexer(strategy, self.name, self.output,
                                                            clock)
                self._periodic_interval = interval
            else:
                self._emission = WatermarkEmission(strategy, self.name, self.output, clock,
                                                   interval)
            self._next_periodic = (clock.monotonic_ms() + interval if interval > 0 else None)
        try:
            self._split_based = self._assign_splits()
            if not self._split_based:
                self._restore_position()
        except SourceRescaleError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def _event_times(self) -> Any:
        return self._emission if self._emission is not None else self._split_mux

    def emit_event_time_lag_ms(self) -> int:
        """Flink's ``currentEmitEventTimeLag``: when the last record with an event time was
        emitted minus that event time (ms); -1 before any (Flink's UNDEFINED)."""
        times = self._event_times()
        if times is None or times.emit_times.last_event_ms is None:
            return -1
        return int(times.emit_times.last_emit_ms - times.emit_times.last_event_ms)

    def output_watermark(self) -> int:
        """Flink's ``currentOutputWatermark`` of a source: the last watermark it emitted."""
        times = self._event_times()
        current = times.output_watermark if times is not None else None
        return MIN_WATERMARK if current is None else current

    def _assign_splits(self) -> bool:
        """Give the reader its splits (new, or its share of the restored ones); False for
        a source that is not split-based."""
        ctx = self.ctx
        if type(self.source).create_splits is Source.create_splits:
            return False
        restored = getattr(self, "_restored_splits", None)
        if restored is not None and not self._restored_position:
            self.reader.add_splits(restored)  # possibly none: all were dealt to others
            return True
        if restored is not None:  # positions of a run before the source had splits
            return False
        splits = self.source.create_splits(ctx.parallelism)
        if splits is None:
            return False
        self.reader.add_splits(list(splits)[ctx.subtask_index::ctx.parallelism])
        return True

    def _restore_position(self) -> None:
        positions = getattr(self, "_restored_position", None) or []
        if not positions:
            return
        ctx = self.ctx
        own = [p for p in positions if isinstance(p, _SubtaskPosition)]
        if len(own) != len(positions) or len(own) != 1 or \
                own[0].parallelism != ctx.parallelism:
            ran_with = {p.parallelism for p in own} or {"?"}
            raise SourceRescaleError(
                f"source {self.name!r} (uid {self.uid!r}) keeps one position per subtask and "
                f"ran with parallelism {'/'.join(str(p) for p in sorted(ran_with, key=str))}; "
                f"it cannot be restored at parallelism {ctx.parallelism} (implement "
                "Source.create_splits and SourceReader.add_splits to make it rescalable)")
        self.reader.restore_state(own[0].position)

    def snapshot_state(self, context: StateSnapshotContext) -> None:
        try:
            position = self.reader.snapshot_state()
        except Exception as e:
            raise self.user_error(e) from e
        if self._split_based:
            if not isinstance(position, (list, tuple)):
                raise self.user_error(TypeError(
                    f"{type(self.reader).__name__}.snapshot_state must return a list of split "
                    f"states for a split-based source, got {type(position).__name__}"))
            self._split_state.update(list(position))
            self._position.clear()
            if self._per_split:
                self.reader.checkpoint_taken(context.checkpoint_id, position)
        else:
            self._position.update([_SubtaskPosition(self.ctx.subtask_index,
                                                    self.ctx.parallelism, position)])

    def _emit_split_batches(self, max_records: int) -> Optional[int]:
        """A :class:`SplitOutputReader`'s batches: records with their own timestamps,
        watermarks per split."""
        reader, mux = self.reader, self._split_mux
        try:
            batches = reader.poll_split_batches(max_records)
            if mux is None:
                if batches is None:
                    return None
                n = 0
                for b in batches:
                    if b.records:
                        self.output.emit(b.records, b.timestamps)
                        n += len(b.records)
                return n
            if reader.splits_version != self._splits_version:
                self._splits_version = reader.splits_version
                mux.set_splits(reader.split_ids())
            if batches is None:
                return None
            n = 0
            for b in batches:
                mux.emit(b.split_id, b.records, b.timestamps)
                n += len(b.records)
                if b.finished:
                    mux.split_finished(b.split_id)
            next_periodic = self._next_periodic
            if next_periodic is not None:
                now = self.ctx.processing_time_service.clock.monotonic_ms()
                if now >= next_periodic:
                    mux.periodic_emit()
                    self._next_periodic = now + self._periodic_interval
            return n
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        super().notify_checkpoint_complete(checkpoint_id)
        reader = getattr(self, "reader", None)
        if isinstance(reader, SplitOutputReader):
            try:
                reader.notify_checkpoint_complete(checkpoint_id)
            except Exception as e:
                raise self.user_error(e) from e

    def emit_next(self, max_records: int) -> Optional[int]:
        """Emit one batch; the number emitted, or ``None`` when the source has ended."""
        if self._per_split:
            return self._emit_split_batches(max_records)
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
        elif self._split_mux is not None:
            self._split_mux.end()
        else:
            self.output.emit_watermark(MAX_WATERMARK)

    def close(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.close()
