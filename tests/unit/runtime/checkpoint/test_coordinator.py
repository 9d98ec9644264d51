"""The checkpoint coordinator, pure: ManualClock, in-memory storage, a recording gateway."""

from flowray.runtime.checkpoint.pending import AckResult, PendingCheckpoint
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.snapshot import (
    TaskStateSnapshot,
)

from tests.support.coordinator import (
    checkpoint_files,
    ALL,
    JOB,
    MAP0,
    MAP1,
    SINK,
    SRC0,
    SRC1,
    Harness,
    R,
    snapshot,
)

# -----------------------------------------------------------------------------------------
# happy path
# -----------------------------------------------------------------------------------------

def test_periodic_trigger_all_acks_complete():
    h = Harness(interval_ms=1000)
    h.advance(999)
    assert h.gateway.triggers == []
    h.advance(1)
    # only sources are triggered; everything not finished must acknowledge
    assert h.gateway.triggers == [("src:0", 1, 11_000, False), ("src:1", 1, 11_000, False)]
    assert h.coord.pending_ids() == [1]
    assert h.coord.pending(1).not_yet_acknowledged == set(ALL)

    h.clock.advance(84)
    results = h.ack(1, [SRC0, SRC1, MAP0, MAP1])
    assert results == [AckResult.SUCCESS] * 4
    assert h.gateway.completes == [] and h.coord.latest_completed() is None
    assert h.ack(1, [SINK]) == [AckResult.SUCCESS]

    cp = h.coord.latest_completed()
    assert cp.checkpoint_id == 1 and cp.job_id == JOB
    assert cp.trigger_ms == 11_000 and cp.completed_ms == 11_084
    assert set(cp.task_states) == {t.key for t in ALL}
    assert cp.external_path == h.storage.metadata_path(1)
    # the metadata was written and reads back
    assert h.completed_on_storage() == [1]
    back = h.storage.read_metadata(h.storage.checkpoint_dir(1))
    assert back.task_states == cp.task_states and back.checkpoint_id == 1
    # every task is told
    assert h.gateway.completed(1) == sorted(t.key for t in ALL)
    assert h.coord.store.all() == [cp]
    assert h.coord.pending_ids() == []
    assert h.stats.counts() == {"triggered": 1, "completed": 1, "failed": 0,
                                "in_progress": 0, "not_triggered": 0}
    rec = h.stats.history()[-1]
    assert rec["status"] == "COMPLETED" and rec["duration_ms"] == 84
    assert rec["tasks"]["map:0"]["alignment_ms"] == 3.0
    assert rec["state_size"] == cp.state_size() > 0


def test_ids_start_at_one_and_failed_preconditions_consume_none():
    h = Harness(running=False)
    r = h.coord.trigger_checkpoint()
    assert r.checkpoint_id is None and r.failure is R.NOT_ALL_TASKS_RUNNING
    h.coord.tasks_running(ALL)
    assert h.trigger() == 1
    assert h.coord.trigger_checkpoint(periodic=True).failure is R.TOO_MANY_CONCURRENT
    assert h.trigger(periodic=False) == 2
    assert h.trigger(is_savepoint=True) == 3
    assert h.coord.pending_ids() == [1, 2, 3]


def test_next_periodic_trigger_is_trigger_time_plus_interval():
    h = Harness(interval_ms=1000, max_concurrent=5)
    h.advance(1000)
    assert h.coord.pending_ids() == [1]
    h.advance(500)
    h.ack(1)
    h.advance(499)
    assert h.coord.pending_ids() == []
    h.advance(1)
    assert h.coord.pending_ids() == [2]


def test_disabled_checkpointing_never_triggers_periodically_but_savepoints_work():
    h = Harness(interval_ms=None)
    assert not h.settings.enabled
    h.advance(1_000_000)
    assert h.gateway.triggers == []
    assert h.trigger(is_savepoint=True) == 1


# -----------------------------------------------------------------------------------------
# acks
# -----------------------------------------------------------------------------------------

