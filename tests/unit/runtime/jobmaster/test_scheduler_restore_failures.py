"""The job master and failures while restoring a checkpoint, pure: a damaged checkpoint
falls back to the previous retained one (a global failover) or fails the job; the same
error restoring over and over fails the job; any failure during a stop-with-savepoint
restarts every task. Real execution graphs (never run), a ManualClock, in-memory
checkpoint storage and a recording deployer."""

import pytest
from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.coordinator import CheckpointRecoveryError
from flowray.runtime.checkpoint.state_assignment import vertex_layouts
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.graph.execution_graph import ExecutionGraph
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.messages import JobStatus, TaskFailure, TaskResult, TaskState

from flowray.common.clock import ManualClock
from flowray.testing import TransactionalTestingSink
from flowray.testing.jobmaster import RecordingDeployer
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    JOB,
    SchedulerHarness,
    scheduler_config,
    tagged_snapshot,
)
from tests.support.scheduler_jobs import ALL, EG, SRC, SUM0, SUM1, Harness
from tests.support.scheduler_regions import ALL as PIPES_ALL
from tests.support.scheduler_regions import EG as PIPES_EG
from tests.support.scheduler_regions import Harness as RegionsHarness
from tests.support.scheduler_regions import MAP, PIPE, streaming

PLAN_BYTES = {v: f"plan-{v}".encode() for v in EG.vertices}
RETAIN_TWO = {"execution.checkpointing.num-retained": 2}
RETAINED_ON_FAILURE = {
    "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"}


def restore_failure(subtask, cid, cause_type="CorruptedStateError",
                    message="checkpoint file damaged: memory://job-1/chk-2/x.keyed"):
    return TaskFailure(f"{subtask.vertex_id}[{subtask.index}]", None, cause_type, message,
                       f"Traceback...\n{cause_type}: {message}", False,
                       restoring_checkpoint=cid)


def restores(deployer):
    """Checkpoint id each subtask of the last deployment restores."""
    return {s: d.restore_checkpoint_id for s, d in deployer.last_descriptors.items()}


def complete(h, subtasks, tag):
    """Trigger the next checkpoint and let ``subtasks`` acknowledge it; its id."""
    cid = h.trigger_checkpoint()
    for s in subtasks:
        h.sched.on_acknowledge(h.sched.attempts[s], s, cid, tagged_snapshot(f"{tag}-{s.key}"),
                               {"sync_ms": 1})
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid
    return cid


def restarted_from_checkpoint_2(config=None):
    """Checkpoints 1 and 2 completed (both retained), then a failure: every task restores
    checkpoint 2 in attempt 1."""
    h = Harness(config=scheduler_config(**RETAIN_TWO) if config is None else config)
    assert not h.sched.commits_on_complete
    assert complete(h, ALL, "one") == 1
    assert complete(h, ALL, "two") == 2
    h.fail_and_restart(SUM0)
    assert h.sched.attempt == 1 and restores(h.deployer) == {s: 2 for s in ALL}
    return h


# ---------------------------------------------------------------------------------------
# a damaged checkpoint: fall back
# ---------------------------------------------------------------------------------------

def test_a_damaged_checkpoint_falls_back_to_the_previous_one():
    h = restarted_from_checkpoint_2()
    cancels_before = len(h.deployer.cancels)
    failure = restore_failure(SUM1, 2)
    h.result(SUM1, TaskState.FAILED, failure)
    assert h.sched.status is JobStatus.RESTARTING
    assert h.deployer.cancels[cancels_before:] == [sorted([SRC, SUM0])]
    # checkpoint 2 is forgotten and deleted; 1 is the latest again
    assert [c.checkpoint_id for c in h.sched.coordinator.store.all()] == [1]
    assert h.storage.list_completed() == [1]
    assert h.storage.latest_completed_record() == 1
    message = ("checkpoint 2 cannot be restored (CorruptedStateError: checkpoint file "
               "damaged: memory://job-1/chk-2/x.keyed); falling back to checkpoint 1")
    assert h.sched.checkpoint_stats()["fallbacks"] == [message]

    h.report_cancelled()
    h.advance(DELAY_MS - 1)
    assert h.sched.attempt == 1
    h.advance(1)
    assert h.sched.attempt == 2 and h.sched.status is JobStatus.RUNNING
    assert restores(h.deployer) == {s: 1 for s in ALL}
    for s, d in h.deployer.last_descriptors.items():  # checkpoint 1's state, not 2's
        own = {u for u, r in d.restore.operators.items() if r.operator_states[s.index]}
        assert own == {f"op-one-{s.key}"}
        assert not any(u.startswith("op-two-") for u in d.restore.operators)
    stats = h.sched.checkpoint_stats()
    assert stats["latest_restore"]["checkpoint_id"] == 1
    assert not stats["latest_restore"]["is_savepoint"]
    assert stats["fallbacks"] == [message]
    assert h.sched.restarts == 2 and h.sched.failures[-1] is failure
    # ids go on after the dropped checkpoint
    assert complete(h, ALL, "three") == 3


