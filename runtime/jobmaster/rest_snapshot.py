"""A :class:`~flowray.runtime.rest.snapshot.JobSnapshot` of a scheduler and its job graph:
what the REST API shows of a job, taken under the job master's lock (pure)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.rest.snapshot import (FailureRecord, JobSnapshot, SubtaskSnapshot,
                                           VertexSnapshot)

__all__ = ["job_snapshot"]


def job_snapshot(scheduler: Any, job_graph: Any, config: Mapping[str, Any],
                 live_metrics: Mapping[SubtaskId, Dict[str, Any]],
                 hosts: Mapping[SubtaskId, str], start_ms: int, end_ms: Optional[int],
                 now_ms: int, job_metrics: Optional[Mapping[str, Any]] = None
                 ) -> JobSnapshot:
    """``live_metrics``: running subtasks' latest metric values (heartbeats); an ended
    subtask's come from its result."""
    vertices = []
    for v in job_graph.topological_order():
        subtasks = []
        for i in range(v.parallelism):
            s = SubtaskId(v.id, i)
            state = scheduler.states.get(s)
            final = scheduler.metrics.get(s) or {}
            metrics = dict(live_metrics.get(s) or final.get("metrics") or {})
            subtasks.append(SubtaskSnapshot(
                index=i, status=state.value if state is not None else "CREATED",
                attempt=max(0, scheduler.attempts.get(s, 0)), host=hosts.get(s, ""),
                start_ms=scheduler.subtask_times.get(s, (-1, -1))[0],
                end_ms=scheduler.subtask_times.get(s, (-1, -1))[1], metrics=metrics))
        inputs = tuple((e.source_vertex, getattr(e.partitioner, "name", "?"))
                       for e in sorted(v.inputs, key=lambda e: e.input_index))
        vertices.append(VertexSnapshot(v.id, v.name, v.parallelism, v.max_parallelism,
                                       inputs, tuple(subtasks), v.is_source))
    stats = scheduler.stats
    failures = tuple(
        FailureRecord(t, f.task, f.cause_type, f.message, f.traceback_text)
        for f, t in zip(scheduler.failures, scheduler.failure_times))
    status = scheduler.status.value
    return JobSnapshot(
        job_id=scheduler.job_id, job_name=scheduler.job_name, state=status,
        job_type="BATCH" if scheduler.batch else "STREAMING", start_ms=start_ms,
        end_ms=end_ms if end_ms is not None else -1, now_ms=now_ms,
        timestamps=dict(scheduler.status_times), vertices=tuple(vertices),
        max_parallelism=max((v.max_parallelism for v in vertices), default=0),
        config={str(k): str(val) for k, val in config.items()},
        checkpoint_counts=stats.counts(), checkpoint_history=stats.history(),
        latest_restore=stats.latest_restore, failures=failures,
        restarts=scheduler.restarts,
        job_metrics=dict(job_metrics or {"numRestarts": scheduler.restarts}))
