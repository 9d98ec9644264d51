"""The checkpoint coordinator, pure: ManualClock, in-memory storage, a recording gateway."""

import pickle

import pytest

from flowray.runtime.checkpoint.pending import AckResult, PendingCheckpoint
from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.completed import CompletedCheckpoint, CompletedCheckpointStore
from flowray.runtime.checkpoint.plan import TaskStatus, compute_checkpoint_plan
from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.common.clock import ManualClock
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.snapshot import (
    SPLIT_DISTRIBUTE,
    OperatorStateEntry,
    OperatorSubtaskState,
    TaskStateSnapshot,
)
from tests.support.gateways import RecordingGateway

R = CheckpointFailureReason
JOB = "job"

# src:0, src:1 --all-to-all--> map:0, map:1 --> sink:0
SRC0, SRC1 = SubtaskId("src", 0), SubtaskId("src", 1)
MAP0, MAP1 = SubtaskId("map", 0), SubtaskId("map", 1)
SINK = SubtaskId("sink", 0)
TOPOLOGY = {SRC0: set(), SRC1: set(), MAP0: {SRC0, SRC1}, MAP1: {SRC0, SRC1},
            SINK: {MAP0, MAP1}}
ALL = [SRC0, SRC1, MAP0, MAP1, SINK]


class Harness:
    def __init__(self, topology=None, start_ms=10_000, running=True, storage=None,
                 store=None, **settings):
        settings.setdefault("interval_ms", 1000)
        self.settings = CheckpointSettings(**settings)
        self.topology = TOPOLOGY if topology is None else topology
        self.clock = ManualClock(start_ms)
        self.storage = storage if storage is not None else MemoryCheckpointStorage(JOB)
        self.gateway = RecordingGateway()
        self.failures = []
        self.stats = CheckpointStatsTracker()
        self.coord = CheckpointCoordinator(JOB, self.settings, self.topology, self.storage,
                                           self.gateway, self.clock, self.failures.append,
                                           stats=self.stats, store=store)
        if running:
            self.coord.tasks_running(self.topology)

    def advance(self, ms):
        self.clock.advance(ms)
        self.coord.tick()

    def trigger(self, **kw):
        result = self.coord.trigger_checkpoint(**kw)
        assert result.failure is None, result
        return result.checkpoint_id

    def ack(self, checkpoint_id, tasks=None, state=None, metrics=None):
        results = []
        pending = self.coord.pending(checkpoint_id)
        if tasks is None:
            tasks = sorted(pending.not_yet_acknowledged) if pending else []
        for t in tasks:
            results.append(self.coord.receive_acknowledge(
                t, checkpoint_id, state if state is not None else snapshot(t.key),
                metrics if metrics is not None else {"sync_ms": 1.0, "async_ms": 2.0,
                                                     "alignment_ms": 3.0, "bytes": 4}))
        return results

    def completed_on_storage(self):
        return self.storage.list_completed()


def snapshot(tag="x", input_ended=False):
    return TaskStateSnapshot(
        {"op": OperatorSubtaskState({"s": OperatorStateEntry(SPLIT_DISTRIBUTE,
                                                             [tag.encode()])})},
        input_ended=input_ended)


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
    assert h.storage.files == {}
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
    assert h.storage.files == {}  # its directory is gone
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
    cid = h.trigger(periodic=False)
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


def test_completed_checkpoint_store():
    store = CompletedCheckpointStore(2)
    cps = [CompletedCheckpoint(JOB, n, 0, 0, {}) for n in (1, 2, 3)]
    assert store.add(cps[0]) == [] and store.add(cps[1]) == []
    assert store.add(cps[2]) == [cps[0]]
    assert store.latest() is cps[2]
    assert store.add(CompletedCheckpoint(JOB, 4, 0, 0, {}, is_savepoint=True)) == []
    assert store.latest() is cps[2] and store.max_checkpoint_id() == 4
    with pytest.raises(ValueError):
        CompletedCheckpointStore(0)


def test_ids_continue_after_existing_checkpoints():
    storage = MemoryCheckpointStorage(JOB)
    for n in (1, 2, 3):
        storage.write_metadata(CompletedCheckpoint(JOB, n, 0, 0, {}))
    h = Harness(storage=storage)
    assert h.trigger() == 4
    store = CompletedCheckpointStore(1)
    store.add(CompletedCheckpoint(JOB, 9, 0, 0, {}))
    assert Harness(store=store).trigger() == 10


# -----------------------------------------------------------------------------------------
# task status
# -----------------------------------------------------------------------------------------

