"""The job master's decisions, pure: a real ExecutionGraph, a ManualClock, in-memory
checkpoint storage and a deployer that records every call."""

import pytest

from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.plan import TaskStatus
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.messages import JobStatus
from flowray.common.clock import ManualClock
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.jobmaster.restart_strategy import FixedDelayRestartStrategy
from flowray.testing.jobmaster import RecordingDeployer
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.scheduler import CANCEL_GRACE_MS, JobScheduler
from flowray.runtime.messages import TaskFailure, TaskResult, TaskState
from flowray.state.snapshot import TaskStateSnapshot
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    INTERVAL_MS,
    JOB,
    SchedulerHarness,
    scheduler_config,
    tagged_snapshot,
    task_failure,
)


def _execution_graph():
    env = local_env(2)
    env.from_collection([("a", 1), ("b", 2)]).key_by(lambda t: t[0]).sum(1) \
        .add_sink(lambda v: None)
    return ExecutionGraph(build_job_graph(stream_graph_of(env, "sched-test")))


# a collection source (parallelism 1) --hash--> sum -> sink (parallelism 2); vertex ids
# come from a process-wide counter, so they are read off the graph (built once: the
# scheduler only reads it)
EG = _execution_graph()
SRC, SUM0, SUM1 = ALL = EG.subtasks()
assert (SRC.index, SUM0.index, SUM1.index) == (0, 0, 1) and SUM0.vertex_id == SUM1.vertex_id
SRC_NAME, SUM_NAME = f"{SRC.vertex_id}[0]", f"{SUM0.vertex_id}[1]"


class Harness(SchedulerHarness):
    def __init__(self, config=None, restart_strategy=None, start=True):
        super().__init__(EG, scheduler_config() if config is None else config,
                         RecordingDeployer(), "sched-test", start=start,
                         restart_strategy=restart_strategy)

    # -- events of the current attempt (or a given one) ------------------------------
    def result(self, subtask, state, failure=None, attempt=None, metrics=None):
        self.sched.on_task_result(self.sched.attempt if attempt is None else attempt,
                                  TaskResult(subtask, state, failure, metrics or {}))

    def report_cancelled(self, subtasks=None):
        for s in (self.sched.running() if subtasks is None else subtasks):
            self.result(s, TaskState.CANCELED)

    def ack_all(self, cid, snapshots=None, attempt=None):
        snapshots = snapshots or {s: TaskStateSnapshot() for s in ALL}
        for s in ALL:
            self.sched.on_acknowledge(self.sched.attempt if attempt is None else attempt,
                                      s, cid, snapshots[s], {"sync_ms": 1})
        return snapshots

    def fail_and_restart(self, subtask=SUM0, message="boom"):
        """Fail a task, let the others answer the cancel, wait out the backoff."""
        failure = self.fail(subtask, message)
        assert self.sched.status is JobStatus.RESTARTING
        self.report_cancelled()
        self.advance(DELAY_MS)
        return failure


# ---------------------------------------------------------------------------------------
# start and finish
# ---------------------------------------------------------------------------------------

def test_start_deploys_every_subtask_at_attempt_0_without_restore_state():
    h = Harness(start=False)
    assert h.sched.status is JobStatus.CREATED and h.deployer.deploys == []
    h.sched.start()
    assert h.sched.status is JobStatus.RUNNING
    assert len(h.deployer.deploys) == 1
    attempt, descriptors = h.deployer.deploys[0]
    assert attempt == 0 and h.sched.attempt == 0
    assert [d.subtask for d in descriptors] == ALL
    for d in descriptors:
        assert d.attempt == 0
        assert d.job_id == JOB
        assert d.plan_bytes == f"plan-{d.subtask.vertex_id}".encode()
        assert d.restore_checkpoint_id is None and d.restore_state is None
        assert d.config["restart-strategy.type"] == "fixed-delay"
    assert sorted(h.sched.running()) == sorted(ALL)
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.RUNNING for s in ALL)
    assert h.sched.coordinator.next_trigger_ms == INTERVAL_MS


