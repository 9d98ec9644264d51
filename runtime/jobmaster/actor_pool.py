"""Which task actors a driver's pool holds (:class:`ActorPoolState`): warm task actor
processes that jobs take instead of starting their own, and give back when their tasks
finished, so that a driver running job after job (a test suite, a notebook, a service
submitting jobs) starts task processes once, not once per job.

The pool keeps ``size`` actors idle (processes started ahead of any job) and at most
``max_idle``, from the driver's second job on. Before its first job it starts none: that
job's actors are started for it, all at once, and one more is kept idle while it runs (a
warm actor for its failovers), so that a program running a single job does not start
``size`` processes it never uses while its job starts. A job takes idle actors for its
tasks; each is *assigned* to that job until
the job gives it back (its task ended normally: it is reset and idle again) or drops it
(the job failed, was cancelled, or its master is gone: its actors are killed). Only an
actor whose reset succeeded goes back to idle, so a task that left anything behind never
hosts another.

>>> pool = ActorPoolState(size=2, max_idle=3)
>>> pool.to_start()          # nothing ahead of the driver's first job
0
>>> [a.name for a in pool.take("job-a", [9, 9])]   # none idle: started for the job
[None, None]
>>> _ = pool.started_for("job-a", "pool/0", "h0", threads=40)
>>> pool.to_start()          # one idle while the first job runs, for its failovers
1
>>> pool.started("pool/1", "h1", threads=40)
>>> [a.name for a in pool.take("job-b", [9, 9])]   # the second job: the pool fills
['pool/1', None]
>>> pool.to_start()
2
>>> [a.name for a in pool.give_back("job-a", ["pool/0"])]
['pool/0']
>>> pool.after_reset(pool.assigned_actor("pool/0"), reusable=True)
True
>>> [a.name for a in pool.drop_job("job-b")]
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
        #: the jobs that took actors so far, until there were two (then the pool is full)
        self._jobs: List[str] = []

    # -- growing -------------------------------------------------------------------------
    def to_start(self) -> int:
        """How many new actors to start to have ``size`` idle (none before the driver's
        first job, one while it is its only job)."""
        target = self.size if len(self._jobs) >= 2 else min(self.size, len(self._jobs))
        return max(0, target - len(self._idle))

    def started(self, name: str, handle: Any, threads: int) -> None:
        """A new actor (its process may still be starting: a call waits for it)."""
        self._idle.append(PooledActor(name, handle, threads))

    # -- jobs ----------------------------------------------------------------------------
    def take(self, job_id: str, threads: List[int]) -> List[PooledActor]:
        """One actor per task of ``job_id`` needing ``threads[i]`` threads, or an actor
        named ``None`` where no idle one has enough (the job starts its own)."""
        if len(self._jobs) < 2 and job_id not in self._jobs:
            self._jobs.append(job_id)
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
