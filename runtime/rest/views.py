"""The JSON of Flink's REST API, built from :class:`~.snapshot.JobSnapshot` values: the same
paths' field names and meanings, so Flink's scripts and tools read flowray's jobs.
Pure functions; times are epoch ms, sizes bytes, durations ms, as in Flink."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Sequence

from flowray.runtime.rest.router import RestError
from flowray.runtime.rest.snapshot import JobSnapshot, SubtaskSnapshot, VertexSnapshot

__all__ = ["FLOWRAY_VERSION_TEXT", "cluster_overview", "jobs_overview", "job_overview",
           "job_details", "job_plan", "job_config", "job_exceptions", "job_metrics",
           "vertex_details",
           "subtask_metrics", "vertex_metrics", "vertex_backpressure", "vertex_watermarks",
           "checkpoints", "checkpoint_details", "EXECUTION_STATES"]

FLOWRAY_VERSION_TEXT = "flowray"

#: Flink's ExecutionState names, in its order (the "tasks" counts of a job or vertex)
EXECUTION_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING",
                    "CANCELED", "FAILED", "RECONCILING", "INITIALIZING")
_JOB_STATES = ("INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING",
               "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING")
_TERMINAL_JOB = ("FINISHED", "FAILED", "CANCELED")


def _duration(start: int, end: int, now: int) -> int:
    if start < 0:
        return -1
    return (end if end >= 0 else now) - start


def _counts(states: Iterable[str]) -> Dict[str, int]:
    counts = {s: 0 for s in EXECUTION_STATES}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    return counts


def _task_counts(states: Iterable[str]) -> Dict[str, int]:
    """The "tasks" of /jobs/overview: lower-case names and the total."""
    counts = {k.lower(): v for k, v in _counts(states).items()}
    counts["pending"] = 0
    counts["total"] = sum(v for k, v in counts.items())
    return counts


def _subtask_states(job: JobSnapshot) -> List[str]:
    return [st.status for v in job.vertices for st in v.subtasks]


def _vertex_status(v: VertexSnapshot) -> str:
    states = [st.status for st in v.subtasks]
    for s in ("FAILED", "CANCELING", "CANCELED", "RUNNING", "DEPLOYING", "INITIALIZING"):
        if s in states:
            return s
    if states and all(s == "FINISHED" for s in states):
        return "FINISHED"
    return states[0] if states else "CREATED"


# -- the cluster ---------------------------------------------------------------------------
def cluster_overview(jobs: Sequence[JobSnapshot], task_slots: int = 0) -> Dict[str, Any]:
    """``/overview``: a flowray "cluster" is the Ray cluster; its task actors are the slots."""
    states = [j.state for j in jobs]
    running = sum(1 for s in states if s not in _TERMINAL_JOB)
    return {"taskmanagers": 1, "taskmanagers-blocked": 0, "slots-total": task_slots,
            "slots-available": 0, "slots-free-and-blocked": 0,
            "jobs-running": running, "jobs-finished": states.count("FINISHED"),
            "jobs-cancelled": states.count("CANCELED"), "jobs-failed": states.count("FAILED"),
            "flink-version": FLOWRAY_VERSION_TEXT, "flink-commit": ""}


def job_overview(job: JobSnapshot) -> Dict[str, Any]:
    return {"jid": job.job_id, "name": job.job_name, "state": job.state,
            "start-time": job.start_ms, "end-time": job.end_ms,
            "duration": _duration(job.start_ms, job.end_ms, job.now_ms),
            "last-modification": max(job.timestamps.values(), default=job.start_ms),
            "tasks": _task_counts(_subtask_states(job)), "pending-operators": 0,
            "jobType": job.job_type, "schedulerType": "Default"}


def jobs_overview(jobs: Sequence[JobSnapshot]) -> Dict[str, Any]:
    """``/jobs/overview``."""
    return {"jobs": [job_overview(j) for j in jobs]}


# -- one job ---------------------------------------------------------------------------------
_ENDED = ("FINISHED", "CANCELED", "FAILED")


def _io_json(subtasks: Sequence[SubtaskSnapshot]) -> Dict[str, Any]:
    """Flink's I/O "metrics" of a vertex (sums over ``subtasks``) or of one subtask: bytes
    and records read and written on channels, complete once they all ended."""
    def total(name: str) -> int:
        return int(sum(st.metrics.get(name, 0) or 0 for st in subtasks))

    done = all(st.status in _ENDED for st in subtasks)
    return {"read-bytes": total("numBytesIn"), "read-bytes-complete": done,
            "write-bytes": total("numBytesOut"), "write-bytes-complete": done,
            "read-records": total("numRecordsIn"), "read-records-complete": done,
            "write-records": total("numRecordsOut"), "write-records-complete": done,
            "accumulated-backpressured-time": total("accumulateBackPressuredTimeMs"),
            "accumulated-idle-time": total("accumulateIdleTimeMs"),
            "accumulated-busy-time": float(total("accumulateBusyTimeMs"))}


def _vertex_times(v: VertexSnapshot, now: int) -> Dict[str, int]:
    starts = [st.start_ms for st in v.subtasks if st.start_ms >= 0]
    start = min(starts) if starts else -1
    ends = [st.end_ms for st in v.subtasks]
    end = max(ends) if ends and all(e >= 0 for e in ends) else -1
    return {"start-time": start, "end-time": end, "duration": _duration(start, end, now)}


def job_details(job: JobSnapshot) -> Dict[str, Any]:
    """``/jobs/:jobid``."""
    vertices = []
    for v in job.vertices:
        vertices.append({"id": v.id, "name": v.name, "maxParallelism": v.max_parallelism,
                         "parallelism": v.parallelism, "status": _vertex_status(v),
                         **_vertex_times(v, job.now_ms),
                         "tasks": _counts(st.status for st in v.subtasks),
                         "metrics": _io_json(v.subtasks), "slotSharingGroupId": None})
    return {"jid": job.job_id, "name": job.job_name, "isStoppable": job.stoppable,
            "state": job.state, "job-type": job.job_type, "schedulerType": "Default",
            "application-id": None, "pending-operators": 0, "stream-graph": {},
            "start-time": job.start_ms,
            "end-time": job.end_ms, "duration": _duration(job.start_ms, job.end_ms, job.now_ms),
            "maxParallelism": job.max_parallelism, "now": job.now_ms,
            "timestamps": {s: job.timestamps.get(s, 0) for s in _JOB_STATES},
            "vertices": vertices, "status-counts": _counts(_subtask_states(job)),
            "plan": job_plan(job)["plan"]}


def job_plan(job: JobSnapshot) -> Dict[str, Any]:
    """``/jobs/:jobid/plan``: the job graph (Flink's JSON plan: nodes with their inputs)."""
    nodes = []
    for v in job.vertices:
        node: Dict[str, Any] = {"id": v.id, "parallelism": v.parallelism, "operator": "",
                                "operator_strategy": "", "description": v.name,
                                "optimizer_properties": {}}
        node["inputs"] = [{"num": i, "id": src, "ship_strategy": strategy,
                           "exchange": "pipelined_bounded"}
                          for i, (src, strategy) in enumerate(v.inputs)]
        nodes.append(node)
    return {"plan": {"jid": job.job_id, "name": job.job_name, "type": job.job_type,
                     "nodes": nodes}}


def job_config(job: JobSnapshot) -> Dict[str, Any]:
    """``/jobs/:jobid/config``: the job's configuration as Flink's ExecutionConfig shows
    it, and every key the job was given."""
    cfg = job.config
    return {"jid": job.job_id, "name": job.job_name, "execution-config": {
        "execution-mode": "PIPELINED", "restart-strategy": cfg.get("restart-strategy.type",
                                                                    "default"),
        "job-parallelism": int(cfg.get("parallelism.default", 1) or 1),
        "object-reuse-mode": False, "user-config": dict(sorted(cfg.items()))}}


def job_exceptions(job: JobSnapshot, max_exceptions: int = 20) -> Dict[str, Any]:
    """``/jobs/:jobid/exceptions``: every failure behind a restart or the job's end, newest
    first (Flink's exception history), and the root exception (the newest)."""
    failures = list(reversed(job.failures))
    truncated = len(failures) > max_exceptions
    failures = failures[:max_exceptions]
    entries = [{"exceptionName": f.cause_type, "stacktrace": f.traceback_text or f.message,
                "timestamp": f.timestamp_ms, "taskName": f.task, "endpoint": f.host or None,
                "taskManagerId": f.host or None, "failureLabels": {},
                "concurrentExceptions": []} for f in failures]
    return {"exceptionHistory": {"entries": entries, "truncated": truncated}}


# -- a vertex ------------------------------------------------------------------------------------
def _vertex_or_404(job: JobSnapshot, vertex_id: str) -> VertexSnapshot:
    v = job.vertex(vertex_id)
    if v is None:
        raise RestError(404, f"job {job.job_id} has no vertex {vertex_id!r}; its vertices: "
                             f"{', '.join(x.id for x in job.vertices)}")
    return v


def _subtask_json(st: SubtaskSnapshot, now: int) -> Dict[str, Any]:
    return {"subtask": st.index, "status": st.status, "attempt": st.attempt,
            "endpoint": st.host, "start-time": st.start_ms, "end-time": st.end_ms,
            "duration": _duration(st.start_ms, st.end_ms, now), "metrics": _io_json([st]),
            "taskmanager-id": st.host, "start_time": st.start_ms,
            "other-concurrent-attempts": [], "status-duration": {}}


def vertex_details(job: JobSnapshot, vertex_id: str) -> Dict[str, Any]:
    """``/jobs/:jobid/vertices/:vertexid``."""
    v = _vertex_or_404(job, vertex_id)
    return {"id": v.id, "name": v.name, "parallelism": v.parallelism,
            "maxParallelism": v.max_parallelism, "now": job.now_ms,
            "subtasks": [_subtask_json(st, job.now_ms) for st in v.subtasks],
            "aggregated": {"metrics": _io_json(v.subtasks), "status-duration": {}}}


def _numeric(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _wanted(query_get: Optional[str]) -> Optional[List[str]]:
    if query_get is None:
        return None
    return [n for n in (x.strip() for x in query_get.split(",")) if n]


def subtask_metrics(job: JobSnapshot, vertex_id: str,
                    get: Optional[str] = None) -> List[Dict[str, Any]]:
    """``/jobs/:jobid/vertices/:vertexid/subtasks/metrics[?get=a,b]``: without ``get`` the
    metric names the subtasks have; with it each metric's min, max, avg, sum and skew over
    the subtasks (Flink's aggregated metrics)."""
    v = _vertex_or_404(job, vertex_id)
    names = _wanted(get)
    if names is None:
        return [{"id": n} for n in sorted({k for st in v.subtasks for k in st.metrics})]
    out = []
    for name in names:
        values = [x for x in (_numeric(st.metrics.get(name)) for st in v.subtasks)
                  if x is not None]
        if not values:
            continue
        avg = sum(values) / len(values)
        skew = 0.0 if avg == 0 else (max(values) - min(values)) / abs(avg) * 100.0
        out.append({"id": name, "min": min(values), "max": max(values), "avg": avg,
                    "sum": sum(values), "skew": round(skew, 3)})
    return out


def vertex_metrics(job: JobSnapshot, vertex_id: str,
                   get: Optional[str] = None) -> List[Dict[str, Any]]:
    """``/jobs/:jobid/vertices/:vertexid/metrics[?get=0.numRecordsIn,...]``: metrics by
    ``<subtask index>.<name>``, values as strings (as Flink sends them)."""
    v = _vertex_or_404(job, vertex_id)
    flat = {f"{st.index}.{k}": val for st in v.subtasks for k, val in st.metrics.items()
            if not isinstance(val, dict)}
    names = _wanted(get)
    if names is None:
        return [{"id": n} for n in sorted(flat)]
    return [{"id": n, "value": str(flat[n])} for n in names if n in flat]


def job_metrics(job: JobSnapshot, get: Optional[str] = None) -> List[Dict[str, Any]]:
    """``/jobs/:jobid/metrics[?get=uptime,numRestarts]``: the job's metrics, values as
    strings (as Flink sends them)."""
    names = _wanted(get)
    if names is None:
        return [{"id": n} for n in sorted(job.job_metrics)]
    return [{"id": n, "value": str(job.job_metrics[n])} for n in names if n in job.job_metrics]


def _level(ratio: float) -> str:
    """Flink's back-pressure levels: ok up to 10%, low up to 50%, high above."""
    if ratio <= 0.10:
        return "ok"
    if ratio <= 0.5:
        return "low"
    return "high"


def vertex_backpressure(job: JobSnapshot, vertex_id: str) -> Dict[str, Any]:
    """``/jobs/:jobid/vertices/:vertexid/backpressure``: each subtask's share of time
    back-pressured, idle and busy over the last 5 s (from its time metrics, as Flink
    1.13+ does)."""
    v = _vertex_or_404(job, vertex_id)
    subtasks = []
    for st in v.subtasks:
        m = st.metrics
        bp = (_numeric(m.get("backPressuredTimeMsPerSecond")) or 0.0) / 1000.0
        idle = (_numeric(m.get("idleTimeMsPerSecond")) or 0.0) / 1000.0
        busy = (_numeric(m.get("busyTimeMsPerSecond")) or 0.0) / 1000.0
        level = _level(bp)
        subtasks.append({"subtask": st.index, "attempt-number": st.attempt,
                         "backpressure-level": level, "backpressureLevel": level,
                         "ratio": round(bp, 3), "idleRatio": round(idle, 3),
                         "busyRatio": round(busy, 3), "other-concurrent-attempts": []})
    worst = max((s["ratio"] for s in subtasks), default=0.0)
    level = _level(worst)
    return {"status": "ok", "backpressure-level": level, "backpressureLevel": level,
            "end-timestamp": job.now_ms, "subtasks": subtasks}


def vertex_watermarks(job: JobSnapshot, vertex_id: str) -> List[Dict[str, Any]]:
    """``/jobs/:jobid/vertices/:vertexid/watermarks``: each subtask's
    ``<index>.currentInputWatermark`` (the head operator's), values as strings."""
    v = _vertex_or_404(job, vertex_id)
    out = []
    for st in v.subtasks:
        head = [(k, val) for k, val in st.metrics.items()
                if k.endswith(".currentInputWatermark")]
        if head:
            out.append({"id": f"{st.index}.currentInputWatermark", "value": str(head[0][1])})
    return out


# -- checkpoints -------------------------------------------------------------------------------
def _stats(values: List[float]) -> Dict[str, Any]:
    if not values:
        return {"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0,
                "p99": 0.0, "p999": 0.0}
    s = sorted(values)

    def q(p: float) -> float:
        return float(s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))])

    return {"min": int(s[0]), "max": int(s[-1]), "avg": int(sum(s) / len(s)),
            "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999)}


def _checkpoint_json(c: Dict[str, Any]) -> Dict[str, Any]:
    tasks = c.get("tasks") or {}
    latest_ack = c.get("end_ms") or c["trigger_ms"]
    alignment = max((float(m.get("alignment_ms", 0) or 0) for m in tasks.values()),
                    default=0.0)
    out = {"className": "completed" if c["status"] == "COMPLETED" else
           ("failed" if c["status"] == "FAILED" else "in_progress"),
           "id": c["checkpoint_id"], "status": c["status"] if c["status"] != "IN_PROGRESS"
           else "IN_PROGRESS", "is_savepoint": c["is_savepoint"],
           "savepointFormat": "CANONICAL" if c["is_savepoint"] else None,
           "trigger_timestamp": c["trigger_ms"], "latest_ack_timestamp": latest_ack,
           "checkpointed_size": int(c.get("state_size") or 0),
           "state_size": int(c.get("state_size") or 0),
           "end_to_end_duration": int(c.get("duration_ms") or 0),
           "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
           "num_subtasks": int(c.get("num_tasks") or 0),
           "num_acknowledged_subtasks": int(c.get("num_acknowledged") or len(tasks)),
           "checkpoint_type": "SAVEPOINT" if c["is_savepoint"] else "CHECKPOINT",
           "tasks": {}, "alignment_ms": alignment}
    if c["status"] == "COMPLETED":
        out.update(external_path=c.get("external_path") or "", discarded=False)
    if c["status"] == "FAILED":
        out.update(failure_timestamp=c.get("end_ms") or c["trigger_ms"],
                   failure_message=c.get("failure_reason") or "")
    return out


def checkpoints(job: JobSnapshot, history_size: int = 10) -> Dict[str, Any]:
    """``/jobs/:jobid/checkpoints``: counts, a summary of the completed ones, the latest
    completed, savepoint, failed and restored, and the history (newest first)."""
    history = [_checkpoint_json(c) for c in job.checkpoint_history]
    done = [c for c in history if c["status"] == "COMPLETED"]
    counts = job.checkpoint_counts
    restore = job.latest_restore

    def latest(pred) -> Optional[Dict[str, Any]]:
        found = [c for c in history if pred(c)]
        return found[-1] if found else None

    restored = None
    if restore:
        restored = {"id": restore["checkpoint_id"], "restore_timestamp": restore["restore_ms"],
                    "is_savepoint": restore["is_savepoint"],
                    "external_path": restore.get("path") or ""}
    sizes = [c["state_size"] for c in done]
    return {"counts": {"restored": 1 if restore else 0,
                       "total": counts.get("triggered", 0),
                       "in_progress": counts.get("in_progress", 0),
                       "completed": counts.get("completed", 0),
                       "failed": counts.get("failed", 0)},
            "summary": {"checkpointed_size": _stats(sizes), "state_size": _stats(sizes),
                        "end_to_end_duration": _stats([c["end_to_end_duration"] for c in done]),
                        "alignment_buffered": _stats([]), "processed_data": _stats([]),
                        "persisted_data": _stats([])},
            "latest": {"completed": latest(lambda c: c["status"] == "COMPLETED"
                                           and not c["is_savepoint"]),
                       "savepoint": latest(lambda c: c["status"] == "COMPLETED"
                                           and c["is_savepoint"]),
                       "failed": latest(lambda c: c["status"] == "FAILED"),
                       "restored": restored},
            "history": list(reversed(history))[:max(0, history_size)]}


def checkpoint_details(job: JobSnapshot, checkpoint_id: int) -> Dict[str, Any]:
    """``/jobs/:jobid/checkpoints/details/:checkpointid``: the checkpoint and, per vertex,
    its subtasks' acknowledgements."""
    raw = next((c for c in job.checkpoint_history if c["checkpoint_id"] == checkpoint_id),
               None)
    if raw is None:
        raise RestError(404, f"checkpoint {checkpoint_id} of job {job.job_id} is not in the "
                             f"kept history")
    out = _checkpoint_json(raw)
    acks = raw.get("tasks") or {}
    tasks = {}
    for v in job.vertices:
        mine = {int(k.split(":")[1]): m for k, m in acks.items()
                if k.split(":")[0] == v.id}
        sizes = [int(m.get("bytes", 0) or 0) for m in mine.values()]
        tasks[v.id] = {"id": v.id, "status": out["status"],
                       "latest_ack_timestamp": max((int(m.get("ack_ms", 0) or 0)
                                                    for m in mine.values()), default=-1),
                       "checkpointed_size": sum(sizes), "state_size": sum(sizes),
                       "end_to_end_duration": out["end_to_end_duration"],
                       "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
                       "num_subtasks": v.parallelism,
                       "num_acknowledged_subtasks": len(mine),
                       "subtasks": [{"index": i, "status": "completed" if i in mine
                                     else "pending_or_failed",
                                     **({"ack_timestamp": int(mine[i].get("ack_ms", 0) or 0),
                                         "state_size": int(mine[i].get("bytes", 0) or 0),
                                         "checkpoint": {
                                             "sync": int(mine[i].get("sync_ms", 0) or 0),
                                             "async": int(mine[i].get("async_ms", 0) or 0)},
                                         "alignment": {"duration": int(
                                             mine[i].get("alignment_ms", 0) or 0)}}
                                        if i in mine else {})}
                                    for i in range(v.parallelism)]}
    out["tasks"] = tasks
    return out
