"""The client of queryable state (``flowray.queryable_state``): read one key of a keyed
state that a running job made queryable, from any process of its Ray cluster.

A query finds the job's master (by id, id prefix or name, as ``flowray info`` does), asks it
which keyed vertices the job has and which actors run their subtasks, asks one of them
which states it serves, and sends the query, by a Ray call, to the subtask owning the key's
key group (Flink's ``KeyGroupRangeAssignment``). Ray calls are authenticated by the
cluster; the job's data plane is not involved.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Dict, Optional, Tuple

import ray
from ray.exceptions import RayActorError

from flowray.runtime.execution.cluster import NAMESPACE, connect_cluster
from flowray.runtime.execution.job_directory import JobNotFoundError, find_job, list_jobs
from flowray.state.descriptors import StateDescriptor, StateKind
from flowray.state.key_groups import (assign_to_key_group,
                                      compute_operator_index_for_key_group)
from flowray.state.queryable import (QueriedState, UnknownKvStateLocation,
                                     UnknownQueryableStateError, with_retries)

__all__ = ["QueryableStateClient", "QueriedState", "UnknownKvStateLocation",
           "UnknownQueryableStateError", "with_retries"]

#: how long one Ray call of a query may take before it counts as a lost location (s)
CALL_TIMEOUT_S = 30.0


class QueryableStateClient:
    """Queries the keyed states that jobs on the Ray cluster at ``address`` (default:
    ``RAY_ADDRESS``, else the local one; the running one inside a Ray program) made
    queryable with ``StateDescriptor.set_queryable(name)`` or
    ``KeyedStream.as_queryable_state(name)``.

    Example (needs a job that runs)::

        client = QueryableStateClient()
        state = client.get_kv_state("clicks", "clicks-per-user", "alice",
                                    ValueStateDescriptor("count"), read_committed=True)
        state.value(), state.checkpoint_id
    """

    def __init__(self, address: Optional[str] = None, max_workers: int = 4) -> None:
        connect_cluster(address)
        self._masters: Dict[str, Tuple[str, Any]] = {}  # job -> (job id, master actor)
        #: (job, state name) -> (vertex, kind, key types); actor name -> handle
        self._locations: Dict[Tuple[str, str], Tuple[Dict[str, Any], str, Tuple[str, ...]]] = {}
        self._actors: Dict[str, Any] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers, thread_name_prefix="flowray-kv-query")

    def get_kv_state(self, job: str, queryable_state_name: str, key: Any,
                     state_descriptor: StateDescriptor,
                     read_committed: bool = False) -> QueriedState:
        """``key``'s value in the state the job ``job`` (id, id prefix or name) serves as
        ``queryable_state_name``. ``read_committed=False``: the live value (Flink's);
        ``True``: as of the latest completed checkpoint, never rolled back by a failover.
        Raises :class:`UnknownKvStateLocation` while the job restarts (retry:
        :func:`with_retries`), :class:`UnknownQueryableStateError` for an unknown name,
        ``TypeError`` for a descriptor of another kind or a key of another type, and
        ``JobNotFoundError`` for an unknown job."""
        if not isinstance(state_descriptor, StateDescriptor):
            raise TypeError(f"state_descriptor must be a StateDescriptor, got "
                            f"{state_descriptor!r}")
        location = self._locations.get((job, queryable_state_name))
        if location is None or not location[2]:   # (no key type seen yet: ask again)
            location = self._locations[(job, queryable_state_name)] = self._locate(
                job, queryable_state_name)
        vertex, kind, key_types = location
        if kind != state_descriptor.kind.value:
            raise TypeError(f"queryable state {queryable_state_name!r} is {kind} state; "
                            f"the query's descriptor is a {type(state_descriptor).__name__}")
        if key_types and type(key).__name__ not in key_types:
            raise TypeError(f"queryable state {queryable_state_name!r} is keyed by "
                            f"{' or '.join(sorted(key_types))}; the key {key!r} is a "
                            f"{type(key).__name__}")
        index = compute_operator_index_for_key_group(
            vertex["max_parallelism"], vertex["parallelism"],
            assign_to_key_group(key, vertex["max_parallelism"]))
        try:
            actor = self._actor(vertex["actors"].get(index) or vertex["actors"].get(str(index)),
                                job, index)
            checkpoint_id, value = ray.get(
                actor.query_state.remote(queryable_state_name, key, read_committed),
                timeout=CALL_TIMEOUT_S)
        except (RayActorError, ray.exceptions.GetTimeoutError, UnknownKvStateLocation) as e:
            self._forget(job)   # the job restarts: where things are is asked again
            if isinstance(e, UnknownKvStateLocation):
                raise
            raise UnknownKvStateLocation(f"subtask {index} of {vertex['name']!r} could not "
                                         f"answer ({type(e).__name__}); retry") from None
        return QueriedState(StateKind(kind), value, checkpoint_id)

    def get_kv_state_async(self, job: str, queryable_state_name: str, key: Any,
                           state_descriptor: StateDescriptor, read_committed: bool = False
                           ) -> "concurrent.futures.Future[QueriedState]":
        """:meth:`get_kv_state` in the client's thread pool: a future of its result."""
        return self._pool.submit(self.get_kv_state, job, queryable_state_name, key,
                                 state_descriptor, read_committed)

    def shutdown_and_wait(self) -> None:
        self._pool.shutdown(wait=True)

    close = shutdown_and_wait

    def __enter__(self) -> "QueryableStateClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown_and_wait()

    # -- where a state lives (cached until a query meets a restart) ---------------------
    def _forget(self, job: str) -> None:
        self._masters.pop(job, None)
        for k in [k for k in self._locations if k[0] == job]:
            self._locations.pop(k, None)
        self._actors.clear()

    def _master(self, job: str) -> Any:
        found = self._masters.get(job)
        if found is None:
            info = find_job(job, list_jobs())
            try:
                master = ray.get_actor(info["master"], namespace=NAMESPACE)
            except ValueError:
                raise JobNotFoundError(f"job {job!r} ended and its master is gone") from None
            found = self._masters[job] = (info["job_id"], master)
        return found[1]

    def _locate(self, job: str, name: str) -> Tuple[Dict[str, Any], str, Tuple[str, ...]]:
        """The keyed vertex serving ``name``, the state's kind and the key types seen."""
        try:
            vertices = ray.get(self._master(job).kv_state_vertices.remote(),
                               timeout=CALL_TIMEOUT_S)
        except (RayActorError, ray.exceptions.GetTimeoutError):
            self._forget(job)
            raise UnknownKvStateLocation(f"the master of job {job!r} does not answer "
                                         "(it may be restarting); retry") from None
        if not vertices:
            raise UnknownQueryableStateError(f"job {job!r} has no keyed state, so no "
                                             f"queryable state {name!r}")
        offered: Dict[str, str] = {}
        for vertex in vertices:
            running = [a for a in vertex["actors"].values() if a]
            if not running:
                raise UnknownKvStateLocation(f"the subtasks of {vertex['name']!r} are not "
                                             "running (the job is deploying or restarting); "
                                             "retry")
            try:
                served = ray.get(self._actor(running[0], job, 0)
                                 .queryable_state_info.remote(), timeout=CALL_TIMEOUT_S)
            except (RayActorError, ray.exceptions.GetTimeoutError):
                raise UnknownKvStateLocation(f"a subtask of {vertex['name']!r} does not "
                                             "answer; retry") from None
            if name in served:
                kind, key_types = served[name]
                return vertex, kind, tuple(key_types)
            offered.update({n: vertex["name"] for n in served})
        if not offered:  # states register when their operators open
            raise UnknownKvStateLocation(f"job {job!r} serves no queryable state yet "
                                         f"({name!r} registers when its operator opens); "
                                         "retry")
        raise UnknownQueryableStateError(f"job {job!r} has no queryable state {name!r} "
                                         f"(it has: {', '.join(sorted(offered))})")

    def _actor(self, name: Optional[str], job: str, index: int) -> Any:
        if not name:
            raise UnknownKvStateLocation(f"subtask {index} of job {job!r} is not running "
                                         "(the job is deploying or restarting); retry")
        found = self._actors.get(name)
        if found is not None:
            return found
        try:
            found = self._actors[name] = ray.get_actor(name, namespace=NAMESPACE)
            return found
        except ValueError:
            raise UnknownKvStateLocation(f"subtask {index} of job {job!r} is gone "
                                         "(the job is restarting); retry") from None
