"""How and where a job runs (Flink's ExecutionOptions, PipelineOptions, DeploymentOptions):
parallelism, runtime mode, target, attached or detached, the client.
"""

from __future__ import annotations

from typing import Any

from flowray.common.configuration import (
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_str,
    register_option,
)
from flowray.common.options.validators import (
    bounded,
    max_parallelism_range,
    positive,
    seconds_or_duration,
    show_ms,
)

__all__ = ["PARALLELISM", "MAX_PARALLELISM", "BUFFER_TIMEOUT", "BUFFER_TIMEOUT_ENABLED",
           "buffer_timeout_ms", "check_buffer_timeout", "parse_buffer_timeout", "RUNTIME_MODE",
           "BLOCKING_PARTITIONS_DIR", "PIPELINE_NAME", "AUTO_WATERMARK_INTERVAL", "RAY_ADDRESS",
           "EXECUTION_TARGET", "ATTACHED", "JOB_STORE_EXPIRATION", "PROGRESS_INTERVAL",
           "SUBMISSION_ID", "TASK_STDOUT_TO_CLIENT"]


PARALLELISM = register_option(
    "parallelism.default", parse_int, 1, "Default parallelism of operators.", check=positive
)


MAX_PARALLELISM = register_option(
    "pipeline.max-parallelism",
    parse_int,
    128,
    "Number of key groups; the upper bound for rescaling.",
    check=max_parallelism_range,
)

def parse_buffer_timeout(value: Any) -> int:
    """A duration in milliseconds, or ``-1`` (flush only when a batch is full), as Flink's
    ``setBufferTimeout``.

    >>> parse_buffer_timeout("5 ms"), parse_buffer_timeout(-1), parse_buffer_timeout("-1")
    (5, -1, -1)
    """
    if value == -1 or (isinstance(value, str) and value.strip() in ("-1", "-1 ms", "-1ms")):
        return -1
    return parse_duration_ms(value)


BUFFER_TIMEOUT = register_option(
    "execution.buffer-timeout.interval",
    parse_buffer_timeout,
    100,
    "Longest time a record waits in a channel batch before the batch is sent: 0 sends "
    "after every batch an operator emits (lowest latency), -1 only when a batch is full "
    "(highest throughput; also execution.buffer-timeout.enabled: false). Per operator: "
    "DataStream.set_buffer_timeout(ms).",
    check=bounded(-1, 10 * 60_000, show_ms, "must be -1 (flush only when full) or more"),
    deprecated_keys=("execution.buffer-timeout",),
)

BUFFER_TIMEOUT_ENABLED = register_option(
    "execution.buffer-timeout.enabled",
    parse_bool,
    True,
    "false: batches are sent only when full (or at a checkpoint, a watermark stall or the "
    "end of input), whatever execution.buffer-timeout.interval says.",
)


def check_buffer_timeout(timeout_millis: Any) -> int:
    """``set_buffer_timeout``'s argument as an int, or a ``ValueError`` naming the rule.

    >>> check_buffer_timeout(-2)
    Traceback (most recent call last):
    ...
    ValueError: buffer timeout must be -1 (flush only when full), 0 (flush at once) or a positive number of milliseconds, got -2
    """
    if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) \
            or timeout_millis < -1:
        raise ValueError("buffer timeout must be -1 (flush only when full), 0 (flush at "
                         "once) or a positive number of milliseconds, got "
                         f"{timeout_millis!r}")
    return timeout_millis


def buffer_timeout_ms(config: Any) -> int:
    """The job's buffer timeout: ``-1`` when disabled, else the interval."""
    if not config.get(BUFFER_TIMEOUT_ENABLED):
        return -1
    return int(config.get(BUFFER_TIMEOUT))


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
    "Where BATCH-mode blocking result partitions are written: a local folder (a mount "
    "every node shares on a cluster of several nodes); unset: flowray-<uid>/partitions in "
    "the system temp folder.",
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

JOB_STORE_EXPIRATION = register_option(
    "jobstore.expiration-time",
    seconds_or_duration,
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
