"""Metric groups and a task process's registry (the implementation of
:class:`flowray.metrics.MetricGroup`).

A metric is named by its group path and labelled by its scope, as Flink's Prometheus
reporter does: ``flowray_<group>_..._<name>``, labels ``job_name``, ``job_id``,
``task_name``, ``subtask_index`` (a task's), ``operator_name`` (an operator's), and one label
per key/value group (``add_group("region", "eu")`` labels ``region="eu"``).

>>> registry = MetricRegistry()
>>> op = registry.task_group(job_name="j", job_id="1", task_name="t",
...                          subtask_index=0).operator_group("map")
>>> op.add_group("cache").add_group("region", "eu").counter("hits").inc(2)
>>> [(s.name, s.labels["region"], s.value) for s in registry.snapshot()]
[('flowray_cache_hits', 'eu', 2)]
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from flowray.metrics import Counter, Distribution, Meter, Metric, MetricGroup
from flowray.metrics.kinds import DistributionView, FunctionGauge, MeterView, \
    SimpleCounter

__all__ = ["MetricRegistry", "GenericMetricGroup", "TaskMetricGroup", "OperatorMetricGroup",
           "MetricSample", "metric_name", "SCOPE_LABELS"]

log = logging.getLogger("flowray.metrics")

#: the labels flowray sets itself (a key/value group may not reuse them)
SCOPE_LABELS = ("job_name", "job_id", "task_name", "subtask_index", "operator_name")
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")
_KINDS = {SimpleCounter: "counter", MeterView: "meter", DistributionView: "distribution",
          FunctionGauge: "gauge"}


def metric_name(path: Tuple[str, ...], name: str) -> str:
    """``flowray_<path>_<name>`` with every character Prometheus does not allow as ``_``.

    >>> metric_name(("my group",), "numRecordsIn")
    'flowray_my_group_numRecordsIn'
    """
    return "_".join(["flowray", *(_NOT_NAME.sub("_", p) for p in path),
                     _NOT_NAME.sub("_", name)])


@dataclass(frozen=True)
class MetricSample:
    """One metric's value at a snapshot: ``kind`` is counter, meter, gauge or distribution;
    ``value`` a number (a meter's: its rate; a distribution's: a dict)."""

    name: str
    labels: Dict[str, str]
    kind: str
    value: Any
    count: Optional[int] = None  # a meter's events in all


def _check_name(what: str, name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a metric {what} must be a non-empty string, got {name!r}")
    return name


class MetricRegistry:
    """Every metric of one task process, keyed by name and labels; ``update_views`` samples
    the meters (every ``UPDATE_INTERVAL_S``), ``snapshot`` reads them all. Thread-safe:
    tasks register from their threads while an exporter reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], Metric] = {}
        self._meters: List[MeterView] = []
        self._broken_gauges: set = set()

    def task_group(self, job_name: str, job_id: str, task_name: str,
                   subtask_index: int) -> "TaskMetricGroup":
        return TaskMetricGroup(self, {"job_name": job_name, "job_id": job_id,
                                      "task_name": task_name,
                                      "subtask_index": str(subtask_index)})

    def job_group(self, job_name: str, job_id: str) -> "GenericMetricGroup":
        """A job's group (the job master's metrics: labels ``job_name``, ``job_id``)."""
        return GenericMetricGroup(self, {"job_name": job_name, "job_id": job_id})

    def register(self, name: str, labels: Dict[str, str], make: Callable[[], Metric],
                 kind: type) -> Metric:
        """The metric ``name`` with ``labels``: the one registered before (of ``kind``, else
        a ``ValueError``), or a new one from ``make``."""
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            found = self._metrics.get(key)
            if found is not None:
                if not isinstance(found, kind):
                    raise ValueError(f"metric {name!r} {dict(labels)} is already a "
                                     f"{_KINDS[type(found)]}, not a {_KINDS[kind]}")
                return found
            metric = self._metrics[key] = make()
            if isinstance(metric, MeterView):
                self._meters.append(metric)
            return metric

    def replace(self, name: str, labels: Dict[str, str], metric: Metric) -> None:
        """Register ``metric`` under ``name``/``labels``, replacing what was there."""
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            old = self._metrics.get(key)
            if isinstance(old, MeterView):
                self._meters.remove(old)
            self._metrics[key] = metric
            if isinstance(metric, MeterView):
                self._meters.append(metric)

    def unregister_all(self, labels: Dict[str, str]) -> None:
        """Drop every metric whose labels include ``labels`` (a task's, when it ends)."""
        items = set(labels.items())
        with self._lock:
            for key in [k for k in self._metrics if items <= set(k[1])]:
                metric = self._metrics.pop(key)
                if isinstance(metric, MeterView):
                    self._meters.remove(metric)

    def update_views(self) -> None:
        with self._lock:
            meters = list(self._meters)
        for meter in meters:
            meter.update()

    def snapshot(self) -> List[MetricSample]:
        out: List[MetricSample] = []
        with self._lock:
            entries = list(self._metrics.items())
        for (name, labels), metric in entries:
            count = None
            if isinstance(metric, SimpleCounter):
                kind, value = "counter", metric.count
            elif isinstance(metric, MeterView):
                kind, value, count = "meter", metric.get_rate(), metric.get_count()
            elif isinstance(metric, DistributionView):
                kind, value = "distribution", metric.values()
            else:
                kind = "gauge"
                try:
                    value = metric.get_value()  # type: ignore[attr-defined]
                except Exception as e:  # noqa: BLE001 - a user's gauge must not stop the others
                    if (name, labels) not in self._broken_gauges:
                        self._broken_gauges.add((name, labels))
                        log.warning("flowray: gauge %s %s raised %s: %s", name, dict(labels),
                                    type(e).__name__, e)
                    continue
            out.append(MetricSample(name, dict(labels), kind, value, count))
        return out


