"""``key_by(column)`` on a columnar stream: each ``pyarrow.RecordBatch`` element is split,
vectorized, into one sub-batch per consumer, every row going to the subtask that owns its
key group; the key group of a row is the one the row path gives the same key
(:func:`~flowray.state.columnar_keys.column_keys`).
"""

from __future__ import annotations

from typing import Any, Union

from flowray.state.columnar_keys import column_keys
from flowray.runtime.network.arrow_codec import is_arrow_batch
from flowray.runtime.network.partitioners import KeyGroupStreamPartitioner, KeySelectorError

__all__ = ["ColumnarKeyGroupPartitioner", "column_selector"]


class _ColumnSelector:
    """The key of a row (tuple, Row or dict) by column name, for error messages and for
    the rows a columnar partitioner may meet."""

    def __init__(self, column: Union[str, int]) -> None:
        self.column = column
        self.__name__ = f"column {column!r}"

    def __call__(self, row: Any) -> Any:
        if isinstance(row, dict):
            return row[self.column]
        if isinstance(self.column, str):
            return getattr(row, self.column)
        return row[self.column]


def column_selector(column: Union[str, int]) -> _ColumnSelector:
    """A key selector reading ``column`` of a row."""
    return _ColumnSelector(column)


class ColumnarKeyGroupPartitioner(KeyGroupStreamPartitioner):
    """Routes record batches by the key column ``column`` (a name or a position). Key
    groups do not travel with the sub-batches: the keyed columnar operator hashes its
    key column itself."""

    name = "HASH"

    def __init__(self, column: Union[str, int], max_parallelism: int) -> None:
        super().__init__(column_selector(column), max_parallelism)
        self.column = column

    def setup(self, num_channels: int, subtask_index: int) -> None:
        super().setup(num_channels, subtask_index)
        import numpy as np

        self._channel_array = np.asarray(self._channel_of, dtype=np.int64)
        self._memo: dict = {}

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        import numpy as np
        import pyarrow as pa

        n = self.n
        for batch in records:
            if not is_arrow_batch(batch):
                raise TypeError(f"key_by({self.column!r}) on a columnar stream expects "
                                f"pyarrow.RecordBatch elements, got {type(batch).__name__}")
            if n == 1:
                out[0].append(batch)
                if out_ts is not None:
                    out_ts[0].append(None)  # columnar elements carry no timestamp
                continue
            try:
                column = batch.column(self.column)
                kgs = column_keys(column, self._assign, self._memo).row_key_groups
            except Exception as e:
                raise KeySelectorError(self.key_selector, e) from e
            channels = self._channel_array[kgs]
            order = np.argsort(channels, kind="stable")
            counts = np.bincount(channels, minlength=n)
            taken = batch.take(pa.array(order))
            start = 0
            for c in range(n):
                k = int(counts[c])
                if k:
                    out[c].append(taken.slice(start, k))
                    if out_ts is not None:
                        out_ts[c].append(None)
                start += k
