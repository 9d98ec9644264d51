"""Which task actors a driver's pool holds (:class:`ActorPoolState`): warm task actor
processes that jobs take instead of starting their own, and give back when their tasks
finished, so that a driver running job after job (a test suite, a notebook, a service
submitting jobs) starts task processes once, not once per job.

The pool keeps ``size`` actors idle (processes started ahead of any job) and at most
``max_idle``. A job takes idle actors for its tasks; each is *assigned* to that job until
the job gives it back (its task ended normally: it is reset and idle again) or drops it
(the job failed, was cancelled, or its master is gone: its actors are killed). Only an
actor whose reset succeeded goes back to idle, so a task that left anything behind never
hosts another.

>>> pool = ActorPoolState(size=2, max_idle=3)
>>> pool.to_start()
2
>>> pool.started("pool/0", "h0", threads=40); pool.started("pool/1", "h1", threads=40)
>>> [a.name for a in pool.take("job-a", [9, 9, 9])]
['pool/1', 'pool/0', None]
>>> pool.to_start()          # two idle again, ahead of the next job
2
>>> [a.name for a in pool.give_back("job-a", ["pool/0"])]
['pool/0']
>>> pool.after_reset(pool.assigned_actor("pool/0"), reusable=True)
True
>>> [a.name for a in pool.drop_job("job-a")]
['pool/1']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

__all__ = ["ActorPoolState", "PooledActor"]


@dataclass
class PooledActor:
    """A pooled task actor: its Ray name and handle and the threads it was made with."""

    name: str
    handle: Any
    threads: int
    job_id: Optional[str] = None   # the job it is assigned to, None when idle


class ActorPoolState:
    """The pool's books; the Ray actor (``TaskActorPool``) creates, resets and kills."""

    def __init__(self, size: int, max_idle: int) -> None:
        if size < 0 or max_idle < size:
            raise ValueError(f"a task actor pool needs 0 <= size <= max_idle, got size "
                             f"{size}, max_idle {max_idle}")
        self.size = size
        self.max_idle = max_idle
        self._idle: List[PooledActor] = []
        self._assigned: Dict[str, PooledActor] = {}

    # -- growing -------------------------------------------------------------------------
    def to_start(self) -> int:
        """How many new actors to start to have ``size`` idle."""
        return max(0, self.size - len(self._idle))

    def started(self, name: str, handle: Any, threads: int) -> None:
        """A new actor (its process may still be starting: a call waits for it)."""
        self._idle.append(PooledActor(name, handle, threads))

    # -- jobs ----------------------------------------------------------------------------
    def take(self, job_id: str, threads: List[int]) -> List[PooledActor]:
        """One actor per task of ``job_id`` needing ``threads[i]`` threads, or an actor
        named ``None`` where no idle one has enough (the job starts its own)."""
        out: List[PooledActor] = []
        for need in threads:
            # the most recently idle first: a process a job just gave back is warm
            found = next((a for a in reversed(self._idle) if a.threads >= need), None)
            if found is None:
                out.append(PooledActor(None, None, 0))  # type: ignore[arg-type]
                continue
            self._idle.remove(found)
            found.job_id = job_id
            self._assigned[found.name] = found
            out.append(found)
        return out

    def started_for(self, job_id: str, name: str, handle: Any, threads: int) -> PooledActor:
        """A new actor started for ``job_id`` (no idle one fitted): the pool's from the
        start, so that it is reused once the job gives it back."""
        actor = PooledActor(name, handle, threads, job_id)
        self._assigned[name] = actor
        return actor

    def assigned_actor(self, name: str) -> Optional[PooledActor]:
        return self._assigned.get(name)

    def give_back(self, job_id: str, names: List[str]) -> List[PooledActor]:
        """The actors of ``job_id`` among ``names``, to reset (their tasks ended
        normally); each then goes to :meth:`after_reset`."""
        return [self._assigned[n] for n in names
                if n in self._assigned and self._assigned[n].job_id == job_id]

    def after_reset(self, actor: PooledActor, reusable: bool) -> bool:
        """True: ``actor`` is idle again; False: kill it (its reset failed, or the pool
        has ``max_idle`` idle already)."""
        if self._assigned.get(actor.name) is not actor:
            return False
        del self._assigned[actor.name]
        actor.job_id = None
        if not reusable or len(self._idle) >= self.max_idle:
            return False
        self._idle.append(actor)
        return True

    def drop_job(self, job_id: str) -> List[PooledActor]:
        """Every actor still assigned to ``job_id``: kill them (idempotent)."""
        gone = [a for a in self._assigned.values() if a.job_id == job_id]
        for a in gone:
            del self._assigned[a.name]
        return gone

    def forget(self, name: str) -> None:
        """An actor that died (killed, or its node lost)."""
        self._assigned.pop(name, None)
        self._idle = [a for a in self._idle if a.name != name]

    # -- reading -------------------------------------------------------------------------
    def idle_count(self) -> int:
        return len(self._idle)

    def assigned_names(self, job_id: Optional[str] = None) -> List[str]:
        return sorted(n for n, a in self._assigned.items()
                      if job_id is None or a.job_id == job_id)
