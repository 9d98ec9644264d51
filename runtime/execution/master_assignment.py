"""A spare job master's assignment, kept in the GCS (key-value store, namespace ``flowray``)
so that Ray's restart of the master finds its job again.

A spare master (:mod:`flowray.runtime.execution.spare_masters`) is started before its job
exists, with no constructor arguments; ``JobMaster.assign`` gives it an attached job.
Ray restarts a dead actor with its constructor's arguments, so a restartable job's
assignment is written here first, under the actor's id (which a restart keeps), and the
restarted master reads it back. The driver deletes it when it releases the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import cloudpickle

from flowray.runtime.execution.actor_names import StoredJob
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_store import KV_NAMESPACE

__all__ = ["MasterAssignment", "assignment_key", "write_assignment", "read_assignment",
           "delete_assignment"]

KEY_PREFIX = b"masters/"


@dataclass(frozen=True)
class MasterAssignment:
    """What ``JobMaster.assign`` was given; the job itself lies in checkpoint storage."""

    job: StoredJob
    driver_addresses: Dict[str, Dict[str, Any]]
    name_prefix: str
    submitted_ms: int
    display_name: str
    #: the driver's task actor pool's actor name (None: the job starts its own actors)
    pool_name: Optional[str]

    def master_arguments(self) -> Dict[str, Any]:
        """The arguments of ``JobMaster._setup`` (the pool's handle looked up by name;
        None once the pool is gone, with its actors)."""
        import ray

        pool = None
        if self.pool_name:
            try:
                pool = ray.get_actor(self.pool_name, namespace=NAMESPACE)
            except ValueError:
                pool = None
        return dict(job=self.job, driver_addresses=self.driver_addresses,
                    name_prefix=self.name_prefix, detached=False,
                    submitted_ms=self.submitted_ms, display_name=self.display_name,
                    actor_pool=pool)


def assignment_key(actor_id: str) -> bytes:
    """The GCS key of the master ``actor_id``'s assignment.

    >>> assignment_key("ab12")
    b'masters/ab12'
    """
    return KEY_PREFIX + actor_id.encode()


def write_assignment(actor_id: str, assignment: MasterAssignment) -> None:
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(assignment_key(actor_id), cloudpickle.dumps(assignment),
                     overwrite=True, namespace=KV_NAMESPACE)


def read_assignment(actor_id: str) -> Optional[MasterAssignment]:
    """The master's assignment, None if it has none (a spare that was never assigned)."""
    from ray.experimental.internal_kv import _internal_kv_get

    data = _internal_kv_get(assignment_key(actor_id), namespace=KV_NAMESPACE)
    return cloudpickle.loads(data) if data else None


def delete_assignment(actor_id: str) -> None:
    """Idempotent."""
    from ray.experimental.internal_kv import _internal_kv_del

    _internal_kv_del(assignment_key(actor_id), namespace=KV_NAMESPACE)