def test_a_missing_file_falls_back_too():
    h = restarted_from_checkpoint_2()
    h.result(SRC, TaskState.FAILED,
             restore_failure(SRC, 2, "FileNotFoundError", "checkpoint file not found: x"))
    assert h.sched.status is JobStatus.RESTARTING
    assert len(h.sched.checkpoint_stats()["fallbacks"]) == 1
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert restores(h.deployer) == {s: 1 for s in ALL}


def test_a_fallback_restarts_every_task_even_with_region_failover():
    h = streaming(**RETAIN_TWO)
    complete(h, PIPES_ALL, "one")
    complete(h, PIPES_ALL, "two")
    h.result(MAP[0], TaskState.FAILED, restore_failure(MAP[0], 2))
    # a global failover: every pipeline must restore the same checkpoint
    assert h.deployer.cancelled() == set(PIPES_ALL) - {MAP[0]}
    assert h.sched.status is JobStatus.RESTARTING
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert sorted(h.deployer.deployed(1)) == sorted(PIPES_ALL)
    assert {d.restore_checkpoint_id for d in h.deployer.deploys[-1][1]} == {1}
    assert h.sched.restarts == 1


def test_an_ordinary_failure_restarts_only_its_pipeline():  # the contrast to the above
    h = streaming(**RETAIN_TWO)
    complete(h, PIPES_ALL, "one")
    h.fail(MAP[0])
    assert h.deployer.cancelled() == PIPE[0] - {MAP[0]}


# ---------------------------------------------------------------------------------------
# a damaged checkpoint: the job fails
# ---------------------------------------------------------------------------------------

@pytest.fixture
def transactional(tmp_path):
    """collection source -> keyed sum -> TransactionalTestingSink (a two-phase-commit
    sink: commits when a checkpoint completes); checkpoints 1 and 2 completed."""
    env = local_env(2)
    env.from_collection([("a", 1), ("b", 2)]).key_by(lambda t: t[0]).sum(1) \
        .sink_to(TransactionalTestingSink(str(tmp_path / "out")))
    eg = ExecutionGraph(build_job_graph(stream_graph_of(env, "tx-test")))
    h = JobHarness(eg, scheduler_config(**RETAIN_TWO, **RETAINED_ON_FAILURE), "tx-test")
    assert h.sched.commits_on_complete
    subtasks = eg.subtasks()
    complete(h, subtasks, "one")
    complete(h, subtasks, "two")
    return h, subtasks


class JobHarness(SchedulerHarness):
    def __init__(self, eg, config, job_name, start=True):
        super().__init__(eg, config, RecordingDeployer(), job_name, start=start)

    def result(self, subtask, state, failure=None, attempt=None, metrics=None):
        self.sched.on_task_result(self.sched.attempt if attempt is None else attempt,
                                  TaskResult(subtask, state, failure, metrics or {}))


def test_a_damaged_checkpoint_of_a_committing_job_fails_the_job(transactional):
    h, subtasks = transactional
    failed = subtasks[-1]
    h.result(failed, TaskState.FAILED, restore_failure(failed, 2))
    assert h.sched.status is JobStatus.FAILING
    for s in subtasks:
        if s != failed:
            h.result(s, TaskState.CANCELED)
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED
    assert out.failure.cause_type == "CorruptedStateError"
    assert out.failure.message == (
        "checkpoint 2 cannot be restored (CorruptedStateError: checkpoint file damaged: "
        "memory://job-1/chk-2/x.keyed); its transactions were committed, so falling back "
        "to checkpoint 1 would commit records twice: repair the file or start the job "
        "from a savepoint")
    assert h.sched.restarts == 0 and out.checkpoint_stats["fallbacks"] == []
    # nothing was dropped: the file can be repaired
    assert [c.checkpoint_id for c in h.sched.coordinator.store.all()] == [1, 2]
    assert h.storage.list_completed() == [1, 2]


