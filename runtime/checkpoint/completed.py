"""A completed checkpoint (:class:`CompletedCheckpoint`: id, times, task states, what it
references) and the retained ones (:class:`CompletedCheckpointStore`, oldest subsumed
beyond ``execution.checkpointing.num-retained``; savepoints never subsumed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from flowray.state.snapshot import TaskStateSnapshot
from flowray.runtime.checkpoint.state_assignment import VertexStateLayout

__all__ = ["CompletedCheckpoint", "CompletedCheckpointStore"]


@dataclass
class CompletedCheckpoint:
    """A checkpoint every task acknowledged and whose ``_metadata`` was written.

    ``task_states`` is keyed by :attr:`SubtaskId.key`; tasks that had finished are present
    with ``finished=True``. ``external_path`` is the ``_metadata`` path. ``vertices``:
    the layout of every vertex (uids, parallelism), so another job can take the state over;
    ``job_name`` finds a job's retained checkpoints again (:func:`find_retained_checkpoints`).
    """

    job_id: str
    checkpoint_id: int
    trigger_ms: int
    completed_ms: int
    task_states: Dict[str, TaskStateSnapshot]
    is_savepoint: bool = False
    external_path: str = ""
    vertices: Dict[str, VertexStateLayout] = field(default_factory=dict)
    job_name: str = ""

    def state_size(self) -> int:
        return sum(s.state_size() for s in self.task_states.values())

    @property
    def duration_ms(self) -> int:
        return self.completed_ms - self.trigger_ms


class CompletedCheckpointStore:
    """The retained completed checkpoints, oldest first; savepoints apart, never subsumed.

    >>> store = CompletedCheckpointStore(num_retained=2)
    >>> cp = lambda n, sp=False: CompletedCheckpoint("j", n, 0, 0, {}, is_savepoint=sp)
    >>> store.add(cp(1)), store.add(cp(2)), store.add(cp(3, True))
    ([], [], [])
    >>> [c.checkpoint_id for c in store.add(cp(4))], store.latest().checkpoint_id
    ([1], 4)
    >>> [c.checkpoint_id for c in store.all()], [c.checkpoint_id for c in store.savepoints()]
    ([2, 4], [3])
    """

    def __init__(self, num_retained: int) -> None:
        if num_retained < 1:
            raise ValueError(f"num_retained must be at least 1, got {num_retained}")
        self.num_retained = num_retained
        self._checkpoints: List[CompletedCheckpoint] = []
        self._savepoints: List[CompletedCheckpoint] = []

    def add(self, checkpoint: CompletedCheckpoint) -> List[CompletedCheckpoint]:
        """Add; returns the checkpoints it subsumed (the oldest beyond ``num_retained``)."""
        if checkpoint.is_savepoint:
            self._savepoints.append(checkpoint)
            return []
        self._checkpoints.append(checkpoint)
        subsumed: List[CompletedCheckpoint] = []
        while len(self._checkpoints) > self.num_retained:
            subsumed.append(self._checkpoints.pop(0))
        return subsumed

    def remove(self, checkpoint_id: int) -> Optional[CompletedCheckpoint]:
        """Take a retained checkpoint out (it proved damaged); None if not retained."""
        for c in self._checkpoints:
            if c.checkpoint_id == checkpoint_id:
                self._checkpoints.remove(c)
                return c
        return None

    def latest(self) -> Optional[CompletedCheckpoint]:
        """The newest retained checkpoint (savepoints are not used for recovery)."""
        return self._checkpoints[-1] if self._checkpoints else None

    def all(self) -> List[CompletedCheckpoint]:
        return list(self._checkpoints)

    def savepoints(self) -> List[CompletedCheckpoint]:
        return list(self._savepoints)

    def max_checkpoint_id(self) -> int:
        ids = [c.checkpoint_id for c in self._checkpoints + self._savepoints]
        return max(ids) if ids else 0
