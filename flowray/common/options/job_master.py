"""The job master (Flink's JobManagerOptions): deployment, standby tasks, heartbeats, its own
restarts, the failover strategy.
"""

from __future__ import annotations

from flowray.common.configuration import (
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_str,
    register_option,
)
from flowray.common.options.validators import DAY_MS, HOUR_MS, bounded, show_ms

__all__ = ["DEPLOY_TIMEOUT", "STANDBY_TASKS", "REDEPLOY_IN_PLACE", "TASK_ACTOR_POOL_SIZE", "TASK_ACTOR_POOL_MAX_IDLE", "HEARTBEAT_INTERVAL", "HEARTBEAT_TIMEOUT",
           "LOCAL_PATHS_SHARED", "JOB_MASTER_MAX_RESTARTS", "FAILOVER_STRATEGY"]


DEPLOY_TIMEOUT = register_option(
    "flowray.deploy-timeout",
    parse_duration_ms,
    120_000,
    "How long tasks may take to start and connect their channels.",
    check=bounded(1, HOUR_MS, show_ms),
)

STANDBY_TASKS = register_option(
    "flowray.failover.standby-tasks",
    parse_int,
    1,
    "Idle task actors the job master keeps started for failovers to deploy into (no new "
    "process to wait for), per resource profile of the job's tasks; only for tasks whose "
    "slot sharing group reserves no Ray resources. A job using its driver's task actor "
    "pool (flowray.task-actor-pool.size) has none: failovers take the pool's warm actors. "
    "0: none.",
    check=bounded(0, 1000, below="must not be negative"),
)

REDEPLOY_IN_PLACE = register_option(
    "flowray.failover.redeploy-in-place",
    parse_bool,
    True,
    "Whether a failover runs the next attempt of a task in the actor its last attempt "
    "ran in, as Flink redeploys into the slots the tasks had: no new process. Only where "
    "that attempt ended (cancelled, or failed with an exception that is not a "
    "MemoryError or SystemError) and closed every operator without an error, and its "
    "channels are sockets; a task whose process died, or whose node is to be avoided, "
    "gets a standby or a new actor. false: every restarted task gets a new actor.",
)

TASK_ACTOR_POOL_SIZE = register_option(
    "flowray.task-actor-pool.size",
    parse_int,
    4,
    "Warm task actors a driver keeps started for its attached jobs on Ray, from its "
    "second job on (its first job's actors are started for it, plus one idle for its "
    "failovers): a job takes "
    "them for its tasks instead of starting a process per task, and gives them back when "
    "it ends (a cancelled or failed job: those whose tasks closed their operators and did "
    "not fail with MemoryError or SystemError; a driver running job after job starts task "
    "processes once). Only for "
    "tasks whose slot sharing group reserves no Ray resources, in jobs without a Python "
    "environment of their own; detached jobs start their own. 0: no pool.",
    check=bounded(0, 1000, below="must not be negative"),
)

TASK_ACTOR_POOL_MAX_IDLE = register_option(
    "flowray.task-actor-pool.max-idle",
    parse_int,
    16,
    "Most idle task actors the driver's pool keeps: actors a finished job gives back "
    "beyond it end.",
    check=bounded(0, 10_000, below="must not be negative"),
)

JOB_MASTER_SPARES = register_option(
    "flowray.jobmaster.spare",
    parse_bool,
    True,
    "Whether a driver keeps a spare job master started for its next attached job (one "
    "per kind: restarted by Ray or not), as it keeps task actors (only where the task "
    "actor pool is used): the job's master process is then running when it is submitted. "
    "A spare's actor name is flowray-pool/<driver>/master-<n>/jobmaster, not the job's.",
)


HEARTBEAT_INTERVAL = register_option(
    "heartbeat.interval",
    parse_duration_ms,
    10_000,
    "How often the job master asks each running task for a heartbeat.",
    check=bounded(1, 10 * 60_000, show_ms),
)

HEARTBEAT_TIMEOUT = register_option(
    "heartbeat.timeout",
    parse_duration_ms,
    50_000,
    "A task that has not answered heartbeats, or whose loop has made no progress (a user "
    "function or source that does not return), for this long is failed over.",
    check=bounded(1, DAY_MS, show_ms),
)


LOCAL_PATHS_SHARED = register_option(
    "flowray.storage.local-paths-shared",
    parse_bool,
    False,
    "Whether plain paths for checkpoints, savepoints and blocking partitions are on "
    "storage every node of the Ray cluster mounts (a network file system). Without it a "
    "job on a cluster of several nodes must use a URI every node reaches (s3://, ...).",
)

JOB_MASTER_MAX_RESTARTS = register_option(
    "flowray.jobmaster.max-restarts",
    parse_int,
    3,
    "How often a dead job master actor is restarted (it resumes the job from the latest "
    "completed checkpoint); only with checkpointing enabled, otherwise the job fails.",
    check=bounded(0, 1000, below="must not be negative"),
)

FAILOVER_STRATEGY = register_option(
    "jobmanager.execution.failover-strategy",
    parse_str,
    "region",
    "Which tasks restart when one fails: 'region' (the failed task's pipelined region, the "
    "regions producing lost blocking inputs, and all consumer regions) or 'full' (every task).",
    choices=("region", "full"),
)
