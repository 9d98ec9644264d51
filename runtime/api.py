"""The DataStream API, shaped like PyFlink's.

>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> ds = env.from_collection(["a b", "b"]).flat_map(lambda s: s.split())
>>> counts = ds.map(lambda w: (w, 1)).key_by(lambda t: t[0]).sum(1)
>>> sorted(counts.execute_and_collect())
[('a', 1), ('b', 1), ('b', 2)]
"""

from __future__ import annotations

import enum
import os
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

from flowray.operators.base import StreamOperator, keyed_state_methods_used
from flowray.operators.basic import (
    CoFlatMapOperator,
    CoMapOperator,
    CoProcessOperator,
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    ProcessOperator,
)
from flowray.operators.keyed import KeyedProcessOperator, KeyedReduceOperator, field_aggregator
from flowray.operators.sinks import (
    DriverSinkOperator,
    Sink,
    SinkFunctionOperator,
    SinkWriterOperator,
)
from flowray.operators.sources import CollectionSource, Source, SourceOperator
from flowray.state.backends import StateBackend
from flowray.operators.two_phase_commit import TwoPhaseCommitSink, TwoPhaseCommitSinkOperator

from flowray.runtime.checkpoint_config import (
    CheckpointConfig,
    CheckpointingMode,
    RestartStrategyConfiguration,
)
from flowray.runtime.client import CollectIterator, JobClient, JobExecutionResult
from flowray.runtime.config import (
    EXECUTION_TARGET,
    MAX_PARALLELISM,
    PARALLELISM,
    PIPELINE_NAME,
    Configuration,
)
from flowray.runtime.executor import JobExecutor, PreparedJob, prepare_job
from flowray.runtime.graph import (
    ChainingStrategy,
    GraphError,
    OperatorTransformation,
    PartitionTransformation,
    Transformation,
    UnionTransformation,
    build_job_graph,
    build_stream_graph,
)
from flowray.runtime.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    ShufflePartitioner,
    StreamPartitioner,
)

__all__ = [
    "RuntimeExecutionMode",
    "StreamExecutionEnvironment",
    "DataStream",
    "KeyedStream",
    "ConnectedStreams",
    "DataStreamSink",
]

DEFAULT_JOB_NAME = "Flink Streaming Job"


class RuntimeExecutionMode(enum.Enum):
    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"


def _check_not_keyed_state(fn: Any, operator_name: str) -> None:
    used = keyed_state_methods_used(fn)
    if used:
        raise GraphError(
            f"operator {operator_name!r} uses keyed state ({', '.join(used)}) but its input is "
            "not keyed; apply it to a KeyedStream (after key_by(...))")


