"""A driver's spare job masters: one idle :class:`JobMaster` per kind (its number of Ray
restarts), started as a job of that kind is submitted, so that the driver's next attached
job takes a master whose process runs and whose modules are imported already
(``JobMaster.assign``) instead of waiting for Ray to start one. A driver starts spares
from its second job on: a program that runs a single job never pays for one.

Spares are used where the driver's task actor pool is (attached jobs without a Python
environment of their own, ``flowray.task-actor-pool.size`` > 0) and
``flowray.jobmaster.spare`` is on. A spare belongs to the
driver, as an attached job's master does: Ray kills it with the driver. Its actor name is
``flowray-pool/<driver's Ray job id>/master-<n>/jobmaster``, not the job's (Ray names are
fixed at creation); ``JobMaster.info()["master"]`` and ``flowray list`` give it. A spare
that cannot take its job (dead, or failing) is killed and the job gets a master of its own,
as without spares. Every method is safe to call from several threads.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Dict, Optional, Tuple

import ray

from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import MASTER_SUFFIX
from flowray.runtime.execution.job_master import JobMaster
from flowray.runtime.execution.standby_actors import kill_quietly
from flowray.runtime.execution.task_actor_pool import driver_pool_name

__all__ = ["SpareMasters", "driver_spares"]

class SpareMasters:
    """The idle spares of one driver, at most one per kind (``max_restarts``)."""

    def __init__(self, pool_name: str) -> None:
        self._prefix = f"{pool_name}/master-"
        self._idle: Dict[int, Tuple[str, Any]] = {}
        self._ids = itertools.count()
        self._jobs = 0   # taken (or asked for) so far
        self._lock = threading.Lock()

    def take(self, restarts: int) -> Optional[Tuple[str, Any]]:
        """The idle spare made for ``restarts`` Ray restarts, ``(name, handle)``, no longer
        idle; None if there is none. It may still be starting: calls wait for it. Counts
        a job (:meth:`replenish` starts spares from a driver's second job on)."""
        with self._lock:
            self._jobs += 1
            return self._idle.pop(restarts, None)

    def idle_name(self, restarts: int) -> Optional[str]:
        """The actor name of the idle spare for ``restarts``, None if there is none."""
        with self._lock:
            spare = self._idle.get(restarts)
            return spare[0] if spare is not None else None

    def idle_names(self) -> "frozenset[str]":
        with self._lock:
            return frozenset(name for name, _ in self._idle.values())

    def replenish(self, restarts: int, force: bool = False) -> None:
        """Start a spare for ``restarts`` unless one is idle, or this driver has taken
        only one job so far (a program that runs one job would start a process it never
        uses, while its job starts); ``force``: even then. Does not wait for it."""
        with self._lock:
            if restarts in self._idle or (self._jobs < 2 and not force):
                return
            name = f"{self._prefix}{next(self._ids)}{MASTER_SUFFIX}"
            self._idle[restarts] = (name, JobMaster.options(
                name=name, namespace=NAMESPACE, max_restarts=restarts,
                max_task_retries=-1 if restarts else 0).remote())

    def discard(self) -> None:
        """Kill the idle spares."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for _, handle in idle:
            kill_quietly(handle)


_SPARES: Dict[Tuple[str, str], SpareMasters] = {}
_SPARES_LOCK = threading.Lock()


def driver_spares() -> SpareMasters:
    """This driver's spares on the Ray it is connected to."""
    ctx = ray.get_runtime_context()
    key = (ctx.gcs_address, ctx.get_job_id())
    with _SPARES_LOCK:
        spares = _SPARES.get(key)
        if spares is None:
            spares = _SPARES[key] = SpareMasters(driver_pool_name())
        return spares
