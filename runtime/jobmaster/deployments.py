"""Deployments on their way (:class:`DeploymentTracker`): the job master creates a batch of
task actors and waits for each one's address before it starts any of them, since
producers connect to their consumers' addresses. Any failure in between is a task failure
for the failover and restart strategies: an actor that cannot be created, one that dies
before it answers, one that does not answer before the deploy deadline. Pure logic; the
Ray shell feeds it answers and the time, and wires what :meth:`take_ready` returns (from
its own loop, never from inside the scheduler).

>>> t = DeploymentTracker()
>>> t.start(attempt=3, subtasks=["a", "b"], deadline=10.0)
>>> t.on_address("a", {"port": 1}); t.on_failure("b", "its actor died")
>>> t.take_ready()
[Wiring(attempt=3, start={'a': {'port': 1}}, lost={'b': 'its actor died'}, timed_out=[])]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Set

__all__ = ["DeploymentTracker", "Wiring"]


@dataclass
class Wiring:
    """A deployment whose every actor answered, failed, timed out or was cancelled.
    The shell reports ``lost`` (subtask -> reason) and ``timed_out`` as task failures
    first, then starts ``start`` (subtask -> address) unless cancelled meanwhile."""

    attempt: int
    start: Dict[Hashable, Any]
    lost: Dict[Hashable, str]
    timed_out: List[Hashable]


@dataclass
class _Deployment:
    attempt: int
    subtasks: List[Hashable]
    deadline: float
    waiting: Set[Hashable] = field(default_factory=set)
    addresses: Dict[Hashable, Any] = field(default_factory=dict)
    lost: Dict[Hashable, str] = field(default_factory=dict)
    timed_out: List[Hashable] = field(default_factory=list)
    cancelled: Set[Hashable] = field(default_factory=set)

    def wiring(self) -> Wiring:
        gone = set(self.lost) | set(self.timed_out) | self.cancelled
        return Wiring(self.attempt,
                      {s: self.addresses[s] for s in self.subtasks
                       if s in self.addresses and s not in gone},
                      {s: r for s, r in self.lost.items() if s not in self.cancelled},
                      [s for s in self.timed_out if s not in self.cancelled])


class DeploymentTracker:
    """Which deployed subtasks have not started yet, and which deployments are ready to
    be wired. A subtask belongs to at most one deployment (a redeploy replaces it)."""

    def __init__(self) -> None:
        self._of: Dict[Hashable, _Deployment] = {}
        self._ready: List[Wiring] = []

    def start(self, attempt: int, subtasks: List[Hashable], deadline: float) -> None:
        """Actors for ``subtasks`` are being created; they must answer by ``deadline``.
        An empty deployment is ready at once."""
        for s in subtasks:  # replaced: the older deployment does not wait for it
            if s in self._of:
                self.cancel(s)
        dep = _Deployment(attempt, list(subtasks), deadline, waiting=set(subtasks))
        for s in subtasks:
            self._of[s] = dep
        self._check(dep)

    def is_pending(self, subtask: Hashable) -> bool:
        """Deployed but not started yet."""
        return subtask in self._of

    def on_address(self, subtask: Hashable, address: Any) -> None:
        dep = self._waiting_in(subtask)
        if dep is not None:
            dep.addresses[subtask] = address
            dep.waiting.discard(subtask)
            self._check(dep)

    def on_failure(self, subtask: Hashable, reason: str) -> None:
        """The actor of ``subtask`` could not be created or died before answering."""
        dep = self._waiting_in(subtask)
        if dep is not None:
            dep.lost[subtask] = reason
            dep.waiting.discard(subtask)
            self._check(dep)

    def cancel(self, subtask: Hashable) -> Optional[int]:
        """Cancel a subtask that has not started: the attempt it was deployed with (the
        shell reports it cancelled; it is never started), or None if not pending."""
        dep = self._of.get(subtask)
        if dep is None:
            return None
        dep.cancelled.add(subtask)
        dep.waiting.discard(subtask)
        self._check(dep)
        return dep.attempt

    def expire(self, now: float) -> None:
        """Every actor that has not answered by its deployment's deadline is lost."""
        for dep in list({id(d): d for d in self._of.values()}.values()):
            if dep.waiting and now > dep.deadline:
                dep.timed_out.extend(sorted(dep.waiting, key=str))
                dep.waiting.clear()
                self._check(dep)

    def take_ready(self) -> List[Wiring]:
        """Deployments ready to be wired since the last call, oldest first."""
        ready, self._ready = self._ready, []
        return ready

    def _waiting_in(self, subtask: Hashable) -> Optional[_Deployment]:
        dep = self._of.get(subtask)
        return dep if dep is not None and subtask in dep.waiting else None

    def _check(self, dep: _Deployment) -> None:
        if dep.waiting:
            return
        for s in dep.subtasks:
            if self._of.get(s) is dep:
                del self._of[s]
        self._ready.append(dep.wiring())
