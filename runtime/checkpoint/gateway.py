"""How the coordinator reaches the tasks (:class:`CheckpointGateway`: trigger, notify
complete, notify aborted) and what a trigger attempt returned (:class:`TriggerResult`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Optional

from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = ["CheckpointGateway", "TriggerResult"]


# -----------------------------------------------------------------------------------------
# the coordinator
# -----------------------------------------------------------------------------------------


class CheckpointGateway(abc.ABC):
    """How the coordinator reaches tasks (the Ray shell implements it; fire and forget)."""

    @abc.abstractmethod
    def trigger(
        self, subtask: SubtaskId, checkpoint_id: int, timestamp_ms: int, is_savepoint: bool,
        location: Optional[str] = None,
    ) -> None:
        """``location``: a savepoint's directory, where the task writes its files."""

    @abc.abstractmethod
    def notify_complete(self, subtask: SubtaskId, checkpoint_id: int) -> None: ...

    @abc.abstractmethod
    def notify_aborted(
        self, subtask: SubtaskId, checkpoint_id: int, reason: CheckpointFailureReason
    ) -> None: ...


@dataclass(frozen=True)
class TriggerResult:
    """``checkpoint_id`` when a checkpoint was started, else the ``failure``."""

    checkpoint_id: Optional[int] = None
    failure: Optional[CheckpointFailureReason] = None

    @property
    def ok(self) -> bool:
        return self.checkpoint_id is not None and self.failure is None
