"""The REST API's behaviour: values, errors as Flink's {"errors": [...]}, asynchronous
savepoints, and the HTTP server's binding and token (a real aiohttp server on loopback)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from flowray.common.options import ports_of
from flowray.runtime.rest.routes import AsyncOperations, job_router
from flowray.runtime.rest.server import RestBindError, RestServer, is_loopback
from tests.unit.rest.test_flink_shapes import sample_job


class Actions:
    def __init__(self):
        self.calls = []

    def cancel(self):
        self.calls.append("cancel")

    def savepoint(self, target, stop, drain):
        self.calls.append(("savepoint", target, stop, drain))
        return (None, "a source declined") if target == "/bad" else (f"{target}/sp-1", None)


def _router(actions=None):
    job = sample_job()
    return job, job_router(lambda: job, actions or Actions(),
                           AsyncOperations(runner=lambda work: work()),
                           cluster_jobs=lambda: [{"jid": "b" * 32, "name": "other"}])


def test_values_come_from_the_subtasks_metrics():
    job, r = _router()
    jid = job.job_id
    agg = r.dispatch("GET", f"/jobs/{jid}/vertices/v1/subtasks/metrics",
                     {"get": "numRecordsIn,map.seen"}).body
    assert {a["id"]: a["sum"] for a in agg} == {"numRecordsIn": 20.0, "map.seen": 14.0}
    names = [m["id"] for m in r.dispatch("GET", f"/jobs/{jid}/vertices/v1/subtasks/metrics",
                                         {}).body]
    assert "backPressuredTimeMsPerSecond" in names
    flat = r.dispatch("GET", f"/jobs/{jid}/vertices/v1/metrics", {"get": "1.numRecordsOut"}).body
    assert flat == [{"id": "1.numRecordsOut", "value": "12"}]
    bp = r.dispatch("GET", f"/jobs/{jid}/vertices/v1/backpressure", {}).body
    assert bp["backpressureLevel"] == "high" and bp["subtasks"][0]["ratio"] == 0.6
    wm = r.dispatch("GET", f"/jobs/{jid}/vertices/v1/watermarks", {}).body
    assert wm == [{"id": "0.currentInputWatermark", "value": "1000"},
                  {"id": "1.currentInputWatermark", "value": "1000"}]
    details = r.dispatch("GET", f"/jobs/{jid}", {}).body
    assert [v["metrics"]["write-records"] for v in details["vertices"]] == [24, 24]
    assert details["vertices"][0]["metrics"]["accumulated-backpressured-time"] == 12_000
    assert details["vertices"][0]["metrics"]["accumulated-busy-time"] == 6_000.0
    assert details["vertices"][0]["start-time"] == 1_000
    cps = r.dispatch("GET", f"/jobs/{jid}/checkpoints", {}).body
    assert [c["id"] for c in cps["history"]] == [3, 2, 1]  # newest first
    assert cps["latest"]["savepoint"]["id"] == 3 and cps["latest"]["failed"]["id"] == 2
    assert cps["latest"]["restored"]["id"] == 1
    one = r.dispatch("GET", f"/jobs/{jid}/checkpoints/details/1", {}).body
    assert one["tasks"]["v1"]["num_acknowledged_subtasks"] == 1
    assert r.dispatch("GET", f"/jobs/{jid}/metrics", {}).body == [{"id": "numRestarts"},
                                                                  {"id": "uptime"}]
    assert r.dispatch("GET", "/flowray/cluster-jobs", {}).body["jobs"][0]["name"] == "other"
    assert r.dispatch("GET", f"/jobs/{jid}/metrics", {"get": "numRestarts,nope"}).body == [
        {"id": "numRestarts", "value": "1"}]
    assert one["tasks"]["v1"]["subtasks"][0]["alignment"]["duration"] == 4
    exc = r.dispatch("GET", f"/jobs/{jid}/exceptions", {}).body["exceptionHistory"]
    assert exc["entries"][0]["exceptionName"] == "ValueError"
    assert exc["entries"][0]["taskName"] == "map -> Sink (1/2)"


def test_errors_are_flinks_json_with_4xx():
    job, r = _router()
    jid = job.job_id
    cases = {("GET", "/jobs/nope"): 404, ("GET", f"/jobs/{jid}/vertices/v9"): 404,
             ("GET", f"/jobs/{jid}/checkpoints/details/x"): 400,
             ("GET", f"/jobs/{jid}/checkpoints/details/99"): 404,
             ("DELETE", f"/jobs/{jid}"): 405, ("GET", "/no/such/path"): 404}
    for (method, path), status in cases.items():
        res = r.dispatch(method, path, {})
        assert res.status == status, (method, path, res.body)
        assert isinstance(res.body["errors"][0], str)
    bad = r.dispatch("POST", f"/jobs/{jid}/savepoints", {}, b"{not json")
    assert bad.status == 400 and "not JSON" in bad.body["errors"][0]
    wrong = r.dispatch("POST", f"/jobs/{jid}/stop", {}, json.dumps({"drain": "yes"}).encode())
    assert wrong.status == 400 and "'drain'" in wrong.body["errors"][0]
    assert r.dispatch("GET", f"/jobs/{jid}/exceptions", {"maxExceptions": "x"}).status == 400


def test_cancel_savepoint_and_stop_are_asynchronous_operations():
    actions = Actions()
    job, r = _router(actions)
    jid = job.job_id
    assert r.dispatch("PATCH", f"/jobs/{jid}", {"mode": "cancel"}).status == 202
    trigger = r.dispatch("POST", f"/jobs/{jid}/savepoints", {},
                         json.dumps({"target-directory": "/sp"}).encode()).body["request-id"]
    done = r.dispatch("GET", f"/jobs/{jid}/savepoints/{trigger}", {}).body
    assert done == {"status": {"id": "COMPLETED"}, "operation": {"location": "/sp/sp-1"}}
    trigger = r.dispatch("POST", f"/jobs/{jid}/stop", {},
                         json.dumps({"targetDirectory": "/bad", "drain": True}).encode()
                         ).body["request-id"]
    failed = r.dispatch("GET", f"/jobs/{jid}/savepoints/{trigger}", {}).body
    assert failed["operation"]["failure-cause"]["stack-trace"] == "a source declined"
    assert actions.calls == ["cancel", ("savepoint", "/sp", False, False),
                             ("savepoint", "/bad", True, True)]
    assert r.dispatch("GET", f"/jobs/{jid}/savepoints/nope", {}).status == 404


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url, method="GET", token=None):
    req = urllib.request.Request(url, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_the_server_serves_on_loopback_and_moves_on_from_a_taken_port():
    job, r = _router()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    server = RestServer(r, "127.0.0.1", [port, port + 1, port + 2, 0],
                        static={"/index.html": ("text/html", b"<html>ui</html>")}).start()
    try:
        assert server.port != port and server.token is None
        status, body = _request(f"{server.url}/jobs/overview")
        assert status == 200 and body["jobs"][0]["jid"] == job.job_id
        assert _request(f"{server.url}/jobs/{job.job_id}", "PATCH")[0] == 202  # loopback
        with urllib.request.urlopen(server.url + "/", timeout=10) as resp:
            assert resp.read() == b"<html>ui</html>"
        assert _request(f"{server.url}/nope")[0] == 404
    finally:
        server.close()
        taken.close()


def test_off_loopback_a_write_without_the_token_gets_401():
    job, r = _router()
    server = RestServer(r, "0.0.0.0", [0]).start()
    try:
        assert server.token  # generated
        base = f"http://127.0.0.1:{server.port}"
        assert _request(f"{base}/jobs/overview")[0] == 200  # reads need no token
        status, body = _request(f"{base}/jobs/{job.job_id}", "PATCH")
        assert status == 401 and "token" in body["errors"][0]
        assert _request(f"{base}/jobs/{job.job_id}", "PATCH", token="wrong")[0] == 401
        assert _request(f"{base}/jobs/{job.job_id}", "PATCH", token=server.token)[0] == 202
    finally:
        server.close()


def test_no_free_port_is_a_clear_error_and_ports_parse_like_flinks():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    _, r = _router()
    with pytest.raises(RestBindError, match="rest.port"):
        RestServer(r, "127.0.0.1", [port]).start()
    taken.close()
    assert ports_of("8081-8083,9000") == [8081, 8082, 8083, 9000]
    with pytest.raises(ValueError, match="a port, a range"):
        ports_of("http")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_a_server_started_in_the_background_reports_its_bind_error_when_waited_for():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    _, r = _router()
    try:
        server = RestServer(r, "127.0.0.1", [port]).start_in_background()
        with pytest.raises(RestBindError, match="rest.port"):
            server.wait_started(30.0)
        ok = RestServer(r, "127.0.0.1", [0]).start_in_background().wait_started(30.0)
        try:
            assert ok.port and _request(f"{ok.url}/jobs/overview")[0] == 200
        finally:
            ok.close()
    finally:
        taken.close()


def test_the_web_ui_ships_in_the_package_and_asks_only_for_paths_the_api_serves():
    import re

    from flowray.runtime.rest.web_ui import WEB_DIR, web_ui_files

    files = web_ui_files()
    assert {"/index.html", "/app.js", "/app.css"} <= set(files)
    assert b"/app.js" in files["/index.html"][1] and b"http" not in files["/index.html"][1]
    source = (WEB_DIR / "app.js").read_text()
    job, r = _router()
    fills = {"job.jid": job.job_id, "state.jid": job.job_id, "j.jid": job.job_id, "v.id": "v1",
             "vid": "v1",
             "state.checkpoint": "1"}
    paths = re.findall(r"get\(`([^`]+)`\)|get\(\"([^\"]+)\"\)", source)
    assert len(paths) >= 8
    for template in (a or b for a, b in paths):
        path = re.sub(r"\$\{([^}]+)\}", lambda m: fills.get(m.group(1), "x"), template)
        path, _, query = path.partition("?")
        res = r.dispatch("GET", path, dict(p.split("=", 1) for p in query.split("&") if p))
        assert res.status == 200, (template, res.body)
