"""Every configuration key of the core, with Flink's names, defaults and duration syntax
(``"10 s"``, ``"1 min"``, ``"10000 ms"``). A plug-in registers its own keys the same way
(:func:`~flowray.common.configuration.register_option`).

>>> from flowray.common.configuration import Configuration
>>> Configuration().set_string("execution.checkpointing.interval", "1 min").get(
...     CHECKPOINTING_INTERVAL)
60000
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from flowray.common.configuration import (
    INFINITE,
    Configuration,
    parse_bool,
    parse_count_or_infinite,
    parse_duration_ms,
    parse_float,
    parse_int,
    parse_memory_bytes,
    parse_str,
    register_option,
)

__all__ = [
    "REST_PORT",
    "REST_ADDRESS",
    "REST_BIND_ADDRESS",
    "REST_TOKEN",
    "JOB_ARCHIVE_DIR",
    "HISTORY_ARCHIVE_DIRS",
    "HISTORY_WEB_PORT",
    "HISTORY_WEB_ADDRESS",
    "HISTORY_REFRESH_INTERVAL",
    "PARALLELISM",
    "MAX_PARALLELISM",
    "BUFFER_TIMEOUT",
    "RUNTIME_MODE",
    "BLOCKING_PARTITIONS_DIR",
    "PIPELINE_NAME",
    "AUTO_WATERMARK_INTERVAL",
    "RAY_ADDRESS",
    "CHANNEL_TRANSPORT",
    "CHANNEL_BATCH_SIZE",
    "CHANNEL_CREDITS",
    "CHANNEL_BATCH_BYTES",
    "DEBLOAT_ENABLED",
    "DEBLOAT_TARGET",
    "DEBLOAT_PERIOD",
    "DEBLOAT_SAMPLES",
    "DEBLOAT_THRESHOLD",
    "DEPLOY_TIMEOUT",
    "STANDBY_TASKS",
    "HEARTBEAT_INTERVAL",
    "HEARTBEAT_TIMEOUT",
    "LOCAL_PATHS_SHARED",
    "EXECUTION_TARGET",
    "SUBMISSION_ID",
    "ATTACHED",
    "JOB_STORE_EXPIRATION",
    "PROGRESS_INTERVAL",
    "CHECKPOINTING_INTERVAL",
    "CHECKPOINTING_MODE",
    "CHECKPOINTING_TIMEOUT",
    "CHECKPOINTING_MIN_PAUSE",
    "CHECKPOINTING_MAX_CONCURRENT",
    "CHECKPOINTING_TOLERABLE_FAILURES",
    "CHECKPOINTING_UNALIGNED_ENABLED",
    "CHECKPOINTING_ALIGNED_TIMEOUT",
    "CHECKPOINTING_UNALIGNED_FORCED",
    "unaligned_checkpoints_enabled",
    "CHECKPOINTS_RETENTION",
    "STATE_BACKEND_TYPE",
    "ROCKSDB_LOCAL_DIR",
    "CHECKPOINTS_DIR",
    "CHECKPOINTS_NUM_RETAINED",
    "SAVEPOINT_PATH",
    "SAVEPOINT_IGNORE_UNCLAIMED_STATE",
    "SAVEPOINTS_DIR",
    "MEMORY_THRESHOLD",
    "SINK_SPILL_THRESHOLD",
    "ITERATION_SPILL_THRESHOLD",
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
]


def _positive(v: Any) -> Optional[str]:
    return None if v > 0 else "must be positive"


def _max_parallelism(v: int) -> Optional[str]:
    return None if 0 < v <= 32768 else "must be in [1, 32768]"


def _show_count(n: int) -> str:
    return str(n)


def _show_bytes(n: int) -> str:
    """``1024`` -> ``'1 kb'``: sizes in the units a user writes them in."""
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} b"


def _show_ms(ms: int) -> str:
    """``86_400_000`` -> ``'24 h'``: durations in the units a user writes them in."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _bounded(low: int, high: int, show: Callable[[int], str] = _show_count,
             below: str = "must be positive") -> Callable[[Any], Optional[str]]:
    """A ``check=`` keeping a value in ``[low, high]`` (both included); either message
    gives the allowed range, e.g. ``must be at most 10000; allowed range [1, 10000]``."""
    allowed = f"allowed range [{show(low)}, {show(high)}]"

    def check(v: Any) -> Optional[str]:
        if v < low:
            return f"{below}; {allowed}"
        if v > high:
            return f"must be at most {show(high)}; {allowed}"
        return None

    return check


