"""Spark DataFrames into flowray jobs: RayDP converts a DataFrame into Ray Dataset blocks,
a small actor keeps references to them for as long as jobs may read (and, after a failure,
re-read) them, and :class:`RayBlockStore` reads one block in any task.

``spark_source(spark, df_or_table)`` is what ``env.from_spark`` calls on the driver.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from typing import Any, Dict, List, Optional

import ray
from ray.exceptions import RayError

from flowray.spark.session import SparkTableNotFoundError
from flowray.spark.block_source import ArrowBlockSource, BlockStore
from flowray.spark.parquet_table import parquet_table_store

from flowray.runtime.execution.cluster import NAMESPACE

__all__ = ["SparkTableNotFoundError", "RayBlockStore", "spark_source", "dataframe_blocks",
           "release_all_blocks"]

log = logging.getLogger(__name__)

# the driver's handles of the block holders: an actor lives while a handle does
_HOLDERS: Dict[str, Any] = {}
# the DataFrame each holder's blocks came from: RayDP keeps an Arrow copy of it cached in
# Spark (to refetch lost blocks) until it is released with the blocks
_DATAFRAMES: Dict[str, Any] = {}


@ray.remote(num_cpus=0)
class _BlockHolder:
    """Holds the Dataset's block references (so they stay in the object store)."""

    def __init__(self, refs: List[List[Any]]) -> None:
        self.refs = refs[0]

    def ref(self, block: int) -> List[Any]:
        return [self.refs[block]]  # nested: the caller gets the reference, not the table

    def size(self) -> int:
        return len(self.refs)


class RayBlockStore(BlockStore):
    """Blocks in the Ray object store, referenced by a named holder actor; with
    ``durable_dir``, also as Parquet files there (``block-<i>.parquet``), read when the
    object store copy is lost."""

    def __init__(self, holder_name: str, fields: Any, num_blocks: int,
                 durable_dir: Optional[str] = None) -> None:
        self.holder_name = holder_name
        self.fields = tuple(fields)
        self._num_blocks = int(num_blocks)
        self.durable_dir = durable_dir
        self._holder: Any = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_holder"] = None
        return state

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    def _handle(self) -> Any:
        if self._holder is None:
            try:
                self._holder = ray.get_actor(self.holder_name, namespace=NAMESPACE)
            except ValueError:
                raise RuntimeError(f"the Spark blocks {self.holder_name!r} are gone (released, "
                                   "or the driver that converted the DataFrame exited)") from None
        return self._holder

    def read(self, block: int) -> Any:
        try:
            (ref,) = ray.get(self._handle().ref.remote(block))
            return ray.get(ref)
        except (RuntimeError, RayError) as e:
            if self.durable_dir is None:
                raise
            import pyarrow.parquet as pq
            self._holder = None
            log.warning("flowray: Spark block %d lost from the object store (%s); reading "
                        "its durable copy", block, type(e).__name__)
            return pq.read_table(durable_block_path(self.durable_dir, block))

    def release(self) -> None:
        """Free the blocks and (on the driver that converted them) Spark's cached copy."""
        _HOLDERS.pop(self.holder_name, None)
        try:
            ray.kill(ray.get_actor(self.holder_name, namespace=NAMESPACE), no_restart=True)
        except ValueError:
            pass
        self._holder = None
        df = _DATAFRAMES.pop(self.holder_name, None)
        if df is not None:
            _release_spark_copy(df)


def _release_spark_copy(df: Any) -> None:
    """Unpersist the Arrow copy RayDP cached in Spark's executors for ``df``'s conversion
    (kept until Spark stops otherwise: executors run out of heap after a few)."""
    try:
        from raydp.spark.dataset import release_spark_recoverable
        release_spark_recoverable(df)
    except Exception as e:  # noqa: BLE001 - Spark stopped: the copy went with it
        log.debug("flowray: Spark's cached copy not released: %s", e)


def _resolve(spark: Any, df_or_table: Any) -> Any:
    if isinstance(df_or_table, str):
        if not spark.catalog.tableExists(df_or_table):
            known = sorted(t.name for t in spark.catalog.listTables())
            raise SparkTableNotFoundError(
                f"Spark table {df_or_table!r} does not exist (tables: "
                f"{', '.join(known) if known else 'none'})")
        return spark.table(df_or_table)
    if not hasattr(df_or_table, "sparkSession") or not hasattr(df_or_table, "schema"):
        raise TypeError(f"from_spark expects a Spark DataFrame or a table name, "
                        f"got {type(df_or_table).__name__}")
    return df_or_table


def durable_block_path(folder: str, block: int) -> str:
    return os.path.join(folder, f"block-{block:05d}.parquet")


def dataframe_blocks(spark: Any, df_or_table: Any,
                     durable_dir: Optional[str] = None) -> RayBlockStore:
    """Convert a DataFrame (or table) with RayDP; a store of its blocks. ``durable_dir``:
    also write each block there (a blocking stage's partition outlives lost objects)."""
    df = _resolve(spark, df_or_table)
    fields = list(df.columns)
    quiet = logging.getLogger("ray.data")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyspark's sql_ctx deprecation inside RayDP
            dataset = ray.data.from_spark(df)
            refs = dataset.to_arrow_refs()
    finally:
        quiet.setLevel(level)
    name = f"flowray-spark-blocks-{uuid.uuid4().hex[:12]}"
    holder = _BlockHolder.options(name=name, namespace=NAMESPACE).remote([refs])
    ray.get(holder.size.remote())
    _HOLDERS[name] = holder
    _DATAFRAMES[name] = df
    if durable_dir is not None:
        import pyarrow.parquet as pq
        os.makedirs(durable_dir, exist_ok=True)
        for i, ref in enumerate(refs):
            pq.write_table(ray.get(ref), durable_block_path(durable_dir, i))
    log.info("flowray: Spark DataFrame converted to %d block(s)", len(refs))
    return RayBlockStore(name, fields, len(refs), durable_dir)


def release_all_blocks() -> int:
    """Free every block this driver converted (their jobs must be done); how many stores."""
    names = list(_HOLDERS)
    for name in names:
        RayBlockStore(name, (), 0).release()
    return len(names)


def spark_source(spark: Any, df_or_table: Any, name: Optional[str] = None,
                 columnar: bool = False, batch_rows: int = 65536,
                 snapshot: bool = False) -> ArrowBlockSource:
    """A bounded, replayable source of the DataFrame's (or table's) rows (``columnar``:
    of its Arrow record batches, up to ``batch_rows`` rows each). A table Spark stores as
    unpartitioned Parquet files on a local path is read in place
    (:mod:`~flowray.spark.parquet_table`) unless ``snapshot``; everything else is
    converted by RayDP into the object store."""
    label = name or (f"Spark table {df_or_table}" if isinstance(df_or_table, str)
                     else "Spark DataFrame")
    store: Optional[BlockStore] = None
    if isinstance(df_or_table, str) and not snapshot:
        _resolve(spark, df_or_table)  # a missing table: the same error as converting
        store = parquet_table_store(spark, df_or_table)
    if store is None:
        store = dataframe_blocks(spark, df_or_table)
    return ArrowBlockSource(store, label, columnar=columnar, batch_rows=batch_rows)