def test_all_finished_results_finish_the_job_and_shut_the_coordinator_down():
    h = Harness()
    h.clock.advance(40)
    h.result(SRC, TaskState.FINISHED, metrics={"records_out": 2})
    h.result(SUM0, TaskState.FINISHED, metrics={"records_in": 1})
    assert h.sched.status is JobStatus.RUNNING and not h.sched.is_done
    assert not h.sched.coordinator.is_shutdown
    h.result(SUM1, TaskState.FINISHED, metrics={"records_in": 1})
    assert h.sched.status is JobStatus.FINISHED and h.sched.is_done
    assert h.sched.coordinator.is_shutdown
    assert h.deployer.cancels == [] and h.deployer.kills == []
    out = h.sched.outcome()
    assert out.status is JobStatus.FINISHED and out.failure is None
    assert out.restarts == 0 and out.duration_ms == 40
    assert out.task_metrics == [{"records_out": 2}, {"records_in": 1}, {"records_in": 1}]
    # nothing moves after the end
    h.clock.advance(10_000)
    h.sched.tick()
    assert h.sched.outcome().duration_ms == 40
    assert len(h.deployer.deploys) == 1 and h.deployer.triggers == []


def test_a_duplicate_result_is_ignored():
    h = Harness()
    h.result(SRC, TaskState.FINISHED)
    h.fail(SRC)  # SRC is no longer running: a late FAILED cannot fail the job
    assert h.sched.status is JobStatus.RUNNING and h.sched.failures == []


# ---------------------------------------------------------------------------------------
# failover and restart
# ---------------------------------------------------------------------------------------

def test_failure_cancels_the_others_and_restarts_after_the_backoff():
    h = Harness()
    h.clock.advance(250)
    failure = h.fail(SUM0)
    assert h.sched.status is JobStatus.RESTARTING
    assert h.deployer.cancels == [[SRC, SUM1]]
    assert h.sched.failures == [failure] and h.sched.failure is None
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.NOT_RUNNING for s in ALL)

    h.result(SRC, TaskState.CANCELED)
    h.result(SUM1, TaskState.CANCELED)
    assert h.sched.running() == []
    assert h.sched.status is JobStatus.RESTARTING and len(h.deployer.deploys) == 1

    h.advance(DELAY_MS - 1)          # the backoff runs from the failure
    assert h.sched.status is JobStatus.RESTARTING and len(h.deployer.deploys) == 1
    assert h.sched.restarts == 0
    h.advance(1)
    assert h.sched.status is JobStatus.RUNNING
    assert h.sched.restarts == 1 and h.sched.attempt == 1
    attempt, descriptors = h.deployer.deploys[-1]
    assert attempt == 1 and [d.subtask for d in descriptors] == ALL
    assert all(d.attempt == 1 and d.restore_checkpoint_id is None and d.restore_state is None
               for d in descriptors)
    assert sorted(h.sched.running()) == sorted(ALL)
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.RUNNING for s in ALL)
    assert h.deployer.kills == []  # everybody answered the cancel


def test_backoff_already_over_when_the_last_task_answers_restarts_at_once():
    h = Harness()
    h.fail(SUM0)
    h.clock.advance(DELAY_MS + 500)
    h.result(SRC, TaskState.CANCELED)
    assert len(h.deployer.deploys) == 1   # SUM1 still running
    h.result(SUM1, TaskState.CANCELED)     # no tick needed
    assert h.sched.status is JobStatus.RUNNING and h.sched.attempt == 1
    assert h.sched.restarts == 1


def test_no_redeploy_while_a_cancelled_task_is_still_running():
    h = Harness()
    h.fail(SUM0)
    h.result(SRC, TaskState.CANCELED)
    h.advance(DELAY_MS + 10)   # backoff over, but SUM1 has not answered yet
    assert h.sched.status is JobStatus.RESTARTING and len(h.deployer.deploys) == 1
    h.result(SUM1, TaskState.CANCELED)
    assert h.sched.status is JobStatus.RUNNING and h.sched.attempt == 1


