"""User metrics, as PyFlink's ``pyflink.metrics``: a function's
``get_runtime_context().get_metrics_group()`` is a :class:`MetricGroup`; it registers
counters, gauges, meters and distributions, and nests groups.

>>> from flowray.metrics import MetricGroup
>>> from flowray.metrics.groups import MetricRegistry
>>> group = MetricRegistry().task_group(job_name="j", job_id="1", task_name="map",
...                                     subtask_index=0).operator_group("map")
>>> seen = group.add_group("parser").counter("badLines")
>>> seen.inc(); seen.inc(2); seen.get_count()
3

The implementations are in :mod:`flowray.metrics.kinds` (the metric kinds) and
:mod:`flowray.metrics.groups` (groups that name and label them, and a task process's
registry); this module holds the interfaces.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Optional

__all__ = ["MetricGroup", "Metric", "Counter", "Meter", "Distribution", "Gauge"]


class Metric(abc.ABC):
    """The base of every metric."""


class Counter(Metric):
    """A count that goes up and down."""

    @abc.abstractmethod
    def inc(self, n: int = 1) -> None:
        """Add ``n``."""

    @abc.abstractmethod
    def dec(self, n: int = 1) -> None:
        """Take away ``n``."""

    @abc.abstractmethod
    def get_count(self) -> int:
        """The current count."""


class Meter(Metric):
    """Events per second, averaged over a time span."""

    @abc.abstractmethod
    def mark_event(self, value: int = 1) -> None:
        """``value`` events happened."""

    @abc.abstractmethod
    def get_count(self) -> int:
        """Events marked in all."""

    @abc.abstractmethod
    def get_rate(self) -> float:
        """Events per second over the meter's time span."""


class Distribution(Metric):
    """Count, sum, minimum, maximum and mean of the values given to ``update``."""

    @abc.abstractmethod
    def update(self, value: Any) -> None:
        """Add a value (an ``int`` or a ``float``)."""


class Gauge(Metric):
    """A value read when metrics are reported (the function given to
    :meth:`MetricGroup.gauge`)."""

    @abc.abstractmethod
    def get_value(self) -> Any:
        """The value now."""


class MetricGroup(abc.ABC):
    """A named container for metrics and further groups (PyFlink's ``MetricGroup``)."""

    @abc.abstractmethod
    def add_group(self, name: str, extra: Optional[str] = None) -> "MetricGroup":
        """A subgroup ``name``; with ``extra``, a key group ``name`` whose value group
        ``extra`` is returned, and ``name=extra`` becomes a label of its metrics."""

    @abc.abstractmethod
    def counter(self, name: str) -> Counter:
        """Register (or find again) the counter ``name``."""

    @abc.abstractmethod
    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        """Register a gauge: ``obj()`` is read when metrics are reported."""

    @abc.abstractmethod
    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        """Register (or find again) a meter averaging over ``time_span_in_seconds``."""

    @abc.abstractmethod
    def distribution(self, name: str) -> Distribution:
        """Register (or find again) the distribution ``name``."""