_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS


PARALLELISM = register_option(
    "parallelism.default", parse_int, 1, "Default parallelism of operators.", check=_positive
)


MAX_PARALLELISM = register_option(
    "pipeline.max-parallelism",
    parse_int,
    128,
    "Number of key groups; the upper bound for rescaling.",
    check=_max_parallelism,
)

BUFFER_TIMEOUT = register_option(
    "execution.buffer-timeout",
    parse_duration_ms,
    100,
    "Longest time a record waits in a channel batch before it is sent.",
    check=_bounded(0, 10 * 60_000, _show_ms, "must not be negative"),
)


RUNTIME_MODE = register_option(
    "execution.runtime-mode",
    parse_str,
    "STREAMING",
    "STREAMING, BATCH (every non-forward exchange is blocking: stages run "
    "one after another, a failure restarts one stage), or AUTOMATIC "
    "(BATCH when every source is bounded).",
    choices=("STREAMING", "BATCH", "AUTOMATIC"),
)

BLOCKING_PARTITIONS_DIR = register_option(
    "flowray.blocking-partitions.dir",
    parse_str,
    None,
    "Where BATCH-mode blocking result partitions are written (a folder every task can "
    "reach); unset: flowray-partitions in the system temp folder.",
)


PIPELINE_NAME = register_option(
    "pipeline.name", parse_str, None, "Job name used when none is given."
)

AUTO_WATERMARK_INTERVAL = register_option(
    "pipeline.auto-watermark-interval",
    parse_duration_ms,
    200,
    "How often watermark generators emit their periodic watermark (0 disables "
    "periodic watermarks; bounded inputs still end with the final one).",
    check=lambda v: None if v >= 0 else "must not be negative",
)

RAY_ADDRESS = register_option(
    "ray.address",
    parse_str,
    None,
    "Ray cluster to join (also RAY_ADDRESS); unset: embedded local Ray.",
)


CHANNEL_TRANSPORT = register_option(
    "flowray.channel.transport",
    parse_str,
    "socket",
    "Data plane between tasks: 'socket' (unix/TCP streams) or 'ray' "
    "(actor calls carrying serialized batches).",
    choices=("socket", "ray"),
)

CHANNEL_BATCH_SIZE = register_option(
    "flowray.channel.batch-size",
    parse_int,
    1000,
    "Records per channel batch before it is flushed (at most; see "
    "flowray.channel.batch-bytes).",
    check=_bounded(1, 1_000_000),
)


CHANNEL_CREDITS = register_option(
    "flowray.channel.credits",
    parse_int,
    8,
    "Batches a writer may have unacknowledged per channel.",
    check=_bounded(1, 10_000),
)

CHANNEL_BATCH_BYTES = register_option(
    "flowray.channel.batch-bytes",
    parse_memory_bytes,
    1 << 20,
    "Bytes per channel batch (about): a batch is flushed at batch-size records or at about "
    "this many serialized bytes, whichever comes first.",
    check=_bounded(1 << 10, 1 << 30, _show_bytes, "must be at least 1 kb"),
)

# Buffer debloating (Flink's taskmanager.network.memory.buffer-debloat.*, FLIP-183)
DEBLOAT_ENABLED = register_option(
    "flowray.channel.debloat.enabled",
    parse_bool,
    True,
    "Size in-flight data by time: each consumer asks its producers for batches it "
    "processes in about flowray.channel.debloat.target (all credits of all its input "
    "channels together), so a checkpoint barrier does not queue behind a long backlog.",
)

