"""``ExecutionConfig``, as PyFlink's ``env.get_config()``: a view of the environment's
settings. Parallelism, max parallelism, the auto-watermark interval and global job
parameters are flowray settings; JVM serializer switches (Kryo, Avro, closure cleaner,
generic types) are accepted with a one-time warning that they do nothing here.

>>> from flowray.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> cfg = env.get_config().set_parallelism(3).set_auto_watermark_interval(50)
>>> env.get_parallelism(), cfg.get_auto_watermark_interval()
(3, 50)
>>> cfg.set_global_job_parameters({"threshold": "7"}).get_global_job_parameters()
{'threshold': '7'}
"""

from __future__ import annotations

from typing import Any, Dict

from flowray.common.compat import not_implemented, warn_once
from flowray.common.configuration import Configuration
from flowray.common.options import AUTO_WATERMARK_INTERVAL
from flowray.common.pyflink_options import GLOBAL_JOB_PARAMETERS, OBJECT_REUSE

__all__ = ["ExecutionConfig"]


class ExecutionConfig:
    """The execution settings of one environment (what ``env.get_config()`` returns).

    ``environment`` is the ``StreamExecutionEnvironment`` whose settings this reads and
    writes (its ``get_configuration()``, ``set_parallelism``...)."""

    PARALLELISM_DEFAULT = -1
    PARALLELISM_UNKNOWN = -2

    def __init__(self, environment: Any) -> None:
        self._env = environment
        self._jvm_flags: Dict[str, bool] = {}

    @property
    def _config(self) -> Configuration:
        return self._env.get_configuration()

    # -- flowray settings ------------------------------------------------------------
    def set_parallelism(self, parallelism: int) -> "ExecutionConfig":
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "ExecutionConfig":
        self._env.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._env.get_max_parallelism()

    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        """Periodic watermarks every ``interval`` ms (``pipeline.auto-watermark-interval``)."""
        self._config.set_string(AUTO_WATERMARK_INTERVAL.key, f"{int(interval)} ms")
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._config.get(AUTO_WATERMARK_INTERVAL)

    def set_global_job_parameters(self, global_job_parameters_dict: Dict[str, str]
                                  ) -> "ExecutionConfig":
        """Every function reads these with ``RuntimeContext.get_job_parameter(key)``."""
        if not isinstance(global_job_parameters_dict, dict):
            raise TypeError("set_global_job_parameters expects a dict of strings, got "
                            f"{global_job_parameters_dict!r}")
        self._config.set_string(GLOBAL_JOB_PARAMETERS.key,
                                {str(k): str(v) for k, v in global_job_parameters_dict.items()})
        return self

    def get_global_job_parameters(self) -> Dict[str, str]:
        return dict(self._config.get(GLOBAL_JOB_PARAMETERS))

    def enable_object_reuse(self) -> "ExecutionConfig":
        """Accepted: flowray never copies records between chained operators, so every
        job behaves as with object reuse."""
        self._config.set_string(OBJECT_REUSE.key, "true")
        return self

    def disable_object_reuse(self) -> "ExecutionConfig":
        self._config.set_string(OBJECT_REUSE.key, "false")
        return self

    def is_object_reuse_enabled(self) -> bool:
        return bool(self._config.get(OBJECT_REUSE))

    # -- JVM serializer switches: accepted, warned once, remembered --------------------
    def _jvm(self, flag: str, value: bool) -> "ExecutionConfig":
        warn_once(f"ExecutionConfig.{flag}",
                  f"flowray: ExecutionConfig {flag} is a JVM serializer setting and does "
                  "nothing here (records are Python objects, pickled between tasks)")
        self._jvm_flags[flag] = value
        return self

    def enable_force_kryo(self) -> "ExecutionConfig":
        return self._jvm("force_kryo", True)

    def disable_force_kryo(self) -> "ExecutionConfig":
        return self._jvm("force_kryo", False)

    def is_force_kryo_enabled(self) -> bool:
        return self._jvm_flags.get("force_kryo", False)

    def enable_force_avro(self) -> "ExecutionConfig":
        return self._jvm("force_avro", True)

    def disable_force_avro(self) -> "ExecutionConfig":
        return self._jvm("force_avro", False)

    def is_force_avro_enabled(self) -> bool:
        return self._jvm_flags.get("force_avro", False)

    def enable_generic_types(self) -> "ExecutionConfig":
        return self._jvm("generic_types", True)

    def disable_generic_types(self) -> "ExecutionConfig":
        return self._jvm("generic_types", False)

    def has_generic_types_disabled(self) -> bool:
        return not self._jvm_flags.get("generic_types", True)

    def enable_closure_cleaner(self) -> "ExecutionConfig":
        return self._jvm("closure_cleaner", True)

    def disable_closure_cleaner(self) -> "ExecutionConfig":
        return self._jvm("closure_cleaner", False)

    def is_closure_cleaner_enabled(self) -> bool:
        return self._jvm_flags.get("closure_cleaner", True)

    def get_registered_kryo_types(self) -> list:
        return []

    def get_registered_pojo_types(self) -> list:
        return []

    def get_default_kryo_serializer_classes(self) -> dict:
        return {}

    # -- not implemented ---------------------------------------------------------------
    enable_auto_generated_uids = not_implemented(
        "ExecutionConfig.enable_auto_generated_uids",
        "operators without .uid(...) always get a generated uid (a warning names them)")
    disable_auto_generated_uids = not_implemented(
        "ExecutionConfig.disable_auto_generated_uids",
        "set .uid(...) on every stateful operator; flowray warns about the ones without")
    has_auto_generated_uids_enabled = not_implemented(
        "ExecutionConfig.has_auto_generated_uids_enabled",
        "generated uids are always enabled in flowray")
    set_latency_tracking_interval = not_implemented(
        "ExecutionConfig.set_latency_tracking_interval",
        "no latency markers; use the job's progress metrics (JobClient.get_job_info)")
    get_latency_tracking_interval = not_implemented(
        "ExecutionConfig.get_latency_tracking_interval", "no latency markers in flowray")
    set_task_cancellation_interval = not_implemented(
        "ExecutionConfig.set_task_cancellation_interval",
        "tasks are Ray actors, killed when they do not stop")
    get_task_cancellation_interval = not_implemented(
        "ExecutionConfig.get_task_cancellation_interval",
        "tasks are Ray actors, killed when they do not stop")
    set_task_cancellation_timeout = not_implemented(
        "ExecutionConfig.set_task_cancellation_timeout",
        "tasks are Ray actors, killed when they do not stop")
    get_task_cancellation_timeout = not_implemented(
        "ExecutionConfig.get_task_cancellation_timeout",
        "tasks are Ray actors, killed when they do not stop")
    set_use_snapshot_compression = not_implemented(
        "ExecutionConfig.set_use_snapshot_compression",
        "snapshots are written as the state backend writes them; no extra compression")
    is_use_snapshot_compression = not_implemented(
        "ExecutionConfig.is_use_snapshot_compression", "snapshot compression is not offered")
