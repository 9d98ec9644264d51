"""Flink's REST paths on one job master: :func:`job_router` binds them to a job (a function
giving its current :class:`~.snapshot.JobSnapshot`) and to what can be done to it
(:class:`JobActions`). Savepoints and stop are asynchronous operations with trigger ids, as
in Flink (``POST`` answers ``{"request-id": ...}``; ``GET .../savepoints/:triggerid`` polls)."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from flowray.runtime.rest import views
from flowray.runtime.rest.router import RestError, RestRequest, RestResponse, Router
from flowray.runtime.rest.snapshot import JobSnapshot

__all__ = ["JobActions", "AsyncOperations", "job_router"]


class JobActions(Protocol):
    def cancel(self) -> None: ...

    def savepoint(self, target_dir: Optional[str], stop: bool, drain: bool
                  ) -> Tuple[Optional[str], Optional[str]]:
        """Blocks until the savepoint completes: ``(path, None)`` or ``(None, error)``."""


class AsyncOperations:
    """Trigger ids of operations under way or done (Flink's ``TriggerId``):
    ``start(fn)`` runs ``fn() -> (path, error)`` on ``runner`` (a new thread by default)."""

    def __init__(self, runner: Optional[Callable[[Callable[[], None]], None]] = None) -> None:
        self._ops: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._runner = runner or (lambda work: threading.Thread(
            target=work, name="flowray-rest-op", daemon=True).start())

    def start(self, fn: Callable[[], Tuple[Optional[str], Optional[str]]]) -> str:
        trigger = uuid.uuid4().hex
        with self._lock:
            self._ops[trigger] = {"status": {"id": "IN_PROGRESS"}}

        def work() -> None:
            try:
                path, error = fn()
            except Exception as e:  # noqa: BLE001 - reported through the operation
                path, error = None, f"{type(e).__name__}: {e}"
            op = ({"location": path} if error is None else
                  {"failure-cause": {"class": "flowray.SavepointError",
                                     "stack-trace": error, "serialized-throwable": None}})
            with self._lock:
                self._ops[trigger] = {"status": {"id": "COMPLETED"}, "operation": op}
        self._runner(work)
        return trigger

    def get(self, trigger: str) -> Dict[str, Any]:
        with self._lock:
            found = self._ops.get(trigger)
        if found is None:
            raise RestError(404, f"no operation with trigger id {trigger!r}")
        return found


def _body(req: RestRequest) -> Dict[str, Any]:
    if req.body is None:
        return {}
    if not isinstance(req.body, dict):
        raise RestError(400, "the request body must be a JSON object")
    return req.body


def _bool(body: Dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise RestError(400, f"{key!r} must be true or false, got {value!r}")
    return value


def _dir(body: Dict[str, Any], key: str) -> Optional[str]:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise RestError(400, f"{key!r} must be a path (a string), got {value!r}")
    return value


def job_router(snapshot: Callable[[], JobSnapshot], actions: JobActions,
               operations: Optional[AsyncOperations] = None,
               cluster_jobs: Optional[Callable[[], List[Dict[str, Any]]]] = None) -> Router:
    """``cluster_jobs``: the jobs on the same Ray cluster (``GET /flowray/cluster-jobs``, not
    Flink's: each flowray job has its own job master and web UI, so the UI links them)."""
    ops = operations or AsyncOperations()
    r = Router()
    if cluster_jobs is not None:
        r.add("GET", "/flowray/cluster-jobs", lambda req: {"jobs": cluster_jobs()})

    def job(req: RestRequest) -> JobSnapshot:
        s = snapshot()
        if req.params.get("jobid") not in (None, s.job_id):
            raise RestError(404, f"Job {req.params['jobid']} not found (this job master runs "
                                 f"{s.job_id})")
        return s

    def checkpoint_id(req: RestRequest) -> int:
        raw = req.params["checkpointid"]
        try:
            return int(raw)
        except ValueError:
            raise RestError(400, f"a checkpoint id is an integer, got {raw!r}") from None

    r.add("GET", "/overview", lambda req: views.cluster_overview(
        [snapshot()], sum(v.parallelism for v in snapshot().vertices)))
    r.add("GET", "/config", lambda req: {
        "refresh-interval": 3000, "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0, "flink-version": views.FLOWRAY_VERSION_TEXT,
        "flink-revision": "", "features": {"web-submit": False, "web-cancel": True,
                                           "web-rescale": False, "web-history": False}})
    r.add("GET", "/jobs", lambda req: {"jobs": [{"id": snapshot().job_id,
                                                 "status": snapshot().state}]})
    r.add("GET", "/jobs/overview", lambda req: views.jobs_overview([snapshot()]))
    r.add("GET", "/jobs/:jobid", lambda req: views.job_details(job(req)))
    r.add("GET", "/jobs/:jobid/plan", lambda req: views.job_plan(job(req)))
    r.add("GET", "/jobs/:jobid/config", lambda req: views.job_config(job(req)))
    r.add("GET", "/jobs/:jobid/exceptions", lambda req: views.job_exceptions(
        job(req), req.query_int("maxExceptions", 20)))
    r.add("GET", "/jobs/:jobid/metrics", lambda req: views.job_metrics(job(req),
                                                                     req.query.get("get")))
    r.add("GET", "/jobs/:jobid/vertices/:vertexid", lambda req: views.vertex_details(
        job(req), req.params["vertexid"]))
    r.add("GET", "/jobs/:jobid/vertices/:vertexid/subtasks/metrics",
          lambda req: views.subtask_metrics(job(req), req.params["vertexid"],
                                            req.query.get("get")))
    r.add("GET", "/jobs/:jobid/vertices/:vertexid/metrics",
          lambda req: views.vertex_metrics(job(req), req.params["vertexid"],
                                           req.query.get("get")))
    r.add("GET", "/jobs/:jobid/vertices/:vertexid/backpressure",
          lambda req: views.vertex_backpressure(job(req), req.params["vertexid"]))
    r.add("GET", "/jobs/:jobid/vertices/:vertexid/watermarks",
          lambda req: views.vertex_watermarks(job(req), req.params["vertexid"]))
    r.add("GET", "/jobs/:jobid/checkpoints", lambda req: views.checkpoints(job(req)))
    r.add("GET", "/jobs/:jobid/checkpoints/details/:checkpointid",
          lambda req: views.checkpoint_details(job(req), checkpoint_id(req)))

    def cancel(req: RestRequest) -> RestResponse:
        job(req)
        mode = req.query.get("mode", "cancel")
        if mode != "cancel":
            raise RestError(400, f"mode {mode!r}: only 'cancel' (stop a job with "
                                 f"POST /jobs/:jobid/stop)")
        actions.cancel()
        return RestResponse(202, {})

    def savepoint_route(directory_key: str, stops: bool) -> Callable[[RestRequest],
                                                                     RestResponse]:
        """POST .../savepoints (``target-directory``, ``cancel-job``) and POST .../stop
        (``targetDirectory``, ``drain``): Flink names the same things two ways."""
        def handle(req: RestRequest) -> RestResponse:
            job(req)
            body = _body(req)
            target = _dir(body, directory_key)
            stop = True if stops else _bool(body, "cancel-job", False)
            drain = _bool(body, "drain", False) if stops else False
            trigger = ops.start(lambda: actions.savepoint(target, stop, drain))
            return RestResponse(202, {"request-id": trigger})
        return handle

    r.add("PATCH", "/jobs/:jobid", cancel, write=True)
    r.add("POST", "/jobs/:jobid/savepoints", savepoint_route("target-directory", False),
          write=True)
    r.add("POST", "/jobs/:jobid/stop", savepoint_route("targetDirectory", True), write=True)
    r.add("GET", "/jobs/:jobid/savepoints/:triggerid",
          lambda req: (job(req), ops.get(req.params["triggerid"]))[1])
    return r