DEBLOAT_TARGET = register_option(
    "flowray.channel.debloat.target",
    parse_duration_ms,
    1000,
    "How long a consumer should take to process the data in flight to it (debloating).",
    check=_bounded(1, 3_600_000, _show_ms),
)

DEBLOAT_PERIOD = register_option(
    "flowray.channel.debloat.period",
    parse_duration_ms,
    200,
    "How often a consumer measures its throughput and may announce a new batch size.",
    check=_bounded(1, 3_600_000, _show_ms),
)

DEBLOAT_SAMPLES = register_option(
    "flowray.channel.debloat.samples",
    parse_int,
    20,
    "Throughput samples the moving average spans (its weight is 2 / (samples + 1)).",
    check=_bounded(1, 1000),
)

DEBLOAT_THRESHOLD = register_option(
    "flowray.channel.debloat.threshold-percentages",
    parse_int,
    25,
    "A new batch size is announced only when it differs from the last by more than this "
    "many percent.",
    check=_bounded(0, 1000, below="must not be negative"),
)

CHANNEL_SAME_NODE = register_option(
    "flowray.channel.same-node",
    parse_str,
    "unix",
    "How tasks on one node connect: 'unix' (unix sockets) or 'tcp' (as across nodes, "
    "e.g. to use TLS, or to try a multi-node network setup on one machine).",
    choices=("unix", "tcp"),
)

SSL_INTERNAL_ENABLED = register_option(
    "security.ssl.internal.enabled",
    parse_bool,
    False,
    "Encrypt and mutually authenticate TCP channels between tasks (and to the driver) "
    "with TLS; needs security.ssl.internal.keystore and .truststore on every node.",
)

SSL_INTERNAL_KEYSTORE = register_option(
    "security.ssl.internal.keystore",
    parse_str,
    None,
    "PEM file with this side's certificate chain and private key (Flink: a keystore; "
    "here PEM), at the same path on every node.",
)

SSL_INTERNAL_TRUSTSTORE = register_option(
    "security.ssl.internal.truststore",
    parse_str,
    None,
    "PEM file of the CA certificates a peer's certificate must chain to.",
)

SSL_INTERNAL_KEY_PASSWORD = register_option(
    "security.ssl.internal.key-password",
    parse_str,
    None,
    "Password of the private key in the keystore, if it is encrypted.",
)

DEPLOY_TIMEOUT = register_option(
    "flowray.deploy-timeout",
    parse_duration_ms,
    120_000,
    "How long tasks may take to start and connect their channels.",
    check=_bounded(1, _HOUR_MS, _show_ms),
)

STANDBY_TASKS = register_option(
    "flowray.failover.standby-tasks",
    parse_int,
    1,
    "Idle task actors the job master keeps started for failovers to deploy into (no new "
    "process to wait for), per resource profile of the job's tasks; only for tasks whose "
    "slot sharing group reserves no Ray resources. 0: none.",
    check=_bounded(0, 1000, below="must not be negative"),
)


HEARTBEAT_INTERVAL = register_option(
    "heartbeat.interval",
    parse_duration_ms,
    10_000,
    "How often the job master asks each running task for a heartbeat.",
    check=_bounded(1, 10 * 60_000, _show_ms),
)

HEARTBEAT_TIMEOUT = register_option(
    "heartbeat.timeout",
    parse_duration_ms,
    50_000,
    "A task that has not answered heartbeats, or whose loop has made no progress (a user "
    "function or source that does not return), for this long is failed over.",
    check=_bounded(1, _DAY_MS, _show_ms),
)


LOCAL_PATHS_SHARED = register_option(
    "flowray.storage.local-paths-shared",
    parse_bool,
    False,
    "Whether plain paths for checkpoints, savepoints and blocking partitions are on "
    "storage every node of the Ray cluster mounts (a network file system). Without it a "
    "job on a cluster of several nodes must use a URI every node reaches (s3://, ...).",
)