def test_tasks_not_running_aborts_and_blocks_until_running():
    h = Harness(interval_ms=1000, tolerable_failures=0)
    cid = h.trigger()
    h.coord.tasks_not_running(ALL)
    assert h.coord.pending_ids() == []
    assert h.stats.history()[-1]["failure_reason"] == R.TASK_FAILURE.value
    assert h.gateway.aborts == []     # the tasks are going away: nobody is told
    assert h.storage.files == {}
    assert h.failures == []
    h.advance(5000)
    assert h.coord.pending_ids() == []
    assert h.coord.trigger_checkpoint().failure is R.NOT_ALL_TASKS_RUNNING
    assert h.coord.trigger_checkpoint(is_savepoint=True).failure is R.NOT_ALL_TASKS_RUNNING
    h.coord.tasks_running(ALL)        # restarts the timer: now + interval
    h.advance(999)
    assert h.coord.pending_ids() == []
    h.advance(1)
    assert h.coord.pending_ids() == [cid + 1]


def test_region_restart_notifies_only_tasks_that_keep_running():
    h = Harness()
    cid = h.trigger()
    h.coord.tasks_not_running([MAP1, SINK])
    assert h.gateway.aborted(cid) == sorted(
        (t.key, R.TASK_FAILURE) for t in (SRC0, SRC1, MAP0))
    assert h.coord.trigger_checkpoint().failure is R.NOT_ALL_TASKS_RUNNING


def test_finished_source_makes_its_downstream_a_trigger_root():
    h = Harness()
    h.coord.task_finished(SRC0)
    h.coord.task_finished(SRC1)
    cid = h.trigger()
    assert h.gateway.triggered(cid) == ["map:0", "map:1"]
    assert h.coord.pending(cid).not_yet_acknowledged == {MAP0, MAP1, SINK}
    assert h.coord.receive_acknowledge(SRC0, cid, snapshot(), {}) is AckResult.UNKNOWN
    h.ack(cid)
    cp = h.coord.latest_completed()
    assert cp.task_states["src:0"].finished and cp.task_states["src:1"].finished
    assert not cp.task_states["map:0"].finished
    assert h.gateway.completed(cid) == ["map:0", "map:1", "sink:0"]  # not the finished


def test_one_finished_source_is_not_enough_for_a_root():
    h = Harness()
    h.coord.task_finished(SRC0)
    cid = h.trigger()
    assert h.gateway.triggered(cid) == ["src:1"]


def test_task_finished_during_pending_checkpoint_acks_it_as_finished():
    h = Harness()
    cid = h.trigger()
    h.ack(cid, [SRC0, MAP0, MAP1, SINK])
    h.coord.task_finished(SRC1)
    cp = h.coord.latest_completed()
    assert cp.checkpoint_id == cid
    assert cp.task_states["src:1"] == TaskStateSnapshot.finished_task()
    assert h.gateway.completed(cid) == ["map:0", "map:1", "sink:0", "src:0"]


def test_all_tasks_finished_stops_checkpointing():
    h = Harness(interval_ms=1000)
    for t in ALL:
        h.coord.task_finished(t)
    assert h.coord.trigger_checkpoint().failure is R.ALL_TASKS_FINISHED
    assert h.coord.trigger_checkpoint(is_savepoint=True).failure is R.ALL_TASKS_FINISHED
    h.advance(10_000)
    assert h.gateway.triggers == []


def test_task_ended_input_is_triggered_directly_for_pending_checkpoints():
    h = Harness(max_concurrent=2)
    one, two = h.trigger(), h.trigger()
    h.ack(one, [SRC0, SRC1, MAP0])
    h.coord.task_ended_input(MAP0)   # acked #1, was not triggered for #2
    h.coord.task_ended_input(SRC0)   # already triggered for both as a source
    assert [(k, c) for k, c, _, _ in h.gateway.triggers] == [
        ("src:0", 1), ("src:1", 1), ("src:0", 2), ("src:1", 2), ("map:0", 2)]
    # the direct trigger carries the checkpoint's own timestamp
    assert h.gateway.triggers[-1][2] == h.coord.pending(two).trigger_ms
    assert h.coord.pending_ids() == [one, two]  # not all ended: no final checkpoint


def test_all_ended_input_triggers_final_checkpoint_at_once():
    h = Harness(interval_ms=60_000)
    for t in (SRC0, SRC1, MAP0, MAP1):
        h.coord.task_ended_input(t)
    assert h.coord.pending_ids() == []
    h.coord.task_ended_input(SINK)
    assert h.coord.pending_ids() == [1]
    assert h.gateway.triggered(1) == sorted(t.key for t in ALL)  # nobody gets a barrier
    h.ack(1, state=snapshot(input_ended=True))
    assert h.gateway.completed(1) == sorted(t.key for t in ALL)
    assert h.coord.pending_ids() == []   # that was the final one: no other
    for t in ALL:
        h.coord.task_finished(t)
    h.advance(60_000)
    assert h.coord.pending_ids() == []


