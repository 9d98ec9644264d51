"""The columnar path of the DataStream API (an extension; PyFlink has no such thing).

* ``stream.map_batches(fn, batch_size=..., batch_format="pyarrow"|"pandas"|"numpy")``, with
  Ray Data's names and semantics: ``fn`` gets a batch in the format and returns one. On a
  row stream, rows become a batch and the result becomes rows again (of the input rows'
  kind; see :mod:`flowray.operators.columnar.batches`); on a columnar stream the result
  stays columnar.
* A :class:`ColumnarDataStream`'s elements are ``pyarrow.RecordBatch`` es: from
  ``env.from_arrow(tables)``, ``env.from_spark(table, columnar=True)`` or
  ``stream.to_columnar()``. They travel through channels as Arrow IPC.
  ``key_by("column")`` partitions batches by a key column, vectorized, into the key groups
  the row path gives the same keys; ``.sum/.min/.max("column")`` are vectorized running
  aggregations (each row goes out with the column replaced by its key's running value).
  Row operations (``map``, ``filter``, ``process``, ``print``, most sinks, a ``key_by``
  with a function, ``reduce``) see rows: named ``Row`` s (``to_rows()``).
  ``sink_to`` a Parquet/Spark table sink (or a sink with ``accepts_record_batches =
  True``) takes the batches as they are.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

from flowray.datastream.data_stream import DataStream
from flowray.datastream.extensions import add_method
from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment
from flowray.operators.arrow_blocks import ArrowBlockSource, InMemoryBlockStore
from flowray.operators.columnar import (
    DEFAULT_BATCH_SIZE,
    ColumnarKeyedAggregateOperator,
    MapBatchesOperator,
    ToRowsOperator,
)
from flowray.operators.parquet_sink import ParquetFilesSink
from flowray.runtime.graph.transformations import GraphError, PartitionTransformation
from flowray.runtime.network.columnar_partitioner import (
    ColumnarKeyGroupPartitioner,
    column_selector,
)
from flowray.runtime.network.partitioners import StreamPartitioner

__all__ = ["ColumnarDataStream", "ColumnarKeyedStream", "map_batches", "from_arrow",
           "to_columnar"]

Column = Union[str, int]


def _batch_size(batch_size: Any) -> Optional[int]:
    return DEFAULT_BATCH_SIZE if batch_size == "default" else batch_size


def map_batches(stream: DataStream, fn: Any, *, batch_size: Union[int, str, None] = "default",
                batch_format: str = "default", fn_args: Sequence[Any] = (),
                fn_kwargs: Optional[Dict[str, Any]] = None,
                fn_constructor_args: Sequence[Any] = (),
                fn_constructor_kwargs: Optional[Dict[str, Any]] = None) -> DataStream:
    """``stream.map_batches(...)`` (see the module doc); ``batch_size``: rows per batch at
    most (``"default"``: 1024, Ray Data's; ``None``: all that arrive together)."""
    columnar = isinstance(stream, ColumnarDataStream)
    op = MapBatchesOperator(fn, batch_format, _batch_size(batch_size), columnar_in=columnar,
                            columnar_out=columnar, fn_args=fn_args, fn_kwargs=fn_kwargs,
                            fn_constructor_args=fn_constructor_args,
                            fn_constructor_kwargs=fn_constructor_kwargs)
    out = DataStream._one_input(stream, op)
    return ColumnarDataStream(stream._env, out._t) if columnar else out


def to_columnar(stream: DataStream, batch_size: Union[int, str, None] = None) -> "ColumnarDataStream":
    """Rows -> a columnar stream of record batches of at most ``batch_size`` rows (``None``:
    all rows that arrive together)."""
    if isinstance(stream, ColumnarDataStream):
        return stream
    op = MapBatchesOperator(_identity, "pyarrow", _batch_size(batch_size),
                            columnar_out=True, name="ToColumnar")
    return ColumnarDataStream(stream._env, DataStream._one_input(stream, op)._t)


def _identity(table: Any) -> Any:
    return table


def from_arrow(env: StreamExecutionEnvironment, tables: Any, batch_rows: int = 65536,
               source_name: Optional[str] = None) -> "ColumnarDataStream":
    """A bounded, replayable columnar stream of Arrow tables or record batches (one
    table, or a list of them of one schema): elements of up to ``batch_rows`` rows."""
    import pyarrow as pa

    items = tables if isinstance(tables, (list, tuple)) else [tables]
    items = [pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
             for t in items]
    for t in items:
        if not isinstance(t, pa.Table):
            raise TypeError(f"from_arrow expects pyarrow Tables or RecordBatches, got "
                            f"{type(t).__name__}")
    source = ArrowBlockSource(InMemoryBlockStore(items), "Arrow tables", columnar=True,
                              batch_rows=batch_rows)
    stream = env.from_source(source, source_name=source_name or "Arrow tables")
    return ColumnarDataStream(env, stream._t)


class ColumnarDataStream(DataStream):
    """A stream of ``pyarrow.RecordBatch`` elements (see the module doc)."""

    def map_batches(self, fn: Any, **kwargs: Any) -> "ColumnarDataStream":  # type: ignore[override]
        return map_batches(self, fn, **kwargs)  # type: ignore[return-value]

    def to_rows(self) -> DataStream:
        """Each row of each batch as a named ``Row``."""
        return DataStream._one_input(self, ToRowsOperator())

    def to_columnar(self, batch_size: Any = None) -> "ColumnarDataStream":
        return self

    def key_by(self, key_selector: Any, key_type: Any = None) -> Any:
        """``key_by("column")`` (a name or a position): a :class:`ColumnarKeyedStream`;
        a function: rows keyed by it."""
        if isinstance(key_selector, (str, int)) and not isinstance(key_selector, bool):
            partitioner = ColumnarKeyGroupPartitioner(key_selector, self._env._max_parallelism)
            return ColumnarKeyedStream(self._env, PartitionTransformation(self._t, partitioner),
                                       key_selector, self)
        return self.to_rows().key_by(key_selector, key_type)

    def _partition(self, partitioner: StreamPartitioner) -> "ColumnarDataStream":
        return ColumnarDataStream(self._env, PartitionTransformation(self._t, partitioner))

    def broadcast(self, *descriptors: Any) -> Any:
        if descriptors and descriptors[0] is not None:
            return self.to_rows().broadcast(*descriptors)
        return super().broadcast(*descriptors)

    def sink_to(self, sink: Any) -> Any:
        """A Parquet or Spark table sink, or a sink whose ``accepts_record_batches`` is
        true, takes the record batches as they are; any other sink gets rows."""
        if _takes_batches(sink):
            return super().sink_to(sink)
        return self.to_rows().sink_to(sink)

    def add_sink(self, sink_func: Any) -> Any:
        """As :meth:`sink_to`: batches for a sink that takes them, else rows."""
        if _takes_batches(sink_func):
            return super().add_sink(sink_func)
        return self.to_rows().add_sink(sink_func)

    def union(self, *streams: DataStream) -> DataStream:
        if all(isinstance(s, ColumnarDataStream) for s in streams):
            return ColumnarDataStream(self._env, super().union(*streams)._t)
        rows = [s.to_rows() if isinstance(s, ColumnarDataStream) else s for s in streams]
        return self.to_rows().union(*rows)


def _takes_batches(sink: Any) -> bool:
    return isinstance(sink, ParquetFilesSink) or getattr(sink, "accepts_record_batches",
                                                         False) is True


def _through_rows(name: str) -> Any:
    def method(self: ColumnarDataStream, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.to_rows(), name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"``{name}`` on the stream's rows (``to_rows()``)."
    return method


for _name in ("map", "flat_map", "filter", "process", "print",
              "execute_and_collect", "connect", "assign_timestamps_and_watermarks",
              "window_all"):
    setattr(ColumnarDataStream, _name, _through_rows(_name))


class ColumnarKeyedStream(ColumnarDataStream):
    """A columnar stream partitioned by the key column ``key_column``."""

    def __init__(self, env: StreamExecutionEnvironment, t: Any, key_column: Column,
                 upstream: ColumnarDataStream) -> None:
        super().__init__(env, t)
        self.key_column = key_column
        self._upstream = upstream

    def _physical(self, what: str) -> Any:
        raise GraphError(f"cannot set {what} on a keyed stream; set it on the operator "
                         "after it")

    def _aggregate(self, kind: str, column: Column) -> ColumnarDataStream:
        op = ColumnarKeyedAggregateOperator(kind, self.key_column, column)
        return ColumnarDataStream(self._env, DataStream._one_input(self, op)._t)

    def sum(self, position_to_sum: Column = 0) -> ColumnarDataStream:
        """Each row with column ``position_to_sum`` replaced by its key's running sum."""
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: Column = 0) -> ColumnarDataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: Column = 0) -> ColumnarDataStream:
        return self._aggregate("max", position_to_max)

    def rows(self) -> Any:
        """The rows, keyed by the key column (a row ``KeyedStream``)."""
        return self._upstream.to_rows().key_by(column_selector(self.key_column))


def _keyed_rows(name: str) -> Any:
    def method(self: ColumnarKeyedStream, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.rows(), name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"``{name}`` on the rows keyed by the key column."
    return method


for _name in ("reduce", "process", "map", "flat_map", "filter", "window", "count_window",
              "min_by", "max_by"):
    setattr(ColumnarKeyedStream, _name, _keyed_rows(_name))


add_method(DataStream, "map_batches", map_batches)
add_method(DataStream, "to_columnar", to_columnar)
add_method(StreamExecutionEnvironment, "from_arrow", from_arrow)
