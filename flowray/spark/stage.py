"""Spark as a blocking stage inside a flowray program: ``stream.to_spark_dataframe(type)``
-> Spark SQL -> ``env.from_spark(df)``.

The stage boundary is run from the driver (PySpark lives there, not in the job master):

1. ``to_spark_dataframe`` adds a :class:`~flowray.operators.parquet_sink.ParquetFilesSink`
   into a fresh folder (the blocking partition) and returns a Spark DataFrame that reads
   that folder lazily, at each Spark action (:func:`lazy_parquet_dataframe`), so Spark SQL
   built on it before the data exists sees the data once it does, as often as needed.
2. ``from_spark(df)`` while such a stage is pending gives a :class:`DeferredSparkSource`,
   converted (RayDP) only when the program reaches it.
3. ``execute`` splits the program (:func:`split_program`): the part that does not depend on
   a deferred source runs first, as one job; then the deferred sources are converted;
   then the rest runs as a second job. A failure in the second job re-reads the converted
   blocks (the source is replayable), from the object store or, if it lost them, from the
   durable copy written at conversion; the first job is not run again unless its folder
   is gone (:func:`stage_output_intact`), in which case it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from flowray.spark.block_source import ArrowBlockSource, BlockStore

__all__ = ["SparkStage", "DeferredSparkSource", "SparkStageError", "split_program",
           "lazy_parquet_dataframe", "stage_output_intact", "record_stage_output",
           "reset_stage"]


class SparkStageError(ValueError):
    """A program shape the Spark stage boundary cannot run."""


@dataclass
class SparkStage:
    """One ``to_spark_dataframe`` boundary: where its files go, what was committed."""

    folder: str
    sink_transformation_id: int
    files: List[str] = field(default_factory=list)   # after the first job


class _PendingBlockStore(BlockStore):
    fields = ()

    @property
    def num_blocks(self) -> int:
        raise SparkStageError("this Spark source is converted when its stage runs")

    def read(self, block: int) -> Any:
        raise SparkStageError("this Spark source is converted when its stage runs")


class DeferredSparkSource(ArrowBlockSource):
    """A Spark source whose DataFrame depends on a stage that has not run yet."""

    def __init__(self, dataframe: Any, name: str = "Spark DataFrame", columnar: bool = False,
                 batch_rows: int = 65536) -> None:
        super().__init__(_PendingBlockStore(), name, columnar=columnar, batch_rows=batch_rows)
        self.dataframe = dataframe

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["dataframe"] = None  # a Spark object stays on the driver
        return state

    def convert(self, spark: Any, durable_dir: Optional[str] = None) -> None:
        """Convert now (the stage has run); ``durable_dir``: keep a copy of the blocks
        there, read if the object store loses them."""
        from flowray.spark.source import dataframe_blocks
        self.store = dataframe_blocks(spark, self.dataframe, durable_dir)


def split_program(transformations: Sequence[Any], deferred_ids: Set[int]
                  ) -> Tuple[List[Any], List[Any]]:
    """(first, second): ``second`` is every transformation downstream of a deferred source
    (those included), ``first`` the rest, each in program order. Inputs are followed
    through transformations not in the list (unions, partitionings). A transformation of
    the second part reading a stream of the first (other than through Spark) is an error."""
    memo: Dict[int, bool] = {}

    def after_stage(t: Any) -> bool:
        if t.id not in memo:
            memo[t.id] = t.id in deferred_ids or any(after_stage(i) for i in t.inputs)
        return memo[t.id]

    def check(t: Any, seen: Set[int]) -> None:
        if t.id in seen or t.id in deferred_ids:
            return
        seen.add(t.id)
        for i in t.inputs:
            if not after_stage(i):
                raise SparkStageError(
                    f"'{t.name}' reads '{i.name}', a stream from before the Spark stage; "
                    "after to_spark_dataframe() the program may only continue from "
                    "env.from_spark(...)")
            check(i, seen)

    seen: Set[int] = set()
    for t in transformations:
        if after_stage(t):
            check(t, seen)
    return ([t for t in transformations if not after_stage(t)],
            [t for t in transformations if after_stage(t)])


def _committed_files(folder: str) -> List[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(".parquet"))
    except FileNotFoundError:
        return []


def stage_output_intact(stage: SparkStage) -> bool:
    """Every file the stage's job committed is still there."""
    present = set(_committed_files(stage.folder))
    return all(f in present for f in stage.files)


def reset_stage(stage: SparkStage) -> None:
    """Before the producer runs again: drop what is left of its earlier output."""
    import shutil
    shutil.rmtree(os.path.join(stage.folder, "_converted"), ignore_errors=True)
    for name in _committed_files(stage.folder):
        try:
            os.remove(os.path.join(stage.folder, name))
        except FileNotFoundError:
            pass
    stage.files = []


def record_stage_output(stage: SparkStage) -> None:
    stage.files = _committed_files(stage.folder)


def _read_partition(folder: str, partitions: int, names: Sequence[str]):  # pragma: no cover
    """Rows of the files of one Spark partition (runs in Spark's Python workers)."""
    def read(index_iter):
        import pyarrow.parquet as pq
        for index in index_iter:
            for name in sorted(os.listdir(folder)):
                if not name.endswith(".parquet"):
                    continue
                if int(name.rsplit("-", 2)[1]) % partitions != index:
                    continue
                table = pq.read_table(os.path.join(folder, name))
                columns = [table.column(n).to_pylist() for n in names]
                yield from zip(*columns)
    return read


def lazy_parquet_dataframe(spark: Any, folder: str, arrow_schema: Any, partitions: int) -> Any:
    """A DataFrame of the Parquet files that will be committed into ``folder``: each Spark
    action lists and reads them again (partition ``i`` reads the files of subtasks ``s``
    with ``s % partitions == i``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(arrow_schema)
    names = list(arrow_schema.names)
    rdd = spark.sparkContext.parallelize(range(partitions), partitions).mapPartitions(
        _read_partition(folder, partitions, names))
    return spark.createDataFrame(rdd, schema)
