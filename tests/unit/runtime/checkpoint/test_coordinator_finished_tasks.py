"""The checkpoint coordinator when tasks finish or stop: trigger roots after finished sources, the final checkpoint, regions that stop, shutdown; plus the store, settings, reasons and stats."""

import pickle

import pytest
from flowray.runtime.checkpoint.completed import (
    CompletedCheckpoint,
    CompletedCheckpointStore,
)
from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator
from flowray.runtime.checkpoint.pending import AckResult
from flowray.runtime.checkpoint.plan import TaskStatus
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.snapshot import (
    TaskStateSnapshot,
)

from flowray.common.clock import ManualClock
from tests.support.coordinator import (
    checkpoint_files,
    ALL,
    END,
    FIN,
    JOB,
    MAP0,
    MAP1,
    RUN,
    SINK,
    SRC0,
    SRC1,
    TOPOLOGY,
    Harness,
    R,
    _plan,
    snapshot,
)
from tests.support.gateways import RecordingGateway


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
    assert checkpoint_files(h.storage) == {}
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


def test_a_task_that_ended_its_input_is_triggered_directly_by_a_new_checkpoint():
    """Its sources still run (they wait for their consumers to take their last frames,
    taking checkpoints meanwhile with unaligned checkpoints): the new checkpoint goes to
    the task at once, not when the sources finish."""
    h = Harness(interval_ms=60_000)
    h.coord.tasks_running(ALL)
    h.coord.task_ended_input(MAP0)
    cid = h.trigger()
    assert h.gateway.triggered(cid) == ["map:0", "src:0", "src:1"]


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


def test_an_ended_input_reported_before_the_task_is_up_is_kept_and_the_final_follows():
    """A task's 'initialized' and 'ended input' may reach the job master out of order (its
    actor serves calls in several threads): 'initialized' must not turn an ended task back
    into a running one, or the final checkpoint never comes (a restored job hung so)."""
    h = Harness(interval_ms=60_000, running=False)
    others = [SRC0, SRC1, MAP0, MAP1]
    h.coord.tasks_running(others)
    h.coord.task_ended_input(SINK)      # before its 'initialized'
    assert h.coord.pending_ids() == []
    h.coord.tasks_running([SINK])       # late
    assert h.coord.statuses[SINK] is TaskStatus.ENDED_INPUT
    for t in others:
        h.coord.task_finished(t)
    assert h.coord.pending_ids() == [1]  # the final checkpoint


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


@pytest.mark.parametrize("statuses,expected", [
    (dict(a=RUN, b=RUN, c=RUN, d=RUN), (["a"], ["a", "b", "c", "d"], [])),
    (dict(a=FIN, b=RUN, c=RUN, d=RUN), (["b", "c"], ["b", "c", "d"], ["a"])),
    (dict(a=END, b=RUN, c=RUN, d=RUN), (["a", "b", "c"], ["a", "b", "c", "d"], [])),
    (dict(a=FIN, b=END, c=RUN, d=RUN), (["b", "c"], ["b", "c", "d"], ["a"])),
    # b ended its input while a still runs (a source waiting for its consumers to take
    # its last frames): no barrier can come to b any more
    (dict(a=RUN, b=END, c=RUN, d=RUN), (["a", "b"], ["a", "b", "c", "d"], [])),
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
        "execution.checkpointing.num-retained": "4",
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


def test_the_final_checkpoint_keeps_the_minimum_pause_after_the_last_one():
    h = Harness(interval_ms=60_000, min_pause_ms=5_000)
    one = h.trigger()
    h.ack(one)                               # completed now
    for t in ALL:
        h.coord.task_ended_input(t)
    assert h.coord.pending_ids() == []       # 5 s of pause first, as a periodic one
    h.advance(4_999)
    assert h.coord.pending_ids() == []
    h.advance(1)
    assert h.coord.pending_ids() == [one + 1]
    assert h.coord.pending(one + 1).is_final
