"""Region-aware scheduling, pure: real execution graphs built through the API (never run),
a ManualClock, in-memory checkpoint storage, a deployer that records every call and, for
BATCH mode, a real BlockingPartitionStore under tmp_path. No Ray, no sleeps."""

import logging
import os
from types import SimpleNamespace

import pytest

from flowray.runtime.network.blocking_partition import (
    BlockingPartitionStore,
    CorruptPartitionError,
)
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.plan import TaskStatus
from flowray.runtime.messages import JobStatus
from flowray.runtime.network.elements import EndOfPartition, RecordBatch
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.execution.executor import prepare_job
from flowray.runtime.graph.job_graph import build_job_graph, mark_blocking_exchanges
from flowray.testing.jobmaster import RecordingDeployer
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.failure_handler import PendingFailover
from flowray.runtime.jobmaster.scheduler import CANCEL_GRACE_MS
from flowray.runtime.task.stream_task import StreamTask
from flowray.runtime.messages import TaskResult, TaskState
from flowray.operators.sources import NumberSequenceSource
from flowray.state.snapshot import TaskStateSnapshot
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    INTERVAL_MS,
    JOB,
    SchedulerHarness,
    scheduler_config,
    tagged_snapshot,
)


# ---------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------

class _Deployer(RecordingDeployer):
    def deployed(self, since=0):
        """Every subtask deployed by the deploy calls from index ``since`` on."""
        return [d.subtask for _, ds in self.deploys[since:] for d in ds]

    def cancelled(self):
        return {s for call in self.cancels for s in call}


class Harness(SchedulerHarness):
    def __init__(self, eg, config, plan_bytes=None, start=True, restart_strategy=None):
        super().__init__(eg, config, _Deployer(), "regions-test", plan_bytes=plan_bytes,
                         start=start, restart_strategy=restart_strategy)

    def result(self, subtask, state, failure=None, attempt=None, metrics=None):
        if attempt is None:
            attempt = self.sched.attempts[subtask]  # the subtask's own current attempt
        self.sched.on_task_result(attempt, TaskResult(subtask, state, failure, metrics or {}))

    def finish(self, *subtasks):
        for s in subtasks:
            self.result(s, TaskState.FINISHED)

    def report_cancelled(self, subtasks=None):
        """The tasks asked to cancel (and still running) answer CANCELED."""
        todo = self.deployer.cancelled() if subtasks is None else subtasks
        for s in sorted(todo):
            if self.sched.states[s] is TaskState.RUNNING:
                self.result(s, TaskState.CANCELED)

    def ack(self, subtasks, cid, snapshots=None, attempt=None):
        for s in subtasks:
            snap = snapshots[s] if snapshots is not None else TaskStateSnapshot()
            self.sched.on_acknowledge(self.sched.attempts[s] if attempt is None else attempt,
                                      s, cid, snap, {"sync_ms": 1})


def _plus_one(x):
    return x + 1


def _discard(_):
    return None


def _by_residue(x):
    return (x % 3, x)


def _first(t):
    return t[0]


# ---------------------------------------------------------------------------------------
# STREAMING: three independent pipelines (forward edges only), one region each
#
#     src0 -> map0 -> sink0        PIPE[0]
#     src1 -> map1 -> sink1        PIPE[1]
#     src2 -> map2 -> sink2        PIPE[2]        (-> pipelined)
# ---------------------------------------------------------------------------------------

def _pipelines_graph():
    env = local_env(3)
    env.from_source(NumberSequenceSource(1, 30), source_name="numbers") \
        .map(_plus_one).disable_chaining() \
        .add_sink(_discard)
    return ExecutionGraph(build_job_graph(stream_graph_of(env, "regions-test")))


# the scheduler only reads the graph: built once
EG = _pipelines_graph()
ALL = EG.subtasks()
SRC_V, MAP_V, SINK_V = [v.id for v in EG.job_graph.topological_order()]
SRC = [SubtaskId(SRC_V, i) for i in range(3)]
MAP = [SubtaskId(MAP_V, i) for i in range(3)]
SINK = [SubtaskId(SINK_V, i) for i in range(3)]
PIPE = [{SRC[i], MAP[i], SINK[i]} for i in range(3)]


