"""Checkpoints and savepoints (Flink's CheckpointingOptions)."""

from __future__ import annotations

from flowray.common.configuration import (
    Configuration,
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_memory_bytes,
    parse_str,
    register_option,
)
from flowray.common.options.validators import DAY_MS, at_most_1mb, bounded, show_ms

__all__ = ["CHECKPOINTING_INTERVAL", "CHECKPOINTING_MODE", "CHECKPOINTING_TIMEOUT",
           "CHECKPOINTING_MIN_PAUSE", "CHECKPOINTING_MAX_CONCURRENT",
           "CHECKPOINTING_TOLERABLE_FAILURES", "CHECKPOINTING_UNALIGNED_ENABLED",
           "CHECKPOINTING_ALIGNED_TIMEOUT", "CHECKPOINTING_UNALIGNED_FORCED",
           "CHECKPOINTS_RETENTION", "CHECKPOINTS_DIR", "CHECKPOINTS_NUM_RETAINED",
           "SAVEPOINT_PATH", "SAVEPOINT_IGNORE_UNCLAIMED_STATE", "SAVEPOINTS_DIR",
           "MEMORY_THRESHOLD", "unaligned_checkpoints_enabled"]


CHECKPOINTING_INTERVAL = register_option(
    "execution.checkpointing.interval",
    parse_duration_ms,
    None,
    "Time between checkpoint triggers; unset: checkpointing is off.",
    check=bounded(1, DAY_MS, show_ms),
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
    check=bounded(1, DAY_MS, show_ms),
)


CHECKPOINTING_MIN_PAUSE = register_option(
    "execution.checkpointing.min-pause",
    parse_duration_ms,
    0,
    "Least time between the end of one checkpoint and the trigger of the next.",
    check=bounded(0, DAY_MS, show_ms, "must not be negative"),
)

CHECKPOINTING_MAX_CONCURRENT = register_option(
    "execution.checkpointing.max-concurrent-checkpoints",
    parse_int,
    1,
    "Checkpoints that may be in progress at once.",
    check=bounded(1, 100, below="must be at least 1"),
)


CHECKPOINTING_TOLERABLE_FAILURES = register_option(
    "execution.checkpointing.tolerable-failed-checkpoints",
    parse_int,
    0,
    "Consecutive checkpoint failures (expired, failed asynchronous part, storage errors) "
    "tolerated before the job fails over.",
    check=bounded(0, 10_000, below="must not be negative"),
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
    check=bounded(0, DAY_MS, show_ms, "must not be negative"),
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
    check=bounded(1, 1000, below="must be at least 1"),
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

MEMORY_THRESHOLD = register_option(
    "state.storage.fs.memory-threshold",
    parse_memory_bytes,
    20 << 10,
    "Operator state (source positions, sink transactions, list state) of one operator in "
    "one subtask up to this size is kept inline in the checkpoint's _metadata; larger state "
    "is written to a file of its own.",
    check=at_most_1mb,
)