def test_further_failures_while_failing_over_do_not_count_as_restarts():
    h = Harness(config=scheduler_config(**{"restart-strategy.fixed-delay.attempts": 1}))
    first = h.fail(SUM0, "first")
    h.fail(SUM1, "second")  # a task that fails while being cancelled
    h.result(SRC, TaskState.CANCELED)
    assert h.sched.failures == [first]
    h.advance(DELAY_MS)
    assert h.sched.status is JobStatus.RUNNING and h.sched.restarts == 1
    # the one allowed restart was not used up by the second failure above
    assert h.sched.restart_strategy.failures == 1


def test_a_task_cancelled_outside_the_job_master_fails_over():
    h = Harness()
    h.result(SUM1, TaskState.CANCELED)
    assert h.sched.status is JobStatus.RESTARTING
    (f,) = h.sched.failures
    assert f.cause_type == "TaskLost" and f.task == SUM_NAME
    assert "cancelled outside the job master" in f.message


def test_a_failure_without_a_cause_gets_one():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    h.result(SUM0, TaskState.FAILED)
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED
    assert h.sched.outcome().failure.cause_type == "TaskLost"
    assert h.sched.outcome().failure.message == "failed without a cause"


def test_task_lost_counts_as_a_failure():
    h = Harness()
    h.sched.on_task_lost(0, SUM1, "actor died: node lost")
    assert h.sched.status is JobStatus.RESTARTING
    assert h.deployer.cancels == [[SRC, SUM0]]
    (f,) = h.sched.failures
    assert f.cause_type == "TaskLost" and f.task == SUM_NAME
    assert f.message == "actor died: node lost" and f.user_code is False
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert h.sched.attempt == 1 and h.sched.restarts == 1


def test_task_lost_of_an_older_attempt_is_ignored():
    h = Harness()
    h.fail_and_restart()
    h.sched.on_task_lost(0, SUM1, "the old actor died")
    assert h.sched.status is JobStatus.RUNNING and len(h.sched.failures) == 1


# ---------------------------------------------------------------------------------------
# restore from the latest checkpoint
# ---------------------------------------------------------------------------------------

def test_restart_restores_each_subtask_from_the_latest_completed_checkpoint():
    h = Harness()
    cid = h.trigger_checkpoint()
    assert cid == 1
    assert [(t[0], t[1]) for t in h.deployer.triggers] == [(SRC, 1)]  # only the source
    snapshots = {s: tagged_snapshot(s.key) for s in ALL}
    h.ack_all(cid, snapshots)
    assert h.sched.coordinator.latest_completed().checkpoint_id == 1
    assert sorted(h.deployer.completes) == sorted((s, 1) for s in ALL)
    assert h.storage.list_completed() == [1]

    h.fail_and_restart(SUM1)
    assert h.sched.attempt == 1
    descriptors = h.deployer.last_descriptors
    assert sorted(descriptors) == sorted(ALL)
    for s, d in descriptors.items():
        assert d.attempt == 1
        assert d.restore_checkpoint_id == 1
        assert d.restore_state is snapshots[s]  # each subtask gets its own state


def test_restore_uses_the_newest_of_several_checkpoints():
    h = Harness()
    h.ack_all(h.trigger_checkpoint(), {s: tagged_snapshot("old") for s in ALL})
    newest = {s: tagged_snapshot(f"new-{s.key}") for s in ALL}
    cid = h.trigger_checkpoint()
    assert cid == 2
    h.ack_all(cid, newest)
    # a third checkpoint in flight when the task fails is aborted, not restored
    pending = h.trigger_checkpoint()
    h.sched.on_acknowledge(0, SRC, pending, tagged_snapshot("partial"), {})
    h.fail_and_restart()
    assert pending not in h.sched.coordinator.pending_ids()
    assert h.sched.coordinator.latest_completed().checkpoint_id == 2
    for s, d in h.deployer.last_descriptors.items():
        assert d.restore_checkpoint_id == 2 and d.restore_state is newest[s]


