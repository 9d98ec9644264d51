"""Checkpointing end to end: exactly-once file output, the final checkpoint of bounded
jobs, checkpoints after some tasks finished, operator state, and checkpoint statistics —
on Ray, and on the local executor (threads) where the same scheduler runs without Ray."""

import functools
import os
from collections import Counter
from typing import Callable

import pytest

from flowray import Configuration, JobExecutionError, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.common.serialization import Encoder
from flowray.datastream import (
    CheckpointedFunction,
    CheckpointingMode,
    CheckpointListener,
    MapFunction,
)
from flowray.datastream.connectors.file_system import FileSink, OutputFileConfig
from flowray.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from flowray.testing import FAIL, PAUSE, WAIT_UNTIL, TestingSource, TransactionalTestingSink
from tests.support.storage import flip_middle_byte

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
           "restart-strategy.fixed-delay.delay": "50 ms"}


def _env(tmp_path, target, interval_ms=100, extra=None):
    conf = {"execution.checkpointing.dir": str(tmp_path / "checkpoints"), **RESTART,
            **(extra or {})}
    if target == "local":
        conf["execution.target"] = "local"
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(conf))
    if interval_ms is not None:
        env.enable_checkpointing(interval_ms)
    return env


@pytest.fixture(params=["ray", "local"])
def target(request):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


def _visible_lines(folder):
    lines, hidden = [], []
    for name in sorted(os.listdir(folder)):
        if name.startswith("."):
            hidden.append(name)
            continue
        with open(os.path.join(folder, name)) as f:
            lines.extend(f.read().splitlines())
    return lines, hidden


def test_file_sink_bounded_job_commits_everything_once(tmp_path, target):
    """A long interval: the only checkpoint is the final one, and it commits the output."""
    env = _env(tmp_path, target, interval_ms=60_000)
    env.set_parallelism(2)
    out = tmp_path / "out"
    items = [f"line-{i}" for i in range(5_000)]
    sink = (FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_suffix(".txt").build())
            .build())
    env.from_collection(items).map(lambda s: s.upper()).sink_to(sink)
    result = env.execute("file-sink")
    lines, hidden = _visible_lines(out)
    assert sorted(lines) == sorted(s.upper() for s in items)
    assert hidden == []
    assert all(name.endswith(".txt") for name in os.listdir(out))
    assert result.outcome.checkpoints >= 1
    # a finished job's checkpoints are deleted (Flink's default retention)
    assert not (tmp_path / "checkpoints" / result.get_job_id()).exists()


def _all_committed(sink: TransactionalTestingSink, values: range) -> Callable[[], bool]:
    def all_committed() -> bool:
        return set(values) <= set(sink.committed())
    return all_committed


@pytest.mark.parametrize("retention, kept", [("NO_EXTERNALIZED_CHECKPOINTS", False),
                                             ("RETAIN_ON_CANCELLATION", True)])
def test_retention_of_a_failed_jobs_checkpoints(tmp_path, retention, kept):
    env = _env(tmp_path, "local", interval_ms=20, extra={
        "restart-strategy.type": "none",
        "execution.checkpointing.externalized-checkpoint-retention": retention})
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    # fails once a checkpoint committed what came before
    items = [*range(500), WAIT_UNTIL(_all_committed(sink, range(500))), FAIL()]
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    env.from_source(source, WatermarkStrategy.no_watermarks(), "n").sink_to(sink)
    client = env.execute_async("retention")
    with pytest.raises(JobExecutionError):
        client.wait(timeout_s=60)
    job_dir = tmp_path / "checkpoints" / client.get_job_id()
    assert any(job_dir.glob("chk-*/_metadata")) is kept


def test_file_sink_without_checkpointing_commits_at_the_end(tmp_path, target):
    env = _env(tmp_path, target, interval_ms=None)
    out = tmp_path / "out"
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    env.from_collection(list(range(100))).sink_to(sink)
    env.execute("file-sink-no-checkpoints")
    lines, hidden = _visible_lines(out)
    assert sorted(map(int, lines)) == list(range(100)) and hidden == []


