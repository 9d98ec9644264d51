"""Region-aware scheduling, pure: real execution graphs built through the API (never run),
a ManualClock, in-memory checkpoint storage, a deployer that records every call and, for
BATCH mode, a real BlockingPartitionStore under tmp_path. No Ray, no sleeps."""

import logging

import pytest
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.plan import TaskStatus
from flowray.runtime.jobmaster.failure_handler import PendingFailover
from flowray.runtime.jobmaster.scheduler import CANCEL_GRACE_MS
from flowray.runtime.messages import JobStatus, TaskState

from tests.support.scheduler import (
    DELAY_MS,
    INTERVAL_MS,
    tagged_snapshot,
)
from tests.support.scheduler_regions import (
    ALL,
    EG,
    MAP,
    PIPE,
    SINK,
    SRC,
    streaming,
)


def test_the_graph_has_three_chains_with_forward_pipelined_edges():
    assert len(ALL) == 9 and len(EG.job_graph.vertices) == 3
    assert [v.parallelism for v in EG.job_graph.topological_order()] == [3, 3, 3]
    partitions = EG.result_partitions()
    assert len(partitions) == 6
    assert all(not p.blocking and len(p.consumers) == 1 for p in partitions)
    assert all(p.consumers[0].index == p.producer.index for p in partitions)


def test_streaming_pipelines_are_one_region_each_and_start_together():
    h = streaming()
    assert sorted(map(sorted, h.sched.regions)) == sorted(sorted(p) for p in PIPE)
    assert len(h.deployer.deploys) == 1
    attempt, descriptors = h.deployer.deploys[0]
    assert attempt == 0 and sorted(d.subtask for d in descriptors) == sorted(ALL)
    assert h.sched.status is JobStatus.RUNNING
    assert h.sched.attempts == {s: 0 for s in ALL}
    assert h.sched.partition_store is None  # no blocking exchange


@pytest.mark.parametrize("failed", [SRC[1], MAP[1], SINK[1]])
def test_a_failure_cancels_and_restarts_only_its_pipeline(failed):
    h = streaming()
    h.clock.advance(250)
    failure = h.fail(failed)
    assert h.sched.status is JobStatus.RUNNING          # not RESTARTING: others run on
    assert h.deployer.cancels == [sorted(PIPE[1] - {failed})]
    assert h.sched.failures == [failure] and h.sched.failure is None
    statuses = h.sched.coordinator.statuses
    assert all(statuses[s] is TaskStatus.NOT_RUNNING for s in PIPE[1])
    assert all(statuses[s] is TaskStatus.RUNNING for s in PIPE[0] | PIPE[2])

    h.report_cancelled()
    assert sorted(h.sched.running()) == sorted(PIPE[0] | PIPE[2])
    h.advance(DELAY_MS - 1)
    assert len(h.deployer.deploys) == 1 and h.sched.restarts == 0
    assert h.sched.status is JobStatus.RUNNING
    h.advance(1)
    assert h.sched.restarts == 1 and h.sched.status is JobStatus.RUNNING
    assert len(h.deployer.deploys) == 2
    attempt, descriptors = h.deployer.deploys[1]
    assert attempt == 1 == h.sched.attempt
    assert sorted(d.subtask for d in descriptors) == sorted(PIPE[1])
    assert all(d.attempt == 1 for d in descriptors)
    # only the restarted subtasks got the new attempt
    assert h.sched.attempts == {s: (1 if s in PIPE[1] else 0) for s in ALL}
    assert sorted(h.sched.running()) == sorted(ALL)
    assert all(statuses[s] is TaskStatus.RUNNING for s in ALL)
    # the other pipelines were never cancelled, killed or redeployed
    assert h.deployer.cancelled() == PIPE[1] - {failed}
    assert h.deployer.kills == []
    assert h.sched.restart_strategy.failures == 1


