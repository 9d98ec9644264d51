"""What a checkpoint is, as the job master sees it: failure reasons, ack results, task
statuses, settings, the plan (:func:`compute_checkpoint_plan`), one checkpoint in flight
(:class:`PendingCheckpoint`), the retained ones (:class:`CompletedCheckpointStore`), the
tolerable-failure count (:class:`CheckpointFailureManager`) and how tasks are reached
(:class:`CheckpointGateway`). The :class:`~flowray.runtime.checkpoint_coordinator.
CheckpointCoordinator` puts them to work. Pure: no threads, no Ray, no clock of its own.

>>> from flowray.runtime.execution_graph import SubtaskId
>>> a, b = SubtaskId("a", 0), SubtaskId("b", 0)
>>> plan = compute_checkpoint_plan({a: set(), b: {a}},
...                                {a: TaskStatus.FINISHED, b: TaskStatus.RUNNING})
>>> [t.key for t in plan.tasks_to_trigger], [t.key for t in plan.finished]
(['b:0'], ['a:0'])
"""

from __future__ import annotations

import abc
import enum
import logging
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import (Any, Callable, Deque, Dict, FrozenSet, Iterable, List, Mapping,
                    Optional, Set, Union)

from flowray.state.snapshot import TaskStateSnapshot

from flowray.runtime.execution_graph import SubtaskId

__all__ = [
    "CheckpointFailureReason",
    "AckResult",
    "TaskStatus",
    "CheckpointSettings",
    "CompletedCheckpoint",
    "CheckpointPlan",
    "compute_checkpoint_plan",
    "PendingCheckpoint",
    "CompletedCheckpointStore",
    "CheckpointFailureManager",
    "CheckpointGateway",
    "TriggerResult",
    "notify_nobody",
]

