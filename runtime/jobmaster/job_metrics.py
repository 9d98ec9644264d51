"""A job's metrics, with Flink's names: ``uptime``, ``numRestarts``, the checkpoint counts
and the last checkpoint's duration, size and restore time, read from the scheduler (gauges:
nothing to update).

>>> from flowray.metrics.groups import MetricRegistry
>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
>>> class Sched:  # what JobMetrics reads of a JobScheduler
...     restarts, stats, is_running = 0, CheckpointStatsTracker(), True
>>> clock, registry = ManualClock(1_000), MetricRegistry()
>>> m = JobMetrics(registry.job_group("j", "id"), Sched(), clock)
>>> clock.advance(2_500); m.values()["uptime"]
2500
"""

from __future__ import annotations

from typing import Any, Dict

from flowray.common.clock import Clock
from flowray.metrics.groups import GenericMetricGroup

__all__ = ["JobMetrics"]


class JobMetrics:
    """Registers the job metrics in ``group`` (labels ``job_name``, ``job_id``).
    ``scheduler`` has ``restarts``, ``stats`` (a ``CheckpointStatsTracker``) and
    ``is_running`` (the job is RUNNING); ``uptime`` counts from this object's creation while
    the job runs and is 0 otherwise (Flink's ``-1`` would read as a count in Grafana)."""

    def __init__(self, group: GenericMetricGroup, scheduler: Any, clock: Clock) -> None:
        self.group = group
        self.scheduler = scheduler
        self.clock = clock
        self._start_ms = clock.monotonic_ms()
        group.gauge("uptime", self.uptime_ms)
        group.gauge("numRestarts", lambda: scheduler.restarts)
        group.gauge("numberOfCompletedCheckpoints", lambda: self._count("completed"))
        group.gauge("numberOfFailedCheckpoints", lambda: self._count("failed"))
        group.gauge("numberOfInProgressCheckpoints", lambda: self._count("in_progress"))
        group.gauge("lastCheckpointDuration", lambda: self._last("duration_ms"))
        group.gauge("lastCheckpointSize", lambda: self._last("state_size"))
        group.gauge("lastCheckpointRestoreTimestamp", self._restore_ms)

    def _count(self, what: str) -> int:
        # (read from the exporter's thread while the job master's loop records checkpoints:
        # a read that meets a change is read again)
        for _ in range(3):
            try:
                return self.scheduler.stats.counts()[what]
            except RuntimeError:
                continue
        return self.scheduler.stats.counts()[what]

    def uptime_ms(self) -> int:
        if not self.scheduler.is_running:
            return 0
        return int(self.clock.monotonic_ms() - self._start_ms)

    def _last(self, field: str) -> int:
        last = self.scheduler.stats.last_completed()
        value = getattr(last, field, None) if last is not None else None
        return int(value) if value is not None else -1

    def _restore_ms(self) -> int:
        restore = self.scheduler.stats.latest_restore
        return int(restore["restore_ms"]) if restore else -1

    def values(self) -> Dict[str, Any]:
        """These metrics by their Flink names (tests, doctests)."""
        return self.group.values()