def streaming(**overrides):
    return Harness(EG, scheduler_config(**overrides))


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
        assert d.restore_state is snapshots[s]   # each subtask its own state
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
        assert d.restore_checkpoint_id is None and d.restore_state is None


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


def test_a_failure_in_a_region_already_restarting_does_not_count_again():
    h = streaming(**{"restart-strategy.fixed-delay.attempts": 1})
    first = h.fail(MAP[1], "first")
    h.fail(SINK[1], "while being cancelled")
    h.report_cancelled()
    assert h.sched.failures == [first] and h.sched.restart_strategy.failures == 1
    h.advance(DELAY_MS)
    assert h.sched.restarts == 1 and h.sched.status is JobStatus.RUNNING
    assert h.deployer.deployed(1) == sorted(PIPE[1])


# ---------------------------------------------------------------------------------------
# BATCH: source (p2) -> map (p2) -> key_by [blocking] -> sum -> sink (p2); sum and sink
# are chained (one vertex) unless sink_apart
#
#     src0 -> map0 --|--> sum0 (-> sink0)
#                  \/
#                  /\
#     src1 -> map1 --|--> sum1 (-> sink1)         (-> pipelined, --|--> blocking)
# ---------------------------------------------------------------------------------------

class Batch:
    """The two-stage job, prepared for BATCH as the executor prepares it, a scheduler over
    it and a store on the same folder to play the producers' part."""

    def __init__(self, tmp_path, start=True, sink_apart=False, **overrides):
        env = local_env(2)
        summed = env.from_source(NumberSequenceSource(1, 20), source_name="numbers") \
            .map(_by_residue).disable_chaining() \
            .key_by(_first).sum(1)
        if sink_apart:  # stage 2 is two vertices: sum -> sink (pipelined, forward)
            summed.add_sink(_discard).disable_chaining()
        else:
            summed.add_sink(_discard)
        sg = stream_graph_of(env, "regions-batch")
        config = {"execution.runtime-mode": "BATCH",
                  "flowray.blocking-partitions.dir": str(tmp_path),
                  "restart-strategy.type": "fixed-delay",
                  "restart-strategy.fixed-delay.attempts": 3,
                  "restart-strategy.fixed-delay.delay": f"{DELAY_MS} ms"}
        config.update(overrides)
        job = prepare_job(build_job_graph(sg), {k: v for k, v in config.items()
                                                if v is not None})
        self.eg = ExecutionGraph(job.job_graph)
        src_v, map_v, sum_v, *sink_v = [v.id for v in job.job_graph.topological_order()]
        self.src = [SubtaskId(src_v, i) for i in range(2)]
        self.map = [SubtaskId(map_v, i) for i in range(2)]
        self.sum = [SubtaskId(sum_v, i) for i in range(2)]
        self.sink = [SubtaskId(v, i) for v in sink_v for i in range(2)]
        self.stage1 = set(self.src) | set(self.map)
        self.stage2 = set(self.sum) | set(self.sink)
        self.blocking = {p.producer: p for p in self.eg.result_partitions() if p.blocking}
        self.store = BlockingPartitionStore(str(tmp_path), JOB)
        self.h = Harness(self.eg, job.config, job.plan_bytes, start=start)
        self.sched = self.h.sched

    def produce(self, producer):
        """Write and publish every subpartition of ``producer``'s blocking partition."""
        for cid in self.blocking[producer].channel_ids:
            w = self.store.writer(cid, fsync=False)
            w.write(RecordBatch([(0, cid)]))
            w.write(EndOfPartition())
            w.close()

    def files_exist(self, producer):
        return [os.path.isfile(self.store.path(c))
                for c in self.blocking[producer].channel_ids]

    def lose(self, producer):
        for cid in self.blocking[producer].channel_ids:
            os.unlink(self.store.path(cid))

    def run_stage_1(self):
        for i in range(2):
            self.run_stage_1_pipeline(i)

    def run_stage_1_pipeline(self, i):
        self.produce(self.map[i])
        self.h.finish(self.src[i], self.map[i])


