"""The job records masters keep in the GCS for the CLI: written once a second while the job
runs, once more with an expiry when it ends, dropped by readers once expired; a running
job's record that stopped being written reads as UNKNOWN. A manual clock, a dict as the
key-value store."""

from flowray.runtime.execution.job_store import (
    HISTORY_KEPT,
    JobRecordPublisher,
    decode_records,
    record_key,
)


class Clock:
    def __init__(self):
        self.s = 100.0

    def __call__(self):
        return self.s

    def wall_ms(self):
        return int(self.s * 1000)


def _publisher(store, clock):
    return JobRecordPublisher("j1", store.__setitem__, store.pop, clock, clock.wall_ms)


def test_a_running_job_is_written_once_a_second_and_ended_with_an_expiry():
    store, clock, snapshots = {}, Clock(), []

    def snapshot():
        snapshots.append(clock.s)
        return {"job_id": "j1", "status": "RUNNING", "start_ms": 1}, {"history": []}
    pub = _publisher(store, clock)
    assert pub.maybe_publish(snapshot) and not pub.maybe_publish(snapshot)
    clock.s += 0.5
    assert not pub.maybe_publish(snapshot)
    clock.s += 0.5
    assert pub.maybe_publish(snapshot)
    assert snapshots == [100.0, 101.0]   # the snapshot is taken only when it is written
    assert not pub.maybe_publish(snapshot, version=("RUNNING", 1))   # a change, too soon
    clock.s += 0.2
    assert pub.maybe_publish(snapshot, version=("RUNNING", 1))   # a change: written now
    clock.s += 0.3
    assert not pub.maybe_publish(snapshot, version=("RUNNING", 1))   # no change, < 1 s
    [job], expired = decode_records(store, clock.wall_ms())
    assert job["status"] == "RUNNING" and job["expires_ms"] is None and not expired

    history = [{"id": i} for i in range(HISTORY_KEPT + 5)]
    pub.publish_final({"job_id": "j1", "status": "FINISHED", "start_ms": 1},
                      {"history": history}, keep_ms=60_000)
    clock.s += 5
    assert not pub.maybe_publish(snapshot)   # nothing overwrites the final record
    [job], _ = decode_records(store, clock.wall_ms() + 59_999 - 5000)
    assert job["status"] == "FINISHED"
    assert job["checkpoint_stats"]["history"] == history[-HISTORY_KEPT:]
    assert decode_records(store, clock.wall_ms() + 55_000) == ([], [record_key("j1")])
    pub.delete()
    assert store == {}


def test_a_record_no_longer_written_reads_as_unknown_and_garbage_is_dropped():
    store, clock = {}, Clock()
    pub = _publisher(store, clock)
    pub.maybe_publish(lambda: ({"job_id": "j1", "status": "RUNNING"}, {}))
    store[b"jobs/other"] = b"not json"
    [job], expired = decode_records(store, clock.wall_ms() + 29_000)
    assert job["status"] == "RUNNING" and expired == [b"jobs/other"]
    [job], _ = decode_records(store, clock.wall_ms() + 31_000)
    assert job["status"] == "UNKNOWN"


def test_a_failing_store_never_stops_the_job_master():
    def broken(*args):
        raise ConnectionError("GCS away")
    pub = JobRecordPublisher("j1", broken, broken, Clock(), Clock().wall_ms)
    assert pub.maybe_publish(lambda: ({"job_id": "j1"}, {}))
    pub.publish_final({"job_id": "j1"}, {}, 1)
    pub.delete()