class StreamExecutionEnvironment:
    """Entry point of a flowray program, as PyFlink's ``StreamExecutionEnvironment``."""

    def __init__(self, configuration: Optional[Configuration] = None) -> None:
        self._config = Configuration(configuration) if configuration is not None \
            else Configuration()
        self._parallelism = self._config.get(PARALLELISM)
        self._max_parallelism = self._config.get(MAX_PARALLELISM)
        self._transformations: List[Transformation] = []
        self._executor: Optional[JobExecutor] = None
        # Spark as a blocking stage: to_spark_dataframe boundaries and the from_spark
        # sources that wait for them (transformation id -> source)
        self._spark_stages: List[Any] = []
        self._deferred_spark_sources: Dict[int, Any] = {}

    @staticmethod
    def get_execution_environment(
        configuration: Optional[Configuration] = None,
    ) -> "StreamExecutionEnvironment":
        return StreamExecutionEnvironment(configuration)

    # -- settings ----------------------------------------------------------------------
    def get_configuration(self) -> Configuration:
        return self._config

    def configure(self, configuration: Configuration) -> "StreamExecutionEnvironment":
        self._config.add_all(configuration)
        self._parallelism = self._config.get(PARALLELISM)
        self._max_parallelism = self._config.get(MAX_PARALLELISM)
        return self

    def set_parallelism(self, parallelism: int) -> "StreamExecutionEnvironment":
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"parallelism must be a positive integer, got {parallelism!r}")
        self._parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        if not isinstance(max_parallelism, int) or not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in [1, 32768], got {max_parallelism!r}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def set_buffer_timeout(self, timeout_millis: int) -> "StreamExecutionEnvironment":
        self._config.set_string("execution.buffer-timeout", f"{int(timeout_millis)} ms")
        return self

    def set_runtime_mode(self, mode: RuntimeExecutionMode) -> "StreamExecutionEnvironment":
        self._config.set_string("execution.runtime-mode", mode.value)
        return self

    # -- checkpoints and restarts ----------------------------------------------------------
    def enable_checkpointing(self, interval: int,
                             mode: Optional[CheckpointingMode] = None
                             ) -> "StreamExecutionEnvironment":
        """Checkpoint every ``interval`` ms (``execution.checkpointing.interval``), in
        ``mode`` (default EXACTLY_ONCE)."""
        cc = self.get_checkpoint_config()
        cc.set_checkpoint_interval(interval)
        if mode is not None:
            cc.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return CheckpointConfig(self._config)

    def get_checkpoint_interval(self) -> int:
        return self.get_checkpoint_config().get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.get_checkpoint_config().get_checkpointing_mode()

    def set_state_backend(self, state_backend: StateBackend) -> "StreamExecutionEnvironment":
        """``HashMapStateBackend()`` (default) or ``EmbeddedRocksDBStateBackend()``."""
        if not isinstance(state_backend, StateBackend):
            raise TypeError(f"expected a state backend (HashMapStateBackend or "
                            f"EmbeddedRocksDBStateBackend), got {state_backend!r}")
        for k, v in state_backend.to_config().items():
            self._config.set_string(k, v)
        return self

    def set_restart_strategy(self, restart_strategy_configuration: RestartStrategyConfiguration
                             ) -> "StreamExecutionEnvironment":
        """As PyFlink's: e.g. ``RestartStrategies.fixed_delay_restart(3, 10000)``."""
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError("expected a RestartStrategies.* configuration, got "
                            f"{restart_strategy_configuration!r}")
        for key in list(self._config.key_set()):
            if key.startswith("restart-strategy."):
                self._config.remove_config(key)
        for k, v in restart_strategy_configuration.to_dict().items():
            self._config.set_string(k, v)
        return self

    def set_executor(self, executor: JobExecutor) -> "StreamExecutionEnvironment":
        """Run jobs with ``executor`` instead of the one ``execution.target`` names."""
        self._executor = executor
        return self

    # -- sources -----------------------------------------------------------------------
    def _add(self, t: Transformation) -> Transformation:
        self._transformations.append(t)
        return t

    def from_collection(self, collection: Iterable[Any], type_info: Any = None) -> "DataStream":
        """A bounded stream of the collection's items (parallelism 1, as in PyFlink)."""
        op = SourceOperator(CollectionSource(list(collection)), "Source: Collection Source")
        t = self._add(OperatorTransformation(op))
        t.parallelism = 1
        return DataStream(self, t)

    def from_source(self, source: Source, watermark_strategy: Any = None,
                    source_name: Optional[str] = None, type_info: Any = None) -> "DataStream":
        name = f"Source: {source_name}" if source_name else None
        op = SourceOperator(source, name)
        return DataStream(self, self._add(OperatorTransformation(op)))

    def from_spark(self, dataframe_or_table: Any,
                   source_name: Optional[str] = None) -> "DataStream":
        """A bounded, replayable stream of a Spark DataFrame's (or table's) rows, as named
        :class:`~flowray.common.types.Row` s. RayDP converts it into Ray blocks now, on
        the driver; block ``b`` goes to source subtask ``b % parallelism`` and a restored
        subtask resumes at the exact row. A table name starts Spark if none is running
        (``flowray.spark.*`` and ``spark.*`` keys of this environment's configuration)."""
        from flowray.spark import get_or_create_spark

        from flowray.runtime.spark_bridge import spark_source
        spark = (get_or_create_spark(self._config) if isinstance(dataframe_or_table, str)
                 else getattr(dataframe_or_table, "sparkSession", None))
        if spark is None:
            raise TypeError(f"from_spark expects a Spark DataFrame or a table name, "
                            f"got {type(dataframe_or_table).__name__}")
        if self._spark_stages and not isinstance(dataframe_or_table, str):
            # may depend on a to_spark_dataframe stage of this program: converted when
            # execute() gets there
            from flowray.runtime.spark_stages import DeferredSparkSource
            deferred = DeferredSparkSource(dataframe_or_table, source_name or "Spark DataFrame")
            stream = self.from_source(deferred, source_name=deferred.default_name)
            self._deferred_spark_sources[stream._t.id] = deferred
            return stream
        source = spark_source(spark, dataframe_or_table, source_name)
        return self.from_source(source, source_name=source.default_name)

    # -- running -----------------------------------------------------------------------
    def _prepare(self, job_name: Optional[str],
                 transformations: Optional[List[Transformation]] = None) -> PreparedJob:
        name = job_name or self._config.get(PIPELINE_NAME) or DEFAULT_JOB_NAME
        stream_graph = build_stream_graph(
            self._transformations if transformations is None else transformations, name,
            self._parallelism, self._max_parallelism)
        return prepare_job(build_job_graph(stream_graph), self._config.to_dict())

    def _make_executor(self) -> JobExecutor:
        if self._executor is not None:
            return self._executor
        if self._config.get(EXECUTION_TARGET) == "local":
            from flowray.runtime.local_executor import LocalExecutor
            return LocalExecutor()
        from flowray.runtime.actors import RayExecutor  # imports ray only when a job runs on Ray
        return RayExecutor()

    def execute_async(self, job_name: Optional[str] = None) -> JobClient:
        """Submit the job; a :class:`JobClient` to watch or cancel it. A program with a
        Spark stage followed by ``from_spark`` first runs (and waits for) the part before
        the stage, then submits the rest."""
        transformations = list(self._transformations)
        stages, deferred = self._spark_stages, self._deferred_spark_sources
        # as Flink: the next execute() starts a new program
        self._transformations.clear()
        self._spark_stages, self._deferred_spark_sources = [], {}
        if deferred:
            from flowray.runtime.spark_stages import split_program
            first, second = split_program(transformations, set(deferred))
            name = job_name or self._config.get(PIPELINE_NAME) or DEFAULT_JOB_NAME
            self._run_spark_stage(first, stages, list(deferred.values()), name)
            return self._submit(second, f"{name} (after Spark)")
        return self._submit(transformations, job_name)

    def _submit(self, transformations: List[Transformation],
                job_name: Optional[str]) -> JobClient:
        job = self._prepare(job_name, transformations)
        hooks = _driver_hooks(transformations)
        for fn in hooks:
            fn.prepare_on_driver()
        client = self._make_executor().submit(job)
        for fn in hooks:
            client.on_outcome(fn.finish_on_driver)
        return client

    def _run_spark_stage(self, first: List[Transformation], stages: List[Any],
                         deferred: List[Any], name: str) -> None:
        """Run the part before the Spark stage, then convert the sources after it. The
        stage's files are checked before the conversion: if some are gone, the part before
        runs again (once)."""
        from flowray.spark import get_or_create_spark

        from flowray.runtime import spark_stages
        for attempt in range(2):
            if attempt == 0 or not all(spark_stages.stage_output_intact(s) for s in stages):
                for stage in stages:
                    spark_stages.reset_stage(stage)
                self._submit(first, f"{name} (before Spark)").wait()
                for stage in stages:
                    spark_stages.record_stage_output(stage)
            if all(spark_stages.stage_output_intact(s) for s in stages):
                break
        else:
            raise RuntimeError("the Spark stage's files disappeared twice while converting")
        spark = get_or_create_spark(self._config)
        for i, source in enumerate(deferred):  # "_": not part of the stage's DataFrame
            source.convert(spark, os.path.join(stages[0].folder, "_converted", str(i)))

    def execute(self, job_name: Optional[str] = None) -> JobExecutionResult:
        """Run the job and wait for it; raises :class:`JobExecutionError` if it fails."""
        return self.execute_async(job_name).wait()

    def get_execution_plan(self) -> str:
        """The chained job graph as text: one line per task, with its inputs."""
        job = build_job_graph(build_stream_graph(self._transformations, "plan",
                                                 self._parallelism, self._max_parallelism))
        lines = []
        for v in job.topological_order():
            ins = ", ".join(f"{job.vertices[e.source_vertex].name} [{e.partitioner.name}]"
                            for e in v.inputs)
            lines.append(f"{v.name} (parallelism {v.parallelism})" + (f" <- {ins}" if ins else ""))
        return "\n".join(lines)

    def close(self) -> None:
        self._transformations.clear()