def test_duplicate_unknown_and_discarded_acks():
    h = Harness()
    cid = h.trigger()
    assert h.ack(cid, [SRC0]) == [AckResult.SUCCESS]
    assert h.ack(cid, [SRC0]) == [AckResult.DUPLICATE]
    stranger = SubtaskId("nope", 0)
    assert h.coord.receive_acknowledge(stranger, cid, snapshot(), {}) is AckResult.UNKNOWN
    assert h.coord.receive_acknowledge(SRC1, 99, snapshot(), {}) is AckResult.UNKNOWN
    assert h.coord.pending(cid).not_yet_acknowledged == {SRC1, MAP0, MAP1, SINK}

    h.coord.receive_decline(MAP0, cid, R.DECLINED)
    # a late ack of the aborted checkpoint: discarded, changes nothing, files cleaned
    late = h.storage.task_state_path(cid, MAP1, "keyed")
    h.storage.write_file(late, b"late state")
    assert h.ack(cid, [MAP1]) == [AckResult.DISCARDED]
    assert h.coord.latest_completed() is None and h.coord.pending_ids() == []
    assert checkpoint_files(h.storage) == {}
    assert h.gateway.completes == []


def test_pending_checkpoint_rules():
    p = PendingCheckpoint(3, 100, {SRC0, MAP0}, {SINK})
    assert p.task_states == {"sink:0": TaskStateSnapshot.finished_task()}
    assert p.acknowledge(SINK, snapshot(), {}) is AckResult.UNKNOWN  # finished: not asked
    assert p.acknowledge(SRC0, snapshot("a"), {"bytes": 1}) is AckResult.SUCCESS
    assert p.task_metrics == {"src:0": {"bytes": 1}}
    assert not p.is_fully_acknowledged and p.not_yet_acknowledged == {MAP0}
    p.abort(R.EXPIRED)
    assert p.is_discarded and p.failure_reason is R.EXPIRED
    assert p.acknowledge(MAP0, snapshot(), {}) is AckResult.DISCARDED
    assert not p.is_fully_acknowledged


# -----------------------------------------------------------------------------------------
# timeouts, pauses, concurrency
# -----------------------------------------------------------------------------------------

def test_timeout_expires_aborts_and_notifies():
    h = Harness(interval_ms=10_000, timeout_ms=500, tolerable_failures=5)
    cid = h.trigger()
    h.storage.write_file(h.storage.task_state_path(cid, SRC0, "keyed"), b"partial")
    h.ack(cid, [SRC0, SRC1])
    h.advance(499)
    assert h.coord.pending_ids() == [cid]
    h.advance(1)
    assert h.coord.pending_ids() == []
    assert h.gateway.aborted(cid) == sorted((t.key, R.EXPIRED) for t in ALL)
    assert checkpoint_files(h.storage) == {}  # its directory is gone
    rec = h.stats.history()[-1]
    assert rec["status"] == "FAILED" and rec["failure_reason"] == R.EXPIRED.value
    assert h.coord.consecutive_failures == 1 and h.failures == []


def test_min_pause_delays_next_periodic_trigger():
    h = Harness(interval_ms=100, min_pause_ms=50)
    h.advance(100)
    assert h.coord.pending_ids() == [1]
    h.advance(80)
    h.ack(1)                          # completes at +180
    h.advance(20)                     # +200: due, but only 20 ms since completion
    assert h.coord.pending_ids() == []
    assert h.coord.next_trigger_ms == 10_000 + 230
    r = h.coord.trigger_checkpoint(periodic=True)
    assert r.failure is R.MINIMUM_PAUSE and r.checkpoint_id is None
    h.advance(29)
    assert h.coord.pending_ids() == []
    h.advance(1)                      # +230 = completion + min pause
    assert h.coord.pending_ids() == [2]
    # a forced checkpoint or a savepoint ignores the pause
    h.ack(2)
    assert h.trigger(periodic=False) == 3
    h.ack(3)
    assert h.trigger(is_savepoint=True) == 4


def test_min_pause_implies_one_concurrent_checkpoint():
    h = Harness(interval_ms=100, min_pause_ms=10, max_concurrent=3)
    h.advance(100)
    h.advance(100)
    assert h.coord.pending_ids() == [1]