def test_a_damaged_checkpoint_with_nothing_older_fails_the_job():
    h = Harness(config=scheduler_config(**RETAINED_ON_FAILURE))  # one retained checkpoint
    complete(h, ALL, "one")
    complete(h, ALL, "two")
    h.fail_and_restart(SUM0)
    h.result(SUM1, TaskState.FAILED, restore_failure(SUM1, 2))
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED and out.failure.cause_type == "CorruptedStateError"
    assert "no older retained checkpoint" in out.failure.message
    assert h.storage.list_completed() == [2]


# ---------------------------------------------------------------------------------------
# the same error restoring, again and again
# ---------------------------------------------------------------------------------------

MANY_RESTARTS = scheduler_config(**{"restart-strategy.fixed-delay.attempts": 10})


def fail_restoring(h, cid, message="out of memory"):
    h.result(SUM1, TaskState.FAILED, restore_failure(SUM1, cid, "MemoryError", message))


def test_three_identical_restore_failures_fail_the_job():
    h = Harness(config=MANY_RESTARTS)
    complete(h, ALL, "one")
    h.fail_and_restart(SUM0)
    for attempt in (2, 3):
        fail_restoring(h, 1)
        assert h.sched.status is JobStatus.RESTARTING
        h.report_cancelled()
        h.advance(DELAY_MS)
        assert h.sched.attempt == attempt and restores(h.deployer) == {s: 1 for s in ALL}
    fail_restoring(h, 1)
    assert h.sched.status is JobStatus.FAILING
    h.report_cancelled()
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED and out.failure.cause_type == "MemoryError"
    assert out.failure.message == ("restoring checkpoint 1 failed 3 times in a row with the "
                                   "same error, giving up: MemoryError: out of memory")
    assert out.restarts == 3  # the first failure and two of the restore failures
    assert h.sched.coordinator.latest_completed().checkpoint_id == 1  # never dropped


def test_a_failure_after_a_restore_went_through_counts_afresh():
    h = Harness(config=MANY_RESTARTS)
    complete(h, ALL, "one")
    h.fail_and_restart(SUM0)
    for _ in range(2):
        fail_restoring(h, 1)
        h.report_cancelled()
        h.advance(DELAY_MS)
    h.fail_and_restart(SUM0)  # a failure after restoring: the restore went through
    for _ in range(2):
        fail_restoring(h, 1)
        assert h.sched.status is JobStatus.RESTARTING
        h.report_cancelled()
        h.advance(DELAY_MS)
    fail_restoring(h, 1)
    assert h.sched.status is JobStatus.FAILING


def test_different_restore_errors_do_not_add_up():
    h = Harness(config=MANY_RESTARTS)
    complete(h, ALL, "one")
    h.fail_and_restart(SUM0)
    for message in ("a", "a", "b", "b", "a", "a"):
        fail_restoring(h, 1, message)
        assert h.sched.status is JobStatus.RESTARTING
        h.report_cancelled()
        h.advance(DELAY_MS)
    assert h.sched.status is JobStatus.RUNNING and h.sched.restarts == 7


def test_a_restore_failure_is_still_bounded_by_the_restart_strategy():
    h = Harness()  # two restarts
    complete(h, ALL, "one")
    h.fail_and_restart(SUM0)
    fail_restoring(h, 1, "a")
    h.report_cancelled()
    h.advance(DELAY_MS)
    failure = restore_failure(SUM1, 1, "MemoryError", "b")
    h.result(SUM1, TaskState.FAILED, failure)
    h.report_cancelled()
    out = h.sched.outcome()
    assert out.status is JobStatus.FAILED and out.failure is failure
    assert out.failure.message == "b"


# ---------------------------------------------------------------------------------------
# stop-with-savepoint
# ---------------------------------------------------------------------------------------

class Done:
    def __init__(self):
        self.calls = []

    def __call__(self, location, error):
        self.calls.append((location, error))


