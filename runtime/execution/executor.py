"""What executors share: a job prepared for submission, and the executor interface."""

from __future__ import annotations

from flowray.common.constants import DEFAULT_CHECKPOINTS_DIR

import abc
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from flowray.operators.sinks import DriverSinkOperator

from flowray.runtime.execution.client import JobClient
from flowray.common.options import (
    BLOCKING_PARTITIONS_DIR,
    CHECKPOINTING_INTERVAL,
    CHECKPOINTS_DIR,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    RUNTIME_MODE,
    SAVEPOINT_IGNORE_UNCLAIMED_STATE,
    SAVEPOINT_PATH,
)
from flowray.common.configuration import Configuration
from flowray.common.files import user_temp_dir
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.graph.job_graph import JobGraph, mark_blocking_exchanges
from flowray.runtime.graph.transformations import GraphError
from flowray.runtime.execution.serialization import dumps_checked, register_user_modules
from flowray.runtime.execution.storage_reach import check_storage_writable

__all__ = ["PreparedJob", "JobExecutor", "prepare_job", "driver_channel_id"]


log = logging.getLogger(__name__)


def is_batch(conf: Configuration, job_graph: JobGraph) -> bool:
    """BATCH, or AUTOMATIC with only bounded sources and no iteration (a cycle runs in
    STREAMING mode: BATCH stages cannot feed back into an earlier one, as in Flink)."""
    mode = conf.get(RUNTIME_MODE)
    has_loop = any(v.iteration_head for v in job_graph.vertices.values())
    if mode == "BATCH" and has_loop:
        raise GraphError("iterate() needs STREAMING execution mode: a cycle cannot run as "
                         "BATCH stages (set execution.runtime-mode to STREAMING)")
    if mode != "AUTOMATIC":
        return mode == "BATCH"
    if has_loop:
        return False
    from flowray.operators.sources import Boundedness, SourceOperator
    for v in job_graph.vertices.values():
        for op in v.plan.operators.values():
            if isinstance(op, SourceOperator) and \
                    op.source.get_boundedness() is not Boundedness.BOUNDED:
                return False
    return True


def driver_channel_id(endpoint_id: str, subtask: SubtaskId) -> str:
    return f"driver:{endpoint_id}/{subtask.key}"


@dataclass
class PreparedJob:
    job_id: str
    job_name: str
    job_graph: JobGraph
    plan_bytes: Dict[str, bytes]
    config: Dict[str, Any]
    # endpoint id -> (mode, channel ids the driver must accept)
    driver_sinks: Dict[str, Tuple[str, List[str]]] = field(default_factory=dict)
    #: the savepoint or retained checkpoint the job starts from (execution.savepoint.path)
    restore_checkpoint: Any = None
    #: channels (task to task, task to driver) authenticate with it before any decoding
    channel_secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)

    def execution_graph(self) -> ExecutionGraph:
        return ExecutionGraph(self.job_graph)


def prepare_job(job_graph: JobGraph, config: Dict[str, Any]) -> PreparedJob:
    """Serialize every task's code now, so a bad function fails before deployment."""
    plan_bytes: Dict[str, bytes] = {}
    driver_sinks: Dict[str, Tuple[str, List[str]]] = {}
    for v in job_graph.vertices.values():
        objects: List[Any] = []
        for op in v.plan.operators.values():
            objects.append(op)
            objects.extend(op.user_functions())
            objects.extend(getattr(p, "key_selector", None) for p in v.plan.partitioners.values())
        register_user_modules(o for o in objects if o is not None)
        for op in v.plan.operators.values():
            dumps_checked(op, f"operator {op.name!r} (uid {op.uid!r})")
            if isinstance(op, DriverSinkOperator):
                chans = [driver_channel_id(op.endpoint_id, SubtaskId(v.id, i))
                         for i in range(v.parallelism)]
                driver_sinks[op.endpoint_id] = (op.mode, chans)
        for eid, p in v.plan.partitioners.items():
            dumps_checked(p, f"the key selector of key_by after {v.name!r}")
        plan_bytes[v.id] = dumps_checked(v.plan, f"task {v.name!r}")
    config = dict(config)
    conf = Configuration(config)
    if is_batch(conf, job_graph):
        mark_blocking_exchanges(job_graph)
        config[RUNTIME_MODE.key] = "BATCH"
        if conf.get(CHECKPOINTING_INTERVAL) is not None:
            # as Flink: a BATCH job recovers by re-running stages, not from checkpoints
            log.warning("flowray: checkpointing is ignored in BATCH mode")
            config.pop(CHECKPOINTING_INTERVAL.key)
        if conf.get(BLOCKING_PARTITIONS_DIR) is None:
            config[BLOCKING_PARTITIONS_DIR.key] = user_temp_dir("partitions")
    if conf.get(HEARTBEAT_TIMEOUT) <= conf.get(HEARTBEAT_INTERVAL):
        raise ValueError(
            f"heartbeat.timeout ({conf.get(HEARTBEAT_TIMEOUT)} ms) must be longer than "
            f"heartbeat.interval ({conf.get(HEARTBEAT_INTERVAL)} ms)")
    if conf.get(CHECKPOINTING_INTERVAL) is not None and conf.get(CHECKPOINTS_DIR) is None:
        # resolved here: task actors run in other working directories
        config[CHECKPOINTS_DIR.key] = os.path.abspath(DEFAULT_CHECKPOINTS_DIR)
    # a storage folder that cannot be written fails now, naming its key, not a task later
    check_storage_writable(Configuration(config))
    return PreparedJob(uuid.uuid4().hex[:12], job_graph.job_name, job_graph, plan_bytes,
                       config, driver_sinks, load_restore_checkpoint(job_graph, conf))


def load_restore_checkpoint(job_graph: JobGraph, conf: Configuration) -> Any:
    """The checkpoint at ``execution.savepoint.path`` (None if unset), checked against the
    job now: a missing path, state no operator claims or a changed max parallelism fail
    here, before anything is deployed."""
    path = conf.get(SAVEPOINT_PATH)
    if not path:
        return None
    from flowray.runtime.checkpoint.state_assignment import assign_task_states, vertex_layouts
    from flowray.runtime.checkpoint.storage import load_checkpoint

    try:
        checkpoint = load_checkpoint(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"execution.savepoint.path: no savepoint or checkpoint at {path} (expected a "
            "directory holding _metadata, or the _metadata file)") from None
    assign_task_states(checkpoint, vertex_layouts(job_graph),
                       conf.get(SAVEPOINT_IGNORE_UNCLAIMED_STATE))
    log.info("flowray: the job starts from %s %d at %s",
             "savepoint" if checkpoint.is_savepoint else "checkpoint",
             checkpoint.checkpoint_id, path)
    return checkpoint


class JobExecutor(abc.ABC):
    """Runs prepared jobs somewhere (Ray actors, or threads in this process)."""

    @abc.abstractmethod
    def submit(self, job: PreparedJob) -> JobClient: ...
