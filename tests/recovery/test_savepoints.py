"""Savepoints on a real local Ray: stop a job with a savepoint, restore it at another
parallelism (1 -> 3 -> 2), and compare the committed output of the whole chain with what
one uninterrupted run commits.

The keyed function keeps value, list, map and reducing state and registers event-time
timers; a map behind it keeps operator list state (split) and union list state. Each
phase reads the source up to a ``HOLD()`` marker, the test waits for the marker (an event)
and stops the job with a savepoint; the next phase starts from that savepoint's directory
(moved elsewhere first, to show it is relocatable), skips the marker and reads on. The
last phase reads to the end and drains, so every timer fires.
"""

import os
import shutil
from collections import Counter

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import Duration, WatermarkStrategy
from flowray.common.watermark_strategy import TimestampAssigner
from flowray.datastream import (
    CheckpointedFunction,
    FlatMapFunction,
    KeyedProcessFunction,
)
from flowray.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flowray.runtime.checkpoint.storage import (
    JOB_FILE,
    LATEST_COMPLETED_FILE,
    RESERVED_IDS_FILE,
)
from flowray.testing import HOLD, TestingSource, TransactionalTestingSink, wait_until

pytestmark = [pytest.mark.timeout(400), pytest.mark.usefixtures("ray_session")]

KEYS = 40
PER_PHASE = 1_200
TIMER_DELAY = 5


def _records():
    """Three phases of ``(key, value, timestamp)``, a HOLD() after the first two."""
    items, n = [], 0
    for phase in range(3):
        for _ in range(PER_PHASE):
            items.append((f"k{n % KEYS}", n, n))
            n += 1
        if phase < 2:
            items.append(HOLD())
    return items


class _Timestamps(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class _KeyedEverything(KeyedProcessFunction):
    """Per key: a count (value), the last three values (list), how often each value % 3
    was seen (map), the sum (reducing); an event-time timer TIMER_DELAY after each record."""

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))
        self.recent = ctx.get_list_state(ListStateDescriptor("recent"))
        self.seen = ctx.get_map_state(MapStateDescriptor("seen"))
        self.total = ctx.get_reducing_state(ReducingStateDescriptor("sum", lambda a, b: a + b))

    def process_element(self, value, ctx):
        _, v, ts = value
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        recent = (list(self.recent.get()) + [v])[-3:]
        self.recent.update(recent)
        self.seen.put(v % 3, (self.seen.get(v % 3) or 0) + 1)
        self.total.add(v)
        ctx.timer_service().register_event_time_timer(ts + TIMER_DELAY)
        yield ("rec", ctx.get_current_key(), count, tuple(recent),
               tuple(sorted(self.seen.items())), self.total.get())

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp)


class _OperatorState(FlatMapFunction, CheckpointedFunction):
    """Split list state: one count of ``rec`` records per subtask life, dealt out on
    rescale (their sum is every record before the savepoint). Union list state: every subtask's name.
    The first record after a restore reports what was restored."""

    def __init__(self, phase):
        self.phase = phase

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.counts = store.get_list_state(ListStateDescriptor("counts"))
        self.names = store.get_union_list_state(ListStateDescriptor("names"))
        self.restored_counts = list(self.counts.get())
        self.restored_names = tuple(sorted(set(self.names.get())))
        self.seen = 0
        self.reported = not context.is_restored()

    def open(self, runtime_context):
        self.me = f"phase{self.phase}-{runtime_context.get_index_of_this_subtask()}"

    def snapshot_state(self, context):
        self.counts.update(self.restored_counts + [self.seen])
        self.names.update([self.me])

    def flat_map(self, value):
        self.seen += value[0] == "rec"
        yield value
        if not self.reported:
            self.reported = True
            yield ("restored", self.phase, sum(self.restored_counts), self.restored_names)


def _expected():
    out = Counter()
    count, recent, seen, total = Counter(), {}, {}, Counter()
    for item in _records():
        if not isinstance(item, tuple):
            continue
        k, v, ts = item
        count[k] += 1
        recent[k] = (recent.get(k, []) + [v])[-3:]
        seen.setdefault(k, Counter())[v % 3] += 1
        total[k] += v
        out[("rec", k, count[k], tuple(recent[k]), tuple(sorted(seen[k].items())),
             total[k])] += 1
        out[("timer", k, ts + TIMER_DELAY)] = 1  # one timer per key and time
    return out