def test_max_concurrent_blocks_periodic_but_not_savepoints():
    h = Harness(interval_ms=1000, max_concurrent=1, timeout_ms=60_000)
    h.advance(1000)
    assert h.coord.pending_ids() == [1]
    h.advance(1000)
    h.advance(1000)
    assert h.coord.pending_ids() == [1]
    assert h.coord.trigger_checkpoint().failure is R.TOO_MANY_CONCURRENT
    assert h.trigger(is_savepoint=True) == 2
    assert h.coord.pending_ids() == [1, 2]
    # the blocked periodic request stays due: the next tick after #1 ends triggers
    h.clock.advance(10)
    h.ack(1)
    assert h.coord.pending_ids() == [2]
    h.advance(0)
    # savepoint #2 still pending and counts toward max concurrent
    assert h.coord.pending_ids() == [2]
    h.ack(2)
    h.advance(0)
    assert h.coord.pending_ids() == [3]


def test_max_concurrent_two():
    h = Harness(interval_ms=1000, max_concurrent=2)
    h.advance(1000)
    h.advance(1000)
    h.advance(1000)
    assert h.coord.pending_ids() == [1, 2]


# -----------------------------------------------------------------------------------------
# failures
# -----------------------------------------------------------------------------------------

def test_tolerable_failures_zero_fails_on_first_counted_failure():
    h = Harness(tolerable_failures=0)
    cid = h.trigger()
    h.coord.receive_decline(MAP0, cid, R.DECLINED, "boom")
    assert len(h.failures) == 1
    assert h.failures[0].startswith("Exceeded checkpoint tolerable failure threshold (0): "
                                    "Checkpoint was declined.")
    assert "boom" in h.failures[0]


def test_tolerable_failures_two_and_success_resets():
    h = Harness(tolerable_failures=2, timeout_ms=100, max_concurrent=10)

    def fail_one(how):
        cid = h.trigger(periodic=False)
        if how == "expire":
            h.advance(100)
        else:
            h.coord.receive_decline(SINK, cid, how)
        return cid

    fail_one("expire")
    fail_one("ASYNC_FAILURE")
    assert h.failures == [] and h.coord.consecutive_failures == 2
    h.ack(h.trigger(periodic=False))  # a success resets the counter
    assert h.coord.consecutive_failures == 0
    fail_one("expire")
    fail_one(R.DECLINED)
    assert h.failures == []
    # reasons that do not count
    fail_one("SUBSUMED")
    fail_one("DECLINED_ON_CANCELLATION")
    h.trigger(periodic=False)
    h.coord.tasks_not_running([SINK])
    h.coord.tasks_running([SINK])
    assert h.failures == [] and h.coord.consecutive_failures == 2
    fail_one("expire")  # the third counted failure in a row
    assert len(h.failures) == 1
    assert "threshold (2)" in h.failures[0] and R.EXPIRED.value in h.failures[0]
    assert h.coord.consecutive_failures == 0  # reset after failing the job


def test_io_failure_writing_metadata_aborts_and_counts():
    class BrokenStorage(MemoryCheckpointStorage):
        def write_metadata(self, checkpoint):
            raise OSError("bucket unavailable")

    h = Harness(storage=BrokenStorage(JOB), tolerable_failures=0)
    cid = h.trigger()
    h.ack(cid)
    assert h.coord.latest_completed() is None and h.coord.pending_ids() == []
    assert h.gateway.aborted(cid) == sorted((t.key, R.IO_FAILURE) for t in ALL)
    assert h.gateway.completes == []
    assert len(h.failures) == 1 and R.IO_FAILURE.value in h.failures[0]
    assert "bucket unavailable" in h.failures[0]


def test_savepoint_expiry_does_not_count():
    h = Harness(tolerable_failures=0, timeout_ms=100)
    h.trigger(is_savepoint=True)
    h.advance(100)
    assert h.failures == [] and h.coord.pending_ids() == []


