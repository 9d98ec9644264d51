"""Helpers shared by test_scheduler_regions.py, test_scheduler_batch.py (moved out of one long test file)."""

import os

from flowray.operators.sources import NumberSequenceSource
from flowray.runtime.execution.executor import prepare_job
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.messages import TaskResult, TaskState
from flowray.runtime.network.blocking_partition import (
    BlockingPartitionStore,
)
from flowray.runtime.network.elements import EndOfPartition, RecordBatch
from flowray.state.snapshot import TaskStateSnapshot

from flowray.testing.jobmaster import RecordingDeployer
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    JOB,
    SchedulerHarness,
    scheduler_config,
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
