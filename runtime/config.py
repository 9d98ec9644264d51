"""Configuration with Flink's string keys, typed options and clear errors.

>>> c = Configuration()
>>> _ = c.set_string("execution.buffer-timeout", "50 ms")
>>> c.get(BUFFER_TIMEOUT)
50
>>> Configuration().set_string("execution.bufer-timeout", "1")
Traceback (most recent call last):
...
flowray.runtime.config.ConfigurationError: unknown configuration key 'execution.bufer-timeout' (did you mean 'execution.buffer-timeout'?)
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence

__all__ = [
    "ConfigurationError",
    "ConfigOption",
    "Configuration",
    "parse_duration_ms",
    "parse_memory_bytes",
    "all_options",
    "PARALLELISM",
    "MAX_PARALLELISM",
    "BUFFER_TIMEOUT",
    "RUNTIME_MODE",
    "BLOCKING_PARTITIONS_DIR",
    "PIPELINE_NAME",
    "RAY_ADDRESS",
    "CHANNEL_TRANSPORT",
    "CHANNEL_BATCH_SIZE",
    "CHANNEL_CREDITS",
    "DEPLOY_TIMEOUT",
    "PROGRESS_INTERVAL",
    "EXECUTION_TARGET",
    "CHECKPOINTING_INTERVAL",
    "CHECKPOINTING_MODE",
    "CHECKPOINTING_TIMEOUT",
    "CHECKPOINTING_MIN_PAUSE",
    "CHECKPOINTING_MAX_CONCURRENT",
    "CHECKPOINTING_TOLERABLE_FAILURES",
    "CHECKPOINTING_UNALIGNED",
    "CHECKPOINTS_DIR",
    "STATE_BACKEND_TYPE",
    "ROCKSDB_LOCAL_DIR",
    "CHECKPOINTS_RETENTION",
    "CHECKPOINTS_NUM_RETAINED",
    "MEMORY_THRESHOLD",
    "FAILOVER_STRATEGY",
    "RESTART_STRATEGY_TYPE",
    "FIXED_DELAY_ATTEMPTS",
    "FIXED_DELAY_DELAY",
    "FAILURE_RATE_MAX_FAILURES",
    "FAILURE_RATE_INTERVAL",
    "FAILURE_RATE_DELAY",
    "EXP_DELAY_INITIAL_BACKOFF",
    "EXP_DELAY_MAX_BACKOFF",
    "EXP_DELAY_MULTIPLIER",
    "EXP_DELAY_RESET_THRESHOLD",
    "EXP_DELAY_JITTER",
    "EXP_DELAY_ATTEMPTS_BEFORE_RESET",
    "parse_count_or_infinite",
]


class ConfigurationError(ValueError):
    """An unknown key, or a value that does not parse for its key."""


_DURATION_UNITS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3,
    "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Zµ]*)\s*$")


def parse_duration_ms(value: Any) -> int:
    """Milliseconds in a Flink duration: ``"10 s"``, ``"1 min"``, ``"10000 ms"``, ``500``.

    A bare number means milliseconds, as in Flink.

    >>> parse_duration_ms("2 min"), parse_duration_ms("10000 ms"), parse_duration_ms(250)
    (120000, 10000, 250)
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"duration must be finite: {value!r}")
        if value < 0:
            raise ValueError(f"duration must not be negative: {value!r}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r}")
    m = _DURATION_RE.match(value)
    if not m:
        raise ValueError(f"not a duration: {value!r} (expected e.g. '10 s', '1 min', '500 ms')")
    number, unit = m.group(1), m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(
            f"unknown time unit {m.group(2)!r} in {value!r} (use ms, s, min, h or d)"
        )
    return int(round(float(number) * _DURATION_UNITS[unit]))


