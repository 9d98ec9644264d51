"""A bounded, replayable, parallel source over Arrow blocks (a Spark DataFrame converted by
RayDP, or tables in memory): each row is emitted as a named
:class:`~flowray.common.types.Row`, or (``columnar=True``) rows travel as Arrow record
batches. (Also importable as ``flowray.spark.block_source``.)

The source is split-based (see :mod:`flowray.operators.sources`): each block is a split, a
:class:`BlockSplit` ``(block, row)`` whose progress is the next row. A job that starts
without state deals the blocks round-robin (block ``b`` goes to subtask ``b % parallelism``);
a reader reads its blocks in order, and its checkpointed state is the blocks it has not
finished, each at its next row, so a restore, at any parallelism, resumes at the exact row.

Where the blocks live is a :class:`BlockStore`: :class:`InMemoryBlockStore` here (tests,
small inputs); the Ray object store behind RayDP in :mod:`flowray.spark.source`.

>>> import pyarrow as pa
>>> store = InMemoryBlockStore([pa.table({"user": ["a", "b"], "n": [1, 2]}),
...                             pa.table({"user": ["c"], "n": [3]})])
>>> source = ArrowBlockSource(store)
>>> reader = source.create_reader(SourceReaderContext(0, 1))
>>> reader.add_splits(source.create_splits(1))
>>> reader.poll_next(1)
[Row(user='a', n=1)]
>>> state = reader.snapshot_state()
>>> state
[BlockSplit(block=0, row=1), BlockSplit(block=1, row=0)]
>>> again = source.create_reader(SourceReaderContext(0, 1))
>>> again.add_splits(state)
>>> again.poll_next(10), again.poll_next(10), again.poll_next(10)
([Row(user='b', n=2)], [Row(user='c', n=3)], None)

With ``columnar=True`` the source is columnar: it emits each block's rows as
``pyarrow.RecordBatch`` elements of up to ``batch_rows`` rows (one element per poll), the
position still counting rows.

>>> columnar = ArrowBlockSource(store, columnar=True)
>>> r = columnar.create_reader(SourceReaderContext(0, 1))
>>> r.add_splits(columnar.create_splits(1))
>>> [b.num_rows for b in r.poll_next(100)], r.snapshot_state()
([2], [BlockSplit(block=1, row=0)])

A reader given no splits (used directly, or restored from a position of a run that did not
use splits) reads its round-robin share of the blocks, with the position ``(index in that
share, row)`` (``restore_state``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from flowray.common.types import Row

from flowray.operators.sources import ShareOrSplitReader, Source, SourceReaderContext

__all__ = ["BlockStore", "InMemoryBlockStore", "ArrowBlockSource", "BlockSplit"]


class BlockStore(abc.ABC):
    """Numbered Arrow tables of one schema. Picklable; ``read`` works in any process of
    the job and returns the same rows in the same order every time (replay)."""

    fields: Tuple[str, ...]

    @property
    @abc.abstractmethod
    def num_blocks(self) -> int: ...

    @abc.abstractmethod
    def read(self, block: int) -> Any:
        """Block ``block`` as a ``pyarrow.Table``."""

    def release(self) -> None:
        """Free the blocks (after the jobs reading them are done). Default: nothing."""


class InMemoryBlockStore(BlockStore):
    """Arrow tables held in the definition itself (pickled with the job)."""

    def __init__(self, tables: Sequence[Any]) -> None:
        self.tables = list(tables)
        self.fields = tuple(self.tables[0].column_names) if self.tables else ()
        for i, t in enumerate(self.tables):
            if tuple(t.column_names) != self.fields:
                raise ValueError(f"block {i} has columns {t.column_names}, expected "
                                 f"{list(self.fields)}")

    @property
    def num_blocks(self) -> int:
        return len(self.tables)

    def read(self, block: int) -> Any:
        return self.tables[block]


@dataclass(frozen=True)
class BlockSplit:
    """A split of an :class:`ArrowBlockSource`: block ``block`` from row ``row`` (the
    progress) to its end."""

    block: int
    row: int = 0


class _BlockReader(ShareOrSplitReader):
    source_label = "ArrowBlockSource"

    """Reads its splits (blocks) in order; without splits, ``blocks`` (its round-robin
    share) with the position ``(index in blocks, row)``."""

    def __init__(self, store: BlockStore, blocks: List[int], columnar: bool = False,
                 batch_rows: int = 65536) -> None:
        self.store = store
        self.columnar = columnar
        self.batch_rows = batch_rows
        self._table: Any = None
        self.blocks = blocks                 # the share read without splits
        self._splits: List[List[int]] = []   # [block, next row] per block not finished
        self._done = 0                       # blocks finished (the index without splits)
        self._columns: Optional[List[List[Any]]] = None   # of the head block, once loaded
        self._rows_in_block = 0

    def _read_own_share(self) -> None:
        self._splits = [[b, 0] for b in self.blocks]

    def add_splits(self, splits: List[Any]) -> None:
        self._mode(True, "add_splits")
        for split in splits:
            if not isinstance(split, BlockSplit):
                raise TypeError(f"ArrowBlockSource: expected a BlockSplit, got {split!r}")
            if not 0 <= split.block < self.store.num_blocks or split.row < 0:
                raise ValueError(f"ArrowBlockSource: split {split!r} does not fit the "
                                 f"store's {self.store.num_blocks} block(s)")
            self._splits.append([split.block, split.row])

    def _load(self, block: int) -> None:
        table = self.store.read(block)
        if self.columnar:
            self._table = table
            self._columns = []
        else:
            self._columns = [col.to_pylist() for col in table.columns]
        self._rows_in_block = table.num_rows

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        if self._split_based is None:
            self._mode(False, "poll_next")
        splits = self._splits
        while splits:
            head = splits[0]
            if self._columns is None:
                self._load(head[0])
            row = head[1]
            if row < self._rows_in_block and self.columnar:
                end = min(self._rows_in_block, row + self.batch_rows)
                batch = self._table.slice(row, end - row).combine_chunks().to_batches()
                head[1] = end
                if end >= self._rows_in_block:
                    self._next_block()
                return batch
            if row < self._rows_in_block:
                end = min(self._rows_in_block, row + max_records)
                fields = self.store.fields
                batch = [Row.with_fields(fields, values)
                         for values in zip(*(c[row:end] for c in self._columns))]
                head[1] = end
                if end >= self._rows_in_block:  # finished: left out of snapshots from now
                    self._next_block()
                return batch
            self._next_block()  # an empty block, or restored at its end
        return None

    def _next_block(self) -> None:
        self._splits.pop(0)
        self._done += 1
        self._columns = self._table = None

    def snapshot_state(self) -> Any:
        """Split-based: the blocks not finished as :class:`BlockSplit` s; else
        ``(index in blocks, row)``."""
        if self._split_based is None:
            self._mode(False, "snapshot_state")
        if self._split_based:
            return [BlockSplit(block, row) for block, row in self._splits]
        return (self._done, self._splits[0][1] if self._splits else 0)

    def restore_state(self, state: Any) -> None:
        """Without splits: go to a position ``(index in blocks, row)``."""
        self._mode(False, "restore_state")
        index, row = (int(v) for v in state)
        if not 0 <= index <= len(self.blocks) or row < 0:
            raise ValueError(f"ArrowBlockSource: position {state!r} does not fit this "
                             f"subtask's {len(self.blocks)} block(s)")
        self._splits = [[b, 0] for b in self.blocks[index:]]
        if self._splits:
            self._splits[0][1] = row
        self._done, self._columns, self._table = index, None, None


class ArrowBlockSource(Source):
    """Every row of the store's blocks once (see the module doc). Split-based: one
    :class:`BlockSplit` per block, so a job may be restored at another parallelism."""

    default_name = "Arrow Blocks"

    def __init__(self, store: BlockStore, name: Optional[str] = None,
                 columnar: bool = False, batch_rows: int = 65536) -> None:
        if not isinstance(store, BlockStore):
            raise TypeError(f"expected a BlockStore, got {store!r}")
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be positive, got {batch_rows}")
        self.store = store
        self.columnar = columnar
        self.batch_rows = batch_rows
        if name:
            self.default_name = name

    @property
    def fields(self) -> Tuple[str, ...]:
        return self.store.fields

    def create_splits(self, parallelism: int) -> List[BlockSplit]:
        """One split per block, in block order (block ``b`` goes to subtask ``b %
        parallelism``)."""
        return [BlockSplit(b) for b in range(self.store.num_blocks)]

    def create_reader(self, context: SourceReaderContext) -> "_BlockReader":
        # the round-robin share is read only if the reader is given no splits
        blocks = list(range(context.subtask_index, self.store.num_blocks, context.parallelism))
        return _BlockReader(self.store, blocks, self.columnar, self.batch_rows)
