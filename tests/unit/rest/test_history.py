"""Archived jobs (Flink's HistoryServer): an ended job's archive holds every GET path its
job master served, in Flink's archive format, and the history router answers those paths
with what the job master answered, for every archived job, read-only."""

from __future__ import annotations

import dataclasses
import json

from flowray.runtime.rest.history import (HistoryArchives, archived_responses,
                                          history_router, write_job_archive)
from flowray.runtime.rest.routes import job_router
from tests.unit.rest.test_flink_shapes import _Actions, sample_job


def _ended(job_id="b" * 32, name="ended", state="FINISHED", start_ms=1_000):
    return dataclasses.replace(sample_job(), job_id=job_id, job_name=name, state=state,
                               start_ms=start_ms, end_ms=start_ms + 9_000)


def test_an_archive_is_flinks_format_with_every_vertex_and_checkpoint(tmp_path):
    job = _ended()
    path = write_job_archive(str(tmp_path / "archive"), job)
    assert path.name == job.job_id and [p.name for p in path.parent.iterdir()] == [job.job_id]
    doc = json.loads(path.read_text())
    paths = {e["path"] for e in doc["archive"]}
    assert all(isinstance(e["json"], str) for e in doc["archive"])   # JSON in a string
    jid = job.job_id
    assert {f"/jobs/{jid}", f"/jobs/{jid}/plan", f"/jobs/{jid}/exceptions",
            f"/jobs/{jid}/checkpoints", f"/jobs/{jid}/metrics", "/jobs/overview",
            f"/jobs/{jid}/vertices/v0/backpressure", f"/jobs/{jid}/vertices/v1/watermarks",
            f"/jobs/{jid}/vertices/v1/subtasks/metrics",
            f"/jobs/{jid}/checkpoints/details/1", f"/jobs/{jid}/checkpoints/details/3"} <= paths
    assert not any("savepoints" in p for p in paths)


def test_the_history_answers_what_the_job_master_answered(tmp_path):
    job = _ended()
    write_job_archive(str(tmp_path), job)
    archives = HistoryArchives([str(tmp_path)])
    assert archives.refresh() == 1
    history, live = history_router(archives), job_router(lambda: job, _Actions())
    for path, _ in archived_responses(job):
        if path == "/jobs/overview":
            continue
        assert history.dispatch("GET", path, {}).body == live.dispatch("GET", path, {}).body, path
    jid = job.job_id
    for path, get in [(f"/jobs/{jid}/vertices/v1/subtasks/metrics", "numRecordsIn,map.seen"),
                      (f"/jobs/{jid}/vertices/v0/metrics", "1.numRecordsOut,0.nope"),
                      (f"/jobs/{jid}/metrics", "numRestarts")]:
        want = live.dispatch("GET", path, {"get": get}).body
        assert want and history.dispatch("GET", path, {"get": get}).body == want, path


def test_every_archived_job_is_listed_newest_first_and_nothing_can_be_changed(tmp_path):
    older, newer = _ended("c" * 32, "older", "FAILED", 1_000), _ended("d" * 32, "newer",
                                                                      "CANCELED", 50_000)
    for job in (older, newer):
        write_job_archive(str(tmp_path), job)
    archives = HistoryArchives([str(tmp_path)])
    archives.refresh()
    r = history_router(archives)
    jobs = r.dispatch("GET", "/jobs/overview", {}).body["jobs"]
    assert [(j["name"], j["state"]) for j in jobs] == [("newer", "CANCELED"), ("older", "FAILED")]
    overview = r.dispatch("GET", "/overview", {}).body
    assert (overview["jobs-failed"], overview["jobs-cancelled"], overview["jobs-running"]) == (
        1, 1, 0)
    assert r.dispatch("GET", "/config", {}).body["features"]["web-history"] is True
    missing = r.dispatch("GET", f"/jobs/{'e' * 32}", {})
    assert missing.status == 404 and "not in the archives" in missing.body["errors"][0]
    assert r.dispatch("GET", f"/jobs/{older.job_id}/vertices/v9", {}).status == 404
    for method, path in [("PATCH", f"/jobs/{older.job_id}"),
                         ("POST", f"/jobs/{older.job_id}/savepoints"),
                         ("POST", f"/jobs/{older.job_id}/stop")]:
        res = r.dispatch(method, path, {}, b"{}")
        assert res.status in (404, 405) and "errors" in res.body, (method, path)


def test_refresh_picks_up_new_archives_and_skips_what_is_not_one(tmp_path, caplog):
    archives = HistoryArchives([str(tmp_path), str(tmp_path / "not-there")])
    assert archives.refresh() == 0
    (tmp_path / ("f" * 32)).write_text("{not json")
    (tmp_path / ".x.tmp").write_text("partial")   # a writer's temp file: never read
    write_job_archive(str(tmp_path), _ended("1" * 32))
    assert archives.refresh() == 1 and archives.job_ids() == ["1" * 32]
    assert "not a job archive" in caplog.text
    write_job_archive(str(tmp_path), _ended("2" * 32))
    assert archives.refresh() == 2
