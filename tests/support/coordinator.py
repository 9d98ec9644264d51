"""Helpers shared by test_coordinator.py, test_coordinator_finished_tasks.py (moved out of one long test file)."""

from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.plan import TaskStatus, compute_checkpoint_plan
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.storage import (
    LATEST_COMPLETED_FILE,
    RESERVED_IDS_FILE,
    MemoryCheckpointStorage,
)
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.snapshot import (
    SPLIT_DISTRIBUTE,
    OperatorStateEntry,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

from flowray.common.clock import ManualClock
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


def checkpoint_files(storage):
    """``storage``'s files but the job's own notes (the ids handed out, the latest)."""
    notes = {f"{storage.job_root}/{n}" for n in (RESERVED_IDS_FILE, LATEST_COMPLETED_FILE)}
    return {p: d for p, d in storage.files.items() if p not in notes}
