"""What tasks report to the job master and the job master to the driver: a task's final
:class:`TaskState` and :class:`TaskResult` (with a :class:`TaskFailure` naming task, operator
and cause), and the job's :class:`JobStatus` and :class:`JobOutcome`. Plain data, shared by
``runtime.task``, ``runtime.jobmaster`` and ``runtime.execution`` so none imports another for
its vocabulary.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from flowray.common.job_status import JobStatus   # used here, and the runtime's name for it
from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = ["TaskState", "TaskFailure", "TaskResult", "JobStatus", "JobOutcome",
           "LoopCounters"]


class TaskState(enum.Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"


@dataclass
class TaskFailure:
    """Why a task failed: where (task, operator) and what (cause and its traceback)."""

    task: str
    operator: Optional[str]
    cause_type: str
    message: str
    traceback_text: str
    user_code: bool
    failed_channel: Optional[str] = None
    """The input channel whose blocking partition could not be read (missing or
    truncated), for the failover strategy's rule 2; None for any other failure."""
    restoring_checkpoint: Optional[int] = None
    """The checkpoint the task was restoring when it failed (None: it failed later)."""
    recoverable: bool = True
    """False for a deterministic error a restart would repeat (an unsupported key type):
    the job fails at once, whatever the restart strategy (Flink's non-recoverable
    errors)."""

    def describe(self) -> str:
        where = (
            f"operator {self.operator!r} in task {self.task!r}"
            if self.operator
            else f"task {self.task!r}"
        )
        said = f"{where} failed: {self.cause_type}: {self.message}"
        if not self.recoverable:
            said += " (not restarted: the error is deterministic, a restart would repeat it)"
        return said


@dataclass
class TaskResult:
    subtask: SubtaskId
    state: TaskState
    failure: Optional[TaskFailure] = None
    metrics: Dict[str, Any] = field(default_factory=dict)
    #: the actor that ran the task may host its next attempt (set by the actor)
    actor_reusable: bool = False


@dataclass
class JobOutcome:
    """What the job master reports when a job ends."""

    job_id: str
    job_name: str
    status: JobStatus
    duration_ms: float
    failure: Optional[TaskFailure] = None
    task_metrics: List[Dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    checkpoints: int = 0
    checkpoint_stats: Dict[str, Any] = field(default_factory=dict)
    job_master_restarts: int = 0
    #: what the attempts before the last one of each task counted (``records_in``,
    #: ``source_records``): ``task_metrics`` hold only the last attempt's
    earlier_attempts: Dict[str, int] = field(default_factory=dict)
    #: every restart, explained (see ``JobScheduler.restart_events``)
    restart_events: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class LoopCounters:
    """One task of an iteration's loop, read between two records on its thread
    (termination detection: runtime/jobmaster/loop_termination.py)."""

    #: records written into the loop's channels so far
    sent: int
    #: records read from the loop's channels so far
    received: int
    #: a head: its regular input ended and its queue is empty (a body task: always)
    idle: bool
