"""Finding jobs on a Ray cluster: every job master is a named actor
``<name>@<job id prefix>/jobmaster`` in the Ray namespace ``flowray``, where ``<name>`` is
the job's name, or ``<job name>#2``... while a job of that name still runs (an ended job's
name is free at once, though its master stays for ``jobstore.expiration-time``), or, for
an attached job that took its driver's spare master (spare_masters.py), the spare's name
``flowray-pool/<driver>/master-<n>/jobmaster``; :func:`list_jobs` asks each master for its
info (an idle spare answers that it has no job) and :func:`find_job` picks the one a user
names (see :mod:`flowray.runtime.execution.jobs`). Apart from re-attaching clients, so the
job master itself can list its cluster's jobs."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import ray

from flowray.runtime.execution.cluster import NAMESPACE, connect_cluster

__all__ = ["JobNotFoundError", "list_jobs", "find_job", "MASTER_SUFFIX", "display_name_of",
           "display_name_for", "live_display_names", "actor_prefix", "SPARE_NAME_PREFIX",
           "is_spare_master_name"]

MASTER_SUFFIX = "/jobmaster"
#: what the actor name of every spare job master starts with (spare_masters.py): a spare
#: is named before it has a job, so its name is not its job's
SPARE_NAME_PREFIX = "flowray-pool/"
MIN_ID_PREFIX = 4
INFO_TIMEOUT_S = 30.0


class JobNotFoundError(LookupError):
    """No job (or more than one) answers to the id or name given."""


ENDED = ("FINISHED", "FAILED", "CANCELED")


def actor_prefix(display_name: str, job_id: str) -> str:
    """The prefix of every actor name of a job: its master's, its tasks' (unique per job).

    >>> actor_prefix("wc#2", "4f2a9c0d1e2f33")
    'wc#2@4f2a9c0d'
    """
    return f"{display_name}@{job_id[:8]}"


def display_name_of(actor_name: str) -> str:
    """The job name shown for a master's actor name.

    >>> display_name_of("wc#2@4f2a9c0d/jobmaster"), display_name_of("a@b@4f2a9c0d/jobmaster")
    ('wc#2', 'a@b')
    """
    prefix = actor_name[:-len(MASTER_SUFFIX)] if actor_name.endswith(MASTER_SUFFIX) \
        else actor_name
    return prefix.rsplit("@", 1)[0] if "@" in prefix else prefix


def is_spare_master_name(actor_name: str) -> bool:
    """Whether ``actor_name`` is a spare job master's (not named for its job).

    >>> is_spare_master_name("flowray-pool/01000000/master-3/jobmaster")
    True
    >>> is_spare_master_name("wc@4f2a9c0d/jobmaster")
    False
    """
    return actor_name.startswith(SPARE_NAME_PREFIX) and actor_name.endswith(MASTER_SUFFIX)


def display_name_for(job_name: str, live: "set[str]") -> str:
    """``job_name``, or ``job_name#2``... the first not shown for a job still running.

    >>> [display_name_for("wc", live) for live in (set(), {"wc"}, {"wc", "wc#2"})]
    ['wc', 'wc#2', 'wc#3']
    """
    name, n = job_name, 1
    while name in live:
        n += 1
        name = f"{job_name}#{n}"
    return name


def live_display_names(job_name: str, timeout_s: float = 10.0,
                       idle_spares: "frozenset[str] | set[str]" = frozenset()) -> "set[str]":
    """The names shown for the jobs called ``job_name`` (or ``job_name#n``) that have not
    ended; a master that does not answer in time counts as running. A spare master's
    actor name is not its job's: it is asked, unless named in ``idle_spares`` (an idle
    spare has no job; one still starting is taken to have none)."""
    def named(display: str) -> bool:
        return display == job_name or display.startswith(job_name + "#")

    refs = []
    for name in _masters():
        spare = is_spare_master_name(name)
        if (spare and name in idle_spares) or (not spare and not named(display_name_of(name))):
            continue
        try:
            master = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            continue   # ended meanwhile
        refs.append((None if spare else display_name_of(name),
                     master.display_status.remote() if spare else master.status.remote()))
    live = set()
    for display, ref in refs:
        try:
            answer = ray.get(ref, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            if display is not None:
                live.add(display)   # too busy to answer: running
            continue   # (a spare still starting has no job)
        except Exception:  # noqa: BLE001 - RayActorError: the master is gone, its job over
            continue
        if display is None:   # a spare: (display name, status), None while it has no job
            if answer is None or not named(answer[0]):
                continue
            display, answer = answer
        if answer not in ENDED:
            live.add(display)
    return live


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
        if (info.get("spare") if info is not None else is_spare_master_name(name)):
            continue   # a spare master without a job yet (or not answering: unknown)
        if info is None:
            info = {"job_id": "?", "job_name": display_name_of(name),
                    "name": display_name_of(name), "status": "UNKNOWN",
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
    flowray.runtime.execution.job_directory.JobNotFoundError: no job 'nosuchjob' on this Ray cluster (flowray list -a shows every job)
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
