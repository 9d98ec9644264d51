"""Columnar operators: ``map_batches``, rows <-> Arrow record batches, and vectorized keyed
running ``sum``/``min``/``max`` over record batches.

A columnar stream's elements are ``pyarrow.RecordBatch`` es; each travels through channels
as one element, encoded as Arrow IPC (:mod:`flowray.runtime.network.arrow_codec`).
Columnar elements carry no event timestamps.

:class:`ColumnarKeyedAggregateOperator` keeps each key's running value in keyed state
(value state ``_columnar_<kind>(<column>)``, the key being the key column's Python value,
as the row path's key), so checkpoints, restores and rescaling work as for any keyed
operator; a batch is folded in with numpy, and each row goes out with its value column
replaced by its key's running value after it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from flowray.common.sentinels import MISSING
from flowray.operators.base import OneInputOperator, close_function, open_function
from flowray.operators.columnar.batches import (
    BATCH_FORMATS,
    format_batch,
    rows_to_table,
    table_to_batch,
    table_to_rows,
    to_table,
)
from flowray.operators.columnar.state import RunningValueCache
from flowray.state.columnar_keys import column_keys
from flowray.state.descriptors import StateKind, ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupAssigner
from flowray.state.keyed_backend import StateAccessError

__all__ = ["MapBatchesOperator", "ToRowsOperator", "ColumnarKeyedAggregateOperator",
           "DEFAULT_BATCH_SIZE"]

#: ``batch_size="default"``: Ray Data's default batch size
DEFAULT_BATCH_SIZE = 1024


class MapBatchesOperator(OneInputOperator):
    """``map_batches``: ``fn`` gets a batch in ``batch_format`` and returns one (or yields
    several). On rows (``columnar_in`` false) the records of an incoming batch are cut into
    batches of at most ``batch_size`` rows (``None``: all that arrived together) and the
    results become rows of the input rows' kind; on record batches each element is cut
    so. ``columnar_out``: emit record batches instead of rows. ``fn`` may be a class: one
    instance per subtask, made at ``open`` with the constructor arguments (Ray Data's
    callable classes). Results carry no timestamps."""

    default_name = "MapBatches"

    def __init__(self, fn: Any, batch_format: str = "default",
                 batch_size: Optional[int] = DEFAULT_BATCH_SIZE, columnar_in: bool = False,
                 columnar_out: bool = False, fn_args: Sequence[Any] = (),
                 fn_kwargs: Optional[Dict[str, Any]] = None,
                 fn_constructor_args: Sequence[Any] = (),
                 fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
                 name: Optional[str] = None) -> None:
        super().__init__(name)
        if not callable(fn):
            raise TypeError(f"map_batches expects a function or a callable class, got {fn!r}")
        if batch_format not in BATCH_FORMATS:
            raise ValueError(f"batch_format must be one of {', '.join(BATCH_FORMATS)}; got "
                             f"{batch_format!r}")
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer or None, got "
                             f"{batch_size!r}")
        if not isinstance(fn, type) and (fn_constructor_args or fn_constructor_kwargs):
            raise ValueError("fn_constructor_args/fn_constructor_kwargs apply only when fn "
                             "is a class")
        self.fn, self.batch_format, self.batch_size = fn, batch_format, batch_size
        self.columnar_in, self.columnar_out = columnar_in, columnar_out
        self.fn_args, self.fn_kwargs = tuple(fn_args), dict(fn_kwargs or {})
        self.fn_constructor_args = tuple(fn_constructor_args)
        self.fn_constructor_kwargs = dict(fn_constructor_kwargs or {})

    def user_functions(self) -> List[Any]:
        return [self.fn]

    def open(self) -> None:
        try:
            self._fn = (self.fn(*self.fn_constructor_args, **self.fn_constructor_kwargs)
                        if isinstance(self.fn, type) else self.fn)
            open_function(self._fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        fn = getattr(self, "_fn", None)
        if fn is not None:
            try:
                close_function(fn)
            except Exception as e:
                raise self.user_error(e) from e

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        import pyarrow as pa

        if not records:
            return
        if self.columnar_in:
            for element in records:
                if not isinstance(element, pa.RecordBatch):
                    raise TypeError(f"{self.name}: a columnar stream's elements are "
                                    f"pyarrow.RecordBatch es, got {type(element).__name__}")
                self._run(pa.Table.from_batches([element]), "row")
        else:
            try:
                table, kind = rows_to_table(records)
            except Exception as e:
                raise self.user_error(e) from e
            self._run(table, kind)

    def _run(self, table: Any, kind: str) -> None:
        size = self.batch_size or max(1, table.num_rows)
        out: List[Any] = []
        for start in range(0, table.num_rows, size):
            piece = table.slice(start, size)
            try:
                result = self._fn(format_batch(piece, self.batch_format), *self.fn_args,
                                  **self.fn_kwargs)
                results = ([result] if _is_batch(result) else
                           [] if result is None else _batches_of(result))
                tables = [to_table(r) for r in results]
            except Exception as e:
                raise self.user_error(e) from e
            for t in tables:
                out.extend(table_to_batch(t) if self.columnar_out else table_to_rows(t, kind))
        if out:
            self.output.emit(out)


def _batches_of(result: Any) -> List[Any]:
    """The batches a function yielded (or returned as an iterable)."""
    if not hasattr(result, "__iter__"):
        raise TypeError("map_batches: the function must return (or yield) a "
                        "pyarrow.Table, a pandas.DataFrame or a dict of column name -> "
                        f"numpy array; it returned a {type(result).__name__}")
    return list(result)


def _is_batch(result: Any) -> bool:
    import pyarrow as pa

    return (isinstance(result, (dict, pa.Table, pa.RecordBatch))
            or type(result).__name__ == "DataFrame")


class ToRowsOperator(OneInputOperator):
    """Record batches -> named :class:`~flowray.common.types.Row` s, one per row."""

    default_name = "ToRows"

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        import pyarrow as pa

        out: List[Any] = []
        for element in records:
            out.extend(table_to_rows(pa.Table.from_batches([element]), "row"))
        if out:
            self.output.emit(out)


_KINDS = ("sum", "min", "max")
_MISSING = MISSING


class ColumnarKeyedAggregateOperator(OneInputOperator):
    """Running ``sum``/``min``/``max`` of ``value_column`` per key of ``key_column`` over
    record batches (see the module doc). Nulls in the key column are the key ``None``; a
    null in the value column fails the job naming the column (the row path cannot add
    ``None`` either). Integer sums are int64 (they wrap past 2**63)."""

    default_name = "Columnar Keyed Aggregation"
    is_keyed = True

    def __init__(self, kind: str, key_column: Union[str, int], value_column: Union[str, int],
                 name: Optional[str] = None) -> None:
        if kind not in _KINDS:
            raise ValueError(f"unknown aggregation {kind!r}; one of {', '.join(_KINDS)}")
        super().__init__(name or f"Columnar Keyed Aggregation ({kind})")
        self.kind, self.key_column, self.value_column = kind, key_column, value_column
        self.state_name = f"_columnar_{kind}({value_column!r})"

    def open(self) -> None:
        if self.ctx.batch_execution:
            raise StateAccessError(f"{self.name}: columnar keyed aggregations run in "
                                   "STREAMING mode; convert to rows (to_rows()) for BATCH")
        backend = self._backend = self.ctx.keyed_backend
        self._range = backend.key_group_range
        self._assign = KeyGroupAssigner(backend.max_parallelism)
        self._memo: Dict[Any, int] = {}
        self._cache: Optional[RunningValueCache] = None
        self._state = None
        if isinstance(backend, HeapKeyedStateBackend):  # numpy in front of the dicts
            table = backend.get_state_table(self.state_name, StateKind.VALUE)
            self._cache = RunningValueCache(table, self._range.start, self._assign,
                                            self._check_key_group)
        else:
            self._state = backend.get_partitioned_state(ValueStateDescriptor(self.state_name))

    def snapshot_state(self, context: Any) -> None:
        """Before the keyed backend's snapshot: the cached running values into state."""
        if self._cache is not None:
            self._cache.flush()
        super().snapshot_state(context)

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        out = [self._fold(b) for b in records if b.num_rows]
        if out:
            self.output.emit(out)

    def _check_key_group(self, key: Any, key_group: int) -> None:
        r = self._range
        if not r.start <= key_group <= r.end:
            raise StateAccessError(
                f"{self.name}: key {key!r} belongs to key group {key_group}, outside this "
                f"subtask's range [{r.start}, {r.end}]")

    # -- one batch ---------------------------------------------------------------------
    def _fold(self, batch: Any) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        column = batch.column(self.value_column)
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise TypeError(f"{self.name}: column {self.value_column!r} is {column.type}; "
                            "sum/min/max need an integer or floating point column")
        if column.null_count:
            raise ValueError(f"{self.name}: column {self.value_column!r} has a null value; "
                             "a running aggregation needs a value in every row")
        integer = pa.types.is_integer(column.type)
        values = column.to_numpy()
        if self._cache is not None:
            encoded = pc.dictionary_encode(batch.column(self.key_column),
                                           null_encoding="encode")
            keys = encoded.dictionary.to_pylist()
            indices = encoded.indices.to_numpy(zero_copy_only=False)
            index, init, present = self._cache.lookup(keys, integer)
            integer = integer and init.dtype != np.float64
        else:
            ck = column_keys(batch.column(self.key_column), self._assign, self._memo)
            for k, kg in zip(ck.keys, ck.key_group_list):
                self._check_key_group(k, kg)
            keys, indices = ck.keys, ck.indices
            stored = self._read_state(ck)
            present = np.array([v is not _MISSING for v in stored], dtype=bool)
            init = np.array([v if v is not _MISSING else 0 for v in stored],
                            dtype=np.int64 if integer else np.float64)
        running, finals = _running(self.kind, values, indices, len(keys), init, present,
                                   integer)
        if self._cache is not None:
            self._cache.store(index, finals)
        else:
            self._write_state(ck, finals.tolist())
        position = (batch.schema.get_field_index(self.value_column)
                    if isinstance(self.value_column, str) else self.value_column)
        new = pa.array(running).cast(column.type)
        return batch.set_column(position, batch.schema.field(position).name, new)

    def _read_state(self, keys: Any) -> List[Any]:
        set_key, state, init = self._backend.set_current_key, self._state, []
        for k, kg in zip(keys.keys, keys.key_group_list):
            set_key(k, kg)
            cur = state.value()
            init.append(_MISSING if cur is None else cur)
        return init

    def _write_state(self, keys: Any, finals: List[Any]) -> None:
        set_key, state = self._backend.set_current_key, self._state
        for k, kg, v in zip(keys.keys, keys.key_group_list, finals):
            set_key(k, kg)
            state.update(v)


