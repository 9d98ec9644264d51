"""The Ray side of a driver's pool of warm task actors (:class:`TaskActorPool`, a thin
shell over :class:`~flowray.runtime.jobmaster.actor_pool.ActorPoolState`).

One pool per driver process and Ray connection (:func:`driver_pool`), created with the
driver's first job: it belongs to the driver (Ray kills it and its actors with the driver,
as it does the job masters of attached jobs). Its actors are
:class:`~flowray.runtime.execution.task_actor.TaskActor` standbys made with enough threads
for most tasks; a job master takes them for its tasks (``assign``), gives them back when
the job finished (the pool resets each and keeps those whose reset succeeds), and drops
them otherwise (they are killed). Detached jobs, jobs with a Python environment of their
own (``add_python_file`` & co.) and tasks of slot sharing groups with resources start
their own actors, as before.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import ray

from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import SPARE_NAME_PREFIX
from flowray.runtime.execution.standby_actors import kill_quietly
from flowray.runtime.execution.task_actor import TaskActor
from flowray.runtime.jobmaster.actor_pool import ActorPoolState

__all__ = ["TaskActorPool", "driver_pool", "driver_pool_name", "start_pooled_actor",
           "POOL_THREADS"]

log = logging.getLogger(__name__)

#: threads of a pooled actor (a task needs 8 plus one per input channel)
POOL_THREADS = 40
#: how long a give-back waits for the actors' resets
RESET_TIMEOUT_S = 10.0


@ray.remote(num_cpus=0, max_concurrency=8)
class TaskActorPool:
    """See the module docstring; every method is safe to call from several jobs at once."""

    def __init__(self, name_prefix: str, size: int, max_idle: int,
                 first: Sequence[Tuple[str, Any]] = ()) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        self._prefix = name_prefix
        self._state = ActorPoolState(size, max_idle)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        for name, handle in first:   # started by the driver for its first job
            self._state.started(name, handle, POOL_THREADS)
        self._replenish()

    def _start_actor(self) -> Tuple[str, Any]:
        return start_pooled_actor(f"{self._prefix}/{next(self._ids)}")

    def _replenish(self) -> None:
        with self._lock:
            for _ in range(self._state.to_start()):
                self._state.started(*self._start_actor(), POOL_THREADS)

    def take(self, job_id: str, threads: List[int]) -> List[Optional[Tuple[str, Any]]]:
        """Per task of ``job_id`` (needing ``threads[i]``) an actor ``(name, handle)``:
        an idle one, else one started now (the pool's, reused once given back); None for
        a task needing more threads than pooled actors have. Idle actors are started again
        in the background."""
        out: List[Optional[Tuple[str, Any]]] = []
        with self._lock:
            for need, actor in zip(threads, self._state.take(job_id, threads)):
                if actor.name is not None:
                    out.append((actor.name, actor.handle))
                elif need <= POOL_THREADS:
                    name, handle = self._start_actor()
                    self._state.started_for(job_id, name, handle, POOL_THREADS)
                    out.append((name, handle))
                else:
                    out.append(None)
        self._replenish()
        return out

    def give_back(self, job_id: str, names: List[str]) -> int:
        """The tasks of ``job_id`` on ``names`` ended normally: reset each actor and keep
        it idle if that worked (else kill it); how many were kept."""
        with self._lock:
            actors = self._state.give_back(job_id, names)
        refs = {a.handle.reset.remote(): a for a in actors}
        kept = 0
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=RESET_TIMEOUT_S)
        for ref, actor in refs.items():
            try:
                reusable = ref in ready and bool(ray.get(ref))
            except Exception:  # noqa: BLE001 - the actor died: not reusable
                reusable = False
            with self._lock:
                keep = self._state.after_reset(actor, reusable)
            if keep:
                kept += 1
            else:
                kill_quietly(actor.handle)
        return kept

    def drop_job(self, job_id: str) -> int:
        """Kill the actors still assigned to ``job_id`` (idempotent); how many."""
        with self._lock:
            gone = self._state.drop_job(job_id)
        for a in gone:
            kill_quietly(a.handle)
        self._replenish()
        return len(gone)

    def forget(self, names: List[str]) -> None:
        """Actors a job master killed (a failover): no longer the pool's."""
        with self._lock:
            for n in names:
                self._state.forget(n)
        self._replenish()

    def stats(self) -> Dict[str, Any]:
        with self._lock:
            return {"idle": self._state.idle_count(),
                    "assigned": self._state.assigned_names()}


def start_pooled_actor(name: str) -> Tuple[str, Any]:
    """Start a pooled task actor named ``name``; ``(name, handle)`` at once (its process
    is still starting: calls wait for it)."""
    handle = TaskActor.options(name=name, namespace=NAMESPACE,
                               max_concurrency=POOL_THREADS, max_restarts=0).remote()
    # an actor's first call takes ~200 ms more than the next ones (Ray sets up the
    # worker's task execution): made now, it is not on a job's start or failover
    handle.standby_node.remote()
    return name, handle


_POOLS: Dict[Tuple[str, str], Any] = {}
_POOLS_LOCK = threading.Lock()


def driver_pool(size: int, max_idle: int, first_tasks: int = 0) -> Optional[Any]:
    """This driver's pool on the Ray it is connected to (made on first use); None if
    ``size`` is 0 and none exists.

    Made for a job of ``first_tasks`` pooled tasks, the pool starts with that many actors
    which the driver starts itself (at most ``max_idle``): their processes start while
    the pool's and the job master's do, not after the pool's."""
    ctx = ray.get_runtime_context()
    key = (ctx.gcs_address, ctx.get_job_id())
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None and (size > 0 or max_idle > 0):
            name = driver_pool_name()   # (its actors' names extend it)
            idle = max(size, max_idle)
            first = [start_pooled_actor(f"{name}/first-{i}")
                     for i in range(min(first_tasks, idle))]
            pool = _POOLS[key] = TaskActorPool.options(name=name, namespace=NAMESPACE).remote(
                name, size, idle, first)
        return pool


def driver_pool_name() -> str:
    """The actor name of this driver's pool, which also begins its actors' and its spare
    job masters' names (a restarted job master looks the pool up by it)."""
    return f"{SPARE_NAME_PREFIX}{ray.get_runtime_context().get_job_id()}"
