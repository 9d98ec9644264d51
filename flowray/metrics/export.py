"""What an exporter sends for a registry snapshot: :func:`export_points` flattens samples into
numeric points (a distribution into ``_count``/``_sum``/``_min``/``_max``/``_mean``, a meter
into its rate); non-numeric gauges are left out. Pure: the Ray exporter
(``flowray.runtime.execution.metrics_export``) applies the points to ``ray.util.metrics``.

>>> from flowray.metrics.groups import MetricSample
>>> export_points([MetricSample("flowray_d", {"a": "1"}, "distribution",
...                             {"count": 2, "sum": 3, "min": 1, "max": 2, "mean": 1.5}),
...                MetricSample("flowray_g", {}, "gauge", "text")])[:2]
[('flowray_d_count', {'a': '1'}, 2.0), ('flowray_d_sum', {'a': '1'}, 3.0)]
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

from flowray.metrics.groups import MetricSample

__all__ = ["export_points", "ExportPoint"]

#: (metric name, labels, value)
ExportPoint = Tuple[str, Dict[str, str], float]


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        f = float(value)
        return f if not math.isnan(f) else None
    return None


def export_points(samples: Iterable[MetricSample]) -> List[ExportPoint]:
    out: List[ExportPoint] = []
    for s in samples:
        if s.kind == "distribution":
            for part in ("count", "sum", "min", "max", "mean"):
                v = _number(s.value.get(part))
                if v is not None:
                    out.append((f"{s.name}_{part}", s.labels, v))
            continue
        v = _number(s.value)
        if v is not None:
            out.append((s.name, s.labels, v))
    return out
