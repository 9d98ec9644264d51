"""The job scheduler's life cycle: restart strategies from config, cancel and kill, checkpoint failures that fail over, the outcome, and a restarted job master."""

import pytest
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.jobmaster.restart_strategy import FixedDelayRestartStrategy
from flowray.runtime.jobmaster.scheduler import CANCEL_GRACE_MS
from flowray.runtime.messages import JobStatus, TaskResult, TaskState
from flowray.state.snapshot import TaskStateSnapshot

from tests.support.scheduler import (
    DELAY_MS,
    INTERVAL_MS,
    JOB,
    scheduler_config,
    tagged_snapshot,
    task_failure,
)
from tests.support.scheduler_jobs import (
    ALL,
    SRC,
    SUM0,
    SUM1,
    Harness,
    _expiring_config,
    _successor,
)


def test_a_failure_of_the_only_running_task_fails_at_once():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    h.result(SRC, TaskState.FINISHED)
    h.result(SUM0, TaskState.FINISHED)
    failure = h.fail(SUM1)
    assert h.deployer.cancels == []  # nobody left to cancel
    assert h.sched.status is JobStatus.FAILED and h.sched.outcome().failure is failure


def test_an_explicit_restart_strategy_overrides_the_config():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}),
                restart_strategy=FixedDelayRestartStrategy(1, 20))
    h.fail(SUM0)
    assert h.sched.status is JobStatus.RESTARTING
    h.report_cancelled()
    h.advance(20)
    assert h.sched.attempt == 1


def test_default_restart_strategy_without_checkpointing_is_none():
    h = Harness(config={})
    failure = h.fail(SUM0)
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED and h.sched.outcome().failure is failure


# ---------------------------------------------------------------------------------------
# cancel deadlines
# ---------------------------------------------------------------------------------------

def test_a_task_that_ignores_the_cancel_is_killed_after_the_grace_period():
    h = Harness()
    h.fail(SUM0)
    h.result(SRC, TaskState.CANCELED)   # SUM1 never answers
    h.advance(CANCEL_GRACE_MS)          # not yet: the grace period is not exceeded
    assert h.deployer.kills == []
    assert h.sched.status is JobStatus.RESTARTING and len(h.deployer.deploys) == 1
    h.advance(1)
    assert h.deployer.kills == [[SUM1]]
    # the backoff (1 s) is long over: the restart happens in the same tick
    assert h.sched.status is JobStatus.RUNNING and h.sched.attempt == 1
    # the killed task's late answer belongs to the old attempt
    h.result(SUM1, TaskState.CANCELED, attempt=0)
    assert h.sched.status is JobStatus.RUNNING and len(h.deployer.kills) == 1
    h.advance(CANCEL_GRACE_MS * 2)      # no cancel outstanding: nobody else is killed
    assert h.deployer.kills == [[SUM1]]


def test_kill_unblocks_a_failing_job():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    failure = h.fail(SUM0)
    h.advance(CANCEL_GRACE_MS + 1)
    assert h.deployer.kills == [[SRC, SUM1]]
    assert h.sched.status is JobStatus.FAILED and h.sched.outcome().failure is failure


def test_kill_unblocks_a_cancelling_job():
    h = Harness()
    h.sched.cancel()
    h.result(SRC, TaskState.CANCELED)
    h.advance(CANCEL_GRACE_MS + 1)
    assert h.deployer.kills == [[SUM0, SUM1]]
    assert h.sched.status is JobStatus.CANCELED


# ---------------------------------------------------------------------------------------
# user cancel
# ---------------------------------------------------------------------------------------

def test_user_cancel_goes_through_cancelling_to_canceled():
    h = Harness()
    h.sched.cancel()
    assert h.sched.status is JobStatus.CANCELLING and not h.sched.is_done
    assert h.deployer.cancels == [ALL]
    h.sched.cancel()                    # a second cancel sends nothing more
    assert h.deployer.cancels == [ALL]
    h.result(SRC, TaskState.CANCELED)
    h.result(SUM0, TaskState.CANCELED)
    assert h.sched.status is JobStatus.CANCELLING
    h.result(SUM1, TaskState.CANCELED)
    assert h.sched.status is JobStatus.CANCELED and h.sched.is_done
    assert h.sched.coordinator.is_shutdown
    out = h.sched.outcome()
    assert out.status is JobStatus.CANCELED and out.failure is None and out.restarts == 0
    assert h.sched.failures == []