_MEMORY_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
                 "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def parse_memory_bytes(value: Any) -> int:
    """Bytes in a Flink memory size: ``"64 mb"``, ``"1g"``, ``4096``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = re.match(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$", str(value))
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"not a memory size: {value!r} (expected e.g. '64 mb', '1 gb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    raise ValueError(f"not an integer: {value!r}")


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"not a boolean: {value!r} (use true or false)")


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"not a number: {value!r}") from None


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}")
    return value


@dataclass(frozen=True)
class ConfigOption:
    """A typed configuration key with a default, like Flink's ``ConfigOption``."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    description: str
    choices: Optional[Sequence[str]] = None
    check: Optional[Callable[[Any], Optional[str]]] = None
    aliases: Mapping[str, str] = None  # type: ignore[assignment]

    def convert(self, raw: Any) -> Any:
        if self.choices is not None:
            text = str(raw).strip().lower()
            canonical = (self.aliases or {}).get(text, text)
            for choice in self.choices:
                if canonical == choice.lower():
                    return choice
            raise ConfigurationError(
                f"invalid value {raw!r} for configuration key {self.key!r}: "
                f"expected one of {', '.join(self.choices)}"
            )
        try:
            value = self.parse(raw)
        except ValueError as e:
            raise ConfigurationError(
                f"invalid value {raw!r} for configuration key {self.key!r}: {e}"
            ) from None
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ConfigurationError(
                    f"invalid value {raw!r} for configuration key {self.key!r}: {problem}"
                )
        return value


_REGISTRY: Dict[str, ConfigOption] = {}


def _option(key: str, parse: Callable[[Any], Any], default: Any, description: str,
            **kwargs: Any) -> ConfigOption:
    opt = ConfigOption(key, parse, default, description, **kwargs)
    _REGISTRY[key] = opt
    return opt


def all_options() -> Dict[str, ConfigOption]:
    """Every supported key, for docs and validation."""
    return dict(_REGISTRY)


def _positive(v: Any) -> Optional[str]:
    return None if v > 0 else "must be positive"


def _max_parallelism(v: int) -> Optional[str]:
    return None if 0 < v <= 32768 else "must be in [1, 32768]"


PARALLELISM = _option("parallelism.default", _parse_int, 1,
                      "Default parallelism of operators.", check=_positive)
MAX_PARALLELISM = _option("pipeline.max-parallelism", _parse_int, 128,
                          "Number of key groups; the upper bound for rescaling.",
                          check=_max_parallelism)
BUFFER_TIMEOUT = _option("execution.buffer-timeout", parse_duration_ms, 100,
                         "Longest time a record waits in a channel batch before it is sent.")
RUNTIME_MODE = _option("execution.runtime-mode", _parse_str, "STREAMING",
                       "STREAMING, BATCH (every non-forward exchange is blocking: stages run "
                       "one after another, a failure restarts one stage), or AUTOMATIC "
                       "(BATCH when every source is bounded).",
                       choices=("STREAMING", "BATCH", "AUTOMATIC"))
BLOCKING_PARTITIONS_DIR = _option(
    "flowray.blocking-partitions.dir", _parse_str, None,
    "Where BATCH-mode blocking result partitions are written (a folder every task can "
    "reach); unset: flowray-partitions in the system temp folder.")
PIPELINE_NAME = _option("pipeline.name", _parse_str, None, "Job name used when none is given.")
RAY_ADDRESS = _option("ray.address", _parse_str, None,
                      "Ray cluster to join (also RAY_ADDRESS); unset: embedded local Ray.")
CHANNEL_TRANSPORT = _option("flowray.channel.transport", _parse_str, "socket",
                            "Data plane between tasks: 'socket' (unix/TCP streams) or 'ray' "
                            "(actor calls carrying serialized batches).",
                            choices=("socket", "ray"))
CHANNEL_BATCH_SIZE = _option("flowray.channel.batch-size", _parse_int, 1000,
                             "Records per channel batch before it is flushed.", check=_positive)
CHANNEL_CREDITS = _option("flowray.channel.credits", _parse_int, 8,
                          "Batches a writer may have unacknowledged per channel.",
                          check=_positive)
DEPLOY_TIMEOUT = _option("flowray.deploy-timeout", parse_duration_ms, 120_000,
                         "How long tasks may take to start and connect their channels.",
                         check=_positive)
EXECUTION_TARGET = _option("execution.target", _parse_str, "ray",
                           "Where jobs run: 'ray' (task actors) or 'local' (threads in the "
                           "driver; for tests and debugging).", choices=("ray", "local"))
