"""Metrics (Flink's MetricOptions)."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_bool,
    parse_duration_ms,
    register_option,
)
from flowray.common.options.validators import bounded, show_ms

__all__ = ["METRICS_ENABLED", "METRICS_REPORT_INTERVAL"]


METRICS_ENABLED = register_option(
    "flowray.metrics.enabled",
    parse_bool,
    True,
    "Task, operator and user metrics (Flink's names) are exported through Ray's metrics "
    "system as flowray_<name> gauges, labelled job_name, job_id, task_name, subtask_index "
    "and operator_name; false registers user metrics but exports nothing.",
)

METRICS_REPORT_INTERVAL = register_option(
    "flowray.metrics.report-interval",
    parse_duration_ms,
    10_000,
    "How often each task sets its Ray metrics (Ray's agent exports every 10 s by default).",
    check=bounded(100, 3_600_000, show_ms, "must be at least 100 ms"),
)