def _run_phase(tmp_path, phase, parallelism, backend, savepoint, stop):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    settings = {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
                "pipeline.auto-watermark-interval": "50 ms",
                "state.backend.type": backend.split("-")[0],
                "execution.checkpointing.incremental": str(backend.endswith("incremental")).lower(),
                "restart-strategy.type": "none"}
    if savepoint is not None:
        settings["execution.savepoint.path"] = savepoint
    for key, value in settings.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(parallelism)
    source = TestingSource(_records(), ledger_dir=str(tmp_path / "ledger"))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(0)).with_timestamp_assigner(_Timestamps())
    (env.from_source(source, strategy, "records").uid("records")
        .key_by(lambda r: r[0])
        .process(_KeyedEverything()).uid("keyed")
        .flat_map(_OperatorState(phase)).uid("operator-state")
        .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))
    client = env.execute_async(f"savepoints-{phase}")
    if not stop:
        return client.wait(300), None
    holds = [i for i, x in enumerate(_records()) if not isinstance(x, tuple)]
    wait_until(lambda: holds[phase] in source.fired_markers(), 120,
               f"the source of phase {phase} to reach its HOLD()")
    path = client.stop_with_savepoint(str(tmp_path / "savepoints"), timeout_s=120)
    assert client.get_job_status() is JobStatus.FINISHED
    # the savepoint is the user's: move it, restore from the new place
    moved = str(tmp_path / f"moved-{phase}")
    shutil.move(path, moved)
    return None, moved


@pytest.mark.parametrize("backends", [
    ("hashmap", "hashmap", "hashmap"),
    ("rocksdb-incremental", "rocksdb-incremental", "rocksdb-incremental"),
    ("hashmap", "rocksdb-incremental", "hashmap"),
], ids=["heap", "rocksdb-incremental", "backend-switch"])
def test_stop_with_savepoint_and_rescale_1_3_2_commits_what_one_run_would(tmp_path, backends):
    savepoint = None
    for phase, (parallelism, backend) in enumerate(zip((1, 3, 2), backends)):
        result, savepoint = _run_phase(tmp_path, phase, parallelism, backend, savepoint,
                                       stop=phase < 2)
    assert result is not None and result.outcome.restarts == 0
    committed = TransactionalTestingSink(str(tmp_path / "out")).committed()
    restored = [r for r in committed if r[0] == "restored"]
    records = Counter(r for r in committed if r[0] != "restored")
    assert records == _expected()  # exactly once, every state kind and timer carried over
    # split state: the counts of every record before each savepoint, dealt out, none lost
    by_phase = {p: [r for r in restored if r[1] == p] for p in (1, 2)}
    assert sum(r[2] for r in by_phase[1]) == PER_PHASE
    assert sum(r[2] for r in by_phase[2]) == 2 * PER_PHASE, restored
    # union state: every subtask of a phase got the names of every subtask before it
    assert {r[3] for r in by_phase[1]} == {("phase0-0",)}
    assert {r[3] for r in by_phase[2]} == {("phase1-0", "phase1-1", "phase1-2")}
    assert len(by_phase[1]) == 3 and len(by_phase[2]) == 2