def test_batch_graph_has_a_blocking_hash_exchange_between_two_stages(tmp_path):
    b = Batch(tmp_path)
    edges = list(b.eg.job_graph.edges.values())
    assert sorted(e.result_type for e in edges) == ["blocking", "pipelined"]
    assert b.sched.batch and b.sched.partition_store == b.store
    assert sorted(b.blocking) == b.map
    for m in b.map:
        p = b.blocking[m]
        assert p.consumers == tuple(b.sum) and len(p.channel_ids) == 2
    assert sorted(map(sorted, b.sched.regions)) == sorted(
        [sorted({b.src[0], b.map[0]}), sorted({b.src[1], b.map[1]}), [b.sum[0]], [b.sum[1]]])
    # mark_blocking_exchanges is what made the difference
    env_graph = Batch(tmp_path / "other", start=False).eg.job_graph
    for e in env_graph.edges.values():
        e.result_type = "pipelined"
    mark_blocking_exchanges(env_graph)
    assert sorted(e.result_type for e in env_graph.edges.values()) == ["blocking", "pipelined"]


def test_batch_deploys_stage_2_once_every_producer_finished_with_its_partitions(tmp_path):
    b = Batch(tmp_path)
    assert len(b.h.deployer.deploys) == 1
    assert sorted(b.h.deployer.deployed()) == sorted(b.stage1)
    assert all(b.sched.states[s] is TaskState.CREATED for s in b.stage2)
    assert b.sched.coordinator.next_trigger_ms is None  # no checkpoints in BATCH

    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0])
    assert len(b.h.deployer.deploys) == 1           # map[1] still running
    b.h.finish(b.src[1])
    assert len(b.h.deployer.deploys) == 1
    b.produce(b.map[1])
    b.h.finish(b.map[1])
    assert len(b.h.deployer.deploys) == 2
    attempt, descriptors = b.h.deployer.deploys[1]
    assert attempt == 1 and sorted(d.subtask for d in descriptors) == b.sum
    for d in descriptors:
        assert all(i.blocking for i in d.inputs) and len(d.inputs) == 2
    assert sorted(b.sched.running()) == b.sum
    assert b.sched.status is JobStatus.RUNNING


def test_batch_stage_2_waits_for_the_partition_files(tmp_path):
    b = Batch(tmp_path)
    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0], b.src[1])
    b.produce(b.map[1])
    b.lose(b.map[1])                                 # gone before the producer reports
    b.h.finish(b.map[1])
    assert not b.sched.is_partition_available(b.blocking[b.map[1]].partition_id)
    assert b.sched.is_partition_available(b.blocking[b.map[0]].partition_id)
    assert len(b.h.deployer.deploys) == 1
    # the lost partition of a finished producer is a failure: its region runs again
    # (instead of the job waiting forever), and counts for the restart strategy
    assert b.sched.failures[-1].cause_type == "PartitionNotFoundError"
    assert b.sched.status is JobStatus.RUNNING
    assert b.map[1] in b.sched._restarting and b.map[0] not in b.sched._restarting


def test_batch_partitions_are_released_when_all_their_consumers_finished(tmp_path):
    b = Batch(tmp_path)
    b.run_stage_1()
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    # a producer's files outlive it: nobody has read them yet
    b.h.finish(b.sum[0])
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    assert b.sched.status is JobStatus.RUNNING
    b.h.finish(b.sum[1])
    assert all(b.files_exist(m) == [False, False] for m in b.map)
    assert b.sched.status is JobStatus.FINISHED
    assert not os.path.exists(b.store.job_dir)