def test_final_checkpoint_waits_for_the_pending_one():
    h = Harness(interval_ms=60_000, max_concurrent=1)
    one = h.trigger()
    h.ack(one, [SRC0, SRC1])          # the sources acked before their input ended
    for t in ALL:
        h.coord.task_ended_input(t)
    assert h.coord.pending_ids() == [one]  # max concurrent: wait
    h.ack(one)
    assert h.coord.pending_ids() == [one + 1]  # triggered as soon as #1 finished
    final = h.coord.pending(one + 1)
    assert final.tasks_triggered == set(ALL)


def test_final_checkpoint_that_expires_is_triggered_again():
    h = Harness(interval_ms=600_000, timeout_ms=100, tolerable_failures=10)
    for t in ALL:
        h.coord.task_ended_input(t)
    assert h.coord.pending_ids() == [1]
    h.advance(100)
    assert h.coord.pending_ids() == [2]


def test_finished_and_ended_tasks_after_final_checkpoint():
    # sink finishes first (it committed), the rest follow; no extra checkpoints
    h = Harness(interval_ms=600_000)
    for t in ALL:
        h.coord.task_ended_input(t)
    h.ack(1, state=snapshot(input_ended=True))
    h.coord.task_finished(SINK)
    h.coord.task_finished(MAP0)
    assert h.coord.pending_ids() == []


def test_shutdown_aborts_pending_without_notifying():
    h = Harness(max_concurrent=2)
    h.trigger()
    h.trigger(is_savepoint=True)
    h.coord.shutdown()
    assert h.coord.pending_ids() == [] and h.gateway.aborts == []
    assert [r["failure_reason"] for r in h.stats.history()] == [R.COORDINATOR_SHUTDOWN.value] * 2
    assert h.coord.trigger_checkpoint().failure is R.COORDINATOR_SHUTDOWN
    h.advance(100_000)
    assert len(h.gateway.triggers) == 4


def test_unknown_subtask_in_status_calls_is_an_error():
    h = Harness()
    with pytest.raises(KeyError, match="ghost:0"):
        h.coord.task_finished(SubtaskId("ghost", 0))
    with pytest.raises(ValueError, match="unknown subtask"):
        CheckpointCoordinator(JOB, CheckpointSettings(), {SRC0: {SubtaskId("x", 0)}},
                              MemoryCheckpointStorage(JOB), RecordingGateway(),
                              ManualClock(), lambda m: None)


# -----------------------------------------------------------------------------------------
# plan
# -----------------------------------------------------------------------------------------

A, B, C, D = (SubtaskId(v, 0) for v in "abcd")
DIAMOND = {A: set(), B: {A}, C: {A}, D: {B, C}}


def _plan(**statuses):
    st = {SubtaskId(k, 0): v for k, v in statuses.items()}
    plan = compute_checkpoint_plan(DIAMOND, st)
    names = lambda s: sorted(t.vertex_id for t in s)  # noqa: E731
    return names(plan.tasks_to_trigger), names(plan.tasks_to_ack), names(plan.finished)


RUN, END, FIN = TaskStatus.RUNNING, TaskStatus.ENDED_INPUT, TaskStatus.FINISHED


@pytest.mark.parametrize("statuses,expected", [
    (dict(a=RUN, b=RUN, c=RUN, d=RUN), (["a"], ["a", "b", "c", "d"], [])),
    (dict(a=FIN, b=RUN, c=RUN, d=RUN), (["b", "c"], ["b", "c", "d"], ["a"])),
    (dict(a=END, b=RUN, c=RUN, d=RUN), (["a", "b", "c"], ["a", "b", "c", "d"], [])),
    (dict(a=FIN, b=END, c=RUN, d=RUN), (["b", "c"], ["b", "c", "d"], ["a"])),
    (dict(a=FIN, b=FIN, c=END, d=RUN), (["c", "d"], ["c", "d"], ["a", "b"])),
    (dict(a=FIN, b=FIN, c=FIN, d=END), (["d"], ["d"], ["a", "b", "c"])),
    (dict(a=FIN, b=FIN, c=FIN, d=FIN), ([], [], ["a", "b", "c", "d"])),
])
def test_plan_on_diamond(statuses, expected):
    assert _plan(**statuses) == expected


# -----------------------------------------------------------------------------------------
# settings, reasons, stats
# -----------------------------------------------------------------------------------------

def test_settings_from_config():
    s = CheckpointSettings.from_config({
        "execution.checkpointing.interval": "5 s",
        "execution.checkpointing.mode": "at-least-once",
        "execution.checkpointing.timeout": "1 min",
        "execution.checkpointing.min-pause": "200 ms",
        "execution.checkpointing.max-concurrent-checkpoints": "3",
        "execution.checkpointing.tolerable-failed-checkpoints": "2",
        "state.checkpoints.num-retained": "4",
    })
    assert s == CheckpointSettings(5000, "AT_LEAST_ONCE", 60_000, 200, 3, 2, 4)
    assert s.enabled
    d = CheckpointSettings.from_config({})
    assert (d.interval_ms, d.mode, d.timeout_ms, d.min_pause_ms, d.max_concurrent,
            d.tolerable_failures, d.num_retained) == (None, "EXACTLY_ONCE", 600_000, 0, 1, 0, 1)
    assert not d.enabled
    with pytest.raises(ValueError):
        CheckpointSettings(interval_ms=0)