def test_file_sink_exactly_once_across_a_failure(tmp_path, target):
    env = _env(tmp_path, target, interval_ms=50)
    env.set_parallelism(2)
    items = []
    for i in range(3_000):
        if i == 2_000:
            items.append(FAIL())
        if i % 300 == 0:
            items.append(PAUSE(0.03))
        items.append(i)
    out = tmp_path / "out"
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda x: x * 2)
        .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()))
    result = env.execute("file-sink-failure")
    lines, hidden = _visible_lines(out)
    assert Counter(map(int, lines)) == Counter(2 * i for i in range(3_000))
    assert hidden == []
    assert result.outcome.restarts == 1 and source.fired_markers()


def test_checkpoints_go_on_after_a_source_finished(tmp_path, target):
    """The short source finishes early; later checkpoints record it as finished, the job
    fails after that and recovers from such a checkpoint: exactly once, nothing replayed
    from the finished source and nothing lost."""
    env = _env(tmp_path, target, interval_ms=50)
    short = TestingSource([("short", i) for i in range(100)], ledger_dir=str(tmp_path / "f1"))
    long_items = []
    for i in range(2_000):
        if i % 100 == 0:
            long_items.append(PAUSE(0.03))  # ~0.6 s: the short source is long gone
        if i == 1_500:
            long_items.append(FAIL())
        long_items.append(("long", i))
    longer = TestingSource(long_items, ledger_dir=str(tmp_path / "f2"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    a = env.from_source(short, WatermarkStrategy.no_watermarks(), "short")
    b = env.from_source(longer, WatermarkStrategy.no_watermarks(), "long")
    a.union(b).key_by(lambda t: t[0]).map(lambda t: t).sink_to(sink)
    client = env.execute_async("finished-source")
    result = client.wait(timeout_s=120)
    expected = Counter([("short", i) for i in range(100)] + [("long", i) for i in range(2_000)])
    assert Counter(sink.committed()) == expected
    assert result.outcome.restarts == 1
    history = result.get_checkpoint_stats()["history"]
    finished_short = [h for h in history if h["status"] == "COMPLETED"
                      and any(m.get("finished") for m in h["tasks"].values())]
    assert finished_short, "no checkpoint completed while the short source was finished"


class _Numbering(MapFunction, CheckpointedFunction):
    """Numbers records per subtask; the counter is operator state."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(
            ListStateDescriptor("next-number"))
        restored = list(self.state.get())
        self.next = restored[0] if restored else 0

    def snapshot_state(self, context):
        self.state.update([self.next])

    def map(self, value):
        n = self.next
        self.next += 1
        return n


@pytest.mark.parametrize("threshold", ["20 kb", "0 b"])  # "0 b": every state in a file
def test_operator_state_survives_a_failure(tmp_path, target, threshold):
    env = _env(tmp_path, target, interval_ms=50,
               extra={"state.storage.fs.memory-threshold": threshold})
    items = []
    for i in range(2_000):
        if i % 200 == 0:
            items.append(PAUSE(0.03))
        if i == 1_200:
            items.append(FAIL())
        items.append(i)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(_Numbering()).sink_to(sink))
    result = env.execute("operator-state")
    assert result.outcome.restarts == 1
    # restored counters continue where the checkpoint left them: 0..1999, each once
    assert sorted(sink.committed()) == list(range(2_000))


class _RememberSubtasks(MapFunction, CheckpointedFunction, CheckpointListener):
    """Each subtask puts its name into a union list state and tags every record with what
    that state held when it was restored. Subtask 0 raises once, after a checkpoint
    completed (so the restart restores one); ``notified_file(dir, i)`` appears when
    subtask i learns of its first completed checkpoint."""

    def __init__(self, ledger, notified_dir):
        self.ledger, self.notified_dir = ledger, notified_dir

    @staticmethod
    def notified_file(notified_dir, index):
        return os.path.join(notified_dir, f"notified-{index}")

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_union_list_state(
            ListStateDescriptor("subtasks"))
        self.restored = tuple(sorted(set(self.state.get())))
        self.checkpointed = False

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.me = f"subtask-{self.index}"

    def snapshot_state(self, context):
        self.state.update([self.me])

    def notify_checkpoint_complete(self, checkpoint_id):
        self.checkpointed = True
        open(self.notified_file(self.notified_dir, self.index), "w").close()

    def map(self, value):
        if self.index == 0 and self.checkpointed and not os.path.exists(self.ledger):
            open(self.ledger, "w").close()
            raise RuntimeError("fail once after a completed checkpoint")
        return value, self.me, self.restored


@pytest.mark.parametrize("threshold", ["20 kb", "0 b"])
def test_union_state_after_restore_holds_every_entry_in_every_subtask(tmp_path, target,
                                                                       threshold):
    env = _env(tmp_path, target, interval_ms=50,
               extra={"state.storage.fs.memory-threshold": threshold})
    env.set_parallelism(2)
    # each source subtask's share (1,000 items) waits halfway until map subtask 0 has
    # learnt of a completed checkpoint: the records after it make that subtask fail
    notified = _RememberSubtasks.notified_file(str(tmp_path), 0)
    items: list = list(range(2_000))
    for at in (1_500, 500):
        items[at:at] = [WAIT_UNTIL(functools.partial(os.path.exists, notified))]
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .rebalance().map(_RememberSubtasks(str(tmp_path / "failed"), str(tmp_path)))
        .sink_to(sink))
    result = env.execute("union-state")
    assert result.outcome.restarts == 1
    committed = sink.committed()
    assert sorted(v for v, _, _ in committed) == sorted(i for i in items if isinstance(i, int))
    after_restore = {(me, restored) for _, me, restored in committed if restored}
    # both subtasks were restored, and each got the entries of both
    assert after_restore == {("subtask-0", ("subtask-0", "subtask-1")),
                             ("subtask-1", ("subtask-0", "subtask-1"))}


def test_checkpoint_stats_report_every_task(tmp_path, target):
    env = _env(tmp_path, target, interval_ms=50,
               extra={"execution.checkpointing.mode": "AT_LEAST_ONCE"})
    env.set_parallelism(2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    # the first subtask's share (items 0-749) waits twice for what it read to be
    # committed: two checkpoints complete while the job runs, however fast the machine
    items: list = list(range(1_500))
    items[500:500] = [WAIT_UNTIL(_all_committed(sink, range(0, 500)))]
    items[250:250] = [WAIT_UNTIL(_all_committed(sink, range(0, 250)))]
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .key_by(lambda x: x % 5).map(lambda x: x)
        .sink_to(sink))
    result = env.execute("stats")
    assert sorted(sink.committed()) == list(range(1_500))
    stats = result.get_checkpoint_stats()
    completed = [h for h in stats["history"] if h["status"] == "COMPLETED"]
    assert stats["counts"]["completed"] == len(completed) >= 2
    # (a checkpoint triggered while the last tasks finish may hold finished tasks only)
    with_state = [h for h in completed
                  if any(not m.get("finished") for m in h["tasks"].values())]
    assert len(with_state) >= 2
    for h in with_state:
        assert h["duration_ms"] >= 0 and h["state_size"] > 0
        for metrics in h["tasks"].values():
            if not metrics.get("finished"):
                assert {"sync_ms", "async_ms", "alignment_ms", "bytes"} <= set(metrics)
    assert "checkpoints" in result.summary()
    # the end-of-job table: the newest checkpoints, one line each
    table = result.checkpoint_table(limit=3).splitlines()
    newest = stats["history"][-3:]
    assert table[0].split()[:2] == ["id", "status"] and len(table) == 1 + len(newest)
    for line, h in zip(table[1:], newest):
        assert line.split()[:2] == [str(h["checkpoint_id"]), h["status"]]
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb", "rocksdb-incremental"])
def test_keyed_state_recovers_exactly_on_each_backend(tmp_path, target, backend):
    env = _env(tmp_path, target, interval_ms=50, extra={
        "state.backend.type": backend.split("-")[0],
        "execution.checkpointing.incremental": str(backend.endswith("incremental")).lower(),
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb")})
    env.set_parallelism(2)
    items = []
    for i in range(3_000):
        if i % 300 == 0:
            items.append(PAUSE(0.03))
        if i == 2_000:
            items.append(FAIL())
        items.append((f"k{i % 13}", 1))
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "pairs")
        .key_by(lambda t: t[0]).sum(1).sink_to(sink))
    result = env.execute(f"keyed-{backend}")
    per_key = Counter(f"k{i % 13}" for i in range(3_000))
    assert Counter(sink.committed()) == Counter(
        (k, c) for k, n in per_key.items() for c in range(1, n + 1))
    assert result.outcome.restarts == 1
    # every task removed its RocksDB working folder when it ended
    leftovers = list((tmp_path / "rocksdb").rglob("*")) if backend != "hashmap" else []
    assert [p for p in leftovers if p.is_file()] == []


class _CorruptLatestThenFail(MapFunction, CheckpointListener):
    """Keyed running count. Once, when a checkpoint completes, subtask 0 flips a byte in
    every keyed-state file of that checkpoint and raises: the restart must restore from
    the damaged checkpoint (the job's min-pause keeps a newer one from starting)."""

    def __init__(self, checkpoints_dir, ledger):
        self.checkpoints_dir, self.ledger = checkpoints_dir, ledger

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def map(self, value):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return value, n

    def notify_checkpoint_complete(self, checkpoint_id):
        if self.index != 0 or os.path.exists(self.ledger):
            return
        damaged = []
        for folder, _, names in os.walk(self.checkpoints_dir):
            if f"chk-{checkpoint_id}" not in folder.split(os.sep)[-2:] and \
                    not folder.endswith(f"chk-{checkpoint_id}"):
                continue
            for name in names:
                path = os.path.join(folder, name)
                if ".keyed" in path and os.path.getsize(path) > 8:
                    flip_middle_byte(path)
                    damaged.append(path)
        if damaged:
            with open(self.ledger, "w") as f:
                f.write("\n".join(damaged))
            raise RuntimeError(f"damaged checkpoint {checkpoint_id}")


@pytest.mark.parametrize("backend", [{}, {"state.backend.type": "rocksdb",
                                          "execution.checkpointing.incremental": "true"}],
                         ids=["hashmap", "rocksdb-incremental"])
def test_a_damaged_checkpoint_file_fails_the_restore_naming_the_file(tmp_path, target,
                                                                     backend):
    env = _env(tmp_path, target, interval_ms=50, extra={
        # no second checkpoint can start before the first one's notification has damaged it
        # (the final checkpoint keeps the pause too: short enough for the job to end)
        "execution.checkpointing.min-pause": "3 s",
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
        "restart-strategy.fixed-delay.delay": "50 ms",
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"), **backend})
    env.set_parallelism(2)
    items = [PAUSE(0.02) if i % 100 == 0 else i for i in range(3_000)]
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    ledger = tmp_path / "damaged.txt"
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .key_by(lambda x: x % 10)
        .map(_CorruptLatestThenFail(str(tmp_path / "checkpoints"), str(ledger)))
        .sink_to(TransactionalTestingSink(str(tmp_path / "out"))))
    with pytest.raises(JobExecutionError) as info:
        env.execute("damaged-checkpoint")
    damaged = ledger.read_text().split("\n")
    assert info.value.cause_type == "CorruptedStateError"
    message = str(info.value)
    assert "is damaged" in message
    assert any(os.path.basename(p) in message for p in damaged), message