@pytest.mark.parametrize("backends", [
    ("hashmap", "hashmap"),
    ("rocksdb-incremental", "rocksdb-incremental"),
    ("rocksdb", "hashmap"),
], ids=["heap", "rocksdb-incremental", "rocksdb-full-to-heap"])
def test_a_cancelled_job_resumes_from_its_retained_checkpoint_at_another_parallelism(
        tmp_path, backends):
    """RETAIN_ON_CANCELLATION keeps the checkpoints of a cancelled job; the user finds the
    latest by the job's name and restores from it as from a savepoint (rescaled 2 -> 3).
    The new job never builds on the old job's files (they stay the user's). A RocksDB
    checkpoint (native SST files) restores on the heap backend too."""
    from flowray import find_retained_checkpoints

    def submit(parallelism, backend, restore_from=None):
        env = StreamExecutionEnvironment.get_execution_environment()
        settings = {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                    "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
                    "state.backend.type": backend.split("-")[0],
                    "execution.checkpointing.incremental":
                        str(backend.endswith("incremental")).lower(),
                    "execution.checkpointing.externalized-checkpoint-retention":
                        "RETAIN_ON_CANCELLATION",
                    "restart-strategy.type": "none"}
        if restore_from:
            settings["execution.savepoint.path"] = restore_from
        for key, value in settings.items():
            env.get_configuration().set_string(key, value)
        env.enable_checkpointing(3_600_000)  # the test takes the checkpoint
        env.set_parallelism(parallelism)
        items = [(f"k{i % KEYS}", 1) for i in range(PER_PHASE)] + [HOLD()] + \
            [(f"k{i % KEYS}", 1) for i in range(PER_PHASE)]
        source = TestingSource(items, ledger_dir=str(tmp_path / "ledger"))
        (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
            .uid("records").set_parallelism(1)
            .key_by(lambda r: r[0]).sum(1).uid("sum")
            .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))
        return env.execute_async("retained"), source

    client, source = submit(2, backends[0])
    wait_until(lambda: PER_PHASE in source.fired_markers(), 120, "the source to hold")
    checkpoint = client.trigger_checkpoint(timeout_s=60)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    wait_until(lambda: len(sink.committed()) == PER_PHASE, 60, "the first part committed")
    client.cancel()
    wait_until(lambda: client.get_job_status() is JobStatus.CANCELED, 120, "the cancel")
    [found] = find_retained_checkpoints(str(tmp_path / "checkpoints"), "retained")
    assert found.path == checkpoint and found.job_name == "retained"
    # the ended job's clean-up (its bookkeeping files go, its retained checkpoint stays)
    # may still run after the status says CANCELED
    job_root = os.path.dirname(checkpoint)
    wait_until(lambda: not any(os.path.exists(os.path.join(job_root, f)) for f in (
        JOB_FILE, LATEST_COMPLETED_FILE, RESERVED_IDS_FILE)), 60, "the ended job's clean-up")
    old_files = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.dirname(checkpoint))
                       for f in fs)

    client, _ = submit(3, backends[1], restore_from=found.path)
    result = client.wait(180)
    assert result.outcome.restarts == 0
    per_key = 2 * PER_PHASE // KEYS
    assert sorted(sink.committed()) == sorted(
        (f"k{k}", n) for k in range(KEYS) for n in range(1, per_key + 1))
    # the retained checkpoint is untouched (NO_CLAIM): still there, byte for byte usable
    assert sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.dirname(checkpoint))
                  for f in fs) == old_files


def test_stop_with_drain_fires_every_timer_and_a_restore_from_it_ends_at_once(tmp_path):
    """--drain ends the input first: the watermark goes to the end of time, so every
    timer registered so far fires before the savepoint; the savepoint then holds finished
    operators, and a job restored from it ends without reading further."""
    env_records = [r for r in _records()[:PER_PHASE]]
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "pipeline.auto-watermark-interval": "50 ms",
                       "restart-strategy.type": "none"}.items():
        env.get_configuration().set_string(key, value)

    def build(env):
        env.enable_checkpointing(200)
        env.set_parallelism(1)
        source = TestingSource(_records(), ledger_dir=str(tmp_path / "ledger"))
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(0)).with_timestamp_assigner(_Timestamps())
        (env.from_source(source, strategy, "records").uid("records")
            .key_by(lambda r: r[0]).process(_KeyedEverything()).uid("keyed")
            .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))
        return source

    source = build(env)
    client = env.execute_async("drain")
    wait_until(lambda: PER_PHASE in source.fired_markers(), 120, "the source to hold")
    path = client.stop_with_savepoint(str(tmp_path / "savepoints"), drain=True,
                                      timeout_s=120)
    assert client.get_job_status() is JobStatus.FINISHED
    committed = TransactionalTestingSink(str(tmp_path / "out")).committed()
    timers = {r for r in committed if r[0] == "timer"}
    assert timers == {("timer", k, ts + TIMER_DELAY) for k, _, ts in env_records}
    assert len([r for r in committed if r[0] == "rec"]) == PER_PHASE

    env2 = StreamExecutionEnvironment.get_execution_environment()
    for key, value in {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "execution.savepoint.path": path,
                       "restart-strategy.type": "none"}.items():
        env2.get_configuration().set_string(key, value)
    build(env2)
    env2.execute("drained-restore")
    assert TransactionalTestingSink(str(tmp_path / "out")).committed() == committed
