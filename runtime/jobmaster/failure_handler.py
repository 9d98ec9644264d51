"""What to do about a failure, as Flink's ``ExecutionFailureHandler``: the failover strategy
says which tasks restart, the restart strategy whether and after what back-off. The handler
decides and *returns* a :class:`FailureHandlingResult`; the scheduler carries it out.

Also here: :class:`PendingFailover` (a granted failover waiting for its tasks to stop and
its back-off to pass; overlapping ones merge) and :func:`root_cause` (which of several
failures of one attempt to report).

>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.jobmaster.restart_strategy import FixedDelayRestartStrategy
>>> from flowray.testing.jobmaster import TestingTopology
>>> from flowray.runtime.jobmaster.failover import RestartPipelinedRegionFailoverStrategy
>>> t = TestingTopology()
>>> for name in ("a", "b", "c"):
...     _ = t.add_vertex(name)
>>> _ = t.connect("a", "b", "pipelined")
>>> handler = ExecutionFailureHandler(RestartPipelinedRegionFailoverStrategy(t),
...                                   FixedDelayRestartStrategy(1, 500), ManualClock())
>>> result = handler.handle_task_failure("b", task_lost("b", "process died"))
>>> result.can_restart, sorted(result.tasks_to_restart), result.restart_delay_ms
(True, ['a', 'b'], 500)
>>> handler.handle_task_failure("c", task_lost("c", "again")).can_restart
False

A failure marked not recoverable (a deterministic error) is never restarted:

>>> from flowray.runtime.messages import TaskFailure
>>> handler = ExecutionFailureHandler(RestartPipelinedRegionFailoverStrategy(t),
...                                   FixedDelayRestartStrategy(5, 500), ManualClock())
>>> bad_key = TaskFailure("b (1/1)", "key_by key selector", "UnsupportedKeyError", "...", "",
...                       True, recoverable=False)
>>> handler.handle_task_failure("b", bad_key).can_restart
False
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Set

from flowray.runtime.jobmaster.failover import FailoverStrategy
from flowray.runtime.jobmaster.restart_strategy import RestartStrategy
from flowray.runtime.messages import TaskFailure

from flowray.common.clock import Clock

__all__ = ["FailureHandlingResult", "ExecutionFailureHandler", "PendingFailover",
           "root_cause", "task_lost"]


@dataclass(frozen=True)
class FailureHandlingResult:
    """The decision for one failure: restart ``tasks_to_restart`` after
    ``restart_delay_ms``, or (``can_restart`` false) fail the job with ``failure``."""

    failure: TaskFailure
    can_restart: bool
    tasks_to_restart: frozenset = field(default_factory=frozenset)
    restart_delay_ms: int = 0
    restart_strategy: str = ""  # how the restart strategy describes itself, for the log


class ExecutionFailureHandler:
    """Pure: a failover strategy, a restart strategy and a clock. Each call counts one
    failure towards the restart strategy."""

    def __init__(self, failover_strategy: FailoverStrategy, restart_strategy: RestartStrategy,
                 clock: Clock) -> None:
        self.failover_strategy = failover_strategy
        self.restart_strategy = restart_strategy
        self.clock = clock

    def handle_task_failure(self, subtask: Any, failure: TaskFailure,
                            failed_partition: Optional[str] = None,
                            not_deployed: Iterable[Any] = ()) -> FailureHandlingResult:
        """A task failed: restart what the failover strategy says for it (``subtask``
        itself always), except tasks not deployed in their current attempt.
        ``failed_partition``: the partition that could not be read, counted as lost even if
        its files are there (rule 2: a truncated file)."""
        tasks = set(self.failover_strategy.get_tasks_needing_restart(
            subtask, failed_partition=failed_partition)) - set(not_deployed)
        tasks.add(subtask)
        return self._decide(failure, tasks)

    def handle_global_failure(self, failure: TaskFailure,
                              deployed: Iterable[Any]) -> FailureHandlingResult:
        """A failure of no task (e.g. too many failed checkpoints): restart every deployed
        task."""
        return self._decide(failure, set(deployed))

    def _decide(self, failure: TaskFailure, tasks: Set[Any]) -> FailureHandlingResult:
        if not failure.recoverable:  # deterministic: a restart would fail the same way
            return FailureHandlingResult(failure, False, frozenset(tasks), 0,
                                         "none: the error is not recoverable")
        # wall-clock ms: a successor of the job master continues the same budget
        self.restart_strategy.notify_failure(int(self.clock.now_ms()))
        if not self.restart_strategy.can_restart():
            return FailureHandlingResult(failure, False, frozenset(tasks), 0,
                                         self.restart_strategy.describe())
        return FailureHandlingResult(failure, True, frozenset(tasks),
                                     int(self.restart_strategy.backoff_ms()),
                                     self.restart_strategy.describe())


@dataclass
class PendingFailover:
    """Tasks to redeploy once they have all stopped and ``restart_at`` (monotonic ms) has
    passed; ``count``: the failovers it stands for (merged ones count each)."""

    tasks: Set[Any]
    restart_at: float
    count: int = 1

    def merged(self, other: "PendingFailover") -> "PendingFailover":
        return PendingFailover(self.tasks | other.tasks,
                               max(self.restart_at, other.restart_at),
                               self.count + other.count)


def merge_failover(under_way: List[PendingFailover],
                   failover: PendingFailover) -> List[PendingFailover]:
    """The failovers under way once ``failover`` joins them: one sharing tasks with others
    is merged with them (it waits for the latest back-off and counts every failover)."""
    keep: List[PendingFailover] = []
    for other in under_way:
        if other.tasks & failover.tasks:
            failover = failover.merged(other)
        else:
            keep.append(other)
    return keep + [failover]


#: failures that follow from another task's failure (its connection broke)
_CONSEQUENTIAL = ("ChannelClosedError", "ChannelError", "HandshakeError", "BrokenPipeError",
                  "ConnectionResetError")


def root_cause(failures: List[TaskFailure]) -> Optional[TaskFailure]:
    """The failure to report when several tasks of one attempt failed: the first that is
    not merely a broken connection to a task that failed before (results of different
    tasks reach the job master in any order)."""
    for f in failures:
        if f.user_code or f.cause_type not in _CONSEQUENTIAL:
            return f
    return failures[0] if failures else None


def task_lost(subtask: Any, reason: str) -> TaskFailure:
    """The failure of a task that vanished without a result (its process died)."""
    name = f"{subtask.vertex_id}[{subtask.index}]" if hasattr(subtask, "vertex_id") \
        else str(subtask)
    return TaskFailure(task=name, operator=None, cause_type="TaskLost", message=reason,
                       traceback_text=reason, user_code=False)