def test_failure_reasons():
    counted = {r for r in R if r.counts_as_failure}
    assert counted == {R.IO_FAILURE, R.ASYNC_FAILURE, R.DECLINED, R.EXPIRED}
    assert len({r.value for r in R}) == len(list(R))  # texts are distinct (no aliases)
    assert R.parse("expired") is R.EXPIRED
    assert R.parse(R.SUBSUMED) is R.SUBSUMED
    assert R.parse("Checkpoint expired before completing.") is R.EXPIRED
    assert R.parse("something new") is R.DECLINED and R.parse(None) is R.DECLINED


def test_completed_checkpoint_pickles():
    h = Harness()
    h.ack(h.trigger())
    cp = h.coord.latest_completed()
    back = pickle.loads(pickle.dumps(cp))
    assert back == cp and back.state_size() == cp.state_size()


def test_stats_tracker():
    t = CheckpointStatsTracker(max_records=5)
    assert t.summary() == "0 checkpoints completed, 0 failed"
    assert t.percentiles("duration_ms") == {}
    for n in range(1, 11):
        t.report_triggered(n, trigger_ms=n * 1000, is_savepoint=False, num_tasks=1)
        t.report_acknowledged(n, "a:0", {"alignment_ms": n, "bytes": 10})
        t.report_completed(n, end_ms=n * 1000 + 10 * n, state_size=2048)
    t.report_triggered(11, trigger_ms=20_000, is_savepoint=True)
    t.report_failed(11, end_ms=20_500, reason="Checkpoint expired before completing.")
    t.report_triggered(12, trigger_ms=21_000, is_savepoint=False)
    assert t.counts() == {"triggered": 12, "completed": 10, "failed": 1, "in_progress": 1,
                          "not_triggered": 0}
    hist = t.history()
    assert [h["checkpoint_id"] for h in hist] == [8, 9, 10, 11, 12]  # bounded
    assert [h["checkpoint_id"] for h in t.history(limit=2)] == [11, 12]
    assert hist[-2]["status"] == "FAILED" and hist[-2]["duration_ms"] == 500
    assert hist[0]["tasks"] == {"a:0": {"alignment_ms": 8, "bytes": 10}}
    pickle.dumps(hist)
    assert t.percentiles("duration_ms") == {"p50": 90.0, "p90": 100.0, "p99": 100.0}
    assert t.percentiles("alignment_ms")["p50"] == 9.0
    assert t.summary() == ("10 checkpoints completed, 1 failed; last #10 in 100 ms, 2.0 KB; "
                           "p50 90 ms, p99 100 ms; 1 in progress")
    # reports about unknown or already finished checkpoints are ignored
    t.report_completed(11, end_ms=0, state_size=0)
    t.report_failed(10, end_ms=0, reason="x")
    t.report_acknowledged(99, "a:0", {})
    assert t.counts()["completed"] == 10 and t.counts()["failed"] == 1


def test_without_storage_checkpoints_fail_with_io_failure():
    h = Harness(interval_ms=None, tolerable_failures=0)
    coord = CheckpointCoordinator(JOB, h.settings, TOPOLOGY, None, h.gateway, h.clock,
                                  h.failures.append)
    coord.tasks_running(ALL)
    cid = coord.trigger_checkpoint(is_savepoint=True).checkpoint_id
    assert cid == 1
    for t in ALL:
        coord.receive_acknowledge(t, cid, snapshot(), {})
    assert coord.latest_completed() is None and coord.pending_ids() == []
    assert h.failures == []  # a savepoint's I/O failure does not count


def test_sources_finishing_without_the_barrier_make_their_consumers_trigger_roots():
    """A source may finish before it runs the trigger: it sends end-of-partition and no
    barrier. Its consumers then cannot get the barrier from anyone; once every source
    they read finished, they are triggered directly (found in a hang under load)."""
    h = Harness()
    cid = h.trigger()
    assert h.gateway.triggered(cid) == ["src:0", "src:1"]
    h.coord.task_finished(SRC0)
    assert h.gateway.triggered(cid) == ["src:0", "src:1"]  # map still reads src:1
    h.coord.task_finished(SRC1)
    assert h.gateway.triggered(cid) == ["map:0", "map:1", "src:0", "src:1"]
    h.ack(cid, [MAP0, MAP1, SINK])
    assert h.coord.latest_completed().checkpoint_id == cid