@pytest.mark.parametrize("inputs_ended", [False, True], ids=["stopping", "savepoint"])
def test_a_task_failure_during_stop_with_savepoint_restarts_every_task(inputs_ended):
    h = streaming()
    stops = []
    h.deployer.stop_sources = lambda subtasks, mode: stops.append(sorted(subtasks))
    done = Done()
    h.sched.stop_with_savepoint("/sp", False, done)
    assert h.sched.coordinator.stopping and len(stops) == 1
    if inputs_ended:
        for s in PIPES_ALL:
            h.sched.on_ended_input(h.sched.attempts[s], s)
        assert len(h.sched.coordinator.pending_ids()) == 1  # the savepoint
    h.fail(MAP[1])
    # the sources stopped everywhere: not only MAP[1]'s pipeline restarts
    assert h.deployer.cancelled() == set(PIPES_ALL) - {MAP[1]}
    assert h.sched.status is JobStatus.RESTARTING
    assert len(done.calls) == 1 and done.calls[0][0] is None
    assert not h.sched.coordinator.stopping
    h.report_cancelled()
    h.advance(DELAY_MS)
    assert sorted(h.deployer.deployed(1)) == sorted(PIPES_ALL)
    assert h.sched.status is JobStatus.RUNNING and h.sched.restarts == 1
    # and a later failure is regional again
    before = len(h.deployer.cancels)
    h.fail(MAP[2])
    assert {s for call in h.deployer.cancels[before:] for s in call} == PIPE[2] - {MAP[2]}


# ---------------------------------------------------------------------------------------
# checkpoints on demand
# ---------------------------------------------------------------------------------------

def test_trigger_checkpoint_reports_the_checkpoint_directory():
    h = Harness()
    done = Done()
    h.sched.trigger_checkpoint(done)
    (cid,) = h.sched.coordinator.pending_ids()
    assert done.calls == []
    h.ack_all(cid)
    assert done.calls == [(h.storage.checkpoint_dir(cid), None)]
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid


def test_trigger_checkpoint_while_restarting_or_without_checkpointing_fails():
    h = Harness()
    h.fail(SUM0)
    done = Done()
    h.sched.trigger_checkpoint(done)
    assert done.calls == [(None, "cannot take a checkpoint: the job is RESTARTING")]
    sched = JobScheduler(JOB, "no-checkpoints", EG, PLAN_BYTES, RecordingDeployer(),
                         ManualClock(0), {})
    assert sched.storage is None
    sched.start()
    done = Done()
    sched.trigger_checkpoint(done)
    assert done.calls == [(None, "cannot take a checkpoint: checkpointing is not enabled")]


# ---------------------------------------------------------------------------------------
# a restarted job master whose newest checkpoint cannot be read
# ---------------------------------------------------------------------------------------

def successor(h, config, job_name="sched-test"):
    """A new scheduler over the same checkpoint storage, as a restarted job master."""
    return JobScheduler(JOB, job_name, h.eg, {v: f"plan-{v}".encode() for v in h.eg.vertices},
                        RecordingDeployer(), ManualClock(0), config,
                        storage=MemoryCheckpointStorage(JOB, h.storage.files))


def test_a_restarted_job_master_falls_back_past_unreadable_metadata():
    config = scheduler_config(**RETAIN_TWO)
    h = Harness(config=config)
    complete(h, ALL, "one")
    complete(h, ALL, "two")
    h.storage.write_file(h.storage.metadata_path(2), b"garbage")
    sched = successor(h, config)
    assert sched.recover(first_attempt=100) == 1
    sched.start()
    assert restores(sched.deployer) == {s: 1 for s in ALL}
    assert sched.coordinator.next_checkpoint_id == 3
    assert h.storage.list_completed() == [1]


def test_a_restarted_job_master_of_a_committing_job_does_not_fall_back(transactional):
    h, subtasks = transactional
    h.storage.write_file(h.storage.metadata_path(2), b"garbage")
    sched = successor(h, scheduler_config(**RETAIN_TWO), "tx-test")
    assert sched.commits_on_complete
    with pytest.raises(CheckpointRecoveryError, match="twice") as e:
        sched.recover(first_attempt=100)
    assert h.storage.metadata_path(2) in str(e.value)


# ---------------------------------------------------------------------------------------
# which jobs commit when a checkpoint completes
# ---------------------------------------------------------------------------------------

class Listening:
    """A map function told of completed checkpoints (a checkpoint listener)."""

    def map(self, value):
        return value

    def notify_checkpoint_complete(self, checkpoint_id):
        pass