def test_events_of_the_old_attempt_count_only_for_untouched_subtasks():
    h = streaming()
    h.fail(MAP[1])
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert h.sched.attempts[MAP[1]] == 1 and h.sched.attempts[MAP[0]] == 0

    # late events of the restarted pipeline's old attempt: ignored
    h.result(SRC[1], TaskState.FINISHED, attempt=0)
    h.fail(MAP[1], "late", attempt=0)
    h.result(SINK[1], TaskState.CANCELED, attempt=0)
    h.sched.on_task_lost(0, SINK[1], "the old actor died")
    assert all(h.sched.states[s] is TaskState.RUNNING for s in PIPE[1])
    assert len(h.sched.failures) == 1 and h.sched.status is JobStatus.RUNNING

    # results of attempt 0 of the untouched pipelines still count
    h.finish(*sorted(PIPE[0] | PIPE[2]))      # their own attempt: 0
    assert all(h.sched.states[s] is TaskState.FINISHED for s in PIPE[0] | PIPE[2])
    assert h.sched.status is JobStatus.RUNNING
    # ... and those of attempt 1 of an untouched one do not
    h2 = streaming()
    h2.fail(MAP[1])
    h2.report_cancelled()
    h2.advance(DELAY_MS)
    h2.result(SRC[0], TaskState.FINISHED, attempt=1)
    assert h2.sched.states[SRC[0]] is TaskState.RUNNING

    h.finish(*sorted(PIPE[1]))                # attempt 1
    assert h.sched.status is JobStatus.FINISHED
    assert h.sched.outcome().restarts == 1


def test_acks_of_the_old_attempt_count_only_for_untouched_subtasks():
    h = streaming()
    h.fail(SINK[1])
    h.report_cancelled()
    h.advance(DELAY_MS)
    cid = h.trigger_checkpoint()
    # every source is triggered, whatever its attempt
    assert sorted(t[0] for t in h.deployer.triggers if t[1] == cid) == SRC
    h.ack(sorted(ALL), cid, attempt=0)
    pending = h.sched.coordinator.pending(cid)
    assert pending is not None and pending.not_yet_acknowledged == PIPE[1]
    # a decline of the old attempt is ignored too
    h.sched.on_decline(0, SRC[1], cid, "DECLINED", "old attempt")
    assert h.sched.coordinator.pending_ids() == [cid]
    h.ack(sorted(PIPE[1]), cid)                # attempt 1
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid
    assert h.sched.status is JobStatus.RUNNING and len(h.sched.failures) == 1


def test_an_ended_input_of_the_old_attempt_is_ignored():
    h = streaming()
    h.fail(MAP[2])
    h.report_cancelled()
    h.advance(DELAY_MS)
    h.sched.on_ended_input(0, SRC[2])
    h.sched.on_ended_input(0, SRC[0])
    statuses = h.sched.coordinator.statuses
    assert statuses[SRC[2]] is TaskStatus.RUNNING
    assert statuses[SRC[0]] is TaskStatus.ENDED_INPUT


def test_full_failover_strategy_restarts_every_task():
    h = streaming(**{"jobmanager.execution.failover-strategy": "full"})
    h.fail(MAP[1])
    assert h.sched.status is JobStatus.RESTARTING
    assert h.deployer.cancels == [sorted(set(ALL) - {MAP[1]})]
    assert all(h.sched.coordinator.statuses[s] is TaskStatus.NOT_RUNNING for s in ALL)
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert h.sched.status is JobStatus.RUNNING and h.sched.restarts == 1
    attempt, descriptors = h.deployer.deploys[-1]
    assert attempt == 1 and sorted(d.subtask for d in descriptors) == sorted(ALL)
    assert h.sched.attempts == {s: 1 for s in ALL}


def test_a_task_that_ignores_the_cancel_is_killed_alone():
    h = streaming()
    h.fail(MAP[1])
    h.result(SRC[1], TaskState.CANCELED)      # SINK[1] never answers
    h.advance(CANCEL_GRACE_MS)
    assert h.deployer.kills == [] and len(h.deployer.deploys) == 1
    h.advance(1)
    assert h.deployer.kills == [[SINK[1]]]     # not the healthy pipelines
    assert sorted(h.sched.running()) == sorted(PIPE[0] | PIPE[2] | PIPE[1])
    assert h.deployer.deployed(1) == sorted(PIPE[1])
    h.advance(10 * CANCEL_GRACE_MS)
    assert h.deployer.kills == [[SINK[1]]]
    for s in sorted(ALL):
        h.result(s, TaskState.FINISHED)
    assert h.sched.status is JobStatus.FINISHED


