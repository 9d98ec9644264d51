"""The job master's decisions, pure: a real ExecutionGraph, a ManualClock, in-memory
checkpoint storage and a deployer that records every call."""

from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.plan import TaskStatus
from flowray.runtime.messages import JobStatus, TaskFailure, TaskState
from flowray.state.snapshot import TaskStateSnapshot

from tests.support.scheduler import (
    DELAY_MS,
    INTERVAL_MS,
    JOB,
    scheduler_config,
    tagged_snapshot,
)
from tests.support.scheduler_jobs import (
    ALL,
    SRC,
    SRC_NAME,
    SUM0,
    SUM1,
    SUM_NAME,
    Harness,
)

# ---------------------------------------------------------------------------------------
# start and finish
# ---------------------------------------------------------------------------------------

def own_operator_states(descriptor):
    """uid -> this subtask's own operator state in what it restores."""
    index = descriptor.subtask.index
    return {uid: r.operator_states[index] for uid, r in descriptor.restore.operators.items()
            if r.operator_states[index] is not None}


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
        assert d.restore_checkpoint_id is None and d.restore is None
        assert d.config["restart-strategy.type"] == "fixed-delay"
    assert sorted(h.sched.running()) == sorted(ALL)
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.RUNNING for s in ALL)
    assert h.sched.coordinator.next_trigger_ms == INTERVAL_MS


def test_checkpoints_wait_for_every_task_to_initialize_and_come_an_interval_later():
    """A task counts as running for checkpoints once it says it has initialized
    (connected, restored), as Flink's INITIALIZING -> RUNNING: the first checkpoint does
    not include the start of the task processes (it took 6-13 s on a fresh machine while
    later ones took tens of ms)."""
    h = Harness(start=False)
    h.initialize_on_deploy = False
    h.sched.start()
    assert h.sched.coordinator.next_trigger_ms is None
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.NOT_RUNNING for s in ALL)
    h.advance(5 * INTERVAL_MS)
    assert h.deployer.triggers == []                # processes still starting
    h.initialized(SRC, SUM0)
    h.advance(INTERVAL_MS)
    assert h.deployer.triggers == []                # SUM1 is not up yet
    h.advance(3_000)
    h.initialized(SUM1)
    assert h.sched.coordinator.next_trigger_ms == h.clock.monotonic_ms() + INTERVAL_MS
    h.advance(INTERVAL_MS)
    assert [t[1] for t in h.deployer.triggers] == [1]


def test_a_savepoint_or_checkpoint_asked_for_while_tasks_initialize_waits_for_them():
    h = Harness(start=False)
    h.initialize_on_deploy = False
    h.sched.start()
    answers = []
    h.sched.trigger_checkpoint(lambda path, error: answers.append((path, error)))
    h.sched.trigger_savepoint("/tmp/sp", lambda path, error: answers.append((path, error)))
    assert answers == [] and h.deployer.triggers == []     # not refused: waiting
    h.initialized(*ALL)
    assert [(t[1], t[3]) for t in h.deployer.triggers] == [(1, False), (2, True)]


def test_a_request_waiting_for_initialization_is_answered_when_the_job_ends():
    h = Harness(start=False)
    h.initialize_on_deploy = False
    h.sched.start()
    answers = []
    h.sched.trigger_checkpoint(lambda path, error: answers.append(error))
    h.sched.cancel()
    h.report_cancelled()
    assert h.sched.status is JobStatus.CANCELED
    assert len(answers) == 1 and "CANCELED" in answers[0]


def test_all_finished_results_finish_the_job_and_shut_the_coordinator_down():
    h = Harness()
    deployed = h.clock.now_ms()
    assert h.sched.subtask_times == {s: (deployed, -1) for s in ALL}
    h.clock.advance(40)
    h.result(SRC, TaskState.FINISHED, metrics={"records_out": 2})
    assert h.sched.subtask_times[SRC] == (deployed, deployed + 40)   # (the REST API's)
    assert h.sched.subtask_times[SUM0] == (deployed, -1)
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
    assert all(d.attempt == 1 and d.restore_checkpoint_id is None and d.restore is None
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
        assert own_operator_states(d) == snapshots[s].operators  # its own state


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
        assert d.restore_checkpoint_id == 2 and own_operator_states(d) == newest[s].operators


def test_a_subtask_missing_from_the_checkpoint_restores_empty_state():
    h = Harness()
    cid = h.trigger_checkpoint()
    h.ack_all(cid)
    # drop one subtask's entry, as if the job graph gained a subtask since
    del h.sched.coordinator.latest_completed().task_states[SUM1.key]
    h.fail_and_restart()
    d = h.deployer.last_descriptors[SUM1]
    assert d.restore_checkpoint_id == cid
    assert own_operator_states(d) == {} and not d.restore.finished


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


def test_a_checkpoint_aborted_by_a_failure_names_the_task_and_the_cause():
    """Its row says which task failed and why, not only Flink's "Task has failed.", and
    the checkpoint table names tasks as they are called, not by subtask keys."""
    from flowray.runtime.checkpoint.stats import format_checkpoint_table
    h = Harness()
    cid = h.trigger_checkpoint()
    h.fail(SUM0, message="no such key: 'x'")
    stats = h.sched.checkpoint_stats()
    [row] = [r for r in stats["history"] if r["checkpoint_id"] == cid]
    assert row["status"] == "FAILED"
    assert row["failure_reason"] == (
        f"Task has failed. (task '{SUM0.vertex_id}[0]': ValueError: no such key: 'x')")
    names = stats["task_names"]
    assert names[SUM0.key] == f"{h.eg.vertex(SUM0).name} (1/2)"
    row["tasks"] = {SUM1.key: {"alignment_ms": 5.0}}
    table = format_checkpoint_table([row], names=names)
    assert f"5 ms ({h.eg.vertex(SUM1).name} (2/2))" in table and SUM1.key not in table


def test_every_restart_is_recorded_with_its_failure_and_decision():
    h = Harness()
    h.clock.advance(250)
    h.fail(SUM0, message="boom")
    [event] = h.sched.restart_events
    assert event["failure"] == f"operator 'Map' in task '{SUM0.vertex_id}[0]' failed: " \
                               "ValueError: boom"
    assert event["decision"].startswith(f"restarting 3 of 3 tasks in {DELAY_MS} ms (")
    assert h.sched.outcome().restart_events == [event]