class GenericMetricGroup(MetricGroup):
    """A group: a path of names (the metric name's middle) and labels."""

    def __init__(self, registry: MetricRegistry, labels: Dict[str, str],
                 path: Tuple[str, ...] = ()) -> None:
        self.registry = registry
        self.labels = labels
        self.path = path

    def add_group(self, name: str, extra: Optional[str] = None) -> "GenericMetricGroup":
        _check_name("group name", name)
        if extra is None:
            return GenericMetricGroup(self.registry, self.labels, self.path + (name,))
        label = _NOT_NAME.sub("_", name)
        if label in SCOPE_LABELS or label in self.labels:
            raise ValueError(f"metric group key {name!r}: the label {label!r} is taken "
                             f"(flowray's own: {', '.join(SCOPE_LABELS)})")
        return GenericMetricGroup(self.registry, {**self.labels, label: str(extra)},
                                  self.path)

    def values(self) -> Dict[str, Any]:
        """This group's own metrics now (not its subgroups' with other labels), by name
        without the ``flowray_`` prefix."""
        return {s.name[len("flowray_"):]: s.value for s in self.registry.snapshot()
                if s.labels == self.labels}

    def name_of(self, name: str) -> str:
        """The full metric name of ``name`` in this group."""
        return metric_name(self.path, _check_name("name", name))

    def counter(self, name: str) -> Counter:
        return self.registry.register(self.name_of(name), self.labels, SimpleCounter,
                                      SimpleCounter)  # type: ignore[return-value]

    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        self.registry.replace(self.name_of(name), self.labels, FunctionGauge(obj))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self.registry.register(self.name_of(name), self.labels,
                                      lambda: MeterView(time_span_in_seconds),
                                      MeterView)  # type: ignore[return-value]

    def distribution(self, name: str) -> Distribution:
        return self.registry.register(self.name_of(name), self.labels, DistributionView,
                                      DistributionView)  # type: ignore[return-value]


class TaskMetricGroup(GenericMetricGroup):
    """A subtask's group (labels ``job_name``, ``job_id``, ``task_name``,
    ``subtask_index``)."""

    def operator_group(self, operator_name: str) -> "OperatorMetricGroup":
        return OperatorMetricGroup(self.registry,
                                   {**self.labels, "operator_name": operator_name})

    def close(self) -> None:
        """The subtask ended: its metrics (and its operators') leave the registry."""
        self.registry.unregister_all(self.labels)


class OperatorMetricGroup(GenericMetricGroup):
    """An operator's group in a subtask (its task's labels and ``operator_name``)."""