def test_a_backoff_longer_than_the_cancel_grace_period_kills_nobody():
    h = streaming(**{"restart-strategy.fixed-delay.delay": f"{3 * CANCEL_GRACE_MS} ms"})
    h.fail(MAP[0])
    h.report_cancelled()                      # everybody answers at once
    h.advance(CANCEL_GRACE_MS + 1)
    h.advance(CANCEL_GRACE_MS)
    assert h.deployer.kills == []
    assert sorted(h.sched.running()) == sorted(PIPE[1] | PIPE[2])
    h.advance_to(3 * CANCEL_GRACE_MS)
    assert h.deployer.deployed(1) == sorted(PIPE[0])
    assert sorted(h.sched.running()) == sorted(ALL) and h.deployer.kills == []


def test_a_user_cancel_during_a_region_backoff_cancels_the_rest_and_never_redeploys():
    h = streaming()
    h.fail(MAP[0])
    h.report_cancelled()
    h.sched.cancel()
    assert h.sched.status is JobStatus.CANCELLING
    assert h.deployer.cancels[-1] == sorted(PIPE[1] | PIPE[2])
    h.report_cancelled()
    assert h.sched.status is JobStatus.CANCELED
    h.advance(10 * DELAY_MS)
    assert len(h.deployer.deploys) == 1 and h.sched.restarts == 0


# ---------------------------------------------------------------------------------------
# checkpoints while a region is down
# ---------------------------------------------------------------------------------------

def test_checkpoints_are_declined_while_a_region_is_down_and_resume_after(caplog):
    caplog.set_level(logging.INFO, logger="flowray")
    h = streaming()
    snapshots = {s: tagged_snapshot(s.key) for s in ALL}
    cid = h.trigger_checkpoint()
    h.ack(sorted(ALL), cid, snapshots)
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid == 1

    second = h.trigger_checkpoint()               # in flight when the region fails
    h.fail(MAP[2])
    assert second not in h.sched.coordinator.pending_ids()   # aborted
    h.report_cancelled()
    triggers = len(h.deployer.triggers)
    next_id = h.sched.coordinator.next_checkpoint_id
    # several periodic triggers fall in the backoff: each is declined before it starts
    for _ in range(3):
        due = h.sched.coordinator.next_trigger_ms
        assert due is not None and due < DELAY_MS + h.clock.monotonic_ms()
        h.advance_to(int(due))
    assert len(h.deployer.triggers) == triggers
    assert h.sched.coordinator.next_checkpoint_id == next_id
    assert h.sched.coordinator.pending_ids() == []
    # counted (and logged once) under their reason
    assert h.sched.stats.not_triggered() == {"NOT_ALL_TASKS_RUNNING": 3}
    assert h.sched.checkpoint_stats()["counts"]["not_triggered"] == 3
    assert "not triggered: 3 (NOT_ALL_TASKS_RUNNING)" in h.sched.stats.summary()
    assert [r.getMessage() for r in caplog.records if "not triggered" in r.getMessage()] \
        == ["flowray: checkpoint not triggered (NOT_ALL_TASKS_RUNNING: 3 task(s) not "
            f"running); retrying every {INTERVAL_MS} ms"]
    result = h.sched.coordinator.trigger_checkpoint()
    assert not result.ok and result.checkpoint_id is None
    assert result.failure is CheckpointFailureReason.NOT_ALL_TASKS_RUNNING
    statuses = h.sched.coordinator.statuses
    assert {s for s in ALL if statuses[s] is TaskStatus.NOT_RUNNING} == PIPE[2]
    assert h.sched.status is JobStatus.RUNNING and len(h.sched.failures) == 1

    h.advance_to(DELAY_MS + 200)
    assert h.sched.restarts == 1
    descriptors = h.deployer.last_descriptors
    assert sorted(descriptors) == sorted(PIPE[2])
    for s, d in descriptors.items():
        assert d.restore_checkpoint_id == 1
        index = s.index  # each subtask its own state
        assert {u: r.operator_states[index] for u, r in d.restore.operators.items()
                if r.operator_states[index] is not None} == snapshots[s].operators
    # triggering resumes (one interval after the redeploy) on every source
    third = h.trigger_checkpoint()
    assert third == next_id
    assert sorted(t[0] for t in h.deployer.triggers if t[1] == third) == SRC
    h.ack(sorted(ALL), third)
    assert h.sched.coordinator.latest_completed().checkpoint_id == third


def test_a_region_restart_without_a_completed_checkpoint_starts_from_scratch():
    h = streaming()
    h.fail(SRC[0])
    h.report_cancelled()
    h.advance(DELAY_MS)
    for d in h.deployer.last_descriptors.values():
        assert d.restore_checkpoint_id is None and d.restore is None


