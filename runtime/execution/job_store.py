"""Job records in the cluster's GCS, read without joining the cluster as a driver.

``flowray list``, ``info``, ``checkpoints``, ``ui`` and ``logs`` read these records through
a plain GCS client (no ``ray.init``), so they do not appear as jobs on Ray's Jobs page, as
Flink's CLI reads its cluster's REST API. Each job master writes its record
``jobs/<job id>`` in the GCS key-value store (namespace ``flowray``) every
:data:`PUBLISH_INTERVAL_S` while its job runs and once more when the job ends; the record
is the master's ``info()`` with its checkpoint statistics, the time it was written and the
time it expires (``jobstore.expiration-time`` after the job ended). A reader drops expired
records (and deletes them); a record of a job still running that has not been written for
:data:`STALE_S` is shown with status ``UNKNOWN`` (its master does not answer).

>>> now = 1_000_000
>>> records = {b"jobs/a": encode_record({"job_id": "a", "status": "RUNNING", "start_ms": 2},
...                                     {}, now - 1000, None),
...            b"jobs/b": encode_record({"job_id": "b", "status": "RUNNING", "start_ms": 1},
...                                     {}, now - 100_000, None),
...            b"jobs/c": encode_record({"job_id": "c", "status": "FINISHED", "start_ms": 0},
...                                     {}, now - 5000, now - 1)}
>>> live, expired = decode_records(records, now)
>>> [(j["job_id"], j["status"]) for j in live], expired
([('b', 'UNKNOWN'), ('a', 'RUNNING')], [b'jobs/c'])
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = ["KV_NAMESPACE", "KEY_PREFIX", "PUBLISH_INTERVAL_S", "STALE_S", "record_key",
           "encode_record", "decode_records", "JobRecordPublisher", "read_job_records"]

KV_NAMESPACE = b"flowray"
KEY_PREFIX = b"jobs/"
PUBLISH_INTERVAL_S = 1.0
#: the least time between two writes, however fast checkpoints come
MIN_GAP_S = 0.2
STALE_S = 30.0
#: the newest checkpoints a record keeps for `flowray checkpoints`
HISTORY_KEPT = 100

_ENDED = ("FINISHED", "FAILED", "CANCELED")


def record_key(job_id: str) -> bytes:
    return KEY_PREFIX + job_id.encode()


def encode_record(info: Mapping[str, Any], checkpoint_stats: Mapping[str, Any],
                  written_ms: int, expires_ms: Optional[int]) -> bytes:
    """One job's record: ``info`` with its checkpoint statistics (the newest
    :data:`HISTORY_KEPT`), when it was written and when it expires (``None``: running)."""
    stats = dict(checkpoint_stats)
    if isinstance(stats.get("history"), list):
        stats["history"] = stats["history"][-HISTORY_KEPT:]
    record = dict(info, checkpoint_stats=stats, written_ms=written_ms, expires_ms=expires_ms)
    return json.dumps(record, default=str).encode()


def decode_records(values: Mapping[bytes, bytes], now_ms: int
                   ) -> Tuple[List[Dict[str, Any]], List[bytes]]:
    """The job records (oldest job first; a stale running one as ``UNKNOWN``) and the keys
    of the expired ones."""
    jobs, expired = [], []
    for key, value in values.items():
        try:
            record = json.loads(value)
        except ValueError:
            expired.append(key)   # not ours to read: written by another version
            continue
        expires = record.get("expires_ms")
        if expires is not None and expires <= now_ms:
            expired.append(key)
            continue
        if record.get("status") not in _ENDED and \
                now_ms - int(record.get("written_ms") or 0) > STALE_S * 1000:
            record["status"] = "UNKNOWN"
        jobs.append(record)
    jobs.sort(key=lambda j: (j.get("start_ms") or 0, j.get("name") or ""))
    return jobs, expired


class JobRecordPublisher:
    """What a job master writes (see the module docstring): ``maybe_publish`` in its loop,
    ``publish_final`` when the job ended, ``delete`` when it exits. ``put`` and ``delete``
    are the GCS key-value calls; the clock is injectable for tests."""

    def __init__(self, job_id: str, put: Callable[[bytes, bytes], None],
                 delete: Callable[[bytes], None],
                 clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._key = record_key(job_id)
        self._put, self._delete = put, delete
        self._clock, self._wall_ms = clock, wall_ms
        self._last: Optional[float] = None
        self._version: Any = None
        self._lock = threading.Lock()   # one writer at a time; nothing after the final
        self._final = False

    def maybe_publish(self, snapshot: Callable[[], Tuple[Dict[str, Any], Dict[str, Any]]],
                      version: Any = None) -> bool:
        """Write the record if :data:`PUBLISH_INTERVAL_S` passed since the last write, or
        when ``version`` (e.g. the status and the checkpoint counts) changed and
        :data:`MIN_GAP_S` passed: a CLI call just after a checkpoint completed finds it."""
        with self._lock:
            if self._final:
                return False
            now = self._clock()
            if self._last is not None:
                since = now - self._last
                if since < MIN_GAP_S or (since < PUBLISH_INTERVAL_S
                                         and version == self._version):
                    return False
            self._last, self._version = now, version
            info, stats = snapshot()
            self._write(info, stats, None)
            return True

    def publish_final(self, info: Dict[str, Any], stats: Dict[str, Any],
                      keep_ms: int) -> None:
        """The ended job's record, kept ``keep_ms``; no write of :meth:`maybe_publish`
        comes after it."""
        with self._lock:
            self._final = True
            self._write(info, stats, self._wall_ms() + keep_ms)

    def _write(self, info: Dict[str, Any], stats: Dict[str, Any],
               expires_ms: Optional[int]) -> None:
        try:
            self._put(self._key, encode_record(info, stats, self._wall_ms(), expires_ms))
        except Exception:  # noqa: BLE001 - the job runs on; readers see a stale record
            pass

    def delete(self) -> None:
        try:
            self._delete(self._key)
        except Exception:  # noqa: BLE001 - readers drop it when it expires
            pass


def read_job_records(address: Optional[str]) -> List[Dict[str, Any]]:
    """Every job record of the cluster at ``address`` (default: ``RAY_ADDRESS``, else the
    local one), read through a GCS client: this process does not become a Ray driver.
    Raises :class:`NoRayClusterError` when there is no cluster or it refuses us."""
    from flowray.runtime.execution.cluster import (
        NoRayClusterError,
        check_reachable,
        gcs_address,
        gcs_client,
        gcs_error,
    )

    given = address or os.environ.get("RAY_ADDRESS")
    if given and given.startswith(("http://", "https://")):
        raise NoRayClusterError(
            f"{given} is a dashboard's URL: give the cluster's address instead (HEAD:6379, "
            "as `ray start --head` printed it)")
    gcs = gcs_address(given)
    if gcs is None:
        raise NoRayClusterError(
            "no running Ray cluster on this machine: start one with `ray start --head` (then "
            "use --address/RAY_ADDRESS if it is elsewhere)")
    check_reachable(gcs)
    try:
        client = gcs_client(gcs)
        keys = client.internal_kv_keys(KEY_PREFIX, KV_NAMESPACE)
        values = client.internal_kv_multi_get(keys, KV_NAMESPACE) if keys else {}
    except Exception as e:  # noqa: BLE001 - RpcError, authentication, timeouts
        raise gcs_error(gcs, e) from None
    jobs, expired = decode_records(values, int(time.time() * 1000))
    for key in expired:
        try:
            client.internal_kv_del(key, False, KV_NAMESPACE)
        except Exception:  # noqa: BLE001 - another reader deleted it first
            pass
    return jobs
