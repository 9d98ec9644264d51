"""Task, operator and user metrics of a job on Ray reach Ray's Prometheus endpoint as
``ray_flowray_<name>`` (Ray prefixes its applications' metrics with ``ray_`` and writes them
in lower case: ``ray_flowray_numrecordsout``), labelled with
the job, task, subtask and operator; a source in front of a slow operator shows
back-pressure; the job master's job metrics arrive too. The test waits for each value to appear (Ray's agent exports every ~10 s)."""

from __future__ import annotations

import contextlib
import re
import time
import urllib.request
from typing import Dict, List, Tuple

import pytest

from flowray.datastream.functions import MapFunction, RuntimeContext
from tests.support.environments import endless_numbers_through

_LINE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _scrape() -> List[Tuple[str, Dict[str, str], float]]:
    import ray
    node = ray._private.worker._global_node
    url = f"http://{node.node_ip_address}:{node.metrics_export_port}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    out = []
    for line in body.splitlines():
        m = _LINE.match(line)
        if m and m.group(1).startswith("ray_flowray_"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2))), float(m.group(3))))
    return out


def _wait_for(job_id: str, test, what: str, timeout_s: float = 120.0):
    """Scrape until ``test(samples of the job)`` gives something true; return it."""
    deadline = time.monotonic() + timeout_s
    seen: list = []
    while time.monotonic() < deadline:
        seen = [s for s in _scrape() if s[1].get("job_id") == job_id]
        found = test(seen)
        if found:
            return found
        time.sleep(0.5)  # (polling the endpoint; the assertion is on what it serves)
    pytest.fail(f"{what} not exported within {timeout_s:.0f} s; the job's samples: "
                f"{sorted({s[0] for s in seen})}")


class _Slow(MapFunction):
    """5 ms a record, counting what it saw in a user metric."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_metrics_group().add_group("slow").counter("seen")

    def map(self, value):
        time.sleep(0.005)
        self.seen.inc()
        return value


def test_task_user_and_back_pressure_metrics_reach_prometheus(ray_session):
    env = endless_numbers_through(_Slow(), "slow-map", **{
        "flowray.metrics.report-interval": "500 ms",
        "execution.checkpointing.interval": "500 ms"})
    client = env.execute_async("metrics-export")
    job_id = client.get_job_id()
    try:
        def records_out(samples):
            return [s for s in samples if s[0] == "ray_flowray_numrecordsout"
                    and s[1]["task_name"].startswith("Source") and s[2] > 0]

        (name, labels, _), = _wait_for(job_id, records_out, "the source's numRecordsOut")
        assert labels["job_name"] == "metrics-export" and labels["subtask_index"] == "0"
        assert "operator_name" not in labels  # a task metric

        def user_counter(samples):
            return [s for s in samples if s[0] == "ray_flowray_slow_seen" and s[2] > 0]

        (_, labels, _), = _wait_for(job_id, user_counter, "the map's user counter")
        assert labels["operator_name"] == "slow-map"

        def back_pressured(samples):
            return [s for s in samples
                    if s[0] == "ray_flowray_backpressuredtimemspersecond"
                    and s[1]["task_name"].startswith("Source") and s[2] > 500]

        _wait_for(job_id, back_pressured, "the source's backPressuredTimeMsPerSecond > 500")

        def checkpoints(samples):  # a job metric, from the job master
            return [s for s in samples if s[0] == "ray_flowray_numberofcompletedcheckpoints"
                    and s[2] >= 1]

        (_, labels, _), = _wait_for(job_id, checkpoints, "numberOfCompletedCheckpoints >= 1")
        assert "task_name" not in labels and labels["job_name"] == "metrics-export"
    finally:
        client.cancel()
        with contextlib.suppress(Exception):  # a canceled job's wait raises
            client.wait(timeout_s=60)
