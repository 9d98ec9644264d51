"""Spark Parquet tables read in place: ``env.from_spark("table")`` on a table Spark stores
as unpartitioned Parquet files on a local path reads those files in the source tasks, one
block per row group, with no copy through Spark and the Ray object store (RayDP).

:func:`parquet_table_store` decides on the driver. It lists the files Spark itself would
read (``DataFrame.inputFiles()``) and reads their footers, so the job reads the table as
it was when the source was made, and replays the same rows after a failure. A file that
disappears before the job read it (the table was overwritten meanwhile) fails the job
with an error saying so; ``from_spark(..., snapshot=True)`` copies the table into the
object store first (RayDP) and survives that. Anything else (a view, a DataFrame, another
format, a partitioned table, a remote path, a column type Arrow cannot take) is ``None``:
the caller converts it with RayDP.

>>> import tempfile, os, pyarrow as pa, pyarrow.parquet as pq
>>> folder = tempfile.mkdtemp()
>>> pq.write_table(pa.table({"id": [1, 2, 3], "user": ["a", "b", "c"]}),
...                os.path.join(folder, "part-0.parquet"), row_group_size=2)
>>> schema = pa.schema([("user", pa.string()), ("id", pa.int64())])
>>> store = ParquetTableBlockStore("t", schema, file_blocks(
...     [os.path.join(folder, "part-0.parquet")], schema.names))
>>> store.num_blocks, store.fields, store.read(1).to_pylist()
(2, ('user', 'id'), [{'user': 'c', 'id': 3}])
>>> local_path("file:/tmp/w/t"), local_path("file:///tmp/a%20b"), local_path("s3a://b/t")
('/tmp/w/t', '/tmp/a b', None)
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence, Tuple
from urllib.parse import unquote

from flowray.spark.block_source import BlockStore

__all__ = ["ParquetTableBlockStore", "TableFileGoneError", "file_blocks", "local_files",
           "local_path", "parquet_table_store", "readable_in_place"]

log = logging.getLogger(__name__)


class TableFileGoneError(FileNotFoundError):
    """A Parquet file of a table read in place is gone (the table changed under the job)."""


def local_path(uri: str) -> Optional[str]:
    """The local file system path of a Spark location (``file:`` URI or a plain path), or
    ``None`` for another file system."""
    if uri.startswith("file:"):
        path = unquote(uri[len("file:"):])  # a URI: "%20" is a space
        while path.startswith("//"):
            path = path[1:]
        return path
    return None if "://" in uri else uri


def file_blocks(files: Sequence[str], fields: Sequence[str]) -> Optional[List[Tuple[str, int]]]:
    """``(file, row group)`` of every non-empty row group of ``files``, in order, from
    their footers; ``None`` if a file lacks one of ``fields`` (its columns are not the
    table's: let Spark read it)."""
    import pyarrow.parquet as pq

    blocks: List[Tuple[str, int]] = []
    wanted = set(fields)
    for path in files:
        meta = pq.ParquetFile(path).metadata
        if not wanted <= set(meta.schema.to_arrow_schema().names):
            return None
        blocks += [(path, g) for g in range(meta.num_row_groups)
                   if meta.row_group(g).num_rows > 0]
    return blocks


class ParquetTableBlockStore(BlockStore):
    """Row groups of a table's Parquet files: block ``i`` is ``blocks[i] = (file, row
    group)``, read with the table's columns in its order and cast to its Arrow
    ``schema``."""

    def __init__(self, table: str, schema: Any, blocks: Sequence[Tuple[str, int]]) -> None:
        self.table = table
        self.schema = schema
        self.fields = tuple(schema.names)
        self.blocks = [(str(f), int(g)) for f, g in blocks]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def read(self, block: int) -> Any:
        import pyarrow.parquet as pq

        path, group = self.blocks[block]
        try:
            data = pq.ParquetFile(path).read_row_group(group, columns=list(self.fields))
        except FileNotFoundError:
            raise TableFileGoneError(
                f"file {path} of Spark table {self.table!r} is gone: the table changed while "
                "the job read it in place; from_spark(..., snapshot=True) reads a copy "
                "instead") from None
        data = data.select(list(self.fields))
        if not data.schema.equals(self.schema, check_metadata=False):
            data = data.cast(self.schema)
        return data


def _table_details(spark: Any, table: str) -> dict:
    """The "Detailed Table Information" part of ``DESCRIBE TABLE EXTENDED`` (not the
    columns, which may have any name)."""
    info: dict = {}
    details = False
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        name = (row.col_name or "").strip()
        if name.startswith("# Detailed Table Information"):
            details = True
        elif details and name and row.data_type is not None:
            info.setdefault(name, str(row.data_type).strip())
    return info


def readable_in_place(provider: Optional[str], location: Optional[str]) -> bool:
    """Whether a table Spark describes with ``provider`` and ``location`` may be read from
    its files: Parquet on the local file system (partitioning is checked apart).

    >>> readable_in_place("parquet", "file:/w/t"), readable_in_place("delta", "file:/w/t")
    (True, False)
    >>> readable_in_place("PARQUET", "s3a://b/t"), readable_in_place("parquet", None)
    (False, False)
    """
    if (provider or "").lower() != "parquet" or not location:
        return False
    return local_path(location) is not None


def local_files(uris: Sequence[str]) -> Optional[List[str]]:
    """The local paths of a table's files, sorted; ``None`` if any is elsewhere.

    >>> local_files(["file:/w/t/b.parquet", "/w/t/a.parquet"])
    ['/w/t/a.parquet', '/w/t/b.parquet']
    >>> local_files(["file:/w/t/a.parquet", "hdfs://n/t/b.parquet"]) is None
    True
    """
    paths = [local_path(u) for u in uris]
    if any(p is None for p in paths):
        return None
    return sorted(p for p in paths if p is not None)


def parquet_table_store(spark: Any, table: str) -> Optional[ParquetTableBlockStore]:
    """A store reading ``table``'s Parquet files in place, or ``None`` when the table is
    not an unpartitioned Parquet table on a local path (see the module doc)."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        info = _table_details(spark, table)
        if not readable_in_place(info.get("Provider"), info.get("Location")):
            return None
        if any(c.isPartition for c in spark.catalog.listColumns(table)):
            return None
        df = spark.table(table)
        schema = to_arrow_schema(df.schema)
        files = local_files(df.inputFiles())
        if files is None:
            return None
        blocks = file_blocks(files, schema.names)
    except Exception as e:  # noqa: BLE001 - an unusual table: RayDP reads it as Spark does
        log.debug("flowray: Spark table %r not read in place: %s", table, e)
        return None
    if blocks is None:
        return None
    log.info("flowray: Spark table %r read in place (%d file(s), %d row group(s))", table,
             len(files), len(blocks))
    return ParquetTableBlockStore(table, schema, blocks)
