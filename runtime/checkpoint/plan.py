"""Which tasks a checkpoint triggers, waits for and skips (:func:`compute_checkpoint_plan`),
from the task graph and each task's :class:`TaskStatus` (finished tasks are skipped, tasks
whose inputs all finished are triggered directly, as Flink's checkpoints after tasks finish).

>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> a, b = SubtaskId("a", 0), SubtaskId("b", 0)
>>> plan = compute_checkpoint_plan({a: set(), b: {a}},
...                                {a: TaskStatus.FINISHED, b: TaskStatus.RUNNING})
>>> [t.key for t in plan.tasks_to_trigger], [t.key for t in plan.finished]
(['b:0'], ['a:0'])
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import FrozenSet, Iterable, Mapping

from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = ["TaskStatus", "CheckpointPlan", "compute_checkpoint_plan"]


class TaskStatus(enum.Enum):
    """A task as the coordinator sees it."""

    NOT_RUNNING = "NOT_RUNNING"  # not deployed yet, or being restarted
    RUNNING = "RUNNING"
    ENDED_INPUT = "ENDED_INPUT"  # input ended, operators finished, waits for a checkpoint
    FINISHED = "FINISHED"


# -----------------------------------------------------------------------------------------
# the plan
# -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointPlan:
    """Tasks to trigger directly, tasks that must acknowledge, tasks already finished."""

    tasks_to_trigger: FrozenSet[SubtaskId]
    tasks_to_ack: FrozenSet[SubtaskId]
    finished: FrozenSet[SubtaskId]


_DONE = (TaskStatus.ENDED_INPUT, TaskStatus.FINISHED)


def compute_checkpoint_plan(
    upstream: Mapping[SubtaskId, Iterable[SubtaskId]], statuses: Mapping[SubtaskId, TaskStatus]
) -> CheckpointPlan:
    """Flink 1.14+ "checkpoints after tasks finished": every task not finished
    acknowledges; a task not finished is triggered directly when none of its upstream
    tasks can still send it a barrier (all ENDED_INPUT or FINISHED; sources have none),
    or when it ended its input itself.

    >>> a, b, c, d = (SubtaskId(v, 0) for v in "abcd")   # a -> b, a -> c, b,c -> d
    >>> up = {a: set(), b: {a}, c: {a}, d: {b, c}}
    >>> st = {a: TaskStatus.FINISHED, b: TaskStatus.RUNNING, c: TaskStatus.ENDED_INPUT,
    ...       d: TaskStatus.RUNNING}
    >>> plan = compute_checkpoint_plan(up, st)
    >>> sorted(t.vertex_id for t in plan.tasks_to_trigger)
    ['b', 'c']
    >>> sorted(t.vertex_id for t in plan.tasks_to_ack), sorted(t.vertex_id for t in plan.finished)
    (['b', 'c', 'd'], ['a'])
    """
    finished = frozenset(
        t for t in upstream if statuses.get(t, TaskStatus.NOT_RUNNING) == TaskStatus.FINISHED
    )
    to_ack = frozenset(t for t in upstream if t not in finished)
    # a task that ended its input had end-of-partition from every upstream task, whatever
    # their status here says (a source still waiting for its consumers is RUNNING)
    to_trigger = frozenset(
        t
        for t in to_ack
        if statuses.get(t) == TaskStatus.ENDED_INPUT
        or all(statuses.get(u, TaskStatus.NOT_RUNNING) in _DONE for u in upstream[t])
    )
    return CheckpointPlan(to_trigger, to_ack, finished)