EXECUTION_TARGET = register_option(
    "execution.target",
    parse_str,
    "ray",
    "Where jobs run: 'ray' (task actors) or 'local' (threads in the "
    "driver; for tests and debugging).",
    choices=("ray", "local"),
)

ATTACHED = register_option(
    "execution.attached",
    parse_bool,
    True,
    "Whether execute() waits for the job (true) or returns once its job master runs, "
    "leaving the job to the Ray cluster (false; `flowray run -d`). A detached job needs a "
    "running Ray cluster (ray.address, RAY_ADDRESS, or the local one of `ray start --head`); "
    "its print() sinks print in the tasks' own output and collect is not available.",
)


def _seconds_or_duration(value: Any) -> float:
    """Seconds: a bare number is seconds, as Flink's ``jobstore.expiration-time`` was;
    ``"10 min"`` style durations work too.

    >>> _seconds_or_duration(3600), _seconds_or_duration("90"), _seconds_or_duration("2 min")
    (3600, 90, 120)
    """
    if isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = parse_duration_ms(value * 1000) / 1000
    else:
        seconds = parse_duration_ms(value) / 1000
    return int(seconds) if float(seconds).is_integer() else seconds


JOB_STORE_EXPIRATION = register_option(
    "jobstore.expiration-time",
    _seconds_or_duration,
    3600,
    "How long (seconds, or a duration such as '10 min') the job master of a detached job "
    "stays after the job ended, so `flowray list -a` / `flowray info` and re-attached "
    "clients can read its outcome; then its actor exits.",
)


PROGRESS_INTERVAL = register_option(
    "flowray.progress-interval",
    parse_duration_ms,
    10_000,
    "How often a running job logs a progress line (0: never).",
)


def _at_least_one(v: Any) -> Optional[str]:
    return None if v >= 1 else "must be at least 1"


CHECKPOINTING_INTERVAL = register_option(
    "execution.checkpointing.interval",
    parse_duration_ms,
    None,
    "Time between checkpoint triggers; unset: checkpointing is off.",
    check=_bounded(1, _DAY_MS, _show_ms),
)


CHECKPOINTING_MODE = register_option(
    "execution.checkpointing.mode",
    parse_str,
    "EXACTLY_ONCE",
    "EXACTLY_ONCE (barriers are aligned) or AT_LEAST_ONCE (never blocks an input).",
    choices=("EXACTLY_ONCE", "AT_LEAST_ONCE"),
    aliases={"exactly-once": "exactly_once", "at-least-once": "at_least_once"},
)

CHECKPOINTING_TIMEOUT = register_option(
    "execution.checkpointing.timeout",
    parse_duration_ms,
    600_000,
    "A checkpoint not complete after this long is aborted (reason: expired).",
    check=_bounded(1, _DAY_MS, _show_ms),
)


CHECKPOINTING_MIN_PAUSE = register_option(
    "execution.checkpointing.min-pause",
    parse_duration_ms,
    0,
    "Least time between the end of one checkpoint and the trigger of the next.",
    check=_bounded(0, _DAY_MS, _show_ms, "must not be negative"),
)

CHECKPOINTING_MAX_CONCURRENT = register_option(
    "execution.checkpointing.max-concurrent-checkpoints",
    parse_int,
    1,
    "Checkpoints that may be in progress at once.",
    check=_bounded(1, 100, below="must be at least 1"),
)


CHECKPOINTING_TOLERABLE_FAILURES = register_option(
    "execution.checkpointing.tolerable-failed-checkpoints",
    parse_int,
    0,
    "Consecutive checkpoint failures (expired, failed asynchronous part, storage errors) "
    "tolerated before the job fails over.",
    check=_bounded(0, 10_000, below="must not be negative"),
)