def test_batch_partitions_are_kept_until_every_consumer_region_finished(tmp_path):
    """A consumer region of two vertices: the partitions stay while a sink still runs,
    so a sink failure restarts its own region (sum + sink) and not the producers.

        src0 -> map0 --|--> sum0 -> sink0
                     \/
                     /\
        src1 -> map1 --|--> sum1 -> sink1      (--|--> blocking, -> pipelined)
    """
    b = Batch(tmp_path, sink_apart=True)
    assert sorted(map(sorted, b.sched.regions)) == sorted(
        [sorted({b.src[0], b.map[0]}), sorted({b.src[1], b.map[1]}),
         sorted({b.sum[0], b.sink[0]}), sorted({b.sum[1], b.sink[1]})])
    b.run_stage_1()
    assert sorted(b.sched.running()) == sorted(b.stage2)
    b.h.finish(*b.sum)                        # the readers are done, the regions are not
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    b.h.finish(b.sink[1])
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    b.h.fail(b.sink[0])
    assert b.h.deployer.cancels == []         # sum0 had finished; nothing else involved
    b.h.advance(DELAY_MS)
    assert sorted(b.h.deployer.deployed(2)) == sorted({b.sum[0], b.sink[0]})
    assert all(b.sched.states[s] is TaskState.FINISHED for s in b.stage1)
    b.h.finish(b.sum[0])
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    b.h.finish(b.sink[0])                     # the last consumer region finished
    assert all(b.files_exist(m) == [False, False] for m in b.map)
    assert b.sched.status is JobStatus.FINISHED and b.sched.restarts == 1


def test_batch_stage_2_failure_restarts_only_its_region(tmp_path):
    b = Batch(tmp_path)
    b.run_stage_1()
    b.h.finish(b.sum[1])
    b.h.clock.advance(10)
    failure = b.h.fail(b.sum[0])
    assert b.sched.status is JobStatus.RUNNING
    assert b.h.deployer.cancels == []                # nothing else in its region
    assert b.sched.failures == [failure]
    b.h.advance(DELAY_MS - 1)
    assert len(b.h.deployer.deploys) == 2
    b.h.advance(1)
    assert len(b.h.deployer.deploys) == 3
    attempt, descriptors = b.h.deployer.deploys[2]
    assert attempt == 2 and [d.subtask for d in descriptors] == [b.sum[0]]
    assert b.sched.restarts == 1
    # stage 1 was neither cancelled nor run again; its partitions are still there
    assert all(b.sched.states[s] is TaskState.FINISHED for s in b.stage1)
    assert b.sched.attempts == {**{s: 0 for s in b.stage1}, b.sum[0]: 2, b.sum[1]: 1}
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    b.h.finish(b.sum[0])
    assert all(b.files_exist(m) == [False, False] for m in b.map)
    assert b.sched.status is JobStatus.FINISHED and b.sched.outcome().restarts == 1
    assert not os.path.exists(b.store.job_dir)


def test_batch_stage_1_failure_restarts_its_pipeline_only(tmp_path):
    b = Batch(tmp_path)
    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0])
    b.h.fail(b.map[1])
    assert b.h.deployer.cancels == [[b.src[1]]]
    b.h.report_cancelled()
    b.h.advance(DELAY_MS)
    assert b.h.deployer.deployed(1) == sorted({b.src[1], b.map[1]})
    b.produce(b.map[1])
    b.h.finish(b.src[1], b.map[1])
    assert sorted(b.h.deployer.deployed(2)) == b.sum
    b.h.finish(*b.sum)
    assert b.sched.status is JobStatus.FINISHED and b.sched.restarts == 1


@pytest.mark.parametrize("other_consumer_done", [False, True])
def test_batch_lost_partition_restarts_its_producer_region_first(tmp_path,
                                                                 other_consumer_done):
    b = Batch(tmp_path)
    b.run_stage_1()
    if other_consumer_done:
        b.h.finish(b.sum[1])
    b.lose(b.map[0])
    b.h.fail(b.sum[0], "partition not found")
    # rule 2: map[0]'s partition is gone, so its pipeline runs again; rule 3: every
    # consumer of that partition (sum[1] too, even finished) runs again; pipeline 1
    # keeps its partition and is not touched
    if other_consumer_done:
        assert b.h.deployer.cancels == []
    else:
        assert b.h.deployer.cancels == [[b.sum[1]]]
        b.h.report_cancelled()
    assert b.sched.status is JobStatus.RUNNING
    b.h.advance(DELAY_MS)
    assert sorted(b.h.deployer.deployed(2)) == sorted({b.src[0], b.map[0]})
    assert sorted(b.sched.running()) == sorted({b.src[0], b.map[0]})
    assert all(b.sched.states[s] is TaskState.CREATED for s in b.stage2)
    assert b.sched.restarts == 1
    # the consumers wait until the producer finished again
    b.h.finish(b.src[0])
    assert len(b.h.deployer.deploys) == 3
    b.produce(b.map[0])
    b.h.finish(b.map[0])
    assert len(b.h.deployer.deploys) == 4
    assert sorted(b.h.deployer.deployed(3)) == b.sum
    assert b.h.deployer.cancelled() <= {b.sum[1]}
    assert all(b.sched.attempts[s] == 0 for s in (b.src[1], b.map[1]))
    b.h.finish(*b.sum)
    assert all(b.files_exist(m) == [False, False] for m in b.map)
    assert b.sched.status is JobStatus.FINISHED
    assert not os.path.exists(b.store.job_dir)


