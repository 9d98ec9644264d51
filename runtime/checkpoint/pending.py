"""One checkpoint in flight: :class:`PendingCheckpoint` collects acknowledgements
(:class:`AckResult`) until every task to acknowledge has done so.

>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> a = SubtaskId("a", 0)
>>> p = PendingCheckpoint(1, 0, {a}, finished=set())
>>> p.acknowledge(a, None, {}).name, p.is_fully_acknowledged
('SUCCESS', True)
"""

from __future__ import annotations

import enum
from typing import Dict, FrozenSet, Iterable, Optional, Set

from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.snapshot import TaskStateSnapshot

__all__ = ["AckResult", "PendingCheckpoint"]


class AckResult(enum.Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


# -----------------------------------------------------------------------------------------
# pending, completed, failures
# -----------------------------------------------------------------------------------------


class PendingCheckpoint:
    """A checkpoint in flight: which tasks still owe an acknowledgement, what they sent.

    >>> a, b = SubtaskId("a", 0), SubtaskId("b", 0)
    >>> p = PendingCheckpoint(1, 0, {a}, {b})
    >>> p.acknowledge(a, TaskStateSnapshot(), {}), p.acknowledge(a, TaskStateSnapshot(), {})
    (<AckResult.SUCCESS: 'SUCCESS'>, <AckResult.DUPLICATE: 'DUPLICATE'>)
    >>> p.acknowledge(SubtaskId("x", 0), TaskStateSnapshot(), {})
    <AckResult.UNKNOWN: 'UNKNOWN'>
    >>> p.is_fully_acknowledged, p.task_states["b:0"].finished
    (True, True)
    """

    def __init__(
        self,
        checkpoint_id: int,
        trigger_ms: int,
        tasks_to_ack: Set[SubtaskId],
        finished: Set[SubtaskId],
        is_savepoint: bool = False,
        *,
        tasks_to_trigger: Iterable[SubtaskId] = (),
        trigger_monotonic_ms: Optional[float] = None,
        is_final: bool = False,
        location: Optional[str] = None,
        terminate: bool = False,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.trigger_ms = trigger_ms
        self.trigger_monotonic_ms = (
            float(trigger_ms) if trigger_monotonic_ms is None else trigger_monotonic_ms
        )
        self.is_savepoint = is_savepoint
        self.is_final = is_final
        #: a savepoint's directory; ``terminate``: the savepoint of a stop-with-savepoint
        self.location = location
        self.terminate = terminate
        self.tasks_to_ack: FrozenSet[SubtaskId] = frozenset(tasks_to_ack)
        self.finished: FrozenSet[SubtaskId] = frozenset(finished) - self.tasks_to_ack
        self.tasks_triggered: Set[SubtaskId] = set(tasks_to_trigger)
        self._not_yet: Set[SubtaskId] = set(self.tasks_to_ack)
        self.task_states: Dict[str, TaskStateSnapshot] = {
            t.key: TaskStateSnapshot.finished_task() for t in self.finished
        }
        self.task_metrics: Dict[str, dict] = {}
        self.failure_reason: Optional[CheckpointFailureReason] = None
        self._discarded = False

    def __repr__(self) -> str:
        return (
            f"PendingCheckpoint({self.checkpoint_id}, acked "
            f"{len(self.tasks_to_ack) - len(self._not_yet)}/{len(self.tasks_to_ack)}"
            f"{', savepoint' if self.is_savepoint else ''}"
            f"{', discarded' if self._discarded else ''})"
        )

    def acknowledge(
        self, subtask: SubtaskId, state: Optional[TaskStateSnapshot], metrics: Optional[dict]
    ) -> AckResult:
        if self._discarded:
            return AckResult.DISCARDED
        if subtask not in self.tasks_to_ack:
            return AckResult.UNKNOWN
        if subtask not in self._not_yet:
            return AckResult.DUPLICATE
        self._not_yet.discard(subtask)
        self.task_states[subtask.key] = state if state is not None else TaskStateSnapshot()
        self.task_metrics[subtask.key] = dict(metrics or {})
        return AckResult.SUCCESS

    def is_acknowledged_by(self, subtask: SubtaskId) -> bool:
        return subtask in self.tasks_to_ack and subtask not in self._not_yet

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self._not_yet and not self._discarded

    @property
    def not_yet_acknowledged(self) -> Set[SubtaskId]:
        return set(self._not_yet)

    @property
    def is_discarded(self) -> bool:
        return self._discarded

    def abort(self, reason: CheckpointFailureReason) -> None:
        if not self._discarded:
            self._discarded = True
            self.failure_reason = reason

    def state_size(self) -> int:
        return sum(s.state_size() for s in self.task_states.values())