def _driver_hooks(transformations: Iterable[Any]) -> List[Any]:
    """User functions (e.g. sinks writing Spark tables) with work to do on the driver before
    the job is submitted (``prepare_on_driver()``) and once its outcome is known
    (``finish_on_driver(outcome)``)."""
    hooks, seen = [], set()
    for t in transformations:
        op = getattr(t, "operator", None)
        for fn in (op.user_functions() if op is not None else []):
            if id(fn) not in seen and callable(getattr(fn, "prepare_on_driver", None)) \
                    and callable(getattr(fn, "finish_on_driver", None)):
                seen.add(id(fn))
                hooks.append(fn)
    return hooks


class DataStream:
    """A stream of records, as PyFlink's ``DataStream``."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._t = transformation

    # -- naming and parallelism ----------------------------------------------------------
    def _physical(self, what: str) -> Transformation:
        if self._t.is_virtual:
            raise GraphError(f"cannot set {what} on a partitioning or union; set it on an "
                             "operator (e.g. after map)")
        return self._t

    def name(self, name: str) -> "DataStream":
        self._physical("a name").name = name
        return self

    def get_name(self) -> str:
        return self._t.name

    def uid(self, uid: str) -> "DataStream":
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"uid must be a non-empty string, got {uid!r}")
        self._physical("a uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"parallelism must be a positive integer, got {parallelism!r}")
        self._physical("parallelism").parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        self._physical("max parallelism").max_parallelism = max_parallelism
        return self

    def start_new_chain(self) -> "DataStream":
        self._physical("chaining").chaining = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> "DataStream":
        self._physical("chaining").chaining = ChainingStrategy.NEVER
        return self

    def slot_sharing_group(self, *_: Any) -> "DataStream":
        return self  # every subtask is its own actor: nothing to share

    # -- transformations ---------------------------------------------------------------
    def _one_input(self, op: StreamOperator) -> "DataStream":
        return DataStream(self._env, self._env._add(OperatorTransformation(op, [self._t])))

    def _check_stateless(self, fn: Any, name: str) -> None:
        _check_not_keyed_state(fn, name)

    def map(self, func: Any, output_type: Any = None) -> "DataStream":
        self._check_stateless(func, "Map")
        return self._one_input(MapOperator(func))

    def flat_map(self, func: Any, output_type: Any = None) -> "DataStream":
        self._check_stateless(func, "Flat Map")
        return self._one_input(FlatMapOperator(func))

    def filter(self, func: Any) -> "DataStream":
        self._check_stateless(func, "Filter")
        return self._one_input(FilterOperator(func))

    def process(self, func: Any, output_type: Any = None) -> "DataStream":
        self._check_stateless(func, "Process")
        return self._one_input(ProcessOperator(func))

    def key_by(self, key_selector: Any, key_type: Any = None) -> "KeyedStream":
        if not callable(key_selector) and not callable(getattr(key_selector, "get_key", None)):
            raise TypeError(f"key_by expects a function or KeySelector, got {key_selector!r}")
        partitioner = KeyGroupStreamPartitioner(key_selector, self._env._max_parallelism)
        return KeyedStream(self._env, PartitionTransformation(self._t, partitioner),
                           key_selector)

    def union(self, *streams: "DataStream") -> "DataStream":
        return DataStream(self._env, UnionTransformation([self._t] + [s._t for s in streams]))

    def connect(self, ds: "DataStream") -> "ConnectedStreams":
        return ConnectedStreams(self, ds)

    def _partition(self, partitioner: StreamPartitioner) -> "DataStream":
        return DataStream(self._env, PartitionTransformation(self._t, partitioner))

    def forward(self) -> "DataStream":
        return self._partition(ForwardPartitioner())

    def rebalance(self) -> "DataStream":
        return self._partition(RebalancePartitioner())

    def shuffle(self) -> "DataStream":
        return self._partition(ShufflePartitioner())

    def broadcast(self) -> "DataStream":
        return self._partition(BroadcastPartitioner())

    def global_(self) -> "DataStream":
        return self._partition(GlobalPartitioner())

    # -- sinks -------------------------------------------------------------------------
    def _sink(self, op: StreamOperator) -> "DataStreamSink":
        t = self._env._add(OperatorTransformation(op, [self._t]))
        return DataStreamSink(DataStream(self._env, t))

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """Print each record on the driver's stdout (``"2> record"`` when parallel)."""
        name = f"Sink: Print to Std. Out{f' ({sink_identifier})' if sink_identifier else ''}"
        return self._sink(DriverSinkOperator("print", uuid.uuid4().hex[:8], name))

    def to_spark_dataframe(self, output_type: Any) -> Any:
        """A Spark DataFrame of this stream's records, for Spark SQL and then
        ``env.from_spark(...)`` in the same program (a blocking stage: what comes after
        runs once this stream is complete). ``output_type``: ``Types.ROW_NAMED`` (or
        ``ROW``/``TUPLE``), the DataFrame's schema, needed before the data exists. The
        DataFrame reads the stage's files at every Spark action, so it can be used many
        times, also after the job."""
        import os
        import tempfile
        import uuid

        from flowray.datastream.connectors.spark import arrow_schema_of
        from flowray.operators.parquet_sink import ParquetFilesSink
        from flowray.spark import get_or_create_spark

        from flowray.runtime.config import BLOCKING_PARTITIONS_DIR
        from flowray.runtime.spark_stages import SparkStage, lazy_parquet_dataframe
        if output_type is None:
            raise TypeError("to_spark_dataframe needs output_type (e.g. Types.ROW_NAMED(...)): "
                            "Spark needs the schema before the data exists")
        schema = arrow_schema_of(output_type)
        env = self._env
        root = env._config.get(BLOCKING_PARTITIONS_DIR) or os.path.join(
            tempfile.gettempdir(), "flowray-partitions")
        folder = os.path.join(root, f"spark-stage-{uuid.uuid4().hex[:12]}")
        os.makedirs(folder, exist_ok=True)
        sink = self.sink_to(ParquetFilesSink(folder, schema, description="a Spark stage"))
        sink.name("Spark stage")
        env._spark_stages.append(SparkStage(folder, sink._ds._t.id))
        parallelism = self._t.parallelism or env._parallelism
        return lazy_parquet_dataframe(get_or_create_spark(env._config), folder, schema,
                                      max(1, int(parallelism)))

    def sink_to(self, sink: Union[Sink, TwoPhaseCommitSink]) -> "DataStreamSink":
        """Write to ``sink``: a :class:`Sink` (at-least-once) or a
        :class:`TwoPhaseCommitSink` such as ``FileSink`` (exactly-once with checkpoints)."""
        if isinstance(sink, TwoPhaseCommitSink):
            return self._sink(TwoPhaseCommitSinkOperator(sink))
        return self._sink(SinkWriterOperator(sink))

    def add_sink(self, sink_func: Any) -> "DataStreamSink":
        if isinstance(sink_func, TwoPhaseCommitSink):
            return self._sink(TwoPhaseCommitSinkOperator(sink_func))
        return self._sink(SinkFunctionOperator(sink_func))

    def execute_and_collect(self, job_name: Optional[str] = None,
                            limit: Optional[int] = None) -> Any:
        """Run the job; an iterator over this stream's records (a list if ``limit``).

        Close the iterator (or use it in ``with``) to cancel a job still running.
        """
        endpoint_id = uuid.uuid4().hex[:8]
        sink = self._sink(DriverSinkOperator("collect", endpoint_id))
        sink._ds._t.parallelism = 1
        client = self._env.execute_async(job_name)
        it = CollectIterator(client, client.endpoints_by_id[endpoint_id],  # type: ignore
                             limit)
        if limit is not None:
            with it:
                return list(it)
        return it


