"""Queryable state on a real local Ray, queried while the job runs and while the task that
holds the state is killed (``ray.kill``, as a crashed worker).

The job counts ``(key, 1)`` records per key in a value state queryable as ``counts`` and
writes each new ``(key, count)`` to an exactly-once sink that stamps its records with the
checkpoint they were committed in. A thread reads committed values all along. Checked:
- committed reads of a key never go backwards, even across the failover;
- a committed read as of checkpoint ``c`` equals the key's highest count the sink
  committed in checkpoints up to ``c`` (the state and the output agree);
- live reads, and the errors for an unknown name, a descriptor of another kind, a key of
  another type and an unknown job.
Every wait is on an event (committed output, a completed checkpoint, the job's end).
"""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream.functions import KeyedProcessFunction, RuntimeContext
from flowray.queryable_state import (JobNotFoundError, QueryableStateClient,
                                     UnknownKvStateLocation, UnknownQueryableStateError,
                                     with_retries)
from flowray.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from flowray.testing import PAUSE, FaultInjector, TestingSource, TransactionalTestingSink, \
    wait_until

pytestmark = pytest.mark.timeout(300)

N = 16_000
KEYS = 16
QUERIED = [f"k{i}" for i in range(0, KEYS, 3)]
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


class CheckpointStampingSink(TransactionalTestingSink):
    """Commits ``(checkpoint id, record)``: which checkpoint made each record visible
    (``None``: the end of input)."""

    def pre_commit_checkpoint(self, transaction, checkpoint_id):
        transaction["records"] = [(checkpoint_id, r) for r in transaction["records"]]
        self.pre_commit(transaction)


class Count(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(
            ValueStateDescriptor("count").set_queryable("counts"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value[0], n


def _items():
    items = []
    for i in range(N):
        if i and i % 100 == 0:
            items.append(PAUSE(0.03))  # about 2.4 s of input per source subtask: queried
        items.append((f"k{i % KEYS}", 1))
    return items


class CommittedReader(threading.Thread):
    """Reads the queried keys' committed values until stopped: (key, checkpoint, value)."""

    def __init__(self, client, job_id):
        super().__init__(daemon=True)
        self.client, self.job_id = client, job_id
        self.reads, self.errors = [], []
        self.stop = threading.Event()

    def run(self):
        descriptor = ValueStateDescriptor("count")
        while not self.stop.is_set():
            for key in QUERIED:
                try:
                    state = with_retries(lambda: self.client.get_kv_state(
                        self.job_id, "counts", key, descriptor, read_committed=True),
                        attempts=200, delay_s=0.05)
                except UnknownKvStateLocation:
                    if self.stop.is_set():
                        return  # the job ended
                    raise
                except Exception as e:  # noqa: BLE001 - reported by the test
                    if not self.stop.is_set():
                        self.errors.append(e)
                    return
                self.reads.append((key, state.checkpoint_id, state.value()))


def _read_checkpoints(reader):
    """The checkpoints the reader's committed reads came from so far."""
    return {cid for _, cid, _ in list(reader.reads)}


def _committed_counts(sink):
    """key -> [(checkpoint id, count)] as committed (end of input: checkpoint inf)."""
    out = defaultdict(list)
    for cid, (key, n) in sink.committed():
        out[key].append((float("inf") if cid is None else cid, n))
    return out


def test_committed_reads_never_go_back_and_match_the_committed_output(ray_session, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, "execution.checkpointing.dir": str(tmp_path / "chk")}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(150)
    env.set_parallelism(2)
    sink = CheckpointStampingSink(str(tmp_path / "out"))
    source = TestingSource(_items(), ledger_dir=str(tmp_path / "faults"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
     .key_by(lambda t: t[0]).process(Count()).name("count").add_sink(sink).name("sink"))
    job = env.execute_async("queryable-counts")
    client = QueryableStateClient()
    jid = job.get_job_id()

    # live reads and the errors, while the job runs
    live = with_retries(lambda: client.get_kv_state(jid, "counts", "k1",
                                                    ValueStateDescriptor("count")),
                        attempts=200, delay_s=0.05)
    assert live.checkpoint_id == -1 and (live.value() is None or live.value() >= 1)
    with pytest.raises(UnknownQueryableStateError, match="has no queryable state 'nope'.*counts"):
        client.get_kv_state(jid, "nope", "k1", ValueStateDescriptor("count"))
    with pytest.raises(TypeError, match="is value state"):
        client.get_kv_state(jid, "counts", "k1", ListStateDescriptor("count"))
    wait_until(lambda: len(sink.committed()) > 0, 60, "committed output")
    with pytest.raises(TypeError, match="keyed by str; the key 7 is a int"):
        client.get_kv_state(jid, "counts", 7, ValueStateDescriptor("count"))
    with pytest.raises(JobNotFoundError):
        client.get_kv_state("no-such-job", "counts", "k1", ValueStateDescriptor("count"))
    future = client.get_kv_state_async(jid, "counts", "k4", ValueStateDescriptor("count"),
                                       read_committed=True)

    reader = CommittedReader(client, jid)
    reader.start()
    assert future.result(timeout=60).checkpoint_id >= 0
    injector = FaultInjector(job)
    wait_until(lambda: len(sink.committed()) >= N // 4 and len(_read_checkpoints(reader)) >= 2,
               120, "a quarter of the output, and committed reads of two checkpoints")
    counting = injector.subtasks("count")
    injector.kill(counting[0])   # the subtask holding half of the keys' state
    result = job.wait(timeout_s=240)
    reader.stop.set()
    reader.join(60)

    assert result.outcome.status is JobStatus.FINISHED and result.outcome.restarts >= 1
    assert reader.errors == []
    assert len(_read_checkpoints(reader)) > 3, "too few checkpoints were read"
    committed = _committed_counts(sink)
    assert sorted(n for _, n in committed["k0"]) == list(range(1, N // KEYS + 1))  # exactly once
    for key in QUERIED:
        seen = [(cid, value) for k, cid, value in reader.reads if k == key]
        values = [v or 0 for _, v in seen]
        assert values == sorted(values), f"{key}: a committed read went back: {seen}"
        for cid, value in seen:
            expected = max((n for c, n in committed[key] if c <= cid), default=None)
            assert value == expected, (key, cid, value, expected)