def test_batch_a_truncated_partition_restarts_its_producer_region(tmp_path):
    """The file is there but cannot be read to its end: the read error names the channel,
    and the strategy takes that partition as unavailable (rule 2) instead of letting the
    consumer read the same bad file on every restart.

        src0 -> map0 --|--> sum0   (map0's file for sum0 is truncated)
                     \/
                     /\
        src1 -> map1 --|--> sum1
    """
    b = Batch(tmp_path)
    b.run_stage_1()
    bad = b.blocking[b.map[0]].channel_ids[0]
    path = b.store.path(bad)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1)
    reader = b.store.reader(bad)
    with pytest.raises(CorruptPartitionError) as err:
        while reader.poll() is not None:
            pass
    failure = StreamTask._failure(SimpleNamespace(tdd=SimpleNamespace(
        display_name="sum (1/2)")), err.value)
    assert failure.failed_channel == bad and failure.cause_type == "CorruptPartitionError"
    b.h.result(b.sum[0], TaskState.FAILED, failure)
    assert b.h.deployer.cancels == [[b.sum[1]]]     # rule 3: map0's other consumer
    b.h.report_cancelled()
    b.h.advance(DELAY_MS)
    assert sorted(b.h.deployer.deployed(2)) == sorted({b.src[0], b.map[0]})
    b.run_stage_1_pipeline(0)
    assert sorted(b.h.deployer.deployed(3)) == b.sum
    b.h.finish(*b.sum)
    assert b.sched.status is JobStatus.FINISHED and b.sched.restarts == 1


def test_batch_failed_job_releases_every_partition(tmp_path):
    b = Batch(tmp_path, **{"restart-strategy.type": "none"})
    b.run_stage_1()
    failure = b.h.fail(b.sum[0])
    assert b.sched.status is JobStatus.FAILING
    assert b.h.deployer.cancels == [[b.sum[1]]]
    assert all(b.files_exist(m) == [True, True] for m in b.map)
    b.h.report_cancelled()
    assert b.sched.status is JobStatus.FAILED and b.sched.outcome().failure is failure
    assert not os.path.exists(b.store.job_dir)


def test_batch_cancelled_job_releases_every_partition(tmp_path):
    b = Batch(tmp_path)
    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0])
    b.sched.cancel()
    b.h.report_cancelled()
    assert b.sched.status is JobStatus.CANCELED
    assert not os.path.exists(b.store.job_dir)


@pytest.mark.parametrize("stop", ["cancel", "fail"])
def test_batch_a_producer_finishing_while_the_job_stops_deploys_nothing(tmp_path, stop):
    b = Batch(tmp_path, **{"restart-strategy.type": "none"})
    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0])
    b.produce(b.map[1])              # map[1] wrote everything but has not reported yet
    if stop == "cancel":
        b.h.finish(b.src[1])
        b.sched.cancel()
        assert b.sched.status is JobStatus.CANCELLING
    else:
        failure = b.h.fail(b.src[1])
        assert b.sched.status is JobStatus.FAILING
    assert b.h.deployer.cancels == [[b.map[1]]]
    b.h.finish(b.map[1])             # it had finished before the cancel reached it
    assert len(b.h.deployer.deploys) == 1     # stage 2 is not started by a stopping job
    if stop == "cancel":
        assert b.sched.status is JobStatus.CANCELED
    else:
        assert b.sched.status is JobStatus.FAILED and b.sched.outcome().failure is failure
    assert not os.path.exists(b.store.job_dir)


