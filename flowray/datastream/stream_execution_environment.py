"""``StreamExecutionEnvironment``, as PyFlink's: settings, sources, and running the program
(``execute``, ``execute_async``). Plug-ins (Spark) add methods and take part in running a
program through :mod:`flowray.datastream.extensions`.

>>> from flowray.common import Configuration
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> env.from_collection([1, 2, 3]).map(lambda x: x + 1).execute_and_collect(limit=3)
[2, 3, 4]

Under the ``flowray`` command line (``flowray run [-d] [-p N] [-s PATH] [-D k=v] script.py``)
the client's settings reach the program as Flink's do: ``get_execution_environment()``
starts from the configuration the CLI passes in the environment variable
``FLOWRAY_CLIENT_CONFIG`` (a JSON object of Flink keys), and what the program sets itself
(a configuration given here, ``set_parallelism``...) takes precedence. With
``execution.attached=false`` (``flowray run -d``) ``execute()`` returns once the job's master
runs, printing the job id; the job runs on in the Ray cluster after the program exits.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from flowray.common.config_file import conf_dir_file, layered, load_config_file
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.options import (
    ATTACHED,
    CHECKPOINTING_INTERVAL,
    EXECUTION_TARGET,
    MAX_PARALLELISM,
    PARALLELISM,
    PIPELINE_NAME,
    SAVEPOINT_PATH,
    check_buffer_timeout,
)
from flowray.common.restart_strategy import RestartStrategyConfiguration
from flowray.common.type_conversion import record_converter
from flowray.operators.typed_output import declare_output_type
from flowray.datastream.checkpoint_config import CheckpointConfig
from flowray.datastream.checkpointing_mode import CheckpointingMode
from flowray.datastream.data_stream import DataStream
from flowray.datastream.environment_api import EnvironmentApiMixin, apply_chaining_setting
from flowray.datastream.execute_reminder import watch_if_main
from flowray.datastream.execution_mode import RuntimeExecutionMode
from flowray.datastream.extensions import program_runners
from flowray.operators.sources import CollectionSource, Source, SourceOperator
from flowray.runtime.execution.client import (
    DetachedJobExecutionResult,
    JobClient,
    JobExecutionResult,
)
from flowray.runtime.execution.executor import JobExecutor, PreparedJob, prepare_job
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.graph.stream_graph import build_stream_graph
from flowray.datastream.slot_sharing_group import ray_actor_resources
from flowray.runtime.graph.transformations import (
    OperatorTransformation,
    Transformation,
)
from flowray.state.state_backend import StateBackend

log = logging.getLogger(__name__)

__all__ = ["StreamExecutionEnvironment", "CLIENT_CONFIG_ENV", "client_configuration"]

DEFAULT_JOB_NAME = "Flink Streaming Job"

#: the environment variable through which ``flowray run`` hands its settings to the program
CLIENT_CONFIG_ENV = "FLOWRAY_CLIENT_CONFIG"


def client_configuration() -> Optional[Configuration]:
    """The settings ``flowray run`` passed to this program (``FLOWRAY_CLIENT_CONFIG``), or
    ``None`` when it was not started by the CLI.

    >>> os.environ[CLIENT_CONFIG_ENV] = '{"parallelism.default": "3"}'
    >>> client_configuration().get_integer("parallelism.default")
    3
    >>> del os.environ[CLIENT_CONFIG_ENV]
    >>> client_configuration() is None
    True
    """
    text = os.environ.get(CLIENT_CONFIG_ENV)
    if not text:
        return None
    try:
        values = json.loads(text)
    except ValueError as e:
        raise ConfigurationError(f"{CLIENT_CONFIG_ENV} is not a JSON object: {e}") from None
    if not isinstance(values, dict):
        raise ConfigurationError(f"{CLIENT_CONFIG_ENV} is not a JSON object: {text[:80]!r}")
    conf = Configuration()
    for key, value in values.items():
        conf.set_string(key, value)
    return conf


class StreamExecutionEnvironment(EnvironmentApiMixin):
    """Entry point of a flowray program, as PyFlink's ``StreamExecutionEnvironment`` (more
    methods in :mod:`flowray.datastream.environment_api`)."""

    def __init__(self, configuration: Optional[Configuration] = None) -> None:
        self._config = (
            Configuration(configuration) if configuration is not None else Configuration()
        )
        self._parallelism = self._config.get(PARALLELISM)
        self._max_parallelism = self._config.get(MAX_PARALLELISM)
        self._transformations: List[Transformation] = []
        self._executor: Optional[JobExecutor] = None
        # what plug-ins keep for the program being built (see flowray.datastream.extensions)
        self._extension_states: Dict[str, Any] = {}
        self._slot_sharing_groups: Dict[str, Any] = {}  # name -> SlotSharingGroup
        self._plan_shown = False   # get_execution_plan() was called: not a forgotten execute
        watch_if_main(self)

    @staticmethod
    def get_execution_environment(
        configuration: Optional[Configuration] = None,
    ) -> "StreamExecutionEnvironment":
        """The program's environment: under ``flowray run`` it starts from the CLI's
        settings (see the module docstring, they include the config file's), otherwise from
        ``$FLOWRAY_CONF_DIR/config.yaml`` if that is set; ``configuration`` overrides them."""
        client = client_configuration()
        if client is None:
            path = conf_dir_file()
            if path is None:
                return StreamExecutionEnvironment(configuration)
            return StreamExecutionEnvironment(layered(load_config_file(path), configuration))
        if configuration is not None:
            client.add_all(configuration)
        return StreamExecutionEnvironment(client)

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
        """How long a record may wait in a channel batch (``execution.buffer-timeout``):
        a positive number of milliseconds, ``0`` (send after every batch an operator
        emits: lowest latency) or ``-1`` (send only full batches: highest throughput)."""
        self._config.set_string("execution.buffer-timeout.interval",
                                str(check_buffer_timeout(timeout_millis)))
        return self

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode
                         ) -> "StreamExecutionEnvironment":
        self._config.set_string("execution.runtime-mode", execution_mode.value)
        return self

    # -- checkpoints and restarts ----------------------------------------------------------
    def enable_checkpointing(
        self, interval: int, mode: Optional[CheckpointingMode] = None
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
            raise TypeError(
                f"expected a state backend (HashMapStateBackend or "
                f"EmbeddedRocksDBStateBackend), got {state_backend!r}"
            )
        for k, v in state_backend.to_config().items():
            self._config.set_string(k, v)
        return self

    def set_restart_strategy(
        self, restart_strategy_configuration: RestartStrategyConfiguration
    ) -> "StreamExecutionEnvironment":
        """As PyFlink's: e.g. ``RestartStrategies.fixed_delay_restart(3, 10000)``."""
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError(
                "expected a RestartStrategies.* configuration, got "
                f"{restart_strategy_configuration!r}"
            )
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
        items = list(collection)
        convert = record_converter(type_info)
        if convert is not None:  # e.g. Types.FLOAT fields become 32-bit floats, as in PyFlink
            items = [convert(item) for item in items]  # RecordTypeError names the field
        op = SourceOperator(CollectionSource(items), "Source: Collection Source")
        t = self._add(OperatorTransformation(op))
        t.parallelism = 1
        t.output_type = type_info
        return DataStream(self, t)

    def from_source(
        self,
        source: Source,
        watermark_strategy: Any = None,
        source_name: Optional[str] = None,
        type_info: Any = None,
    ) -> "DataStream":
        name = f"Source: {source_name}" if source_name else None
        op = SourceOperator(source, name, watermark_strategy)
        declare_output_type(op, type_info)  # records are converted to it, as in PyFlink
        t = self._add(OperatorTransformation(op))
        if type_info is None:  # a source that knows what it produces (a Kafka deserializer)
            produced = getattr(source, "get_produced_type", None)
            type_info = produced() if callable(produced) else None
        t.output_type = type_info
        return DataStream(self, t)

    # -- running -----------------------------------------------------------------------
    def _prepare(
        self, job_name: Optional[str], transformations: Optional[List[Transformation]] = None
    ) -> PreparedJob:
        name = job_name or self._config.get(PIPELINE_NAME) or DEFAULT_JOB_NAME
        apply_chaining_setting(self._config, self._transformations if transformations is None
                               else transformations)
        stream_graph = build_stream_graph(
            self._transformations if transformations is None else transformations,
            name,
            self._parallelism,
            self._max_parallelism,
            group_resources={group_name: ray_actor_resources(group)
                             for group_name, group in self._slot_sharing_groups.items()},
        )
        config = self._config.to_dict()
        _warn_about_generated_uids(stream_graph.generated_uids, self._config)
        return prepare_job(build_job_graph(stream_graph), config)

    def _make_executor(self) -> JobExecutor:
        if self._executor is not None:
            return self._executor
        if self._config.get(EXECUTION_TARGET) == "local":
            if not self._config.get(ATTACHED):
                raise ConfigurationError(
                    "execution.attached=false needs execution.target=ray: the local "
                    "executor runs the job in this process")
            from flowray.runtime.execution.local_executor import LocalExecutor

            return LocalExecutor()
        from flowray.runtime.execution.ray_executor import (
            RayExecutor,  # imports ray only when a job runs on Ray
        )

        return RayExecutor()

    def execute_async(self, job_name: Optional[str] = None) -> JobClient:
        """Submit the job; a :class:`JobClient` to watch or cancel it. A plug-in's program
        runner may run the program in several jobs (e.g. around a Spark stage): the client
        is then the last job's."""
        transformations = list(self._transformations)
        states, self._extension_states = self._extension_states, {}
        # as Flink: the next execute() starts a new program
        self._transformations.clear()
        name = job_name or self._config.get(PIPELINE_NAME) or DEFAULT_JOB_NAME
        for key, runner in program_runners():
            client = runner.run(self, transformations, states.get(key), name, self._submit)
            if client is not None:
                return client
        return self._submit(transformations, job_name)

    def _submit(
        self, transformations: Sequence[Transformation], job_name: Optional[str]
    ) -> JobClient:
        _validate_against_job(transformations, self._config)
        job = self._prepare(job_name, list(transformations))
        hooks = _driver_hooks(transformations)
        for fn in hooks:
            fn.prepare_on_driver()
        client = self._make_executor().submit(job)
        for fn in hooks:
            client.on_outcome(fn.finish_on_driver)
        if getattr(client, "detached", False):
            # as Flink's client; `flowray run -d` shows it to the user
            print(f"Job has been submitted with JobID {client.get_job_id()} "
                  f"(name {client.get_job_name()!r})", flush=True)
        return client

    def extension_state(self, key: str, factory: Callable[[], Any]) -> Any:
        """The state a plug-in keeps for the program being built (created by ``factory``
        on first use, handed to the plug-in's program runner at ``execute_async``)."""
        if key not in self._extension_states:
            self._extension_states[key] = factory()
        return self._extension_states[key]

    def execute(
        self, job_name: Optional[str] = None
    ) -> "JobExecutionResult | DetachedJobExecutionResult":
        """Run the job and wait for it; raises :class:`JobExecutionError` if it fails.
        Detached (``execution.attached=false``): return once the job runs, with a
        :class:`DetachedJobExecutionResult` (its id); the job outlives this process."""
        client = self.execute_async(job_name)
        if getattr(client, "detached", False):
            return DetachedJobExecutionResult(client.get_job_id(), client.get_job_name())
        return client.wait()

    def get_execution_plan(self) -> str:
        """The chained job graph as text: one line per task, with its inputs."""
        self._plan_shown = True
        apply_chaining_setting(self._config, self._transformations)
        job = build_job_graph(
            build_stream_graph(
                self._transformations, "plan", self._parallelism, self._max_parallelism
            )
        )
        lines = []
        for v in job.topological_order():
            ins = ", ".join(
                f"{job.vertices[e.source_vertex].name} [{e.partitioner.name}]" for e in v.inputs
            )
            lines.append(f"{v.name} (parallelism {v.parallelism})" + (f" <- {ins}" if ins else ""))
        return "\n".join(lines)

    def close(self) -> None:
        self._transformations.clear()


def _validate_against_job(transformations: Iterable[Any], config: Configuration) -> None:
    """At submission: user functions that check themselves against the job's settings
    (``validate_job_config(checkpoint_interval_ms)``, e.g. a Kafka sink's transaction
    timeout) raise a clear error before anything runs."""
    interval = config.get(CHECKPOINTING_INTERVAL)
    for t in transformations:
        op = getattr(t, "operator", None)
        for fn in op.user_functions() if op is not None else []:
            check = getattr(fn, "validate_job_config", None)
            if callable(check):
                check(interval)


def _driver_hooks(transformations: Iterable[Any]) -> List[Any]:
    """User functions (e.g. sinks writing Spark tables) with work to do on the driver before
    the job is submitted (``prepare_on_driver()``) and once its outcome is known
    (``finish_on_driver(outcome)``)."""
    hooks, seen = [], set()
    for t in transformations:
        op = getattr(t, "operator", None)
        for fn in op.user_functions() if op is not None else []:
            if (
                id(fn) not in seen
                and callable(getattr(fn, "prepare_on_driver", None))
                and callable(getattr(fn, "finish_on_driver", None))
            ):
                seen.add(id(fn))
                hooks.append(fn)
    return hooks


def _warn_about_generated_uids(generated: Dict[str, str], config: Configuration) -> None:
    """Once per job with checkpoints or a savepoint to restore: operators without a uid
    get one from their place in the program, which a change of the program may move."""
    if not generated or (config.get(CHECKPOINTING_INTERVAL) is None
                         and not config.get(SAVEPOINT_PATH)):
        return
    names = sorted(generated)
    log.warning("flowray: %d operator(s) have no uid (%s%s); their state is matched by a "
                "hash of their place in the job, which changes when the job changes: set "
                ".uid(...) on stateful operators so savepoints restore across versions",
                len(names), ", ".join(repr(n) for n in names[:5]),
                ", ..." if len(names) > 5 else "")
