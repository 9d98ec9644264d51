"""Keys and key groups of an Arrow key column, vectorized, exactly as the row path.

A columnar batch is keyed by one of its columns. :func:`column_keys` dictionary-encodes the
column (nulls are one key, ``None``, as a ``None`` key of the row path), hashes each distinct
key once with :func:`~flowray.state.key_groups.assign_to_key_group` semantics (through a
:class:`~flowray.state.key_groups.KeyGroupAssigner` and its memo), and
gives every row its key's index and key group. The keys are the column's Python values
(``to_pylist``), the same objects a row path's key selector returns for rows read from the
same data, so keyed state written by either path is the other's.

numpy and pyarrow are imported on first use: ``import flowray`` does not import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from flowray.state.key_groups import KeyGroupAssigner

__all__ = ["ColumnKeys", "column_keys"]


@dataclass
class ColumnKeys:
    """The distinct ``keys`` of a column (Python values, first-seen order), ``indices[i]``:
    the index in ``keys`` of row ``i``'s key; ``key_groups[j]``: the key group of
    ``keys[j]``; ``row_key_groups[i]``: the key group of row ``i`` (numpy arrays)."""

    keys: List[Any]
    indices: Any
    key_groups: Any
    row_key_groups: Any
    #: ``key_groups`` as a list of ints
    key_group_list: List[int]


_MEMO_SIZE = 1 << 20


def column_keys(column: Any, assigner: KeyGroupAssigner,
                memo: Optional[Dict[Any, int]] = None) -> ColumnKeys:
    """Keys and key groups of an Arrow array or chunked array (see the module doc);
    ``memo``: a dict kept by the caller across batches, key -> key group (cleared at a
    million keys)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column, null_encoding="encode")
    keys = encoded.dictionary.to_pylist()
    indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    # a memo: the distinct keys of a batch mostly repeat earlier batches'
    memo = {} if memo is None else memo
    groups = list(map(memo.get, keys))
    if None in groups:
        for j, g in enumerate(groups):
            if g is None:
                groups[j] = g = assigner(keys[j])
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()
                try:
                    memo[keys[j]] = g
                except TypeError:  # an unhashable key (the assigner named it)
                    pass
    key_groups = np.asarray(groups, dtype=np.int64)
    row_key_groups = key_groups[indices] if len(keys) else np.zeros(0, dtype=np.int64)
    return ColumnKeys(keys, indices, key_groups, row_key_groups, groups)
