"""Why a checkpoint failed (:class:`CheckpointFailureReason`, named as in Flink) and how many
failures in a row the job tolerates (:class:`CheckpointFailureManager`,
``execution.checkpointing.tolerable-failed-checkpoints``).

>>> CheckpointFailureReason.EXPIRED.counts_as_failure
True
>>> CheckpointFailureReason.TOO_MANY_CONCURRENT.counts_as_failure
False
"""

from __future__ import annotations

import enum
from typing import Optional, Set, Union

__all__ = ["CheckpointFailureReason", "notify_nobody", "CheckpointFailureManager"]


# -----------------------------------------------------------------------------------------
# vocabulary
# -----------------------------------------------------------------------------------------


class CheckpointFailureReason(enum.Enum):
    """Why a checkpoint was not triggered or not completed (Flink's texts).

    >>> CheckpointFailureReason.EXPIRED.value
    'Checkpoint expired before completing.'
    >>> [r.name for r in CheckpointFailureReason if r.counts_as_failure]
    ['EXPIRED', 'DECLINED', 'ASYNC_FAILURE', 'IO_FAILURE']
    >>> CheckpointFailureReason.parse("ASYNC_FAILURE"), CheckpointFailureReason.parse("?")
    (<CheckpointFailureReason.ASYNC_FAILURE: 'Asynchronous task checkpoint failed.'>, <CheckpointFailureReason.DECLINED: 'Checkpoint was declined.'>)
    """

    # counted toward tolerable-failed-checkpoints
    EXPIRED = "Checkpoint expired before completing."
    DECLINED = "Checkpoint was declined."
    ASYNC_FAILURE = "Asynchronous task checkpoint failed."
    IO_FAILURE = "An Exception occurred while triggering the checkpoint. IO-problem detected."
    # not counted
    TASK_FAILURE = "Task has failed."
    SUBSUMED = "Checkpoint has been subsumed."
    DECLINED_ON_CANCELLATION = "Task received cancellation from one of its inputs."
    DECLINED_TASK_NOT_READY = "Checkpoint was declined (tasks not ready)."
    DECLINED_INPUT_END_OF_STREAM = "Checkpoint was declined because one input stream is finished."
    TRIGGER_FAILURE = "Trigger checkpoint failure."
    TOO_MANY_CONCURRENT = "The maximum number of concurrent checkpoints is exceeded."
    MINIMUM_PAUSE = (
        "The minimum time between checkpoints is still pending. Checkpoint "
        "will be triggered after the minimum time."
    )
    NOT_ALL_TASKS_RUNNING = "Not all required tasks are currently running."
    ALL_TASKS_FINISHED = "All tasks of the job have finished."
    COORDINATOR_SHUTDOWN = "CheckpointCoordinator shutdown."

    @property
    def counts_as_failure(self) -> bool:
        """Counted by the failure manager (Flink's IO_EXCEPTION, CHECKPOINT_ASYNC_EXCEPTION,
        CHECKPOINT_DECLINED, CHECKPOINT_EXPIRED); every other reason is ignored."""
        return self in _COUNTED

    @property
    def is_pre_flight(self) -> bool:
        """A trigger precondition that failed: no checkpoint id was consumed."""
        return self in _PRE_FLIGHT

    @classmethod
    def parse(
        cls, reason: "Union[CheckpointFailureReason, str, None]"
    ) -> "CheckpointFailureReason":
        """A reason from itself or its name (as tasks send it); unknown -> DECLINED."""
        if isinstance(reason, cls):
            return reason
        if isinstance(reason, str):
            name = reason.strip().upper().replace("-", "_")
            if name in cls.__members__:
                return cls[name]
            for member in cls:
                if member.value == reason:
                    return member
        return cls.DECLINED


_COUNTED = frozenset(
    {
        CheckpointFailureReason.EXPIRED,
        CheckpointFailureReason.DECLINED,
        CheckpointFailureReason.ASYNC_FAILURE,
        CheckpointFailureReason.IO_FAILURE,
    }
)

_PRE_FLIGHT = frozenset(
    {
        CheckpointFailureReason.TOO_MANY_CONCURRENT,
        CheckpointFailureReason.MINIMUM_PAUSE,
        CheckpointFailureReason.NOT_ALL_TASKS_RUNNING,
        CheckpointFailureReason.ALL_TASKS_FINISHED,
        CheckpointFailureReason.COORDINATOR_SHUTDOWN,
    }
)


# tasks are gone or going away: telling them about the abort is pointless
_NOTIFY_NOBODY = frozenset({CheckpointFailureReason.COORDINATOR_SHUTDOWN})


def notify_nobody(reason: CheckpointFailureReason) -> bool:
    """Aborts for this reason are not sent to tasks (they are going away)."""
    return reason in _NOTIFY_NOBODY


class CheckpointFailureManager:
    """Counts consecutive checkpoint failures (Flink's ``CheckpointFailureManager``).

    Only reasons that :attr:`~CheckpointFailureReason.counts_as_failure` count, each
    checkpoint once, and only checkpoints newer than the last success; coordinator-side
    failures (expired, I/O) of savepoints do not count. When the count exceeds
    ``tolerable`` the counter resets and :meth:`on_failure` returns the error message.

    >>> m = CheckpointFailureManager(1)
    >>> m.on_failure(1, CheckpointFailureReason.EXPIRED, False, False) is None
    True
    >>> m.on_failure(2, CheckpointFailureReason.SUBSUMED, False, False) is None
    True
    >>> m.on_failure(3, CheckpointFailureReason.DECLINED, False, True)
    'Exceeded checkpoint tolerable failure threshold (1): Checkpoint was declined. (checkpoint 3; 2 consecutive failed checkpoints)'
    """

    def __init__(self, tolerable: int) -> None:
        self.tolerable = tolerable
        self.count = 0
        self._counted: Set[int] = set()
        self.last_succeeded_id = 0

    def on_success(self, checkpoint_id: int) -> None:
        if checkpoint_id > self.last_succeeded_id:
            self.last_succeeded_id = checkpoint_id
            self._clear()

    def on_failure(
        self,
        checkpoint_id: int,
        reason: CheckpointFailureReason,
        is_savepoint: bool,
        from_task: bool,
    ) -> Optional[str]:
        if not reason.counts_as_failure or checkpoint_id <= self.last_succeeded_id:
            return None
        if is_savepoint and not from_task:
            return None
        if checkpoint_id in self._counted:
            return None
        self._counted.add(checkpoint_id)
        self.count += 1
        if self.count > self.tolerable:
            n = self.count
            self._clear()
            return (
                f"Exceeded checkpoint tolerable failure threshold ({self.tolerable}): "
                f"{reason.value} (checkpoint {checkpoint_id}; {n} consecutive failed "
                f"checkpoints)"
            )
        return None

    def _clear(self) -> None:
        self.count = 0
        self._counted.clear()