def test_a_failure_while_cancelling_does_not_restart():
    h = Harness()
    h.sched.cancel()
    h.fail(SRC, "while cancelling")
    h.report_cancelled()
    h.advance(10 * DELAY_MS)
    assert h.sched.status is JobStatus.CANCELED
    assert h.sched.failures == [] and len(h.deployer.deploys) == 1


def test_cancel_during_the_restart_backoff_stops_the_restart():
    h = Harness()
    h.fail(SUM0)
    h.report_cancelled()
    assert h.sched.status is JobStatus.RESTARTING
    h.sched.cancel()
    assert h.sched.status is JobStatus.CANCELLING
    h.advance(DELAY_MS)
    assert h.sched.status is JobStatus.CANCELED
    assert len(h.deployer.deploys) == 1 and h.sched.restarts == 0


def test_cancel_does_not_turn_a_failing_job_into_a_canceled_one():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    failure = h.fail(SUM0)
    assert h.sched.status is JobStatus.FAILING
    h.sched.cancel()
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED and out.failure is failure


def test_cancel_after_the_end_changes_nothing():
    h = Harness()
    for s in ALL:
        h.result(s, TaskState.FINISHED)
    h.sched.cancel()
    assert h.sched.status is JobStatus.FINISHED and h.deployer.cancels == []


def test_an_expired_checkpoint_beyond_the_threshold_fails_over():
    h = Harness(config=_expiring_config())
    cid = h.trigger_checkpoint()
    h.sched.on_acknowledge(0, SRC, cid, TaskStateSnapshot(), {})
    h.advance(999)
    assert h.sched.status is JobStatus.RUNNING and h.sched.coordinator.pending_ids() == [cid]
    h.advance(1)
    assert h.sched.status is JobStatus.RESTARTING
    assert h.deployer.cancels == [ALL]
    (f,) = h.sched.failures
    assert f.cause_type == "CheckpointFailure" and f.task == "CheckpointCoordinator"
    assert "tolerable failure threshold" in f.message
    assert CheckpointFailureReason.EXPIRED.value in f.message
    assert h.sched.coordinator.pending_ids() == []
    assert h.sched.stats.counts()["failed"] == 1
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert h.sched.status is JobStatus.RUNNING and h.sched.attempt == 1
    assert h.sched.restarts == 1 and h.sched.restart_strategy.failures == 1
    # nothing completed: the restart starts from scratch
    assert all(d.restore_checkpoint_id is None for d in h.deployer.last_descriptors.values())


def test_an_expired_checkpoint_with_restarts_exhausted_fails_the_job():
    h = Harness(config=_expiring_config(**{"restart-strategy.type": "none"}))
    h.trigger_checkpoint()
    h.advance(1000)
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED
    assert out.failure.cause_type == "CheckpointFailure"
    assert "Exceeded checkpoint tolerable failure threshold (0)" in out.failure.message


def test_an_expired_checkpoint_within_the_threshold_is_tolerated():
    h = Harness(config=_expiring_config(
        **{"execution.checkpointing.tolerable-failed-checkpoints": 1}))
    first = h.trigger_checkpoint()
    h.advance(1000)                      # expires, and the next one is triggered
    assert h.sched.status is JobStatus.RUNNING and h.sched.failures == []
    assert first not in h.sched.coordinator.pending_ids()
    (second,) = h.sched.coordinator.pending_ids()
    h.advance(1000)                      # a second one in a row: over the threshold
    assert second not in h.sched.coordinator.pending_ids()
    assert h.sched.status is JobStatus.RESTARTING
    assert h.sched.failures[0].cause_type == "CheckpointFailure"


def test_a_completed_checkpoint_resets_the_failure_count():
    h = Harness(config=_expiring_config(
        **{"execution.checkpointing.tolerable-failed-checkpoints": 1}))
    h.trigger_checkpoint()
    h.advance(1000)                      # first failure (tolerated)
    (cid,) = h.sched.coordinator.pending_ids()
    h.ack_all(cid)                       # success resets the count
    h.trigger_checkpoint()
    h.advance(1000)                      # one failure again: still tolerated
    assert h.sched.status is JobStatus.RUNNING and h.sched.failures == []


# ---------------------------------------------------------------------------------------
# outcome
# ---------------------------------------------------------------------------------------

