"""Task liveness as the job master sees it (:class:`HeartbeatMonitor`): Flink's heartbeat
between the JobMaster and its tasks, with progress in the payload.

Every ``heartbeat.interval`` the job master asks each running task for a heartbeat; the
answer says how long the task's own loop has gone without a turn (``stalled_ms``: a user
function or a source that does not return). A task is failed over when it has not
answered for ``heartbeat.timeout`` (its process hangs or its node is unreachable) or when
it answers that it has been stalled for that long. Waiting on a slow consumer
(back-pressure) or on producers is not a stall. Pure logic, driven by the caller's clock.

>>> m = HeartbeatMonitor(interval_ms=1000, timeout_ms=5000)
>>> m.track("map[0]", attempt=1, now_ms=0)
>>> m.due(1000)
[('map[0]', 1)]
>>> m.on_reply("map[0]", 1, now_ms=1010, stalled_ms=0)
>>> m.expired(4000)
[]
>>> [e.subtask for e in m.expired(6011)]
['map[0]']
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, Hashable, List, Optional, Tuple

__all__ = ["HeartbeatMonitor", "HeartbeatExpiry", "ExpiryKind"]


class ExpiryKind(enum.Enum):
    """Why a task was declared dead."""

    #: no answer to heartbeats for the timeout: the process hangs or is unreachable
    UNREACHABLE = "unreachable"
    #: the task answers but its loop made no progress for the timeout: a user function
    #: or source hangs
    STALLED = "stalled"


@dataclass(frozen=True)
class HeartbeatExpiry:
    """A task whose heartbeat timed out: which attempt, why, and for how long."""

    subtask: Hashable
    attempt: int
    kind: ExpiryKind
    silent_ms: float

    def reason(self, task_name: str, timeout_ms: int) -> str:
        if self.kind is ExpiryKind.STALLED:
            return (f"task {task_name!r} made no progress for {self.silent_ms / 1000:.1f} s "
                    f"(heartbeat.timeout is {timeout_ms / 1000:g} s): a user function or "
                    "source does not return")
        return (f"task {task_name!r} did not answer heartbeats for "
                f"{self.silent_ms / 1000:.1f} s (heartbeat.timeout is {timeout_ms / 1000:g} s):"
                " its process hangs or its node is unreachable")


@dataclass
class _Tracked:
    attempt: int
    last_answer_ms: float
    last_request_ms: Optional[float]
    stalled_since_ms: Optional[float]


class HeartbeatMonitor:
    """Which tasks to ask for a heartbeat now, and which have timed out.

    ``track`` a task once it runs (its deadline counts from then), ``untrack`` it when it
    ends or is redeployed. Answers of an older attempt are ignored; every expiry is
    reported once (the task is untracked by :meth:`expired`)."""

    def __init__(self, interval_ms: int, timeout_ms: int) -> None:
        if interval_ms <= 0 or timeout_ms <= 0:
            raise ValueError("heartbeat interval and timeout must be positive")
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self._tasks: Dict[Hashable, _Tracked] = {}

    def track(self, subtask: Hashable, attempt: int, now_ms: float) -> None:
        self._tasks[subtask] = _Tracked(attempt, now_ms, None, None)

    def untrack(self, subtask: Hashable) -> None:
        self._tasks.pop(subtask, None)

    def tracked(self) -> List[Hashable]:
        return list(self._tasks)

    def due(self, now_ms: float) -> List[Tuple[Hashable, int]]:
        """``(task, attempt)`` to send a heartbeat request now (marked as asked)."""
        out = []
        for s, t in self._tasks.items():
            since = t.last_request_ms if t.last_request_ms is not None else t.last_answer_ms
            if now_ms - since >= self.interval_ms:
                t.last_request_ms = now_ms
                out.append((s, t.attempt))
        return out

    def on_reply(self, subtask: Hashable, attempt: int, now_ms: float,
                 stalled_ms: float) -> None:
        """A task answered: it is reachable, and its loop has not turned for
        ``stalled_ms`` (0: it is making progress or waiting on its channels)."""
        t = self._tasks.get(subtask)
        if t is None or t.attempt != attempt:
            return
        t.last_answer_ms = now_ms
        t.stalled_since_ms = now_ms - stalled_ms if stalled_ms > 0 else None

    def expired(self, now_ms: float) -> List[HeartbeatExpiry]:
        """Tasks past the timeout, longest silent first (the first is the likely cause:
        a hung task stalls its producers' output too); they are no longer tracked."""
        out = []
        for s, t in self._tasks.items():
            silent = now_ms - t.last_answer_ms
            if silent > self.timeout_ms:
                out.append(HeartbeatExpiry(s, t.attempt, ExpiryKind.UNREACHABLE, silent))
            elif t.stalled_since_ms is not None and now_ms - t.stalled_since_ms > self.timeout_ms:
                out.append(HeartbeatExpiry(s, t.attempt, ExpiryKind.STALLED,
                                           now_ms - t.stalled_since_ms))
        out.sort(key=lambda e: -e.silent_ms)
        for e in out:
            del self._tasks[e.subtask]
        return out
