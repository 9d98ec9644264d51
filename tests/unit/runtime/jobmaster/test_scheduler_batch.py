"""The job scheduler in BATCH mode: stages deployed once their blocking partitions are complete, partitions released when their consumer regions finished, lost or truncated partitions rerun their producers."""

import os

import pytest
from flowray.operators.sources import NumberSequenceSource
from flowray.runtime.execution.executor import prepare_job
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.graph.job_graph import build_job_graph, mark_blocking_exchanges
from flowray.runtime.messages import JobStatus, TaskState
from flowray.runtime.network.blocking_partition import (
    BlockingPartitionStore,
    CorruptPartitionError,
)
from flowray.runtime.network.elements import EndOfPartition
from flowray.runtime.task.task_failures import describe_failure

from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import (
    DELAY_MS,
    JOB,
)
from tests.support.scheduler_regions import (
    MAP,
    PIPE,
    SINK,
    Batch,
    Harness,
    _by_residue,
    _discard,
    _first,
    streaming,
)


def test_a_failure_in_a_region_already_restarting_does_not_count_again():
    h = streaming(**{"restart-strategy.fixed-delay.attempts": 1})
    first = h.fail(MAP[1], "first")
    h.fail(SINK[1], "while being cancelled")
    h.report_cancelled()
    assert h.sched.failures == [first] and h.sched.restart_strategy.failures == 1
    h.advance(DELAY_MS)
    assert h.sched.restarts == 1 and h.sched.status is JobStatus.RUNNING
    assert h.deployer.deployed(1) == sorted(PIPE[1])


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
    r"""A consumer region of two vertices: the partitions stay while a sink still runs,
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
    # consumer of that partition still running (sum[1]) runs again, a finished one does
    # not (it read its input to the end, and its sink committed); pipeline 1 keeps its
    # partition and is not touched
    if other_consumer_done:
        assert b.h.deployer.cancels == []
    else:
        assert b.h.deployer.cancels == [[b.sum[1]]]
        b.h.report_cancelled()
    assert b.sched.status is JobStatus.RUNNING
    b.h.advance(DELAY_MS)
    assert sorted(b.h.deployer.deployed(2)) == sorted({b.src[0], b.map[0]})
    assert sorted(b.sched.running()) == sorted({b.src[0], b.map[0]})
    # they finished before: this run is for the lost partition, their sinks drop records
    assert all(d.output_committed for d in b.h.deployer.deploys[2][1])
    rerun = {b.sum[0]} if other_consumer_done else set(b.stage2)
    assert all(b.sched.states[s] is TaskState.CREATED for s in rerun)
    assert b.sched.restarts == 1
    # the consumers wait until the producer finished again
    b.h.finish(b.src[0])
    assert len(b.h.deployer.deploys) == 3
    b.produce(b.map[0])
    b.h.finish(b.map[0])
    assert len(b.h.deployer.deploys) == 4
    assert sorted(b.h.deployer.deployed(3)) == sorted(rerun)
    # sum[1], if it ran again, had not finished: its sink runs as usual
    assert not any(d.output_committed for d in b.h.deployer.deploys[3][1])
    assert b.h.deployer.cancelled() <= {b.sum[1]}
    assert all(b.sched.attempts[s] == 0 for s in (b.src[1], b.map[1]))
    if other_consumer_done:
        assert b.sched.attempts[b.sum[1]] == 1 and b.sched.states[b.sum[1]] is \
            TaskState.FINISHED
    b.h.finish(*sorted(rerun))
    assert all(b.files_exist(m) == [False, False] for m in b.map)
    assert b.sched.status is JobStatus.FINISHED
    assert not os.path.exists(b.store.job_dir)


def test_batch_a_truncated_partition_restarts_its_producer_region(tmp_path):
    r"""The file is there but cannot be read to its end: the read error names the channel,
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
    failure = describe_failure("sum (1/2)", err.value)
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
    done_in = (h.sched.attempts[b[1]], h.sched.attempts[c[1]])
    for cid in partitions[b[0]].channel_ids:               # b[0]'s result is lost
        os.unlink(store.path(cid))
    h.fail(c[0], "partition not found")
    # rule 2 twice (b[0]'s partition is lost, a's were released); rule 3 leaves out
    # b[1] and c[1], which finished: 4 of the 6 tasks run again
    assert h.sched.status is JobStatus.RUNNING and h.deployer.cancels == []
    h.advance(DELAY_MS)
    assert sorted(h.deployer.deployed(3)) == a
    run_stage(a)
    run_stage([b[0]])
    assert files(*a) == {False}       # released again: every consumer finished again
    run_stage([c[0]])
    assert h.sched.status is JobStatus.FINISHED and h.sched.restarts == 1
    assert (h.sched.attempts[b[1]], h.sched.attempts[c[1]]) == done_in  # ran once
    assert not os.path.exists(store.job_dir)
