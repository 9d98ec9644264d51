"""The job master of a running job on Ray serves Flink's REST paths: the job with its
vertices, metric values from its tasks (a source in front of a slow map is back-pressured,
its numRecordsOut is what it emitted), checkpoints counting up, and a cancel through PATCH.
Waits on what the API serves (heartbeats every second carry the tasks' metrics)."""

from __future__ import annotations

import contextlib
import time
import urllib.request

from flowray.common.job_status import JobStatus
from tests.support.environments import endless_numbers_through
from tests.support.rest import get_json as _get
from tests.support.rest import until_served as _until


def _slow(x):
    time.sleep(0.005)
    return x


def test_a_running_jobs_rest_api(ray_session):
    env = endless_numbers_through(_slow, "slow", **{
        "heartbeat.interval": "1 s", "execution.checkpointing.interval": "300 ms",
        "rest.port": "0"})  # (any free port: tests run side by side)
    client = env.execute_async("rest-api")
    try:
        url = client.get_web_url()
        assert url and url.startswith("http://127.0.0.1:")
        jid = client.get_job_id()
        with urllib.request.urlopen(url + "/", timeout=10) as resp:  # the web UI's page
            assert b"/app.js" in resp.read()
        overview = _get(f"{url}/jobs/overview")["jobs"]
        assert [j["jid"] for j in overview] == [jid] and overview[0]["name"] == "rest-api"
        job = _get(f"{url}/jobs/{jid}")
        names = [v["name"] for v in job["vertices"]]
        assert any(n.startswith("Source: numbers") for n in names) and "slow" in \
            " ".join(names)
        source = next(v["id"] for v in job["vertices"] if v["name"].startswith("Source"))

        def back_pressured(bp):
            return bp["subtasks"] and bp["subtasks"][0]["ratio"] > 0.5 and bp

        _until(lambda: _get(f"{url}/jobs/{jid}/vertices/{source}/backpressure"),
               back_pressured, "the source's back-pressure ratio > 0.5")
        bp_ms = _get(f"{url}/jobs/{jid}/vertices/{source}/subtasks/metrics"
                     f"?get=backPressuredTimeMsPerSecond")
        assert bp_ms[0]["max"] > 500, bp_ms   # the metric behind the ratio
        out = _until(lambda: _get(f"{url}/jobs/{jid}/vertices/{source}/subtasks/metrics"
                                  f"?get=numRecordsOut"),
                     lambda m: m and m[0]["sum"] > 0 and m, "the source's numRecordsOut")
        assert out[0]["id"] == "numRecordsOut"
        first = _get(f"{url}/jobs/{jid}/checkpoints")["counts"]["completed"]
        _until(lambda: _get(f"{url}/jobs/{jid}/checkpoints"),
               lambda c: c["counts"]["completed"] > first, "the checkpoint count growing")
        # the source's position (operator state) is in each checkpoint: its stateSize
        size = _until(lambda: _get(f"{url}/jobs/{jid}/vertices/{source}/subtasks/metrics"
                                   f"?get=Source:%20numbers.stateSize"),
                      lambda m: m and m[0]["sum"] > 0 and m, "the source's stateSize")
        assert size[0]["id"] == "Source: numbers.stateSize"
        req = urllib.request.Request(f"{url}/jobs/{jid}?mode=cancel", method="PATCH")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 202
        _until(lambda: client.get_job_status(),
               lambda s: s is JobStatus.CANCELED, "the job CANCELED by PATCH")
    finally:
        client.cancel()
        with contextlib.suppress(Exception):
            client.wait(timeout_s=60)