CHECKPOINTING_UNALIGNED_ENABLED = register_option(
    "execution.checkpointing.unaligned.enabled",
    parse_bool,
    False,
    "Unaligned checkpoints (FLIP-76): a barrier overtakes the records in flight, which "
    "are stored with the checkpoint, so checkpoints stay fast under back-pressure. "
    "Savepoints stay aligned. EXACTLY_ONCE mode only.",
    deprecated_keys=("execution.checkpointing.unaligned",),
)

CHECKPOINTING_ALIGNED_TIMEOUT = register_option(
    "execution.checkpointing.aligned-checkpoint-timeout",
    parse_duration_ms,
    0,
    "With unaligned checkpoints: a checkpoint starts aligned at each task and switches to "
    "unaligned once its barrier is this old (0: unaligned at once).",
    check=_bounded(0, _DAY_MS, _show_ms, "must not be negative"),
)

CHECKPOINTING_UNALIGNED_FORCED = register_option(
    "execution.checkpointing.unaligned.forced",
    parse_bool,
    False,
    "Unaligned checkpoints also for the tasks of iterations (their loops are otherwise "
    "checkpointed aligned).",
)


def unaligned_checkpoints_enabled(config: "Configuration") -> bool:
    """``execution.checkpointing.unaligned.enabled`` (or its deprecated name)."""
    return bool(config.get(CHECKPOINTING_UNALIGNED_ENABLED))