class DataStreamSink:
    def __init__(self, ds: DataStream) -> None:
        self._ds = ds

    def name(self, name: str) -> "DataStreamSink":
        self._ds.name(name)
        return self

    def uid(self, uid: str) -> "DataStreamSink":
        self._ds.uid(uid)
        return self

    def set_parallelism(self, parallelism: int) -> "DataStreamSink":
        self._ds.set_parallelism(parallelism)
        return self

    def disable_chaining(self) -> "DataStreamSink":
        self._ds.disable_chaining()
        return self


class KeyedStream(DataStream):
    """A stream partitioned by key; operators on it may use keyed state and timers."""

    def __init__(self, env: StreamExecutionEnvironment, t: Transformation,
                 key_selector: Any) -> None:
        super().__init__(env, t)
        self._key_selector = key_selector

    def _check_stateless(self, fn: Any, name: str) -> None:
        pass  # keyed state is allowed here

    def _keyed(self, op: StreamOperator) -> DataStream:
        return self._one_input(op)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(MapOperator(func, key_selector=self._key_selector))

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(FlatMapOperator(func, key_selector=self._key_selector))

    def filter(self, func: Any) -> DataStream:
        return self._keyed(FilterOperator(func, key_selector=self._key_selector))

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(KeyedProcessOperator(func, self._key_selector))

    def reduce(self, func: Any) -> DataStream:
        return self._keyed(KeyedReduceOperator(func, self._key_selector))

    def _aggregate(self, kind: str, field: Union[int, str]) -> DataStream:
        return self._keyed(KeyedReduceOperator(field_aggregator(kind, field), self._key_selector,
                                               name=f"Keyed Aggregation ({kind})"))

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("max_by", position_to_max_by)

    def _physical(self, what: str) -> Transformation:
        raise GraphError(f"cannot set {what} on a KeyedStream; set it on the operator after it")


class ConnectedStreams:
    """Two streams processed by one two-input function (``connect``)."""

    def __init__(self, first: DataStream, second: DataStream) -> None:
        self.stream1 = first
        self.stream2 = second

    def _two_input(self, op: StreamOperator) -> DataStream:
        env = self.stream1._env
        t = env._add(OperatorTransformation(op, [self.stream1._t, self.stream2._t]))
        return DataStream(env, t)

    def key_by(self, key_selector1: Any, key_selector2: Any) -> "ConnectedStreams":
        return ConnectedStreams(self.stream1.key_by(key_selector1),
                                self.stream2.key_by(key_selector2))

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        _check_not_keyed_state(func, "Co-Map")
        return self._two_input(CoMapOperator(func))

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        _check_not_keyed_state(func, "Co-Flat Map")
        return self._two_input(CoFlatMapOperator(func))

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        _check_not_keyed_state(func, "Co-Process")
        return self._two_input(CoProcessOperator(func))
