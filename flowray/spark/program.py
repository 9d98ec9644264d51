"""How the Spark plug-in joins a program: ``env.from_spark(...)``,
``stream.to_spark_dataframe(...)`` and the runner that executes a program with a Spark stage
in two jobs (the part before the stage, then the rest), all through the extension point of
:mod:`flowray.datastream.extensions`. Installed by :func:`install` when :mod:`flowray` is
imported.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from flowray.common.files import user_temp_dir
from flowray.common.options import BLOCKING_PARTITIONS_DIR
from flowray.datastream.columnar import ColumnarDataStream
from flowray.datastream.data_stream import DataStream
from flowray.datastream.extensions import (
    ProgramRunner,
    SubmitJob,
    add_method,
    register_program_runner,
)
from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment
from flowray.operators.parquet_sink import ParquetFilesSink
# the module, not its names: tests replace its functions (record_stage_output...) there
import flowray.spark.stage as spark_stages
from flowray.spark.session import get_or_create_spark
from flowray.spark.table_sink import arrow_schema_of

__all__ = ["from_spark", "to_spark_dataframe", "SparkStageRunner", "install"]

STATE_KEY = "spark"


@dataclass
class SparkProgramState:
    """What a program being built holds for Spark: its ``to_spark_dataframe`` stages and
    the ``from_spark`` sources that wait for them (transformation id -> source)."""

    stages: List[Any] = field(default_factory=list)
    deferred_sources: Dict[int, Any] = field(default_factory=dict)


def _state(env: StreamExecutionEnvironment) -> SparkProgramState:
    return env.extension_state(STATE_KEY, SparkProgramState)


def from_spark(self: StreamExecutionEnvironment, dataframe_or_table: Any,
               source_name: Optional[str] = None, columnar: bool = False,
               batch_rows: int = 65536, snapshot: bool = False) -> DataStream:
    """A bounded, replayable stream of a Spark DataFrame's (or table's) rows, as named
    :class:`~flowray.common.types.Row` s. RayDP converts it into Ray blocks now, on the
    driver (a table stored as unpartitioned Parquet files on a local path is read in place
    instead, see below); block ``b`` goes to source subtask ``b % parallelism`` and a
    restored subtask resumes at the exact row. A table name starts Spark if none is running
    (``flowray.spark.*`` and ``spark.*`` keys of this environment's configuration).
    ``columnar=True``: a :class:`~flowray.datastream.columnar.ColumnarDataStream` whose
    elements are the blocks' Arrow record batches (up to ``batch_rows`` rows), no rows.
    In-place reading: the tasks read the table's files, one block per row group, with no
    conversion; ``snapshot=True`` converts such a table too, so that the job can still
    replay it if the table is overwritten while the job runs."""
    spark = (get_or_create_spark(self.get_configuration())
             if isinstance(dataframe_or_table, str)
             else getattr(dataframe_or_table, "sparkSession", None))
    if spark is None:
        raise TypeError(f"from_spark expects a Spark DataFrame or a table name, "
                        f"got {type(dataframe_or_table).__name__}")
    state = _state(self)
    if state.stages and not isinstance(dataframe_or_table, str):
        # may depend on a to_spark_dataframe stage of this program: converted when
        # execute() gets there
        deferred = spark_stages.DeferredSparkSource(
            dataframe_or_table, source_name or "Spark DataFrame", columnar=columnar,
            batch_rows=batch_rows)
        stream = self.from_source(deferred, source_name=deferred.default_name)
        state.deferred_sources[stream._t.id] = deferred
        return ColumnarDataStream(self, stream._t) if columnar else stream
    from flowray.spark.source import spark_source  # imports Ray
    source = spark_source(spark, dataframe_or_table, source_name, columnar=columnar,
                          batch_rows=batch_rows, snapshot=snapshot)
    stream = self.from_source(source, source_name=source.default_name)
    return ColumnarDataStream(self, stream._t) if columnar else stream


def to_spark_dataframe(self: DataStream, output_type: Any) -> Any:
    """A Spark DataFrame of this stream's records, for Spark SQL and then
    ``env.from_spark(...)`` in the same program (a blocking stage: what comes after runs
    once this stream is complete). ``output_type``: ``Types.ROW_NAMED`` (or
    ``ROW``/``TUPLE``), the DataFrame's schema, needed before the data exists. The
    DataFrame reads the stage's files at every Spark action, so it can be used many times,
    also after the job."""
    if output_type is None:
        raise TypeError("to_spark_dataframe needs output_type (e.g. Types.ROW_NAMED(...)): "
                        "Spark needs the schema before the data exists")
    schema = arrow_schema_of(output_type)
    env = self._env
    config = env.get_configuration()
    root = config.get(BLOCKING_PARTITIONS_DIR) or user_temp_dir("partitions")
    folder = os.path.join(root, f"spark-stage-{uuid.uuid4().hex[:12]}")
    os.makedirs(folder, exist_ok=True)
    sink = self.sink_to(ParquetFilesSink(folder, schema, description="a Spark stage"))
    sink.name("Spark stage")
    _state(env).stages.append(spark_stages.SparkStage(folder, sink._ds._t.id))
    parallelism = self._t.parallelism or env.get_parallelism()
    return spark_stages.lazy_parquet_dataframe(get_or_create_spark(config), folder, schema,
                                               max(1, int(parallelism)))


class SparkStageRunner(ProgramRunner):
    """Runs a program whose ``from_spark`` sources wait for a Spark stage: first the part
    before the stage, then, once its files are converted, the rest. The stage's files are
    checked before the conversion: if some are gone, the part before runs again (once)."""

    def run(self, env: StreamExecutionEnvironment, transformations: List[Any],
            state: Optional[SparkProgramState], job_name: str,
            submit: SubmitJob) -> Any:
        if state is None or not state.deferred_sources:
            return None
        first, second = spark_stages.split_program(transformations,
                                                   set(state.deferred_sources))
        self._run_stage(env, first, state.stages, list(state.deferred_sources.values()),
                        job_name, submit)
        return submit(second, f"{job_name} (after Spark)")

    @staticmethod
    def _run_stage(env: StreamExecutionEnvironment, first: Sequence[Any], stages: List[Any],
                   deferred: List[Any], name: str, submit: SubmitJob) -> None:
        for attempt in range(2):
            if attempt == 0 or not all(spark_stages.stage_output_intact(s) for s in stages):
                for stage in stages:
                    spark_stages.reset_stage(stage)
                submit(first, f"{name} (before Spark)").wait()
                for stage in stages:
                    spark_stages.record_stage_output(stage)
            if all(spark_stages.stage_output_intact(s) for s in stages):
                break
        else:
            raise RuntimeError("the Spark stage's files disappeared twice while converting")
        spark = get_or_create_spark(env.get_configuration())
        for i, source in enumerate(deferred):  # "_": not part of the stage's DataFrame
            source.convert(spark, os.path.join(stages[0].folder, "_converted", str(i)))


_installed = False


def install() -> None:
    """Add ``from_spark`` / ``to_spark_dataframe`` and the stage runner (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    add_method(StreamExecutionEnvironment, "from_spark", from_spark)
    add_method(DataStream, "to_spark_dataframe", to_spark_dataframe)
    register_program_runner(STATE_KEY, SparkStageRunner())