def test_decline_aborts_with_given_reason():
    h = Harness(tolerable_failures=3)
    cid = h.trigger()
    h.coord.receive_decline(MAP1, cid, "ASYNC_FAILURE", "OSError: no space")
    assert h.coord.pending_ids() == []
    assert h.gateway.aborted(cid) == sorted((t.key, R.ASYNC_FAILURE) for t in ALL)
    rec = h.stats.history()[-1]
    assert rec["failure_reason"] == f"{R.ASYNC_FAILURE.value} OSError: no space"
    # declines for unknown ids / tasks change nothing
    cid2 = h.trigger()
    h.coord.receive_decline(MAP1, 99)
    h.coord.receive_decline(SubtaskId("x", 0), cid2)
    assert h.coord.pending_ids() == [cid2]
    h.coord.receive_decline(MAP1, cid2)  # no reason: DECLINED
    assert h.gateway.aborted(cid2)[0][1] is R.DECLINED


def test_unreachable_task_fails_the_trigger():
    h = Harness(tolerable_failures=0)
    h.gateway.fail_trigger_for.add(SRC1)
    r = h.coord.trigger_checkpoint()
    assert r.checkpoint_id == 1
    assert h.coord.pending_ids() == []
    assert h.stats.history()[-1]["failure_reason"] == R.TRIGGER_FAILURE.value
    assert h.failures == []  # not counted


# -----------------------------------------------------------------------------------------
# subsumption and retention
# -----------------------------------------------------------------------------------------

def test_num_retained_one_discards_older_checkpoint():
    h = Harness(num_retained=1)
    h.ack(h.trigger())
    assert h.completed_on_storage() == [1]
    h.ack(h.trigger())
    assert h.completed_on_storage() == [2]
    assert not any(p.startswith(h.storage.checkpoint_dir(1) + "/") for p in h.storage.files)
    assert [c.checkpoint_id for c in h.coord.store.all()] == [2]


def test_num_retained_two():
    h = Harness(num_retained=2)
    for _ in range(4):
        h.ack(h.trigger())
    assert h.completed_on_storage() == [3, 4]
    assert [c.checkpoint_id for c in h.coord.store.all()] == [3, 4]
    assert h.coord.latest_completed().checkpoint_id == 4


def test_newer_completion_aborts_older_pending_as_subsumed():
    h = Harness(max_concurrent=3, tolerable_failures=0)
    one, two = h.trigger(), h.trigger()
    h.storage.write_file(h.storage.task_state_path(one, SRC0, "keyed"), b"s")
    h.ack(one, [SRC0])
    h.ack(two)
    assert h.coord.pending_ids() == []
    assert h.gateway.aborted(one) == sorted((t.key, R.SUBSUMED) for t in ALL)
    assert h.completed_on_storage() == [two]
    assert not any(p.startswith(h.storage.checkpoint_dir(one) + "/") for p in h.storage.files)
    assert h.failures == [] and h.coord.consecutive_failures == 0
    assert h.stats.counts()["failed"] == 1
    assert h.coord.receive_acknowledge(SRC1, one, snapshot(), {}) is AckResult.DISCARDED


def test_older_checkpoint_may_complete_while_newer_pending():
    h = Harness(max_concurrent=3, num_retained=1)
    one, two = h.trigger(), h.trigger()
    h.ack(one)
    assert h.coord.pending_ids() == [two]
    assert h.coord.latest_completed().checkpoint_id == one
    h.ack(two)
    assert h.coord.latest_completed().checkpoint_id == two
    assert h.completed_on_storage() == [two]


def test_savepoints_are_kept_apart():
    h = Harness(max_concurrent=3, num_retained=1)
    one = h.trigger()
    sp = h.trigger(is_savepoint=True)
    assert h.gateway.triggers[-1][3] is True
    h.ack(sp)
    # a savepoint neither subsumes pending checkpoints nor commits side effects
    assert h.coord.pending_ids() == [one]
    assert h.gateway.completes == []
    assert h.coord.latest_completed() is None
    assert [s.checkpoint_id for s in h.coord.store.savepoints()] == [sp]
    h.ack(one)
    h.ack(h.trigger())
    assert h.completed_on_storage() == [sp, 3]  # retention never deletes a savepoint
    assert h.storage.read_metadata(h.storage.checkpoint_dir(sp)).is_savepoint