def test_a_subtask_missing_from_the_checkpoint_restores_empty_state():
    h = Harness()
    cid = h.trigger_checkpoint()
    h.ack_all(cid)
    # drop one subtask's entry, as if the job graph gained a subtask since
    del h.sched.coordinator.latest_completed().task_states[SUM1.key]
    h.fail_and_restart()
    d = h.deployer.last_descriptors[SUM1]
    assert d.restore_checkpoint_id == cid
    assert isinstance(d.restore_state, TaskStateSnapshot)
    assert d.restore_state.operators == {} and not d.restore_state.finished


def test_a_pending_checkpoint_is_aborted_by_a_failure():
    h = Harness()
    cid = h.trigger_checkpoint()
    h.sched.on_acknowledge(0, SRC, cid, TaskStateSnapshot(), {})
    h.fail(SUM0)
    assert h.sched.coordinator.pending_ids() == []
    assert h.sched.stats.counts()["failed"] == 1
    # acks arriving while failing over are dropped
    h.sched.on_acknowledge(0, SUM1, cid, TaskStateSnapshot(), {})
    assert h.sched.coordinator.latest_completed() is None


def test_checkpoints_resume_after_a_restart():
    h = Harness()
    h.fail_and_restart()
    restarted_at = h.clock.now_ms()
    assert h.sched.coordinator.next_trigger_ms == restarted_at + INTERVAL_MS
    cid = h.trigger_checkpoint()
    h.ack_all(cid)
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid


# ---------------------------------------------------------------------------------------
# events of an older attempt
# ---------------------------------------------------------------------------------------

def test_results_of_an_older_attempt_are_ignored_after_a_restart():
    h = Harness()
    h.fail_and_restart()
    assert h.sched.attempt == 1
    # the old attempt's tasks report late: FINISHED, FAILED, CANCELED
    h.result(SRC, TaskState.FINISHED, attempt=0)
    h.fail(SUM0, "late", attempt=0)
    h.result(SUM1, TaskState.CANCELED, attempt=0)
    assert h.sched.status is JobStatus.RUNNING
    assert sorted(h.sched.running()) == sorted(ALL)
    assert len(h.sched.failures) == 1 and h.sched.restarts == 1
    assert h.deployer.cancels == [[SRC, SUM1]]  # only the first failover's
    # the current attempt's results still count
    for s in ALL:
        h.result(s, TaskState.FINISHED)
    assert h.sched.status is JobStatus.FINISHED


def test_acks_of_an_older_attempt_are_ignored_after_a_restart():
    h = Harness()
    h.fail_and_restart()
    cid = h.trigger_checkpoint()
    h.ack_all(cid, attempt=0)
    assert h.sched.coordinator.pending_ids() == [cid]
    assert h.sched.coordinator.pending(cid).not_yet_acknowledged == set(ALL)
    assert h.sched.coordinator.latest_completed() is None
    h.ack_all(cid, attempt=1)
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid


def test_declines_of_an_older_attempt_are_ignored_after_a_restart():
    h = Harness()
    h.fail_and_restart()
    cid = h.trigger_checkpoint()
    h.sched.on_decline(0, SRC, cid, "ASYNC_FAILURE", "old attempt")
    assert h.sched.coordinator.pending_ids() == [cid]
    h.sched.on_decline(1, SRC, cid, "NO_SUCH_REASON", "now")
    assert h.sched.coordinator.pending_ids() == []
    (rec,) = [r for r in h.sched.stats.history() if r["checkpoint_id"] == cid]
    assert rec["status"] == "FAILED"
    assert CheckpointFailureReason.DECLINED.value in rec["failure_reason"]
    # a decline counts against tolerable-failed-checkpoints (0 here): a failover
    assert h.sched.status is JobStatus.RESTARTING
    assert h.sched.failures[-1].cause_type == "CheckpointFailure"