# -- Spark through RayDP -------------------------------------------------------------------
#: every ``spark.*`` key is passed to the Spark session as is
SPARK_PASSTHROUGH_PREFIX = "spark."
SPARK_APP_NAME = _option("flowray.spark.app-name", _parse_str, "flowray",
                         "Name of the Spark application flowray starts through RayDP.")
SPARK_EXECUTORS = _option("flowray.spark.executors", _parse_int, 1,
                          "Spark executors (each a Ray actor holding executor-cores CPUs).",
                          check=_positive)
SPARK_EXECUTOR_CORES = _option("flowray.spark.executor-cores", _parse_int, 1,
                               "CPU cores per Spark executor.", check=_positive)
SPARK_EXECUTOR_MEMORY = _option("flowray.spark.executor-memory", _parse_str, "1g",
                                "Memory per Spark executor (e.g. 512m, 2g).",
                                check=lambda v: None if re.fullmatch(
                                    r"\s*\d+\s*([kmgt]b?|b)?\s*", str(v).lower())
                                else "must be a size such as 512m or 2g")
SPARK_ENABLE_HIVE = _option("flowray.spark.enable-hive", _parse_bool, False,
                            "Use an embedded Hive metastore (tables persist across sessions).")

PROGRESS_INTERVAL = _option("flowray.progress-interval", parse_duration_ms, 10_000,
                            "How often a running job logs a progress line (0: never).")



# -- checkpointing (Flink's keys and defaults) ------------------------------------------
INFINITE = (1 << 31) - 1  # Flink's Integer.MAX_VALUE for "no limit"