def _commits(build):
    env = local_env(2)
    build(env.from_collection([1, 2, 3]))
    eg = ExecutionGraph(build_job_graph(stream_graph_of(env, "commits")))
    return JobHarness(eg, scheduler_config(), "commits", start=False).sched.commits_on_complete


def test_commits_on_complete_comes_from_the_operators(tmp_path):
    assert not _commits(lambda s: s.map(lambda x: x).add_sink(lambda v: None))
    assert _commits(lambda s: s.map(Listening()).add_sink(lambda v: None))
    assert _commits(lambda s: s.sink_to(TransactionalTestingSink(str(tmp_path / "out"))))


# ---------------------------------------------------------------------------------------
# a savepoint the job started from
# ---------------------------------------------------------------------------------------

SAVEPOINT = CompletedCheckpoint("old-job", 41, 0, 0, {}, is_savepoint=True,
                                external_path="/sp/savepoint-1/_metadata",
                                vertices=vertex_layouts(EG.job_graph))


def from_savepoint(config):
    return JobScheduler(JOB, "sched-test", EG, PLAN_BYTES, RecordingDeployer(),
                        ManualClock(0), config, storage=MemoryCheckpointStorage(JOB),
                        initial_checkpoint=SAVEPOINT)


def test_a_damaged_savepoint_the_job_started_from_fails_the_job():
    sched = from_savepoint(scheduler_config(**RETAIN_TWO))
    sched.start()
    assert restores(sched.deployer) == {s: 41 for s in ALL}
    sched.on_task_result(0, TaskResult(SUM0, TaskState.FAILED, restore_failure(SUM0, 41)))
    assert sched.status is JobStatus.FAILING
    for s in (SRC, SUM1):
        sched.on_task_result(0, TaskResult(s, TaskState.CANCELED))
    out = sched.outcome()
    assert out.status is JobStatus.FAILED and out.failure.cause_type == "CorruptedStateError"
    assert out.failure.message.startswith("the savepoint the job starts from cannot be "
                                          "restored (CorruptedStateError: ")


# ---------------------------------------------------------------------------------------
# several regions failing to restore in one attempt
# ---------------------------------------------------------------------------------------

def test_regions_failing_to_restore_in_one_attempt_count_as_one_repeat():
    config = scheduler_config(**{"restart-strategy.fixed-delay.attempts": 10})
    first = RegionsHarness(PIPES_EG, config)
    complete(first, PIPES_ALL, "one")
    # its job master restarts: every pipeline restores checkpoint 1
    h = RegionsHarness(PIPES_EG, config, start=False)
    h.storage.files.update(first.storage.files)
    assert h.sched.recover(first_attempt=10) == 1
    h.sched.start()
    assert {d.restore_checkpoint_id for d in h.deployer.deploys[-1][1]} == {1}
    for m in MAP:  # each pipeline's map fails restoring checkpoint 1, the same way
        h.result(m, TaskState.FAILED, restore_failure(m, 1, "MemoryError", "out of memory"))
    assert h.sched.status is JobStatus.RESTARTING  # three region restarts, not a failure



# ---------------------------------------------------------------------------------------
# a restarted job master continues the restart budget
# ---------------------------------------------------------------------------------------

def test_a_restarted_job_master_continues_the_restart_budget_and_count():
    config = scheduler_config()  # fixed-delay, 2 attempts
    h = Harness(config=config)
    h.fail_and_restart(SUM0, "first")
    h.fail_and_restart(SRC, "second")
    sched = successor(h, config)
    sched.recover(first_attempt=100)
    assert sched.restarts == 2               # numRestarts counts on
    sched.start()
    # a third failure exceeds the budget, as it would have without the master's restart
    sched.on_task_result(sched.attempts[SUM1], TaskResult(
        SUM1, TaskState.FAILED, TaskFailure("sum (2/2)", SUM1, "ValueError", "third", "", True)))
    assert sched.status is JobStatus.FAILING


def test_a_changed_restart_strategy_starts_a_new_budget():
    h = Harness(config=scheduler_config())
    h.fail_and_restart(SUM0, "first")
    h.fail_and_restart(SRC, "second")
    sched = successor(h, scheduler_config(**{"restart-strategy.fixed-delay.attempts": 5}))
    sched.recover(first_attempt=100)
    assert sched.restarts == 2 and sched.restart_strategy.failures == 0
