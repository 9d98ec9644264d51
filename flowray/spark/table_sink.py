"""Spark tables as exactly-once sinks (also importable as ``flowray.datastream.connectors.spark``).

``SparkTableSink(table, mode="append"|"overwrite", output_type=...)`` writes a stream into a
Spark table stored as Parquet files. Each checkpoint epoch of each subtask becomes one
Parquet file, staged and then moved into the table's folder when the checkpoint completes
(:class:`~flowray.operators.parquet_sink.ParquetFilesSink`), so the table holds every
record exactly once across failures, and a retried commit adds nothing twice.

The table is resolved on the driver, when the sink is created:

* an existing table must be a Parquet table with a location (a managed or external table,
  not a view); its schema is the schema records must fit;
* a new table with ``output_type`` (``Types.ROW_NAMED``, ``Types.ROW`` or
  ``Types.TUPLE``; unnamed fields are ``f0, f1, ...``) is created at once, as an external
  Parquet table under ``spark.sql.warehouse.dir``;
* a new table without ``output_type`` takes its schema from the first records written and
  is registered when the job ends.

``mode="overwrite"`` empties the table when the job is submitted (once, not on restarts).
The table is refreshed in Spark when the job ends, so queries see the new files.

An epoch's records wait in memory up to ``flowray.sink.spill-threshold`` bytes (64 mb;
``spill_threshold=`` overrides it for this sink); past it they spill to a file in the
task's local temp folder and are read back piece by piece when the epoch's file is written
(:mod:`flowray.operators.staged_records`), so a long interval, or a job without
checkpointing, does not hold all its records in memory.

    sink = SparkTableSink("totals", output_type=Types.ROW_NAMED(
        ["user", "total"], [Types.STRING(), Types.LONG()]))
    stream.sink_to(sink)
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, Optional, Tuple

from flowray.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation
from flowray.operators.parquet_sink import ParquetFilesSink, SchemaMismatchError

__all__ = ["SparkTableSink", "SchemaMismatchError", "arrow_schema_of"]

_ARROW_TYPES = {
    "STRING": "string", "CHAR": "string", "BOOLEAN": "bool", "BYTE": "int8", "SHORT": "int16",
    "INT": "int32", "LONG": "int64", "BIG_INT": "int64", "FLOAT": "float32",
    "DOUBLE": "float64", "SQL_DATE": "date32", "SQL_TIMESTAMP": "timestamp[us]",
    "PICKLED_BYTE_ARRAY": "binary",
}


def arrow_schema_of(output_type: TypeInformation) -> Any:
    """The Arrow schema of a row or tuple type.

    >>> from flowray.common.typeinfo import Types
    >>> arrow_schema_of(Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.LONG()]))
    user: string
    n: int64
    >>> arrow_schema_of(Types.LIST(Types.INT()))
    Traceback (most recent call last):
    ...
    TypeError: SparkTableSink: output_type must be Types.ROW_NAMED, Types.ROW or Types.TUPLE, got List(INT)
    """
    import pyarrow as pa

    if not isinstance(output_type, (RowTypeInfo, TupleTypeInfo)):
        raise TypeError("SparkTableSink: output_type must be Types.ROW_NAMED, Types.ROW or "
                        f"Types.TUPLE, got {output_type!r}")
    types = list(output_type.field_types)
    names = list(getattr(output_type, "field_names", None) or
                 [f"f{i}" for i in range(len(types))])
    fields = []
    for name, t in zip(names, types):
        kind = getattr(t, "name", repr(t))
        if kind == "BIG_DEC":
            arrow = pa.decimal128(38, 18)
        elif kind in _ARROW_TYPES:
            arrow = pa.type_for_alias(_ARROW_TYPES[kind])
        else:
            raise TypeError(f"SparkTableSink: field {name!r} has type {t!r}, which has no "
                            "Spark column type")
        fields.append(pa.field(name, arrow))
    return pa.schema(fields)


def _spark_ddl(schema: Any) -> str:
    import pyarrow as pa

    def sql_type(t: Any) -> str:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "STRING"
        if pa.types.is_boolean(t):
            return "BOOLEAN"
        for width, name in ((8, "TINYINT"), (16, "SMALLINT"), (32, "INT"), (64, "BIGINT")):
            if pa.types.is_integer(t) and t.bit_width == width:
                return name
        if pa.types.is_float32(t):
            return "FLOAT"
        if pa.types.is_float64(t):
            return "DOUBLE"
        if pa.types.is_decimal(t):
            return f"DECIMAL({t.precision},{t.scale})"
        if pa.types.is_date(t):
            return "DATE"
        if pa.types.is_timestamp(t):
            return "TIMESTAMP"
        if pa.types.is_binary(t):
            return "BINARY"
        raise TypeError(f"no Spark column type for Arrow type {t}")
    return ", ".join(f"`{f.name}` {sql_type(f.type)}" for f in schema)


def _describe(spark: Any, table: str) -> Tuple[Optional[str], Optional[str]]:
    """(location, provider) of a table, from ``DESCRIBE TABLE EXTENDED``."""
    info: Dict[str, str] = {}
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if row.col_name and row.data_type is not None:
            info.setdefault(row.col_name.strip(), str(row.data_type).strip())
    return info.get("Location"), (info.get("Provider") or "").lower() or None


def _local_dir(location: str, table: str) -> str:
    if location.startswith("file:"):
        location = location[len("file:"):]
        while location.startswith("//"):
            location = location[1:]
    elif "://" in location:
        raise ValueError(f"SparkTableSink: table {table!r} is stored at {location!r}; only "
                         "tables on a file system path every task can reach are supported")
    return location


def _check_compatible(table: str, table_schema: Any, wanted: Any) -> None:
    if list(wanted.names) != list(table_schema.names):
        raise SchemaMismatchError(f"SparkTableSink: output_type has fields {wanted.names}, "
                                  f"table {table!r} has columns {table_schema.names}")
    for f in wanted:
        t = table_schema.field(f.name).type
        if t != f.type:
            raise SchemaMismatchError(f"SparkTableSink: field {f.name!r} is {f.type} in "
                                      f"output_type but {t} in table {table!r}")


class SparkTableSink(ParquetFilesSink):
    """An exactly-once sink into a Spark table (see the module doc)."""

    default_name = "SparkTableSink"

    def __init__(self, table: str, mode: str = "append",
                 output_type: Optional[TypeInformation] = None, spark: Any = None,
                 spill_threshold: Optional[int] = None) -> None:
        from flowray.spark.session import get_or_create_spark
        from pyspark.sql.pandas.types import to_arrow_schema

        if mode not in ("append", "overwrite"):
            raise ValueError(f"SparkTableSink: mode must be 'append' or 'overwrite', "
                             f"got {mode!r}")
        if not isinstance(table, str) or not table:
            raise ValueError(f"SparkTableSink: table must be a table name, got {table!r}")
        if spill_threshold is not None and spill_threshold < 0:
            raise ValueError(f"SparkTableSink: spill_threshold must not be negative, got "
                             f"{spill_threshold}")
        spark = spark if spark is not None else get_or_create_spark()
        wanted = arrow_schema_of(output_type) if output_type is not None else None
        self.table, self.mode = table, mode
        if spark.catalog.tableExists(table):
            location, provider = _describe(spark, table)
            if location is None:
                raise ValueError(f"SparkTableSink: {table!r} is a view, not a table stored "
                                 "as files")
            if provider != "parquet":
                raise ValueError(f"SparkTableSink: table {table!r} is stored as {provider}; "
                                 "only Parquet tables are supported")
            schema = to_arrow_schema(spark.table(table).schema)
            if wanted is not None:
                _check_compatible(table, schema, wanted)
            self._register_at_end = False
        else:
            warehouse = spark.conf.get("spark.sql.warehouse.dir")
            location = os.path.join(_local_dir(warehouse, table), table)
            schema = wanted
            if wanted is not None:
                os.makedirs(location, exist_ok=True)
                spark.sql(f"CREATE TABLE {table} ({_spark_ddl(wanted)}) USING parquet "
                          f"LOCATION '{location}'")
            self._register_at_end = wanted is None
        super().__init__(_local_dir(location, table), schema,
                         description=f"Spark table {table!r}", spill_threshold=spill_threshold)

    def __repr__(self) -> str:
        return f"SparkTableSink({self.table!r}, mode={self.mode!r})"

    # -- on the driver -----------------------------------------------------------------
    def prepare_on_driver(self) -> None:
        """Overwrite: empty the table's folder before the job runs (once per submission)."""
        os.makedirs(self.staging_dir, exist_ok=True)
        if self.mode != "overwrite":
            return
        for name in os.listdir(self.directory):
            if name.startswith(("_", ".")):
                continue
            path = os.path.join(self.directory, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)

    def finish_on_driver(self, outcome: Any) -> None:
        """Register a table whose schema came from the records; refresh it in Spark."""
        from flowray.spark.session import get_or_create_spark

        spark = get_or_create_spark()
        has_files = any(n.endswith(".parquet") for n in os.listdir(self.directory))
        if self._register_at_end:
            if not has_files:
                return  # nothing was written: no schema to register
            spark.sql(f"CREATE TABLE IF NOT EXISTS {self.table} USING parquet "
                      f"LOCATION '{self.directory}'")
        spark.catalog.refreshTable(self.table)