def parse_count_or_infinite(value: Any) -> int:
    """A non-negative count, or ``"infinite"`` / ``"inf"`` (Flink's Integer.MAX_VALUE)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinite", "infinity"):
        return INFINITE
    n = _parse_int(value)
    if n < 0:
        raise ValueError("must not be negative")
    return n


def _non_negative(v: Any) -> Optional[str]:
    return None if v >= 0 else "must not be negative"


def _at_least_one(v: Any) -> Optional[str]:
    return None if v >= 1 else "must be at least 1"


CHECKPOINTING_INTERVAL = _option(
    "execution.checkpointing.interval", parse_duration_ms, None,
    "Time between checkpoint triggers; unset: checkpointing is off.", check=_positive)
CHECKPOINTING_MODE = _option(
    "execution.checkpointing.mode", _parse_str, "EXACTLY_ONCE",
    "EXACTLY_ONCE (barriers are aligned) or AT_LEAST_ONCE (never blocks an input).",
    choices=("EXACTLY_ONCE", "AT_LEAST_ONCE"),
    aliases={"exactly-once": "exactly_once", "at-least-once": "at_least_once"})
CHECKPOINTING_TIMEOUT = _option(
    "execution.checkpointing.timeout", parse_duration_ms, 600_000,
    "A checkpoint not complete after this long is aborted (reason: expired).", check=_positive)
CHECKPOINTING_MIN_PAUSE = _option(
    "execution.checkpointing.min-pause", parse_duration_ms, 0,
    "Least time between the end of one checkpoint and the trigger of the next.")
CHECKPOINTING_MAX_CONCURRENT = _option(
    "execution.checkpointing.max-concurrent-checkpoints", _parse_int, 1,
    "Checkpoints that may be in progress at once.", check=_at_least_one)
CHECKPOINTING_TOLERABLE_FAILURES = _option(
    "execution.checkpointing.tolerable-failed-checkpoints", _parse_int, 0,
    "Consecutive checkpoint failures (expired, failed asynchronous part, storage errors) "
    "tolerated before the job fails over.", check=_non_negative)
CHECKPOINTING_UNALIGNED = _option(
    "execution.checkpointing.unaligned", _parse_bool, False,
    "Unaligned checkpoints (not supported: must be false).",
    check=lambda v: "unaligned checkpoints are not supported yet" if v else None)
CHECKPOINTS_RETENTION = _option(
    "execution.checkpointing.externalized-checkpoint-retention", _parse_str,
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to a job's checkpoints when it ends: NO_EXTERNALIZED_CHECKPOINTS (deleted "
    "whatever the outcome), DELETE_ON_CANCELLATION (kept if the job failed), "
    "RETAIN_ON_CANCELLATION (kept if it failed or was cancelled). A finished job's "
    "checkpoints are always deleted.",
    choices=("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"))
JOB_MASTER_MAX_RESTARTS = _option(
    "flowray.jobmaster.max-restarts", _parse_int, 3,
    "How often a dead job master actor is restarted (it resumes the job from the latest "
    "completed checkpoint); only with checkpointing enabled, otherwise the job fails.",
    check=_non_negative)
STATE_BACKEND_TYPE = _option(
    "state.backend.type", _parse_str, "hashmap",
    "Where keyed state lives: hashmap (Python dicts on the heap) or rocksdb (an embedded "
    "RocksDB per task, through rocksdict).", choices=("hashmap", "rocksdb"),
    aliases={"heap": "hashmap", "filesystem": "hashmap", "jobmanager": "hashmap"})
ROCKSDB_LOCAL_DIR = _option(
    "state.backend.rocksdb.localdir", _parse_str, None,
    "Working folder for RocksDB state (one sub-folder per task, removed when the task "
    "ends); unset: the system temp folder.")
ROCKSDB_INCREMENTAL = _option(
    "state.backend.incremental", _parse_bool, False,
    "RocksDB only: incremental checkpoints (upload only the SST files that no confirmed "
    "earlier checkpoint uploaded; the rest are shared between checkpoints and "
    "reference-counted by the job master). Ignored by the hashmap backend.")
CHECKPOINTS_DIR = _option(
    "state.checkpoints.dir", _parse_str, None,
    "Where checkpoints go: a pyarrow.fs URI or path (s3://, gs://, hdfs://, file://, a "
    "shared mount); unset: ./flowray-checkpoints under the working directory.")
CHECKPOINTS_NUM_RETAINED = _option(
    "state.checkpoints.num-retained", _parse_int, 1,
    "Completed checkpoints kept; older ones are subsumed and deleted.", check=_at_least_one)

def _at_most_1mb(v: Any) -> Optional[str]:
    return None if 0 <= v <= (1 << 20) else "must be between 0 and 1 mb"


MEMORY_THRESHOLD = _option(
    "state.storage.fs.memory-threshold", parse_memory_bytes, 20 << 10,
    "Operator state (source positions, sink transactions, list state) of one operator in "
    "one subtask up to this size is kept inline in the checkpoint's _metadata; larger state "
    "is written to a file of its own.", check=_at_most_1mb)

FAILOVER_STRATEGY = _option(
    "jobmanager.execution.failover-strategy", _parse_str, "region",
    "Which tasks restart when one fails: 'region' (the failed task's pipelined region, the "
    "regions producing lost blocking inputs, and all consumer regions) or 'full' (every task).",
    choices=("region", "full"))

# -- restart strategies ------------------------------------------------------------------
RESTART_STRATEGY_TYPE = _option(
    "restart-strategy.type", _parse_str, None,
    "none | fixed-delay | failure-rate | exponential-delay; unset: none without "
    "checkpointing, exponential-delay with it.",
    choices=("none", "fixed-delay", "failure-rate", "exponential-delay"),
    aliases={"off": "none", "disable": "none", "fixeddelay": "fixed-delay",
             "failurerate": "failure-rate", "exponentialdelay": "exponential-delay"})
FIXED_DELAY_ATTEMPTS = _option(
    "restart-strategy.fixed-delay.attempts", parse_count_or_infinite, 1,
    "Restarts allowed before the job fails.")
FIXED_DELAY_DELAY = _option(
    "restart-strategy.fixed-delay.delay", parse_duration_ms, 1_000,
    "Wait between a failure and the restart.")
FAILURE_RATE_MAX_FAILURES = _option(
    "restart-strategy.failure-rate.max-failures-per-interval", _parse_int, 1,
    "Failures within one interval that are still restarted.", check=_at_least_one)
FAILURE_RATE_INTERVAL = _option(
    "restart-strategy.failure-rate.failure-rate-interval", parse_duration_ms, 60_000,
    "The window in which failures are counted.", check=_positive)
FAILURE_RATE_DELAY = _option(
    "restart-strategy.failure-rate.delay", parse_duration_ms, 1_000,
    "Wait between a failure and the restart.")
EXP_DELAY_INITIAL_BACKOFF = _option(
    "restart-strategy.exponential-delay.initial-backoff", parse_duration_ms, 1_000,
    "First wait after a failure.")
EXP_DELAY_MAX_BACKOFF = _option(
    "restart-strategy.exponential-delay.max-backoff", parse_duration_ms, 60_000,
    "Longest wait between restarts.")
EXP_DELAY_MULTIPLIER = _option(
    "restart-strategy.exponential-delay.backoff-multiplier", _parse_float, 1.5,
    "Factor applied to the wait after each failure.",
    check=lambda v: None if v > 1.0 else "must be greater than 1.0")
EXP_DELAY_RESET_THRESHOLD = _option(
    "restart-strategy.exponential-delay.reset-backoff-threshold", parse_duration_ms,
    3_600_000, "A job that ran this long without failing starts again from the initial "
    "backoff.", check=_positive)
EXP_DELAY_JITTER = _option(
    "restart-strategy.exponential-delay.jitter-factor", _parse_float, 0.1,
    "Random spread of the wait, as a fraction of it (0 to 1).",
    check=lambda v: None if 0.0 <= v <= 1.0 else "must be between 0 and 1")
EXP_DELAY_ATTEMPTS_BEFORE_RESET = _option(
    "restart-strategy.exponential-delay.attempts-before-reset-backoff",
    parse_count_or_infinite, INFINITE,
    "Restarts allowed before the backoff is reset; more fail the job.", check=_at_least_one)


class Configuration:
    """Flink-style configuration: string keys, validated on ``set``.

    Accepts the PyFlink setters (``set_string``, ``set_integer``, ``set_boolean``,
    ``set_float``) and ``set``; unknown keys and unparsable values raise
    :class:`ConfigurationError` naming key and value.
    """

    def __init__(self, other: Optional["Configuration | Mapping[str, Any]"] = None) -> None:
        self._values: Dict[str, Any] = {}
        if other is not None:
            items = other.to_dict() if isinstance(other, Configuration) else dict(other)
            for k, v in items.items():
                self.set_string(k, v)

    @staticmethod
    def _lookup(key: str) -> ConfigOption:
        opt = _REGISTRY.get(key)
        if opt is None and isinstance(key, str) and key.startswith(SPARK_PASSTHROUGH_PREFIX) \
                and len(key) > len(SPARK_PASSTHROUGH_PREFIX):
            return ConfigOption(key, _parse_str, None, "passed to Spark as is")
        if opt is None:
            close = difflib.get_close_matches(key, list(_REGISTRY), n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(f"unknown configuration key {key!r}{hint}")
        return opt

    def set_string(self, key: str, value: Any) -> "Configuration":
        opt = self._lookup(key)
        opt.convert(value)  # validate now, so the error points at the line that set it
        self._values[key] = value
        return self

    set = set_string
    set_integer = set_string
    set_boolean = set_string
    set_float = set_string

    def get(self, option: ConfigOption) -> Any:
        if option.key in self._values:
            return option.convert(self._values[option.key])
        return option.default

    def get_string(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        self._lookup(key)
        v = self._values.get(key)
        return default_value if v is None else str(v)

    def get_integer(self, key: str, default_value: int = 0) -> int:
        opt = self._lookup(key)
        return int(opt.convert(self._values[key])) if key in self._values else default_value

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        self._lookup(key)
        return _parse_bool(self._values[key]) if key in self._values else default_value

    def contains_key(self, key: str) -> bool:
        return key in self._values

    def remove_config(self, key: str) -> bool:
        return self._values.pop(key, None) is not None

    def key_set(self) -> Iterable[str]:
        return set(self._values)

    def add_all(self, other: "Configuration") -> "Configuration":
        for k, v in other.to_dict().items():
            self.set_string(k, v)
        return self

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._values)

    def copy(self) -> "Configuration":
        c = Configuration()
        c._values = dict(self._values)
        return c

    def __repr__(self) -> str:
        return f"Configuration({self._values!r})"
