"""Ended jobs' REST responses, archived and served again (Flink's HistoryServer).

When a job ends its master writes one archive file per job into
``jobmanager.archive.fs.dir``: Flink's format, ``{"archive": [{"path": ..., "json": ...}]}``,
one entry per GET path the job's REST API serves (every vertex and checkpoint expanded;
metric lists with every metric, so ``?get=`` can be answered from them).
:class:`HistoryArchives` reads such directories and :func:`history_router` answers the same
paths read-only, with ``/jobs/overview`` listing every archived job.

>>> import tempfile
>>> archives = HistoryArchives([tempfile.mkdtemp()])
>>> archives.refresh()
0
>>> history_router(archives).dispatch("GET", "/jobs/a1b2/plan", {}).body
{'errors': ['Job a1b2 is not in the archives']}
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from flowray.runtime.rest import views
from flowray.runtime.rest.router import RestError, RestRequest, Router
from flowray.runtime.rest.routes import job_router
from flowray.runtime.rest.snapshot import JobSnapshot

__all__ = ["archived_responses", "write_job_archive", "HistoryArchives", "history_router",
           "HistoryServer"]

log = logging.getLogger("flowray.rest")

#: paths whose response is a list of {"id", ...} metrics, filtered by ``?get=a,b``
_METRIC_LIST = re.compile(r"^/jobs/[^/]+(/vertices/[^/]+(/subtasks)?)?/metrics$")
_JOB_ID = re.compile(r"^[0-9A-Za-z_-]{1,128}$")


class _NoActions:
    def cancel(self) -> None:  # pragma: no cover - archives only read
        raise RestError(405, "an archived job cannot be changed")

    def savepoint(self, target_dir, stop, drain):  # pragma: no cover
        raise RestError(405, "an archived job cannot be changed")


def _expansions(pattern: str, job: JobSnapshot) -> Iterator[str]:
    if ":triggerid" in pattern:
        return  # savepoint operations of the running job: nothing to archive
    paths = [pattern.replace(":jobid", job.job_id)]
    if ":vertexid" in pattern:
        paths = [p.replace(":vertexid", v.id) for p in paths for v in job.vertices]
    if ":checkpointid" in pattern:
        ids = [h["checkpoint_id"] for h in job.checkpoint_history]
        paths = [p.replace(":checkpointid", str(i)) for p in paths for i in ids]
    yield from paths


def archived_responses(job: JobSnapshot) -> List[Tuple[str, Any]]:
    """(path, JSON value) of every GET the job's REST API answers about ``job``, as served
    at its end. Metric lists hold every metric with its value."""
    router = job_router(lambda: job, _NoActions())
    out: List[Tuple[str, Any]] = []
    for pattern in router.patterns("GET"):
        if not pattern.startswith("/jobs/:jobid"):
            continue  # /overview, /config, /jobs: the history server's own
        for path in _expansions(pattern, job):
            query: Dict[str, str] = {}
            if _METRIC_LIST.match(path):
                names = router.dispatch("GET", path, {}).body
                query = {"get": ",".join(m["id"] for m in names)}
            res = router.dispatch("GET", path, query)
            if res.status == 200:
                out.append((path, res.body))
    out.append(("/jobs/overview", views.jobs_overview([job])))
    return out


def write_job_archive(directory: str, job: JobSnapshot) -> Path:
    """Write ``job``'s archive as ``<directory>/<job id>`` (atomically: a reader sees the
    whole file or none). Returns its path."""
    folder = Path(directory).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"archive": [{"path": p, "json": json.dumps(body, separators=(",", ":"))}
                       for p, body in archived_responses(job)]}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{job.job_id}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        final = folder / job.job_id
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final


class HistoryArchives:
    """The archived jobs of ``directories``; :meth:`refresh` reads archives written since
    (a file that does not parse is skipped with a warning, and read again when it changes).
    """

    def __init__(self, directories: Sequence[str]) -> None:
        self.directories = [Path(d).expanduser() for d in directories]
        self._jobs: Dict[str, Dict[str, Any]] = {}   # job id -> path -> JSON value
        self._seen: Dict[Path, float] = {}
        self._lock = threading.Lock()   # refresh (a timer thread) vs the server's readers

    def refresh(self) -> int:
        """Read new or changed archive files; returns how many jobs are archived."""
        for folder in self.directories:
            if not folder.is_dir():
                continue
            for f in sorted(folder.iterdir()):
                if f.name.startswith(".") or not f.is_file() or not _JOB_ID.match(f.name):
                    continue
                mtime = f.stat().st_mtime
                if self._seen.get(f) == mtime:
                    continue
                self._seen[f] = mtime
                try:
                    doc = json.loads(f.read_text(encoding="utf-8"))
                    responses = {e["path"]: json.loads(e["json"]) for e in doc["archive"]}
                    with self._lock:
                        self._jobs[f.name] = responses
                except (ValueError, KeyError, TypeError, OSError) as e:
                    log.warning("flowray: skipping %s, not a job archive: %s", f, e)
        with self._lock:
            return len(self._jobs)

    def job_ids(self) -> List[str]:
        with self._lock:
            return sorted(self._jobs)

    def overview(self) -> List[Dict[str, Any]]:
        """Every archived job's /jobs/overview entry, newest first."""
        with self._lock:
            jobs = [j for responses in self._jobs.values()
                    for j in responses.get("/jobs/overview", {}).get("jobs", [])]
        return sorted(jobs, key=lambda j: j.get("start-time", 0), reverse=True)

    def response(self, job_id: str, path: str) -> Optional[Any]:
        with self._lock:
            return self._jobs.get(job_id, {}).get(path)