def test_batch_a_partition_of_a_restarting_producer_is_not_available(tmp_path):
    b = Batch(tmp_path)
    b.produce(b.map[0])
    b.h.finish(b.src[0], b.map[0])
    b.produce(b.map[1])              # map[1] wrote everything but has not reported yet
    b.sched.on_task_lost(0, b.src[1], "actor died")
    assert b.h.deployer.cancels == [[b.map[1]]]
    b.h.finish(b.map[1])             # it had finished before the cancel reached it
    pid = b.blocking[b.map[1]].partition_id
    assert not b.sched.is_partition_available(pid)
    assert len(b.h.deployer.deploys) == 1     # no consumer of a pipeline about to rerun
    b.h.advance(DELAY_MS)
    assert b.h.deployer.deployed(1) == sorted({b.src[1], b.map[1]})
    assert not b.sched.is_partition_available(pid)
    b.produce(b.map[1])
    b.h.finish(b.src[1], b.map[1])
    assert b.sched.is_partition_available(pid)
    assert sorted(b.h.deployer.deployed(2)) == b.sum
    b.h.finish(*b.sum)
    assert b.sched.status is JobStatus.FINISHED and b.sched.restarts == 1


# ---------------------------------------------------------------------------------------
# BATCH, three stages: a released partition that is needed again is produced again, and
# released again once its consumers finished (again)
#
#     a0 --|--> b0 --|--> c0          (every exchange all-to-all: a_i feeds b0 and b1,
#     a1 --|--> b1 --|--> c1           b_i feeds c0 and c1; --|--> blocking)
# ---------------------------------------------------------------------------------------

def test_batch_a_released_partition_produced_again_is_released_again(tmp_path):
    env = local_env(2)
    env.from_source(NumberSequenceSource(1, 20), source_name="numbers") \
        .map(_by_residue) \
        .key_by(_first).sum(1) \
        .key_by(_first).sum(1) \
        .add_sink(_discard)
    sg = stream_graph_of(env, "three-stages")
    job = prepare_job(build_job_graph(sg), {
        "execution.runtime-mode": "BATCH", "flowray.blocking-partitions.dir": str(tmp_path),
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
        "restart-strategy.fixed-delay.delay": f"{DELAY_MS} ms"})
    eg = ExecutionGraph(job.job_graph)
    a_v, b_v, c_v = [v.id for v in job.job_graph.topological_order()]
    a, b, c = ([SubtaskId(v, i) for i in range(2)] for v in (a_v, b_v, c_v))
    partitions = {p.producer: p for p in eg.result_partitions()}
    assert all(p.blocking for p in partitions.values()) and len(partitions) == 4
    store = BlockingPartitionStore(str(tmp_path), JOB)
    h = Harness(eg, job.config, job.plan_bytes)

    def produce(*producers):
        for producer in producers:
            for cid in (partitions[producer].channel_ids if producer in partitions else ()):
                w = store.writer(cid, fsync=False)
                w.write(EndOfPartition())
                w.close()

    def files(*producers):
        return {os.path.isfile(store.path(cid))
                for p in producers for cid in partitions[p].channel_ids}

    def run_stage(stage):
        assert sorted(h.sched.running()) == stage
        produce(*stage)
        h.finish(*stage)

    run_stage(a)
    run_stage(b)
    assert files(*a) == {False} and files(*b) == {True}   # a's consumers are done
    h.finish(c[1])
    for cid in partitions[b[0]].channel_ids:               # b[0]'s result is lost
        os.unlink(store.path(cid))
    h.fail(c[0], "partition not found")
    # rule 2 twice (b[0]'s partition is lost, a's were released), rule 3 for the rest
    assert h.sched.status is JobStatus.RESTARTING and h.deployer.cancels == []
    h.advance(DELAY_MS)
    assert sorted(h.deployer.deployed(3)) == a
    run_stage(a)
    run_stage(b)
    assert files(*a) == {False}       # released again: every consumer finished again
    run_stage(c)
    assert h.sched.status is JobStatus.FINISHED and h.sched.restarts == 1
    assert not os.path.exists(store.job_dir)