CHECKPOINTS_RETENTION = register_option(
    "execution.checkpointing.externalized-checkpoint-retention",
    parse_str,
    "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to a job's checkpoints when it ends: NO_EXTERNALIZED_CHECKPOINTS (deleted "
    "whatever the outcome), DELETE_ON_CANCELLATION (kept if the job failed), "
    "RETAIN_ON_CANCELLATION (kept if it failed or was cancelled). A finished job's "
    "checkpoints are always deleted.",
    choices=("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
)

JOB_MASTER_MAX_RESTARTS = register_option(
    "flowray.jobmaster.max-restarts",
    parse_int,
    3,
    "How often a dead job master actor is restarted (it resumes the job from the latest "
    "completed checkpoint); only with checkpointing enabled, otherwise the job fails.",
    check=_bounded(0, 1000, below="must not be negative"),
)


STATE_BACKEND_TYPE = register_option(
    "state.backend.type",
    parse_str,
    "hashmap",
    "Where keyed state lives: hashmap (Python dicts on the heap) or rocksdb (an embedded "
    "RocksDB per task, through rocksdict).",
    choices=("hashmap", "rocksdb"),
    aliases={"heap": "hashmap", "filesystem": "hashmap", "jobmanager": "hashmap"},
)

ROCKSDB_LOCAL_DIR = register_option(
    "state.backend.rocksdb.localdir",
    parse_str,
    None,
    "Working folder for RocksDB state (one sub-folder per task, removed when the task "
    "ends); unset: the system temp folder.",
)


ROCKSDB_INCREMENTAL = register_option(
    "execution.checkpointing.incremental",
    parse_bool,
    False,
    "RocksDB only: incremental checkpoints (upload only the SST files that no confirmed "
    "earlier checkpoint uploaded; the rest are shared between checkpoints and "
    "reference-counted by the job master); false: every checkpoint uploads all of "
    "RocksDB's files, its own. Ignored by the hashmap backend.",
    deprecated_keys=("state.backend.incremental",),
)

LOCAL_RECOVERY = register_option(
    "execution.checkpointing.local-backup.enabled",
    parse_bool,
    False,
    "RocksDB only: task-local recovery. Each checkpoint's RocksDB directory (hard links to "
    "the database's files) stays on the task's node beside the RocksDB working folders "
    "until a later checkpoint completes; a task restored on the same node opens it instead "
    "of reading checkpoint storage (elsewhere, or if it is missing, storage is read).",
    deprecated_keys=("state.backend.local-recovery",),
)

ROCKSDB_VALUE_CACHE_ENTRIES = register_option(
    "flowray.state.rocksdb.value-cache-entries",
    parse_int,
    65536,
    "RocksDB only: entries of the write-behind cache in front of each reduce/sum/min/max "
    "state (stored bytes, written to RocksDB before every snapshot); 0: every input batch "
    "is written through at once.",
    check=_bounded(0, 100_000_000),
)

CHECKPOINTS_DIR = register_option(
    "execution.checkpointing.dir",
    parse_str,
    None,
    "Where checkpoints go: a pyarrow.fs URI or path (s3://, gs://, hdfs://, file://, a "
    "shared mount); unset: ./flowray-checkpoints under the working directory.",
    deprecated_keys=("state.checkpoints.dir",),
)


CHECKPOINTS_NUM_RETAINED = register_option(
    "execution.checkpointing.num-retained",
    parse_int,
    1,
    "Completed checkpoints kept; older ones are subsumed and deleted.",
    check=_bounded(1, 1000, below="must be at least 1"),
    deprecated_keys=("state.checkpoints.num-retained",),
)


SAVEPOINT_PATH = register_option(
    "execution.savepoint.path",
    parse_str,
    None,
    "Start the job from this savepoint or retained checkpoint (its directory or its "
    "_metadata file, a path or URI); state is matched to operators by uid.",
)

SAVEPOINT_IGNORE_UNCLAIMED_STATE = register_option(
    "execution.savepoint.ignore-unclaimed-state",
    parse_bool,
    False,
    "Allow a restore that leaves state of the savepoint unused (an operator was removed); "
    "otherwise such a restore fails naming the operator.",
)

SAVEPOINTS_DIR = register_option(
    "execution.checkpointing.savepoint-dir",
    parse_str,
    None,
    "Default directory for savepoints (a path or URI) when a trigger names none.",
    deprecated_keys=("state.savepoints.dir",),
)


def _at_most_1mb(v: Any) -> Optional[str]:
    return None if 0 <= v <= (1 << 20) else "must be between 0 and 1 mb"


MEMORY_THRESHOLD = register_option(
    "state.storage.fs.memory-threshold",
    parse_memory_bytes,
    20 << 10,
    "Operator state (source positions, sink transactions, list state) of one operator in "
    "one subtask up to this size is kept inline in the checkpoint's _metadata; larger state "
    "is written to a file of its own.",
    check=_at_most_1mb,
)



def _not_negative(v: Any) -> Optional[str]:
    return None if v >= 0 else "must not be negative"


SINK_SPILL_THRESHOLD = register_option(
    "flowray.sink.spill-threshold",
    parse_memory_bytes,
    64 << 20,
    "Sinks that stage a checkpoint interval's records before writing them (Parquet files, "
    "Spark tables) keep up to this many bytes of records in memory per subtask, measured "
    "as their pickled size (Python objects take several times more); past it staged "
    "records go to a spill file in the local temp folder, read back in pieces of this size "
    "when the transaction is written. 0 spills every record.",
    check=_not_negative,
)

ITERATION_SPILL_THRESHOLD = register_option(
    "flowray.iteration.spill-threshold",
    parse_memory_bytes,
    64 << 20,
    "An iteration head keeps up to this many bytes of records that came back over its "
    "back edge in memory (measured as their pickled size); past it they wait in a spill "
    "file in the local temp folder, so a cycle whose output is back-pressured always "
    "takes its feedback and cannot deadlock. At least 1 byte.",
    check=lambda v: None if v >= 1 else "must be at least 1 byte",
)

FAILOVER_STRATEGY = register_option(
    "jobmanager.execution.failover-strategy",
    parse_str,
    "region",
    "Which tasks restart when one fails: 'region' (the failed task's pipelined region, the "
    "regions producing lost blocking inputs, and all consumer regions) or 'full' (every task).",
    choices=("region", "full"),
)


# -- restart strategies ------------------------------------------------------------------
RESTART_STRATEGY_TYPE = register_option(
    "restart-strategy.type",
    parse_str,
    None,
    "none | fixed-delay | failure-rate | exponential-delay; unset: none without "
    "checkpointing, exponential-delay with it.",
    choices=("none", "fixed-delay", "failure-rate", "exponential-delay"),
    aliases={
        "off": "none",
        "disable": "none",
        "fixeddelay": "fixed-delay",
        "failurerate": "failure-rate",
        "exponentialdelay": "exponential-delay",
    },
)

FIXED_DELAY_ATTEMPTS = register_option(
    "restart-strategy.fixed-delay.attempts",
    parse_count_or_infinite,
    1,
    "Restarts allowed before the job fails.",
)


FIXED_DELAY_DELAY = register_option(
    "restart-strategy.fixed-delay.delay",
    parse_duration_ms,
    1_000,
    "Wait between a failure and the restart.",
)

FAILURE_RATE_MAX_FAILURES = register_option(
    "restart-strategy.failure-rate.max-failures-per-interval",
    parse_int,
    1,
    "Failures within one interval that are still restarted.",
    check=_at_least_one,
)


FAILURE_RATE_INTERVAL = register_option(
    "restart-strategy.failure-rate.failure-rate-interval",
    parse_duration_ms,
    60_000,
    "The window in which failures are counted.",
    check=_positive,
)

FAILURE_RATE_DELAY = register_option(
    "restart-strategy.failure-rate.delay",
    parse_duration_ms,
    1_000,
    "Wait between a failure and the restart.",
)


EXP_DELAY_INITIAL_BACKOFF = register_option(
    "restart-strategy.exponential-delay.initial-backoff",
    parse_duration_ms,
    1_000,
    "First wait after a failure.",
)

EXP_DELAY_MAX_BACKOFF = register_option(
    "restart-strategy.exponential-delay.max-backoff",
    parse_duration_ms,
    60_000,
    "Longest wait between restarts.",
)


EXP_DELAY_MULTIPLIER = register_option(
    "restart-strategy.exponential-delay.backoff-multiplier",
    parse_float,
    1.5,
    "Factor applied to the wait after each failure.",
    check=lambda v: None if v > 1.0 else "must be greater than 1.0",
)

EXP_DELAY_RESET_THRESHOLD = register_option(
    "restart-strategy.exponential-delay.reset-backoff-threshold",
    parse_duration_ms,
    3_600_000,
    "A job that ran this long without failing starts again from the initial backoff.",
    check=_positive,
)


EXP_DELAY_JITTER = register_option(
    "restart-strategy.exponential-delay.jitter-factor",
    parse_float,
    0.1,
    "Random spread of the wait, as a fraction of it (0 to 1).",
    check=lambda v: None if 0.0 <= v <= 1.0 else "must be between 0 and 1",
)

EXP_DELAY_ATTEMPTS_BEFORE_RESET = register_option(
    "restart-strategy.exponential-delay.attempts-before-reset-backoff",
    parse_count_or_infinite,
    INFINITE,
    "Restarts allowed before the backoff is reset; more fail the job.",
    check=_at_least_one,
)


# -- connectors -------------------------------------------------------------------------
KAFKA_CONNECT_TIMEOUT = register_option(
    "flowray.kafka.connect-timeout",
    parse_duration_ms,
    30_000,
    "How long a Kafka source or sink keeps retrying, with back-off, a broker it cannot "
    "reach (at start, and when the connection is lost while the job runs) before it fails "
    "its task with an error naming the bootstrap servers.",
    check=_positive,
)

SUBMISSION_ID = register_option(
    "flowray.submission-id",
    parse_str,
    None,
    "Set by `flowray run` when Ray's Job Submission runs the program: the Ray job whose "
    "output `flowray logs JOB` shows.",
)

TASK_STDOUT_TO_CLIENT = register_option(
    "flowray.task-stdout-to-client",
    parse_bool,
    True,
    "Lines that user functions print to stdout inside task actors appear on the stdout of "
    "the client that runs the attached job (as PyFlink's local mode shows a UDF's print()); "
    "false leaves them in the Ray workers' logs. Detached jobs always leave them there.",
)

METRICS_ENABLED = register_option(
    "flowray.metrics.enabled",
    parse_bool,
    True,
    "Task, operator and user metrics (Flink's names) are exported through Ray's metrics "
    "system as flowray_<name> gauges, labelled job_name, job_id, task_name, subtask_index "
    "and operator_name; false registers user metrics but exports nothing.",
)

METRICS_REPORT_INTERVAL = register_option(
    "flowray.metrics.report-interval",
    parse_duration_ms,
    10_000,
    "How often each task sets its Ray metrics (Ray's agent exports every 10 s by default).",
    check=_bounded(100, 3_600_000, _show_ms, "must be at least 100 ms"),
)


def parse_port_range(value: Any) -> str:
    """A port (``8081``), a range (``8081-8090``) or a list (``8081,8085``), as Flink's
    ``rest.port``/``rest.bind-port``; kept as text, checked here."""
    text = str(value).strip()
    ports_of(text)
    return text


def ports_of(text: str) -> List[int]:
    """The ports a ``rest.port`` value allows, in order (``0``: any free port); one port
    ``P`` allows ``P`` and, when it is taken, the next 100 after it.

    >>> ports_of("8081")[:3], len(ports_of("8081")), ports_of("0"), ports_of("80-82,90")
    ([8081, 8082, 8083], 101, [0], [80, 81, 82, 90])
    """
    out: List[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"a port, a range a-b or a list of them, got {text!r}") from None
        if not (0 <= a <= b <= 65535):
            raise ValueError(f"ports are 0..65535 and a range goes up, got {part!r}")
        out.extend(range(a, b + 1))
    if not out:
        raise ValueError(f"no port in {text!r}")
    if len(out) == 1 and out[0] != 0:
        out = list(range(out[0], min(65535, out[0] + 100) + 1))
    return out


REST_PORT = register_option(
    "rest.port",
    parse_port_range,
    "8081",
    "Port of the job master's REST API and web UI: a port, a range (8081-8090) or a list; "
    "a port that is taken moves on to the next free one after it (0: any free port).",
)

REST_ADDRESS = register_option(
    "rest.address",
    parse_str,
    None,
    "Host name the REST API's URL names (JobClient.get_web_url, the CLI); default: the "
    "bind address, or the node's address when bound to all interfaces.",
)

REST_BIND_ADDRESS = register_option(
    "rest.bind-address",
    parse_str,
    "127.0.0.1",
    "Address the REST server binds. Loopback by default; bound elsewhere, the write "
    "endpoints (cancel, stop, savepoints) need the token (rest.token).",
)

REST_TOKEN = register_option(
    "rest.token",
    parse_str,
    None,
    "Token the REST API's write endpoints require when bound off loopback "
    "(Authorization: Bearer <token>); default: one generated per job, printed by the CLI.",
)

JOB_ARCHIVE_DIR = register_option(
    "jobmanager.archive.fs.dir",
    parse_str,
    None,
    "Directory where a job master archives its job's REST responses when the job ends "
    "(one file per job, as Flink's HistoryServer reads them); `flowray history` serves "
    "them. Unset: nothing is archived.",
)

HISTORY_ARCHIVE_DIRS = register_option(
    "historyserver.archive.fs.dir",
    parse_str,
    None,
    "Comma-separated directories `flowray history` serves ended jobs from; default: "
    "jobmanager.archive.fs.dir.",
)

HISTORY_WEB_PORT = register_option(
    "historyserver.web.port",
    parse_port_range,
    "8082",
    "Port of `flowray history`'s REST API and web UI (a taken port moves on to the next).",
)

HISTORY_WEB_ADDRESS = register_option(
    "historyserver.web.address",
    parse_str,
    "127.0.0.1",
    "Address `flowray history` binds (it serves ended jobs read-only).",
)

HISTORY_REFRESH_INTERVAL = register_option(
    "historyserver.archive.fs.refresh-interval",
    parse_duration_ms,
    10_000,
    "How often `flowray history` looks for newly archived jobs.",
    check=_bounded(100, 24 * 3600_000, _show_ms),
)
