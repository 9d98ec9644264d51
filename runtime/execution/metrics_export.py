"""The Ray shell of metrics: a thread in each task actor that samples the meters every
``UPDATE_INTERVAL_S`` and sets ``ray.util.metrics`` gauges from the registry every
``flowray.metrics.report-interval``; Ray's metrics agent then serves them to Prometheus
(Flink's Prometheus reporter exports every metric as a gauge too)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Tuple

from flowray.metrics.export import export_points
from flowray.metrics.groups import MetricRegistry
from flowray.metrics.kinds import UPDATE_INTERVAL_S

__all__ = ["RayMetricsExporter"]

log = logging.getLogger("flowray.metrics")


class RayMetricsExporter:
    """Samples ``registry``'s meters and exports its metrics until ``close``."""

    def __init__(self, registry: MetricRegistry, report_interval_s: float) -> None:
        self.registry = registry
        self.report_interval_s = max(0.1, report_interval_s)
        self._gauges: Dict[str, Tuple[Any, Tuple[str, ...]]] = {}
        self._mismatch_logged: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flowray-metrics",
                                        daemon=True)

    def start(self) -> "RayMetricsExporter":
        self._thread.start()
        return self

    def _run(self) -> None:
        since_views = since_report = 0.0
        step = min(UPDATE_INTERVAL_S, self.report_interval_s)
        while not self._stop.wait(step):
            since_views += step
            since_report += step
            try:
                if since_views >= UPDATE_INTERVAL_S:
                    since_views = 0.0
                    self.registry.update_views()
                if since_report >= self.report_interval_s:
                    since_report = 0.0
                    self.report()
            except Exception:  # metrics never fail a task
                log.warning("flowray: exporting metrics failed", exc_info=True)

    def report(self) -> None:
        from ray.util.metrics import Gauge
        for name, labels, value in export_points(self.registry.snapshot()):
            keys = tuple(sorted(labels))
            found = self._gauges.get(name)
            if found is None:
                found = self._gauges[name] = (Gauge(name, tag_keys=keys), keys)
            gauge, declared = found
            if declared != keys:  # a name with two label sets: Prometheus takes one
                if name not in self._mismatch_logged:
                    self._mismatch_logged.add(name)
                    log.warning("flowray: metric %s has labels %s, not %s as first "
                                "exported; left out", name, keys, declared)
                continue
            gauge.set(value, tags=labels)

    def close(self) -> None:
        """Report once more (a short task's totals) and stop."""
        self._stop.set()
        self._thread.join(5)
        try:
            self.registry.update_views()
            self.report()
        except Exception:
            log.warning("flowray: exporting metrics failed", exc_info=True)