def _running(kind: str, values: Any, indices: Any, groups: int, init: Any, present: Any,
             integer: bool) -> tuple:
    """Per row, its group's running ``kind`` after it (starting from ``init[g]`` where
    ``present[g]``); and each group's value after the batch. Sums add in row order, so
    floats give exactly the row path's values."""
    import numpy as np

    # 16-bit codes sort by radix, several times faster than 64-bit ones
    codes = indices.astype(np.uint16) if groups <= 1 << 16 else indices.astype(np.int64)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=groups)
    ends = np.cumsum(counts)
    starts = ends - counts
    ordered = values[order].astype(np.int64 if integer else np.float64, copy=False)
    if kind == "sum" and integer:
        base = np.where(present, init, 0).astype(np.int64)
        cs = np.cumsum(ordered)
        before = np.where(starts > 0, cs[np.maximum(starts - 1, 0)], 0)
        result = cs + np.repeat(base - before, counts)
    else:
        ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[kind]
        result = np.empty_like(ordered)
        init = init.astype(ordered.dtype, copy=False)
        for g in range(groups):
            s, e = int(starts[g]), int(ends[g])
            if present[g]:
                seg = np.concatenate((init[g:g + 1], ordered[s:e]))
                result[s:e] = ufunc.accumulate(seg)[1:]
            else:
                result[s:e] = ufunc.accumulate(ordered[s:e])
    out = np.empty_like(result)
    out[order] = result
    return out, result[ends - 1]
