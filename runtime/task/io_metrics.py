"""A subtask's task metrics, with Flink's names and meanings, read from what the task counts
anyway (per batch, never per record): records and bytes in and out, their rates, and the
share of each second spent busy, idle (waiting for input) and back-pressured (waiting for
credit to write).

>>> from flowray.metrics.groups import MetricRegistry
>>> counts = {"in": 0, "idle_ms": 0.0}
>>> registry = MetricRegistry()
>>> m = TaskIOMetrics(registry.task_group("j", "1", "Map", 0),
...                   records_in=lambda: counts["in"], records_out=lambda: 0,
...                   bytes_in=lambda: 0, bytes_out=lambda: 0,
...                   idle_ms=lambda: counts["idle_ms"], back_pressured_ms=lambda: 0.0)
>>> counts["in"] += 600; counts["idle_ms"] += 1500.0; registry.update_views()
>>> m.values()["idleTimeMsPerSecond"], m.values()["busyTimeMsPerSecond"]
(300.0, 700.0)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from flowray.metrics.groups import GenericMetricGroup, TaskMetricGroup
from flowray.metrics.kinds import UPDATE_INTERVAL_S, FunctionCounter, MeterView

__all__ = ["TaskIOMetrics", "RATE_TIME_SPAN_S", "register_operator_metrics"]

#: the time span of the per-second record and byte rates (Flink's MeterView default)
RATE_TIME_SPAN_S = 60


class TaskIOMetrics:
    """Registers a subtask's I/O metrics in ``group``; every argument reads a running total
    the task keeps (``idle_ms``/``back_pressured_ms``: milliseconds in all). The time
    metrics are per second over the last ``UPDATE_INTERVAL_S`` (Flink's ``TimerGauge``);
    the rates over ``RATE_TIME_SPAN_S``. With ``running_ms`` (ms since the task started)
    also the totals: ``accumulateIdleTimeMs``, ``accumulateBackPressuredTimeMs`` and
    ``accumulateBusyTimeMs`` (the rest)."""

    def __init__(self, group: TaskMetricGroup, *, records_in: Callable[[], int],
                 records_out: Callable[[], int], bytes_in: Callable[[], int],
                 bytes_out: Callable[[], int], idle_ms: Callable[[], float],
                 back_pressured_ms: Callable[[], float],
                 running_ms: Optional[Callable[[], float]] = None) -> None:
        self.group = group
        registry, labels = group.registry, group.labels
        totals = {"numRecordsIn": records_in, "numRecordsOut": records_out,
                  "numBytesIn": bytes_in, "numBytesOut": bytes_out}
        for name, fn in totals.items():
            group.gauge(name, fn)
            rate = MeterView(RATE_TIME_SPAN_S, FunctionCounter(fn))
            registry.replace(group.name_of(name + "PerSecond"), labels, rate)
        self._idle = MeterView(UPDATE_INTERVAL_S, FunctionCounter(idle_ms))
        self._back_pressured = MeterView(UPDATE_INTERVAL_S, FunctionCounter(back_pressured_ms))
        registry.replace(group.name_of("idleTimeMsPerSecond"), labels, self._idle)
        registry.replace(group.name_of("backPressuredTimeMsPerSecond"), labels,
                         self._back_pressured)
        group.gauge("busyTimeMsPerSecond", self.busy_ms_per_second)
        if running_ms is not None:   # Flink's totals since the task started (ms)
            group.gauge("accumulateIdleTimeMs", lambda: int(idle_ms()))
            group.gauge("accumulateBackPressuredTimeMs", lambda: int(back_pressured_ms()))
            group.gauge("accumulateBusyTimeMs", lambda: int(max(
                0.0, running_ms() - idle_ms() - back_pressured_ms())))

    def busy_ms_per_second(self) -> float:
        """1000 - idle - back-pressured (ms per second), as Flink derives it."""
        return max(0.0, 1000.0 - self._idle.get_rate() - self._back_pressured.get_rate())

    def values(self) -> Dict[str, Any]:
        """These metrics by their Flink names (tests, doctests)."""
        return self.group.values()


def register_operator_metrics(group: GenericMetricGroup, op: Any) -> None:
    """An operator's watermark gauges (Flink's): ``currentInputWatermark`` (the minimum
    over its inputs), ``currentInput1Watermark``/``currentInput2Watermark`` for two inputs,
    and ``currentOutputWatermark``. Not for a source operator: its watermarks come from its
    reader's splits."""
    n = getattr(op, "num_inputs", 0)
    if n < 1:
        return
    group.gauge("currentInputWatermark", lambda: min(op.input_watermarks()))
    if n > 1:
        for i in range(n):
            group.gauge(f"currentInput{i + 1}Watermark",
                        lambda i=i: op.input_watermarks()[i])
    group.gauge("currentOutputWatermark", lambda: op.current_watermark)
