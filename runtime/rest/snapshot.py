"""What the REST API reads of a job, copied out of the job master at one moment (so the
views are pure functions of it, and an archive of an ended job is the same data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["VertexSnapshot", "FailureRecord", "JobSnapshot", "SubtaskSnapshot"]


@dataclass(frozen=True)
class SubtaskSnapshot:
    index: int
    status: str  # Flink's ExecutionState name: CREATED, DEPLOYING, RUNNING, FINISHED, ...
    attempt: int
    host: str
    start_ms: int  # epoch ms, -1 unknown
    end_ms: int  # epoch ms, -1 still running
    metrics: Dict[str, Any]  # the subtask's metric values (StreamTask.metric_values)


@dataclass(frozen=True)
class VertexSnapshot:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    #: (input vertex id, ship strategy: FORWARD, HASH, REBALANCE, ...) per input edge
    inputs: Tuple[Tuple[str, str], ...]
    subtasks: Tuple[SubtaskSnapshot, ...]
    is_source: bool = False


@dataclass(frozen=True)
class FailureRecord:
    """A failure behind a restart (or the job's end): when, where and why."""

    timestamp_ms: int
    task: str
    cause_type: str
    message: str
    traceback_text: str
    host: str = ""


@dataclass(frozen=True)
class JobSnapshot:
    job_id: str
    job_name: str
    state: str  # Flink's JobStatus name
    job_type: str  # STREAMING or BATCH
    start_ms: int  # epoch ms
    end_ms: int  # epoch ms, -1 while running
    now_ms: int
    #: epoch ms at which the job entered each status it went through
    timestamps: Dict[str, int]
    vertices: Tuple[VertexSnapshot, ...]
    max_parallelism: int
    config: Dict[str, str]
    #: CheckpointStatsTracker's counts, history (oldest first) and latest restore
    checkpoint_counts: Dict[str, int]
    checkpoint_history: List[Dict[str, Any]]
    latest_restore: Optional[Dict[str, Any]]
    failures: Tuple[FailureRecord, ...]
    restarts: int = 0
    #: the job's metrics by name (JobMetrics: uptime, numRestarts, checkpoint counts...)
    job_metrics: Dict[str, Any] = field(default_factory=dict)
    stoppable: bool = True
    extra: Dict[str, Any] = field(default_factory=dict)

    def vertex(self, vertex_id: str) -> Optional[VertexSnapshot]:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        return None