# ---------------------------------------------------------------------------------------
# two failures in different regions during one backoff
# ---------------------------------------------------------------------------------------

def test_two_region_failures_with_one_restart_allowed_fail_the_job():
    h = streaming(**{"restart-strategy.fixed-delay.attempts": 1})
    first = h.fail(MAP[0], "first")
    assert h.sched.status is JobStatus.RUNNING
    h.result(SRC[0], TaskState.CANCELED)
    h.advance(300)
    second = h.fail(SINK[2], "second")
    assert h.sched.status is JobStatus.FAILING
    assert h.sched.restart_strategy.failures == 2
    # everything still running is cancelled now
    assert h.deployer.cancels[-1] == sorted((PIPE[0] | PIPE[1] | PIPE[2])
                                            - {SRC[0], MAP[0], SINK[2]})
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED and h.sched.is_done
    out = h.sched.outcome()
    assert out.restarts == 0 and len(h.deployer.deploys) == 1
    assert h.sched.failures == [first, second]
    # the job failed because the second failure could not be restarted
    assert out.failure is second
    h.advance(10 * DELAY_MS)
    assert len(h.deployer.deploys) == 1


def test_two_region_failures_with_two_restarts_allowed_restart_both_regions():
    h = streaming()  # 2 attempts
    h.fail(MAP[0], "first")
    h.advance(300)
    h.fail(SINK[2], "second")
    assert h.sched.status is JobStatus.RUNNING
    assert h.sched.restart_strategy.failures == 2
    assert h.deployer.cancelled() == (PIPE[0] - {MAP[0]}) | (PIPE[2] - {SINK[2]})
    h.report_cancelled()
    assert sorted(h.sched.running()) == sorted(PIPE[1])
    # each region comes back when its own back-off is over
    h.advance_to(DELAY_MS)
    assert sorted(h.deployer.deployed(1)) == sorted(PIPE[0])
    assert h.sched.restarts == 1 and sorted(h.sched.running()) == sorted(PIPE[0] | PIPE[1])
    h.advance_to(300 + DELAY_MS - 1)
    assert len(h.deployer.deploys) == 2
    h.advance_to(300 + DELAY_MS)
    assert sorted(h.deployer.deployed(2)) == sorted(PIPE[2])
    assert h.sched.restarts == 2 and h.sched.status is JobStatus.RUNNING
    assert all(h.sched.attempts[s] > 0 for s in PIPE[0] | PIPE[2])
    assert all(h.sched.attempts[s] == 0 for s in PIPE[1])
    assert sorted(h.sched.running()) == sorted(ALL)
    # the restart strategy is used up: a third failure fails the job
    third = h.fail(MAP[1], "third")
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    assert h.sched.status is JobStatus.FAILED and h.sched.outcome().failure is third


def test_full_failover_twice_counts_two_restarts():
    h = streaming(**{"jobmanager.execution.failover-strategy": "full"})
    h.fail(MAP[0], "first")
    h.advance(300)
    h.report_cancelled()
    h.advance_to(DELAY_MS - 1)
    assert len(h.deployer.deploys) == 1
    h.advance_to(DELAY_MS)
    assert sorted(h.deployer.deployed(1)) == sorted(ALL)
    h.fail(SINK[2], "second")
    h.fail(MAP[1], "third, in tasks already restarting")   # part of the second
    h.report_cancelled()
    h.advance_to(2 * DELAY_MS)
    assert sorted(h.deployer.deployed(2)) == sorted(ALL)
    assert h.sched.restarts == 2 and h.sched.restart_strategy.failures == 2


def test_failovers_sharing_tasks_merge_and_wait_for_the_later_back_off():
    h = streaming()
    sched = h.sched
    sched._add_failover(PendingFailover(set(PIPE[0]), 100))
    sched._add_failover(PendingFailover(set(PIPE[2]), 300))
    sched._add_failover(PendingFailover({SRC[0], SRC[1]}, 200))  # touches PIPE[0] only
    assert sorted((sorted(f.tasks), f.restart_at, f.count) for f in sched._failovers) == \
        sorted([(sorted(PIPE[0] | {SRC[1]}), 200, 2), (sorted(PIPE[2]), 300, 1)])
    assert sched._restarting == PIPE[0] | PIPE[2] | {SRC[1]}
