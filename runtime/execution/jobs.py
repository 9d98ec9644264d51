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

from typing import Any, Dict, List, Optional

import ray

from flowray.runtime.execution.client import JobClient
from flowray.runtime.execution.cluster import NAMESPACE, connect_cluster

__all__ = ["JobNotFoundError", "attach", "list_jobs", "find_job", "MASTER_SUFFIX"]

MASTER_SUFFIX = "/jobmaster"
MIN_ID_PREFIX = 4
INFO_TIMEOUT_S = 30.0


class JobNotFoundError(LookupError):
    """No job (or more than one) answers to the id or name given."""


def _masters() -> List[str]:
    """Names of every job master actor alive in the cluster."""
    names = ray.util.list_named_actors(all_namespaces=True)
    return sorted(n["name"] for n in names
                  if n.get("namespace") == NAMESPACE and n["name"].endswith(MASTER_SUFFIX))


def list_jobs(address: Optional[str] = None) -> List[Dict[str, Any]]:
    """``JobMaster.info()`` of every job on the cluster, oldest first; a master that does
    not answer is listed with status ``UNKNOWN``."""
    connect_cluster(address)
    names = _masters()
    handles = []
    for name in names:
        try:
            handles.append((name, ray.get_actor(name, namespace=NAMESPACE)))
        except ValueError:  # ended meanwhile
            continue
    refs = [h.info.remote() for _, h in handles]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=INFO_TIMEOUT_S) if refs else ([], [])
    ready_set = set(ready)
    jobs = []
    for (name, _), ref in zip(handles, refs):
        info = None
        if ref in ready_set:
            try:
                info = ray.get(ref)
            except Exception:  # noqa: BLE001 - RayActorError: it ended meanwhile
                info = None
        if info is None:
            info = {"job_id": "?", "job_name": name[:-len(MASTER_SUFFIX)],
                    "name": name[:-len(MASTER_SUFFIX)], "status": "UNKNOWN",
                    "start_ms": None, "vertices": [], "parallelism": 0}
        info["master"] = name
        jobs.append(info)
    jobs.sort(key=lambda j: (j.get("start_ms") or 0, j["name"]))
    return jobs


def find_job(job: str, jobs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The one job of ``jobs`` that ``job`` names (see the module docstring).

    >>> jobs = [{"job_id": "4f2a9c0d1e2f", "job_name": "wc", "name": "wc", "status": "FINISHED"},
    ...         {"job_id": "77aa00bb11cc", "job_name": "wc", "name": "wc#2", "status": "RUNNING"}]
    >>> find_job("4f2a", jobs)["name"], find_job("wc", jobs)["name"], find_job("wc#2", jobs)["name"]
    ('wc', 'wc#2', 'wc#2')
    >>> find_job("nosuchjob", jobs)
    Traceback (most recent call last):
    ...
    flowray.runtime.execution.jobs.JobNotFoundError: no job 'nosuchjob' on this Ray cluster (flowray list -a shows every job)
    """
    by_id = [j for j in jobs if j.get("job_id") == job]
    if not by_id and len(job) >= MIN_ID_PREFIX:
        by_id = [j for j in jobs if str(j.get("job_id", "")).startswith(job)]
    if len(by_id) == 1:
        return by_id[0]
    if len(by_id) > 1:
        raise JobNotFoundError(f"job id prefix {job!r} is ambiguous: "
                               + ", ".join(j["job_id"] for j in by_id))
    by_name = [j for j in jobs if job in (j.get("name"), j.get("job_name"))]
    if len(by_name) > 1:
        live = [j for j in by_name
                if j.get("status") not in ("FINISHED", "FAILED", "CANCELED", "UNKNOWN")]
        exact = [j for j in by_name if j.get("name") == job]
        for choice in (live, exact):
            if len(choice) == 1:
                return choice[0]
        raise JobNotFoundError(f"{len(by_name)} jobs are named {job!r}; give the job id: "
                               + ", ".join(j["job_id"] for j in by_name))
    if by_name:
        return by_name[0]
    raise JobNotFoundError(f"no job {job!r} on this Ray cluster "
                           f"(flowray list -a shows every job)")


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