def _filtered(metrics: List[Dict[str, Any]], get: Optional[str]) -> List[Dict[str, Any]]:
    if get is None:
        return [{"id": m["id"]} for m in metrics]
    by_id = {m["id"]: m for m in metrics}
    return [by_id[n] for n in (x.strip() for x in get.split(",")) if n in by_id]


def history_router(archives: HistoryArchives) -> Router:
    """Flink's REST paths over ``archives``, read-only: the job master's GET paths for each
    archived job, and the cluster-wide ones over all of them."""
    r = Router()

    def overview(req: RestRequest) -> Dict[str, Any]:
        states = [j["state"] for j in archives.overview()]
        return {"taskmanagers": 0, "taskmanagers-blocked": 0, "slots-total": 0,
                "slots-available": 0, "slots-free-and-blocked": 0, "jobs-running": 0,
                "jobs-finished": states.count("FINISHED"),
                "jobs-cancelled": states.count("CANCELED"),
                "jobs-failed": states.count("FAILED"),
                "flink-version": views.FLOWRAY_VERSION_TEXT, "flink-commit": ""}

    r.add("GET", "/overview", overview)
    r.add("GET", "/config", lambda req: {
        "refresh-interval": 10000, "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0, "flink-version": views.FLOWRAY_VERSION_TEXT,
        "flink-revision": "", "features": {"web-submit": False, "web-cancel": False,
                                           "web-rescale": False, "web-history": True}})
    r.add("GET", "/jobs/overview", lambda req: {"jobs": archives.overview()})
    r.add("GET", "/jobs", lambda req: {"jobs": [{"id": j["jid"], "status": j["state"]}
                                                for j in archives.overview()]})

    def archived(req: RestRequest) -> Any:
        jid = req.params["jobid"]
        path = "/" + "/".join(p for p in req.path.split("?", 1)[0].split("/") if p)
        body = archives.response(jid, path)
        if body is None:
            if archives.response(jid, "/jobs/overview") is None:
                raise RestError(404, f"Job {jid} is not in the archives")
            raise RestError(404, f"Not found in the archive of job {jid}: {path}")
        if _METRIC_LIST.match(path):
            return _filtered(body, req.query.get("get"))
        return body

    live = job_router(lambda: None, _NoActions())  # (only its patterns are used)
    for pattern in live.patterns("GET"):
        if pattern.startswith("/jobs/:jobid") and ":triggerid" not in pattern:
            r.add("GET", pattern, archived)
    return r


class HistoryServer:
    """Serves ``directories``' archived jobs (REST API and web UI) on ``bind_address`` at
    the first free port of ``ports``, reading new archives every ``refresh_ms``."""

    def __init__(self, directories: Sequence[str], bind_address: str, ports: List[int],
                 refresh_ms: int) -> None:
        from flowray.runtime.rest.server import RestServer
        from flowray.runtime.rest.web_ui import web_ui_files

        self.archives = HistoryArchives(directories)
        self.refresh_ms = refresh_ms
        self.server = RestServer(history_router(self.archives), bind_address, ports,
                                 static=web_ui_files())
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> "HistoryServer":
        self.archives.refresh()
        self.server.start()
        self._thread = threading.Thread(target=self._refresh_loop, name="flowray-history",
                                        daemon=True)
        self._thread.start()
        return self

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.refresh_ms / 1000.0):
            self.archives.refresh()

    def close(self) -> None:
        self._stop.set()
        self.server.close()
