"""Rows <-> Arrow tables <-> the batch formats of ``map_batches`` (Ray Data's names).

* ``"pyarrow"``: a ``pyarrow.Table``; ``"pandas"``: a ``pandas.DataFrame``; ``"numpy"`` (and
  ``"default"``, as in Ray Data): a ``dict`` of column name -> ``numpy.ndarray``.
* A user function may return any of these (or a ``pyarrow.RecordBatch``, or a dict of
  lists); :func:`to_table` makes it a table again.
* Rows become a table by :func:`rows_to_table`, which remembers the rows' kind so that
  :func:`table_to_rows` gives back the same kind: dicts stay dicts, named
  :class:`~flowray.common.types.Row` s stay Rows (by the result's column names), tuples stay
  tuples (columns ``f0, f1, ...``, PyFlink's tuple field names) and any other value is the
  single column ``item`` (Ray Data's name) and comes back as the value.

>>> t, kind = rows_to_table([("a", 1), ("b", 2)])
>>> t.column_names, kind
(['f0', 'f1'], 'tuple')
>>> table_to_rows(to_table({"f0": ["a"], "f1": [3]}), kind)
[('a', 3)]
>>> sorted(format_batch(t, "numpy"))
['f0', 'f1']
"""

from __future__ import annotations

from typing import Any, List, Tuple

from flowray.common.types import Row

__all__ = ["BATCH_FORMATS", "rows_to_table", "table_to_rows", "format_batch", "to_table",
           "table_to_batch", "ITEM"]

BATCH_FORMATS = ("default", "pyarrow", "pandas", "numpy")
#: the column of rows that are plain values (Ray Data's name)
ITEM = "item"


def rows_to_table(records: List[Any]) -> Tuple[Any, str]:
    """An Arrow table of ``records`` and their kind (``"dict"``, ``"row"``, ``"tuple"``,
    ``"item"``), decided by the first record."""
    import pyarrow as pa

    first = records[0]
    if isinstance(first, dict):
        return pa.Table.from_pylist(records), "dict"
    names = getattr(first, "_fields", None)
    if isinstance(first, Row) and names:
        columns = list(zip(*records)) if records else []
        return pa.table({n: list(c) for n, c in zip(names, columns)}), "row"
    if isinstance(first, tuple):
        width = len(first)
        for r in records:
            if not isinstance(r, tuple) or len(r) != width:
                raise TypeError(f"map_batches: rows of one batch must be alike; {r!r} does "
                                f"not match {first!r}")
        columns = list(zip(*records))
        return pa.table({f"f{i}": list(c) for i, c in enumerate(columns)}), "tuple"
    return pa.table({ITEM: records}), "item"


def table_to_rows(table: Any, kind: str) -> List[Any]:
    """The rows of ``table`` in the kind of the rows it was made from."""
    if kind == "dict":
        return table.to_pylist()
    columns = [c.to_pylist() for c in table.columns]
    if kind == "item" and table.column_names == [ITEM]:
        return columns[0]
    if kind == "tuple" and table.column_names == [f"f{i}" for i in range(table.num_columns)]:
        return list(zip(*columns)) if columns else []
    if kind in ("row", "tuple", "item"):
        names = tuple(table.column_names)
        return [Row.with_fields(names, values) for values in zip(*columns)]
    raise ValueError(f"unknown row kind {kind!r}")


def format_batch(table: Any, batch_format: str) -> Any:
    """``table`` in ``batch_format`` (see the module doc)."""
    if batch_format == "pyarrow":
        return table
    if batch_format == "pandas":
        return table.to_pandas()
    if batch_format in ("numpy", "default"):
        return {name: col.to_numpy() for name, col in
                zip(table.column_names, table.columns)}
    raise ValueError(f"batch_format must be one of {', '.join(BATCH_FORMATS)}; got "
                     f"{batch_format!r}")


def to_table(batch: Any) -> Any:
    """An Arrow table of what a batch function returned."""
    import pyarrow as pa

    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if isinstance(batch, dict):
        return pa.table({name: _array(col) for name, col in batch.items()})
    if type(batch).__name__ == "DataFrame" and hasattr(batch, "to_records"):
        return pa.Table.from_pandas(batch, preserve_index=False)
    raise TypeError("map_batches: the function must return a pyarrow.Table, a "
                    "pandas.DataFrame or a dict of column name -> numpy array; got "
                    f"{type(batch).__name__}")


def _array(col: Any) -> Any:
    import pyarrow as pa

    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        return col
    ndim = getattr(col, "ndim", 1)
    if ndim != 1:
        raise ValueError(f"map_batches: a column must be one-dimensional, got a {ndim}-d "
                         "array")
    return pa.array(col)


def table_to_batch(table: Any) -> List[Any]:
    """``table`` as record batches to travel as columnar elements (one, or none when it
    has no rows)."""
    if table.num_rows == 0:
        return []
    return table.combine_chunks().to_batches()