def test_outcome_reports_restarts_checkpoints_and_checkpoint_stats():
    h = Harness(config=scheduler_config(
        **{"execution.checkpointing.tolerable-failed-checkpoints": 5}))
    h.ack_all(h.trigger_checkpoint(), {s: tagged_snapshot(s.key) for s in ALL})
    h.fail_and_restart()
    h.ack_all(h.trigger_checkpoint())
    aborted = h.trigger_checkpoint()
    h.sched.on_decline(1, SRC, aborted, "DECLINED", "no")
    for s in ALL:
        h.result(s, TaskState.FINISHED, metrics={"task": s.key})
    out = h.sched.outcome()
    assert out.status is JobStatus.FINISHED and out.job_id == JOB
    assert out.job_name == "sched-test"
    assert out.restarts == 1
    assert out.checkpoints == 2
    stats = out.checkpoint_stats
    assert stats["restarts"] == 1
    assert stats["counts"] == {"triggered": 3, "completed": 2, "failed": 1, "in_progress": 0,
                               "not_triggered": 0}
    assert [r["checkpoint_id"] for r in stats["history"]] == [1, 2, 3]
    assert [r["status"] for r in stats["history"]] == ["COMPLETED", "COMPLETED", "FAILED"]
    assert "summary" in stats
    assert stats == h.sched.checkpoint_stats()
    assert out.task_metrics == [{"task": s.key} for s in ALL]
    assert out.duration_ms == h.clock.monotonic_ms()


def test_outcome_while_running_measures_up_to_now():
    h = Harness()
    h.clock.advance(123)
    out = h.sched.outcome()
    assert out.status is JobStatus.RUNNING and out.duration_ms == 123
    assert out.checkpoints == 0 and out.restarts == 0 and out.failure is None


def test_next_wakeup_is_bounded():
    h = Harness()
    assert 0 < h.sched.next_wakeup_ms() <= INTERVAL_MS


@pytest.mark.parametrize("state", [TaskState.FINISHED, TaskState.CANCELED])
def test_unknown_attempt_numbers_are_ignored(state):
    h = Harness()
    h.result(SRC, state, attempt=5)
    assert h.sched.status is JobStatus.RUNNING and sorted(h.sched.running()) == sorted(ALL)


def test_ended_input_leads_to_a_final_checkpoint_before_the_job_finishes():
    h = Harness()
    for s in ALL:
        h.sched.on_ended_input(0, s)
    # every task ended its input: the final checkpoint is triggered at once, on all
    triggered = {(t[0], t[1]) for t in h.deployer.triggers}
    assert triggered == {(s, 1) for s in ALL}
    assert h.sched.coordinator.pending(1).is_final
    h.ack_all(1, {s: TaskStateSnapshot(input_ended=True) for s in ALL})
    assert sorted(h.deployer.completes) == sorted((s, 1) for s in ALL)
    for s in ALL:
        h.result(s, TaskState.FINISHED)
    out = h.sched.outcome()
    assert out.status is JobStatus.FINISHED and out.checkpoints == 1


def test_a_restarted_job_master_deploys_everything_from_the_latest_checkpoint():
    h = Harness()
    h.ack_all(h.trigger_checkpoint(), {s: tagged_snapshot(f"one-{s.key}") for s in ALL})
    snapshots = h.ack_all(h.trigger_checkpoint(), {s: tagged_snapshot(f"two-{s.key}") for s in ALL})
    cid = h.trigger_checkpoint()  # in progress when the master dies, a task wrote a file
    h.storage.write_file(h.storage.task_state_path(cid, SUM0, "keyed"), b"half")

    sched, deployer, latest = _successor(h, first_attempt=1000)
    assert latest == 2
    sched.start()
    descriptors = deployer.last_descriptors
    assert sorted(descriptors) == sorted(ALL)
    for s, d in descriptors.items():
        assert d.attempt == 1000 and d.restore_checkpoint_id == 2
        own = {u for u, r in d.restore.operators.items() if r.operator_states[s.index]}
        assert own == snapshots[s].operators.keys()
    # events of the dead master's attempt are ignored; checkpoint ids are not reused
    sched.on_task_result(0, TaskResult(SUM0, TaskState.FAILED, task_failure(SUM0, "old"), {}))
    assert sched.status is JobStatus.RUNNING and sched.restarts == 0
    assert sched.coordinator.next_checkpoint_id == 4
    assert h.storage.list_incomplete() == []  # the unfinished checkpoint's folder is gone
    assert sched.outcome().job_master_restarts == 1
    # a second restart counts on
    again, _, latest = _successor(h, first_attempt=2000)
    assert latest == 2 and again.outcome().job_master_restarts == 2


def test_a_job_master_restarted_before_any_checkpoint_starts_over():
    h = Harness()
    sched, deployer, latest = _successor(h, first_attempt=50)
    sched.start()
    assert latest is None
    assert {d.restore_checkpoint_id for d in deployer.last_descriptors.values()} == {None}