log = logging.getLogger("flowray.runtime.checkpoint_coordinator")


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
    DECLINED_INPUT_END_OF_STREAM = ("Checkpoint was declined because one input stream is "
                                    "finished.")
    TRIGGER_FAILURE = "Trigger checkpoint failure."
    TOO_MANY_CONCURRENT = "The maximum number of concurrent checkpoints is exceeded."
    MINIMUM_PAUSE = ("The minimum time between checkpoints is still pending. Checkpoint "
                     "will be triggered after the minimum time.")
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
    def parse(cls, reason: "Union[CheckpointFailureReason, str, None]"
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


_COUNTED = frozenset({CheckpointFailureReason.EXPIRED, CheckpointFailureReason.DECLINED,
                      CheckpointFailureReason.ASYNC_FAILURE,
                      CheckpointFailureReason.IO_FAILURE})
_PRE_FLIGHT = frozenset({CheckpointFailureReason.TOO_MANY_CONCURRENT,
                         CheckpointFailureReason.MINIMUM_PAUSE,
                         CheckpointFailureReason.NOT_ALL_TASKS_RUNNING,
                         CheckpointFailureReason.ALL_TASKS_FINISHED,
                         CheckpointFailureReason.COORDINATOR_SHUTDOWN})
# tasks are gone or going away: telling them about the abort is pointless
_NOTIFY_NOBODY = frozenset({CheckpointFailureReason.COORDINATOR_SHUTDOWN})


def notify_nobody(reason: CheckpointFailureReason) -> bool:
    """Aborts for this reason are not sent to tasks (they are going away)."""
    return reason in _NOTIFY_NOBODY


class AckResult(enum.Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


class TaskStatus(enum.Enum):
    """A task as the coordinator sees it."""

    NOT_RUNNING = "NOT_RUNNING"  # not deployed yet, or being restarted
    RUNNING = "RUNNING"
    ENDED_INPUT = "ENDED_INPUT"  # input ended, operators finished, waits for a checkpoint
    FINISHED = "FINISHED"


@dataclass(frozen=True)
class CheckpointSettings:
    """Checkpointing options (Flink's keys, durations in ms).

    >>> s = CheckpointSettings.from_config({"execution.checkpointing.interval": "10 s",
    ...                                     "execution.checkpointing.min-pause": "500 ms"})
    >>> s.enabled, s.interval_ms, s.min_pause_ms, s.timeout_ms, s.max_concurrent
    (True, 10000, 500, 600000, 1)
    >>> CheckpointSettings.from_config({}).enabled
    False
    """

    interval_ms: Optional[int] = None
    mode: str = "EXACTLY_ONCE"
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    num_retained: int = 1

    def __post_init__(self) -> None:
        if self.interval_ms is not None and self.interval_ms <= 0:
            raise ValueError(f"checkpoint interval must be positive, got {self.interval_ms}")
        if self.timeout_ms <= 0:
            raise ValueError(f"checkpoint timeout must be positive, got {self.timeout_ms}")
        if self.min_pause_ms < 0:
            raise ValueError(f"min pause must not be negative, got {self.min_pause_ms}")
        if self.max_concurrent < 1:
            raise ValueError(f"max concurrent must be at least 1, got {self.max_concurrent}")
        if self.tolerable_failures < 0:
            raise ValueError(
                f"tolerable failures must not be negative, got {self.tolerable_failures}")
        if self.num_retained < 1:
            raise ValueError(f"num retained must be at least 1, got {self.num_retained}")

    @property
    def enabled(self) -> bool:
        """Periodic checkpoints are on (an interval is set)."""
        return self.interval_ms is not None

    @staticmethod
    def from_config(config: Any) -> "CheckpointSettings":
        """From a :class:`~flowray.runtime.config.Configuration` or a dict of keys."""
        from flowray.runtime.config import (
            CHECKPOINTING_INTERVAL,
            CHECKPOINTING_MAX_CONCURRENT,
            CHECKPOINTING_MIN_PAUSE,
            CHECKPOINTING_MODE,
            CHECKPOINTING_TIMEOUT,
            CHECKPOINTING_TOLERABLE_FAILURES,
            CHECKPOINTS_NUM_RETAINED,
            Configuration,
        )

        if config is None:
            config = Configuration()
        elif not isinstance(config, Configuration):
            config = Configuration(config)
        return CheckpointSettings(
            interval_ms=config.get(CHECKPOINTING_INTERVAL),
            mode=config.get(CHECKPOINTING_MODE),
            timeout_ms=config.get(CHECKPOINTING_TIMEOUT),
            min_pause_ms=config.get(CHECKPOINTING_MIN_PAUSE),
            max_concurrent=config.get(CHECKPOINTING_MAX_CONCURRENT),
            tolerable_failures=config.get(CHECKPOINTING_TOLERABLE_FAILURES),
            num_retained=config.get(CHECKPOINTS_NUM_RETAINED),
        )


@dataclass
class CompletedCheckpoint:
    """A checkpoint every task acknowledged and whose ``_metadata`` was written.

    ``task_states`` is keyed by :attr:`SubtaskId.key`; tasks that had finished are present
    with ``finished=True``. ``external_path`` is the ``_metadata`` path.
    """

    job_id: str
    checkpoint_id: int
    trigger_ms: int
    completed_ms: int
    task_states: Dict[str, TaskStateSnapshot]
    is_savepoint: bool = False
    external_path: str = ""

    def state_size(self) -> int:
        return sum(s.state_size() for s in self.task_states.values())

    @property
    def duration_ms(self) -> int:
        return self.completed_ms - self.trigger_ms


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


def compute_checkpoint_plan(upstream: Mapping[SubtaskId, Iterable[SubtaskId]],
                            statuses: Mapping[SubtaskId, TaskStatus]) -> CheckpointPlan:
    """Flink 1.14+ "checkpoints after tasks finished": every task not finished
    acknowledges; a task not finished is triggered directly when none of its upstream
    tasks can still send it a barrier (all ENDED_INPUT or FINISHED; sources have none).

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
    finished = frozenset(t for t in upstream
                         if statuses.get(t, TaskStatus.NOT_RUNNING) == TaskStatus.FINISHED)
    to_ack = frozenset(t for t in upstream if t not in finished)
    to_trigger = frozenset(
        t for t in to_ack
        if all(statuses.get(u, TaskStatus.NOT_RUNNING) in _DONE for u in upstream[t]))
    return CheckpointPlan(to_trigger, to_ack, finished)


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

    def __init__(self, checkpoint_id: int, trigger_ms: int, tasks_to_ack: Set[SubtaskId],
                 finished: Set[SubtaskId], is_savepoint: bool = False, *,
                 tasks_to_trigger: Iterable[SubtaskId] = (),
                 trigger_monotonic_ms: Optional[float] = None,
                 is_final: bool = False) -> None:
        self.checkpoint_id = checkpoint_id
        self.trigger_ms = trigger_ms
        self.trigger_monotonic_ms = (float(trigger_ms) if trigger_monotonic_ms is None
                                     else trigger_monotonic_ms)
        self.is_savepoint = is_savepoint
        self.is_final = is_final
        self.tasks_to_ack: FrozenSet[SubtaskId] = frozenset(tasks_to_ack)
        self.finished: FrozenSet[SubtaskId] = frozenset(finished) - self.tasks_to_ack
        self.tasks_triggered: Set[SubtaskId] = set(tasks_to_trigger)
        self._not_yet: Set[SubtaskId] = set(self.tasks_to_ack)
        self.task_states: Dict[str, TaskStateSnapshot] = {
            t.key: TaskStateSnapshot.finished_task() for t in self.finished}
        self.task_metrics: Dict[str, dict] = {}
        self.failure_reason: Optional[CheckpointFailureReason] = None
        self._discarded = False

    def __repr__(self) -> str:
        return (f"PendingCheckpoint({self.checkpoint_id}, acked "
                f"{len(self.tasks_to_ack) - len(self._not_yet)}/{len(self.tasks_to_ack)}"
                f"{', savepoint' if self.is_savepoint else ''}"
                f"{', discarded' if self._discarded else ''})")

    def acknowledge(self, subtask: SubtaskId, state: Optional[TaskStateSnapshot],
                    metrics: Optional[dict]) -> AckResult:
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

    def on_failure(self, checkpoint_id: int, reason: CheckpointFailureReason,
                   is_savepoint: bool, from_task: bool) -> Optional[str]:
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
            return (f"Exceeded checkpoint tolerable failure threshold ({self.tolerable}): "
                    f"{reason.value} (checkpoint {checkpoint_id}; {n} consecutive failed "
                    f"checkpoints)")
        return None

    def _clear(self) -> None:
        self.count = 0
        self._counted.clear()


# -----------------------------------------------------------------------------------------
# the coordinator
# -----------------------------------------------------------------------------------------

class CheckpointGateway(abc.ABC):
    """How the coordinator reaches tasks (the Ray shell implements it; fire and forget)."""

    @abc.abstractmethod
    def trigger(self, subtask: SubtaskId, checkpoint_id: int, timestamp_ms: int,
                is_savepoint: bool) -> None: ...

    @abc.abstractmethod
    def notify_complete(self, subtask: SubtaskId, checkpoint_id: int) -> None: ...

    @abc.abstractmethod
    def notify_aborted(self, subtask: SubtaskId, checkpoint_id: int,
                       reason: CheckpointFailureReason) -> None: ...


@dataclass(frozen=True)
class TriggerResult:
    """``checkpoint_id`` when a checkpoint was started, else the ``failure``."""

    checkpoint_id: Optional[int] = None
    failure: Optional[CheckpointFailureReason] = None

    @property
    def ok(self) -> bool:
        return self.checkpoint_id is not None and self.failure is None


