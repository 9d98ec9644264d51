"""A bounded, replayable, parallel source over Arrow blocks (a Spark DataFrame converted by
RayDP, or tables in memory): block ``b`` goes to subtask ``b % parallelism``, each row is
emitted as a named :class:`~flowray.common.types.Row`, and the reader's position is
``(block, row)``, so a restored reader resumes at the exact row.

Where the blocks live is a :class:`BlockStore`: :class:`InMemoryBlockStore` here (tests,
small inputs); the Ray object store behind RayDP in :mod:`flowray.spark.source`.

>>> import pyarrow as pa
>>> store = InMemoryBlockStore([pa.table({"user": ["a", "b"], "n": [1, 2]}),
...                             pa.table({"user": ["c"], "n": [3]})])
>>> source = ArrowBlockSource(store)
>>> reader = source.create_reader(SourceReaderContext(0, 1))
>>> reader.poll_next(1)
[Row(user='a', n=1)]
>>> position = reader.snapshot_state()
>>> position
(0, 1)
>>> again = source.create_reader(SourceReaderContext(0, 1))
>>> again.restore_state(position)
>>> again.poll_next(10), again.poll_next(10), again.poll_next(10)
([Row(user='b', n=2)], [Row(user='c', n=3)], None)
"""

from __future__ import annotations

import abc
from typing import Any, List, Optional, Sequence, Tuple

from flowray.common.types import Row

from flowray.operators.sources import Source, SourceReader, SourceReaderContext

__all__ = ["BlockStore", "InMemoryBlockStore", "ArrowBlockSource"]


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


class _BlockReader(SourceReader):
    def __init__(self, store: BlockStore, blocks: List[int]) -> None:
        self.store = store
        self.blocks = blocks
        self._index = 0          # position in self.blocks
        self._row = 0            # next row of the current block
        self._columns: Optional[List[List[Any]]] = None
        self._rows_in_block = 0

    def _load(self) -> None:
        table = self.store.read(self.blocks[self._index])
        self._columns = [col.to_pylist() for col in table.columns]
        self._rows_in_block = table.num_rows

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        while self._index < len(self.blocks):
            if self._columns is None:
                self._load()
            if self._row < self._rows_in_block:
                end = min(self._rows_in_block, self._row + max_records)
                fields = self.store.fields
                batch = [Row.with_fields(fields, values)
                         for values in zip(*(c[self._row:end] for c in self._columns))]
                self._row = end
                return batch
            self._index, self._row, self._columns = self._index + 1, 0, None
        return None

    def snapshot_state(self) -> Any:
        return (self._index, self._row)

    def restore_state(self, state: Any) -> None:
        index, row = state
        self._index, self._row, self._columns = int(index), int(row), None


class ArrowBlockSource(Source):
    """Every row of the store's blocks once (see the module doc). The source's
    parallelism must stay the same across a restore (the position is per subtask)."""

    default_name = "Arrow Blocks"

    def __init__(self, store: BlockStore, name: Optional[str] = None) -> None:
        if not isinstance(store, BlockStore):
            raise TypeError(f"expected a BlockStore, got {store!r}")
        self.store = store
        if name:
            self.default_name = name

    @property
    def fields(self) -> Tuple[str, ...]:
        return self.store.fields

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        blocks = list(range(context.subtask_index, self.store.num_blocks, context.parallelism))
        return _BlockReader(self.store, blocks)
