"""Checkpoint statistics: one record per checkpoint, counts, percentiles, a summary line.

The :class:`CheckpointStatsTracker` is fed by the checkpoint coordinator (trigger, each
acknowledgement with the task's metrics, completion or failure) and read by the job
master for logs, the job summary and the client. It is pure bookkeeping: no clock, the
caller passes every timestamp. It keeps the last 1,000 records; the counts cover every
checkpoint since the tracker was created.

>>> t = CheckpointStatsTracker()
>>> t.report_triggered(1, trigger_ms=1_000, is_savepoint=False, num_tasks=2)
>>> t.report_acknowledged(1, "map:0", {"sync_ms": 1.0, "alignment_ms": 3.0, "bytes": 10})
>>> t.report_completed(1, end_ms=1_084, state_size=1_200_000)
>>> t.report_triggered(2, trigger_ms=2_000, is_savepoint=False, num_tasks=2)
>>> t.report_failed(2, end_ms=2_500, reason="Checkpoint expired before completing.")
>>> t.counts()
{'triggered': 2, 'completed': 1, 'failed': 1, 'in_progress': 0, 'not_triggered': 0}
>>> t.summary()
'1 checkpoint completed, 1 failed; last #1 in 84 ms, 1.1 MB; p50 84 ms, p99 84 ms'
>>> t.history()[0]["status"], t.history()[1]["failure_reason"]
('COMPLETED', 'Checkpoint expired before completing.')
>>> print(format_checkpoint_table(t.history()))
   id  status     duration  size    tasks  sync max  async max  alignment max
    1  COMPLETED  84 ms     1.1 MB  1/2    1 ms      -          3 ms (map:0)
    2  FAILED     500 ms    -       0/2    -         -          -              Checkpoint expired before completing.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional

__all__ = [
    "IN_PROGRESS",
    "COMPLETED",
    "FAILED",
    "CheckpointStats",
    "CheckpointStatsTracker",
    "format_bytes",
    "format_checkpoint_table",
]

IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"
FAILED = "FAILED"

MAX_RECORDS = 1000


@dataclass
class CheckpointStats:
    """What is known about one checkpoint.

    ``tasks`` maps a subtask key (``"vertex:index"``) to the metrics the task sent with
    its acknowledgement (``sync_ms``, ``async_ms``, ``alignment_ms``, ``bytes``, ...).
    ``end_ms``/``duration_ms`` are set once the checkpoint completed or failed.
    """

    checkpoint_id: int
    status: str
    is_savepoint: bool
    trigger_ms: int
    end_ms: Optional[int] = None
    duration_ms: Optional[int] = None
    state_size: int = 0
    failure_reason: Optional[str] = None
    tasks: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    num_tasks: int = 0
    external_path: str = ""

    @property
    def num_acknowledged(self) -> int:
        return len(self.tasks)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["num_acknowledged"] = self.num_acknowledged
        return d


def format_bytes(n: float) -> str:
    """Human-readable size with binary units.

    >>> format_bytes(512), format_bytes(1536), format_bytes(1_258_291)
    ('512 B', '1.5 KB', '1.2 MB')
    """
    units = ["B", "KB", "MB", "GB", "TB"]
    value = float(n)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _percentile(sorted_values: List[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def _fmt_ms(v: float) -> str:
    return f"{v:.0f} ms" if v >= 10 or float(v).is_integer() else f"{v:.1f} ms"


class CheckpointStatsTracker:
    """Records checkpoints as they are triggered, acknowledged, completed or failed."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        if max_records < 1:
            raise ValueError("max_records must be at least 1")
        self._max = max_records
        self._records: "OrderedDict[int, CheckpointStats]" = OrderedDict()
        self._triggered = 0
        self._completed = 0
        self._failed = 0
        self._not_triggered: Dict[str, int] = {}
        self._last_completed: Optional[CheckpointStats] = None
        #: the checkpoint the latest (re)deployment restored (Flink's "latest restore")
        self.latest_restore: Optional[Dict[str, Any]] = None
        #: why restores fell back to older checkpoints, in order
        self.fallbacks: List[str] = []

    def report_restored(self, checkpoint_id: int, is_savepoint: bool, path: str,
                        restore_ms: int) -> None:
        self.latest_restore = {"checkpoint_id": checkpoint_id, "is_savepoint": is_savepoint,
                               "path": path, "restore_ms": restore_ms}

    def report_fallback(self, message: str) -> None:
        self.fallbacks.append(message)

    # -- reports (from the coordinator) ---------------------------------------------------
    def report_triggered(self, checkpoint_id: int, trigger_ms: int, is_savepoint: bool,
                         num_tasks: int = 0) -> None:
        self._triggered += 1
        self._records[checkpoint_id] = CheckpointStats(
            checkpoint_id, IN_PROGRESS, is_savepoint, trigger_ms, num_tasks=num_tasks)
        self._records.move_to_end(checkpoint_id)
        while len(self._records) > self._max:
            self._records.popitem(last=False)

    def report_acknowledged(self, checkpoint_id: int, subtask_key: str,
                            metrics: Optional[Dict[str, Any]]) -> None:
        rec = self._records.get(checkpoint_id)
        if rec is not None and rec.status == IN_PROGRESS:
            rec.tasks[subtask_key] = dict(metrics or {})

    def report_completed(self, checkpoint_id: int, end_ms: int, state_size: int,
                         external_path: str = "") -> None:
        rec = self._records.get(checkpoint_id)
        if rec is None or rec.status != IN_PROGRESS:
            return
        rec.status = COMPLETED
        rec.end_ms = end_ms
        rec.duration_ms = max(0, end_ms - rec.trigger_ms)
        rec.state_size = state_size
        rec.external_path = external_path
        self._completed += 1
        self._last_completed = rec

    def report_failed(self, checkpoint_id: int, end_ms: int, reason: str) -> None:
        rec = self._records.get(checkpoint_id)
        if rec is None or rec.status != IN_PROGRESS:
            return
        rec.status = FAILED
        rec.end_ms = end_ms
        rec.duration_ms = max(0, end_ms - rec.trigger_ms)
        rec.failure_reason = reason
        self._failed += 1

    def report_not_triggered(self, reason: str) -> None:
        """A periodic checkpoint was due but could not start (e.g. a region was down);
        it took no checkpoint id (Flink counts these as failed without a record)."""
        self._not_triggered[reason] = self._not_triggered.get(reason, 0) + 1

    # -- queries ---------------------------------------------------------------------------
    def not_triggered(self) -> Dict[str, int]:
        """Periodic triggers that could not start, per reason name."""
        return dict(self._not_triggered)

    def get(self, checkpoint_id: int) -> Optional[CheckpointStats]:
        return self._records.get(checkpoint_id)

    def counts(self) -> Dict[str, int]:
        in_progress = sum(1 for r in self._records.values() if r.status == IN_PROGRESS)
        return {"triggered": self._triggered, "completed": self._completed,
                "failed": self._failed, "in_progress": in_progress,
                "not_triggered": sum(self._not_triggered.values())}

    def history(self, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Records as plain dicts, oldest first; ``limit`` keeps the newest ``limit``."""
        records = list(self._records.values())
        if limit is not None:
            records = records[-limit:] if limit > 0 else []
        return [r.to_dict() for r in records]

    def last_completed(self) -> Optional[CheckpointStats]:
        return self._last_completed

    def percentiles(self, field_name: str = "duration_ms",
                    qs: tuple = (50, 90, 99)) -> Dict[str, float]:
        """Percentiles over the completed checkpoints kept.

        ``field_name`` is a :class:`CheckpointStats` field (``duration_ms``,
        ``state_size``) or a task metric (``alignment_ms``, ``sync_ms``, ``async_ms``,
        ``bytes``), which counts the largest value among a checkpoint's tasks. Empty dict
        if nothing completed.
        """
        values: List[float] = []
        for r in self._records.values():
            if r.status != COMPLETED:
                continue
            if field_name in ("duration_ms", "state_size", "trigger_ms", "end_ms"):
                v = getattr(r, field_name)
                if v is not None:
                    values.append(float(v))
            else:
                per_task = [float(m[field_name]) for m in r.tasks.values()
                            if isinstance(m.get(field_name), (int, float))]
                if per_task:
                    values.append(max(per_task))
        if not values:
            return {}
        values.sort()
        return {f"p{q}": _percentile(values, q) for q in qs}

    def summary(self) -> str:
        """One line, e.g. ``12 checkpoints completed, 1 failed; last #13 in 84 ms, 1.2 MB;
        p50 60 ms, p99 120 ms``."""
        noun = "checkpoint" if self._completed == 1 else "checkpoints"
        text = f"{self._completed} {noun} completed, {self._failed} failed"
        last = self._last_completed
        if last is not None:
            text += (f"; last #{last.checkpoint_id} in {_fmt_ms(last.duration_ms or 0)}, "
                     f"{format_bytes(last.state_size)}")
            p = self.percentiles("duration_ms")
            if p:
                text += f"; p50 {_fmt_ms(p['p50'])}, p99 {_fmt_ms(p['p99'])}"
        in_progress = self.counts()["in_progress"]
        if in_progress:
            text += f"; {in_progress} in progress"
        if self._not_triggered:
            text += "; not triggered: " + ", ".join(
                f"{n} ({reason})" for reason, n in sorted(self._not_triggered.items()))
        return text


def _task_max(tasks: Dict[str, Dict[str, Any]], metric: str, name_it: bool,
              names: Optional[Mapping[str, str]] = None) -> str:
    values = [(float(m[metric]), key) for key, m in tasks.items()
              if isinstance(m.get(metric), (int, float))]
    if not values:
        return "-"
    value, key = max(values)
    if not name_it:
        return _fmt_ms(value)
    return f"{_fmt_ms(value)} ({(names or {}).get(key, key)})"


def format_checkpoint_table(history: List[Dict[str, Any]], limit: int = 10,
                            names: Optional[Mapping[str, str]] = None) -> str:
    """The newest ``limit`` records of :meth:`CheckpointStatsTracker.history` as a text
    table: id, status, duration, size, tasks acknowledged, and the slowest task's
    synchronous, asynchronous and alignment times (the slowest alignment names its task,
    by ``names``: subtask key -> task name, e.g. ``"v3:1" -> "Map (2/2)"``); a failed
    checkpoint ends with its reason."""
    header = ("id", "status", "duration", "size", "tasks", "sync max", "async max",
              "alignment max")
    rows = []
    for r in history[-limit:] if limit > 0 else []:
        done = r["status"] == COMPLETED
        rows.append((
            str(r["checkpoint_id"]), r["status"],
            _fmt_ms(r["duration_ms"]) if r.get("duration_ms") is not None else "-",
            format_bytes(r["state_size"]) if done else "-",
            f"{r['num_acknowledged']}/{r['num_tasks']}",
            _task_max(r["tasks"], "sync_ms", False),
            _task_max(r["tasks"], "async_ms", False),
            _task_max(r["tasks"], "alignment_ms", True, names),
            r.get("failure_reason") or ""))
    widths = [max([len(header[i])] + [len(row[i]) for row in rows])
              for i in range(len(header))]
    lines = []
    for row in [header + ("",)] + rows:
        cells = [row[0].rjust(widths[0] + 3)] + [row[i].ljust(widths[i])
                                                 for i in range(1, len(header))]
        line = "  ".join(cells)
        lines.append((line + "  " + row[-1]) if row[-1] else line.rstrip())
    return "\n".join(lines)
