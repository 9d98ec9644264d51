"""Helpers shared by test_scheduler.py, test_scheduler_lifecycle.py (moved out of one long test file)."""

from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.graph.execution_graph import ExecutionGraph
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.messages import JobStatus, TaskResult, TaskState
from flowray.state.snapshot import TaskStateSnapshot

from flowray.common.clock import ManualClock
from flowray.testing.jobmaster import RecordingDeployer
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    JOB,
    SchedulerHarness,
    scheduler_config,
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


SRC_NAME = f"{SRC.vertex_id}[0]"
#: how a failure without a result from SUM1 names the task (as the task names itself)
SUM_NAME = f"{EG.vertex(SUM1).name} (2/{EG.vertex(SUM1).parallelism})"


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
# checkpoint failures
# ---------------------------------------------------------------------------------------

def _expiring_config(**overrides):
    conf = {"execution.checkpointing.timeout": "1 s",
            "execution.checkpointing.tolerable-failed-checkpoints": 0}
    conf.update(overrides)
    return scheduler_config(**conf)


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