def test_ended_input_of_an_older_attempt_is_ignored_after_a_restart():
    h = Harness()
    h.fail_and_restart()
    h.sched.on_ended_input(0, SRC)
    assert h.sched.coordinator.statuses[SRC] is TaskStatus.RUNNING
    h.sched.on_ended_input(1, SRC)
    assert h.sched.coordinator.statuses[SRC] is TaskStatus.ENDED_INPUT


# ---------------------------------------------------------------------------------------
# the restart strategy runs out
# ---------------------------------------------------------------------------------------

def test_fixed_delay_attempts_exhausted_fails_the_job_with_the_last_cause():
    h = Harness()  # 2 attempts
    first = h.fail_and_restart(SUM0, "first")
    second = h.fail_and_restart(SRC, "second")
    assert h.sched.restarts == 2 and h.sched.attempt == 2
    third = h.fail(SUM1, "third")
    assert h.sched.status is JobStatus.FAILING and not h.sched.is_done
    assert h.deployer.cancels[-1] == [SRC, SUM0]
    h.result(SRC, TaskState.CANCELED)
    assert h.sched.status is JobStatus.FAILING
    h.result(SUM0, TaskState.CANCELED)
    assert h.sched.status is JobStatus.FAILED and h.sched.is_done
    assert h.sched.coordinator.is_shutdown
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED
    assert out.failure is third and out.failure.message == "third"
    assert out.restarts == 2
    assert h.sched.failures == [first, second, third]
    # no more deploys, even after a long wait
    h.advance(10 * DELAY_MS)
    assert len(h.deployer.deploys) == 3 and h.sched.status is JobStatus.FAILED


def test_restart_strategy_none_fails_at_the_first_failure():
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    failure = h.fail(SRC, "no luck")
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED
    out = h.sched.outcome()
    assert out.failure is failure and out.failure.describe() == \
        f"operator 'Map' in task '{SRC_NAME}' failed: ValueError: no luck"
    assert out.restarts == 0
    assert len(h.deployer.deploys) == 1


def test_the_root_cause_wins_over_broken_connections_that_arrive_first():
    """Results of different tasks reach the job master in any order: a downstream task
    whose input connection broke may report before the task that raised."""
    h = Harness(config=scheduler_config(**{"restart-strategy.type": "none"}))
    broken = TaskFailure(task="sum", operator=None, cause_type="ChannelClosedError",
                         message="peer closed", traceback_text="...", user_code=False)
    h.result(SUM0, TaskState.FAILED, broken)
    root = h.fail(SRC, "the real cause")
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED
    assert h.sched.outcome().failure is root


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


# ---------------------------------------------------------------------------------------
# checkpoint failures
# ---------------------------------------------------------------------------------------

def _expiring_config(**overrides):
    conf = {"execution.checkpointing.timeout": "1 s",
            "execution.checkpointing.tolerable-failed-checkpoints": 0}
    conf.update(overrides)
    return scheduler_config(**conf)


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


# ---------------------------------------------------------------------------------------
# a restarted job master
# ---------------------------------------------------------------------------------------

def _successor(h, first_attempt):
    """A new scheduler over the same checkpoint storage, as a restarted job master."""
    storage = MemoryCheckpointStorage(JOB, h.storage.files)
    plan_bytes = {v: f"plan-{v}".encode() for v in h.eg.vertices}
    deployer = RecordingDeployer()
    sched = JobScheduler(JOB, "sched-test", h.eg, plan_bytes, deployer, ManualClock(0),
                         scheduler_config(), storage=storage)
    return sched, deployer, sched.recover(first_attempt=first_attempt)


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
        assert d.restore_state.operators.keys() == snapshots[s].operators.keys()
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
