"""What the ``flowray`` commands print: plain-text tables and job descriptions, from the
dicts ``JobMaster.info()`` returns (pure; no Ray).

>>> print(format_table(["JOB ID", "STATUS"], [["4f2a9c", "RUNNING"], ["77aa", "CANCELED"]]))
JOB ID  STATUS
4f2a9c  RUNNING
77aa    CANCELED
>>> format_duration(0), format_duration(59_400), format_duration(3_725_000)
('0s', '59s', '1h 02m 05s')
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["format_table", "format_duration", "format_time", "format_job_list",
           "format_job_info", "ENDED"]

#: statuses of a job that has ended
ENDED = ("FINISHED", "FAILED", "CANCELED")


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> str:
    """Columns left-aligned to their widest cell, two spaces apart."""
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in cells)


def format_duration(ms: Optional[float]) -> str:
    """``12s``, ``3m 04s``, ``1h 02m 05s``; ``-`` when unknown."""
    if ms is None:
        return "-"
    s = int(max(0, ms) // 1000)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m {sec:02d}s"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


def format_time(epoch_ms: Optional[float]) -> str:
    """Local time ``YYYY-MM-DD HH:MM:SS``; ``-`` when unknown."""
    if not epoch_ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_ms / 1000.0))


def _runtime_ms(job: Dict[str, Any], now_ms: float) -> Optional[float]:
    start = job.get("start_ms")
    if not start:
        return None
    return (job.get("end_ms") or now_ms) - start


def format_job_list(jobs: List[Dict[str, Any]], now_ms: Optional[float] = None) -> str:
    """One line per job: id, name, status, start time, how long it ran, parallelism,
    checkpoints completed, attached or detached.

    >>> job = {"job_id": "4f2a9c0d1e2f", "name": "wc", "status": "RUNNING", "start_ms": None,
    ...        "end_ms": None, "parallelism": 2, "checkpoints": {"completed": 3},
    ...        "detached": True}
    >>> print(format_job_list([dict(job, web_url="http://127.0.0.1:8081")]))
    JOB ID        NAME  STATUS   START TIME  RUNTIME  PARALLELISM  CHECKPOINTS  MODE      WEB UI
    4f2a9c0d1e2f  wc    RUNNING  -           -        2            3            detached  http://127.0.0.1:8081
    """
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    rows = []
    for j in jobs:
        rows.append([j.get("job_id", "?"), j.get("name") or j.get("job_name", "?"),
                     j.get("status", "UNKNOWN"), format_time(j.get("start_ms")),
                     format_duration(_runtime_ms(j, now_ms)), j.get("parallelism") or "-",
                     (j.get("checkpoints") or {}).get("completed", "-"),
                     "detached" if j.get("detached") else
                     ("attached" if "detached" in j else "-"),
                     j.get("web_url") or "-"])
    return format_table(["JOB ID", "NAME", "STATUS", "START TIME", "RUNTIME", "PARALLELISM",
                         "CHECKPOINTS", "MODE", "WEB UI"], rows)


def _checkpoint_line(c: Optional[Dict[str, Any]]) -> str:
    if not c:
        return "-"
    text = f"#{c['id']} at {c['path'] or '?'} (completed {format_time(c.get('completed_ms'))}"
    if c.get("exists") is False:
        text += "; deleted since"
    return text + ")"


def format_job_info(job: Dict[str, Any], now_ms: Optional[float] = None) -> str:
    """``flowray info``: the job's ids, status, times, checkpoints and its tasks.

    >>> job = {"job_id": "4f2a9c0d1e2f", "job_name": "wc", "name": "wc", "status": "RUNNING",
    ...        "detached": True, "start_ms": None, "end_ms": None, "restarts": 0,
    ...        "checkpoints": {"completed": 2, "failed": 0, "in_progress": 1},
    ...        "latest_checkpoint": {"id": 2, "path": "/ck/4f2a9c0d1e2f/chk-2",
    ...                              "completed_ms": None},
    ...        "latest_savepoint": None, "failure": None, "web_url": "http://127.0.0.1:8081",
    ...        "vertices": [{"name": "Source: words", "parallelism": 1, "max_parallelism": 128},
    ...                     {"name": "Sum -> Sink", "parallelism": 2, "max_parallelism": 128}]}
    >>> print(format_job_info(job))
    Job ID:            4f2a9c0d1e2f
    Name:              wc
    Status:            RUNNING
    Mode:              detached
    Web UI:            http://127.0.0.1:8081
    Started:           -
    Runtime:           -
    Restarts:          0
    Checkpoints:       2 completed, 0 failed, 1 in progress
    Latest checkpoint: #2 at /ck/4f2a9c0d1e2f/chk-2 (completed -)
    Latest savepoint:  -
    <BLANKLINE>
    Tasks:
      TASK           PARALLELISM  MAX PARALLELISM
      Source: words  1            128
      Sum -> Sink    2            128
    """
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    counts = job.get("checkpoints") or {}
    name = job.get("job_name", "?")
    if job.get("name") and job.get("name") != name:
        name = f"{name} (as {job['name']})"
    fields = [
        ("Job ID", job.get("job_id", "?")),
        ("Name", name),
        ("Status", job.get("status", "UNKNOWN")),
        ("Mode", "detached" if job.get("detached") else "attached"),
        ("Web UI", job.get("web_url") or "-"),
    ]
    if job.get("rest_token"):  # bound off loopback: the REST write endpoints need it
        fields.append(("REST token", job["rest_token"]))
    fields += [
        ("Started", format_time(job.get("start_ms"))),
    ]
    if job.get("end_ms"):
        fields.append(("Ended", format_time(job.get("end_ms"))))
    fields += [
        ("Runtime", format_duration(_runtime_ms(job, now_ms))),
        ("Restarts", str(job.get("restarts", 0))
         + (f" (and {job['job_master_restarts']} job master restarts)"
            if job.get("job_master_restarts") else "")),
        ("Checkpoints", f"{counts.get('completed', 0)} completed, {counts.get('failed', 0)} "
                        f"failed, {counts.get('in_progress', 0)} in progress"),
        ("Latest checkpoint", _checkpoint_line(job.get("latest_checkpoint"))),
        ("Latest savepoint", _checkpoint_line(job.get("latest_savepoint"))),
    ]
    if job.get("failure"):
        fields.append(("Failure", str(job["failure"]).splitlines()[0]))
    width = max(len(k) for k, _ in fields) + 2
    lines = [f"{k + ':':<{width}}{v}" for k, v in fields]
    restarts = job.get("restart_events") or []
    if restarts:
        lines += ["", "Restarts:"] + [
            f"  {format_time(e.get('time_ms'))}  {e.get('failure')}; {e.get('decision')}"
            for e in restarts]
    vertices = job.get("vertices") or []
    if vertices:
        lines += ["", "Tasks:", format_table(
            ["TASK", "PARALLELISM", "MAX PARALLELISM"],
            [[v["name"], v["parallelism"], v["max_parallelism"]] for v in vertices],
            indent="  ")]
    return "\n".join(lines)
