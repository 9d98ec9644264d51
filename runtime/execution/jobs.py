"""The jobs on a Ray cluster: list their job masters, and re-attach a :class:`JobClient` to
one from any process (``flowray list``, ``flowray info``, ``flowray stop`` ...).

Every job's master is a named actor ``<job name>/jobmaster`` (``<job name>#2/jobmaster``
... while an earlier job of that name still has one) in the Ray namespace ``flowray``. A
job is found by its id (or an unambiguous prefix of at least 4 characters), by that
actor name without ``/jobmaster``, or by its job name when one job has it (or exactly one
of those that have it still runs, or one master has exactly that name). A re-attached client never ends the master when it is
done with it: the job stays the cluster's.
"""

from __future__ import annotations

from typing import Optional

import ray

from flowray.runtime.execution.client import JobClient
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import (MASTER_SUFFIX, JobNotFoundError,
                                                     find_job, list_jobs)

__all__ = ["JobNotFoundError", "attach", "list_jobs", "find_job", "MASTER_SUFFIX"]


def attach(job: str, address: Optional[str] = None) -> JobClient:
    """A :class:`JobClient` for the job ``job`` (id, id prefix or name) running on the
    cluster at ``address`` (default: ``RAY_ADDRESS``, else the local one), from any
    process. Raises :class:`JobNotFoundError`."""
    from flowray.runtime.execution.ray_executor import _RayJobHandle

    info = find_job(job, list_jobs(address))
    try:
        master = ray.get_actor(info["master"], namespace=NAMESPACE)
    except ValueError:
        raise JobNotFoundError(f"job {job!r} ended and its master is gone") from None
    handle = _RayJobHandle(info["job_id"], info["job_name"], master, None, [],
                           info["master"], owns_master=False)
    return JobClient(handle, [], progress_interval_ms=0, detached=True)

