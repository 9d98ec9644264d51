"""The job master's bookkeeping of one run: which subtasks finished, failed or were lost,
and what that means for the job. Pure: the Ray shell and the local executor feed it events.
"""

from __future__ import annotations

import enum
from typing import Dict, Iterable, List, Optional

from .client import JobOutcome, JobStatus
from .clock import Clock
from .execution_graph import SubtaskId
from .stream_task import TaskFailure, TaskResult, TaskState

__all__ = ["Decision", "JobRun"]


class Decision(enum.Enum):
    CONTINUE = "CONTINUE"          # keep waiting for tasks
    FINISH = "FINISH"              # every task finished
    CANCEL_ALL = "CANCEL_ALL"      # a task failed or the user cancelled: stop the others
    DONE = "DONE"                  # nothing left running after a failure/cancel


class JobRun:
    """Tracks subtask states; decides when the job is finished, failing or cancelled.

    >>> from flowray.runtime.clock import ManualClock
    >>> run = JobRun("j1", "demo", [SubtaskId("v1", 0)], ManualClock())
    >>> run.on_result(TaskResult(SubtaskId("v1", 0), TaskState.FINISHED)).value
    'FINISH'
    """

    def __init__(self, job_id: str, job_name: str, subtasks: Iterable[SubtaskId],
                 clock: Clock) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.clock = clock
        self.states: Dict[SubtaskId, TaskState] = {s: TaskState.CREATED for s in subtasks}
        self.metrics: Dict[SubtaskId, dict] = {}
        self.status = JobStatus.CREATED
        self.failure: Optional[TaskFailure] = None
        self._start_ms = clock.monotonic_ms()
        self._end_ms: Optional[float] = None

    def deployed(self) -> None:
        self.status = JobStatus.RUNNING
        for s in self.states:
            self.states[s] = TaskState.RUNNING

    def running(self) -> List[SubtaskId]:
        return [s for s, st in self.states.items() if st is TaskState.RUNNING]

    def on_result(self, result: TaskResult) -> Decision:
        self.states[result.subtask] = result.state
        if result.metrics:
            self.metrics[result.subtask] = result.metrics
        if result.state is TaskState.FAILED and self.failure is None:
            self.failure = result.failure
            if self.status in (JobStatus.RUNNING, JobStatus.CREATED):
                self.status = JobStatus.FAILING
        return self._decide()

    def on_lost(self, subtask: SubtaskId, reason: str) -> Decision:
        """A task's process died (no result)."""
        return self.on_result(TaskResult(subtask, TaskState.FAILED, TaskFailure(
            task=f"{subtask.vertex_id}[{subtask.index}]", operator=None,
            cause_type="TaskLost", message=reason, traceback_text=reason, user_code=False)))

    def cancel(self) -> Decision:
        if not self.status.is_globally_terminal_state():
            self.status = JobStatus.CANCELLING
        return self._decide()

    def _decide(self) -> Decision:
        running = self.running()
        if self.status in (JobStatus.FAILING, JobStatus.CANCELLING):
            if running:
                return Decision.CANCEL_ALL
            self.status = (JobStatus.FAILED if self.status is JobStatus.FAILING
                           else JobStatus.CANCELED)
            self._end_ms = self.clock.monotonic_ms()
            return Decision.DONE
        if not running and all(st is TaskState.FINISHED for st in self.states.values()):
            self.status = JobStatus.FINISHED
            self._end_ms = self.clock.monotonic_ms()
            return Decision.FINISH
        return Decision.CONTINUE

    def outcome(self) -> JobOutcome:
        end = self._end_ms if self._end_ms is not None else self.clock.monotonic_ms()
        return JobOutcome(self.job_id, self.job_name, self.status, end - self._start_ms,
                          self.failure, [self.metrics[s] for s in sorted(self.metrics)])
