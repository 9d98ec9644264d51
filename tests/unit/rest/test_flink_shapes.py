"""The REST API's JSON has the field names and JSON types of Flink's published REST API
(tests/unit/rest/flink_schemas: copied from Flink's rest_v1_dispatcher.yml, with the wire
format where the spec is wrong), for a job with running subtasks, checkpoints, a restore
and failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest

from flowray.runtime.rest.routes import AsyncOperations, job_router
from flowray.runtime.rest.snapshot import (FailureRecord, JobSnapshot, SubtaskSnapshot,
                                           VertexSnapshot)

SCHEMAS = Path(__file__).with_name("flink_schemas")

METRICS = {"numRecordsIn": 10, "numRecordsOut": 12, "numBytesIn": 100, "numBytesOut": 120,
           "numRecordsInPerSecond": 1.5, "idleTimeMsPerSecond": 100.0,
           "backPressuredTimeMsPerSecond": 600.0, "busyTimeMsPerSecond": 300.0,
           "map.currentInputWatermark": 1000, "map.currentOutputWatermark": 1000,
           "map.seen": 7, "accumulateIdleTimeMs": 1_000, "accumulateBackPressuredTimeMs": 6_000,
           "accumulateBusyTimeMs": 3_000}


def sample_job() -> JobSnapshot:
    def subtasks(n, status="RUNNING"):
        return tuple(SubtaskSnapshot(i, status, 0, "node-1", 1_000, -1, dict(METRICS))
                     for i in range(n))
    src = VertexSnapshot("v0", "Source: numbers", 2, 128, (), subtasks(2), True)
    mapper = VertexSnapshot("v1", "map -> Sink", 2, 128, (("v0", "HASH"),), subtasks(2))
    history = [
        {"checkpoint_id": 1, "status": "COMPLETED", "is_savepoint": False, "trigger_ms": 2_000,
         "end_ms": 2_050, "duration_ms": 50, "state_size": 4096, "failure_reason": None,
         "tasks": {"v0:0": {"bytes": 1000, "sync_ms": 1, "async_ms": 2, "alignment_ms": 0,
                            "ack_ms": 2_040},
                   "v1:0": {"bytes": 3096, "sync_ms": 1, "async_ms": 3, "alignment_ms": 4,
                            "ack_ms": 2_049}},
         "num_tasks": 4, "external_path": "/chk/1", "num_acknowledged": 2},
        {"checkpoint_id": 2, "status": "FAILED", "is_savepoint": False, "trigger_ms": 3_000,
         "end_ms": 3_010, "duration_ms": 10, "state_size": 0, "failure_reason": "declined",
         "tasks": {}, "num_tasks": 4, "external_path": "", "num_acknowledged": 0},
        {"checkpoint_id": 3, "status": "COMPLETED", "is_savepoint": True, "trigger_ms": 4_000,
         "end_ms": 4_070, "duration_ms": 70, "state_size": 5000, "failure_reason": None,
         "tasks": {}, "num_tasks": 4, "external_path": "/sp/3", "num_acknowledged": 4},
    ]
    return JobSnapshot(
        job_id="a" * 32, job_name="job", state="RUNNING", job_type="STREAMING",
        start_ms=1_000, end_ms=-1, now_ms=5_000,
        timestamps={"CREATED": 900, "RUNNING": 1_000}, vertices=(src, mapper),
        max_parallelism=128, config={"parallelism.default": "2"},
        checkpoint_counts={"triggered": 3, "completed": 2, "failed": 1, "in_progress": 0},
        checkpoint_history=history,
        latest_restore={"checkpoint_id": 1, "is_savepoint": False, "path": "/chk/1",
                        "restore_ms": 2_500},
        failures=(FailureRecord(2_400, "map -> Sink (1/2)", "ValueError", "boom",
                                "Traceback...\nValueError: boom"),),
        restarts=1, job_metrics={"uptime": 12_000, "numRestarts": 1})


class _Actions:
    def cancel(self):
        pass

    def savepoint(self, target, stop, drain):
        return "/sp/4", None


def _json_type_ok(schema_type: str, value: Any) -> bool:
    if value is None:
        return True  # Flink writes null where a value is not known yet
    return {"string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "boolean": isinstance(value, bool), "object": isinstance(value, dict),
            "array": isinstance(value, list)}.get(schema_type, True)


def _mismatches(schema: dict, value: Any, where: str = "") -> List[str]:
    t = schema.get("type")
    if t and not _json_type_ok(t, value):
        return [f"{where or '.'}: Flink's is {t}, ours {type(value).__name__} ({value!r})"]
    out: List[str] = []
    if t == "object" and isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if sub.get("recursion_cut"):
                continue
            if name not in value:
                out.append(f"{where}.{name}: missing")
            else:
                out.extend(_mismatches(sub, value[name], f"{where}.{name}"))
    if t == "array" and isinstance(value, list) and value and schema.get("items"):
        out.extend(_mismatches(schema["items"], value[0], f"{where}[0]"))
    if "enum" in schema and isinstance(value, str) and value not in schema["enum"]:
        out.append(f"{where}: {value!r} not one of {schema['enum']}")
    return out


def _ours(path: str, method: str = "GET") -> Any:
    job = sample_job()
    router = job_router(lambda: job, _Actions(), AsyncOperations(runner=lambda work: work()))
    concrete = (path.replace(":jobid", job.job_id).replace(":vertexid", "v1")
                .replace(":checkpointid", "1"))
    query = {"get": "numRecordsIn,busyTimeMsPerSecond"} if "metrics" in path else {}
    body = None
    if method == "POST":
        body = b"{}"
    if ":triggerid" in path:
        trigger = router.dispatch("POST", f"/jobs/{job.job_id}/savepoints", {}, b"{}").body
        concrete = concrete.replace(":triggerid", trigger["request-id"])
    res = router.dispatch(method, concrete, query, body)
    assert res.status in (200, 202), (path, res.body)
    return res.body


CASES = sorted(p.name for p in SCHEMAS.glob("*.json"))


@pytest.mark.parametrize("name", CASES)
def test_our_json_has_flinks_fields(name):
    spec = json.loads((SCHEMAS / name).read_text())
    schema = spec.get("response_wire") or spec.get("response")
    if not schema:
        pytest.skip("Flink's spec has no response body")
    ours = _ours(spec["path"], spec["method"])
    problems = _mismatches(schema, ours)
    assert not problems, "\n".join(problems)
