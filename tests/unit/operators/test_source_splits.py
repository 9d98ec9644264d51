"""Split-based sources restored at another parallelism: the split states of every old
subtask are dealt to the new ones as the runtime does (``redistribute_operator_state``),
and every record is read exactly once.

Reader level for each split-based source, then ``SourceOperator`` end to end with its
operator list state (the operator harness has no operator state, so a small driver here
does what a task does: setup, initialize_state, open, emit_next, snapshot_state)."""

import pickle
from collections import Counter

import cloudpickle
import pyarrow as pa
import pytest

from flowray.common.clock import ManualClock
from flowray.operators.base import (
    CollectingOutput,
    OperatorContext,
    ProcessingTimeService,
    StateInitializationContext,
    StateSnapshotContext,
)
from flowray.operators.file_source import FileSource, FileSourceSplit, StreamFormat
from flowray.operators.sources import (
    _READER_STATE,
    CollectionSource,
    IndexRangeSplit,
    NumberSequenceSource,
    Source,
    SourceOperator,
    SourceReader,
    SourceReaderContext,
    SourceRescaleError,
    _SubtaskPosition,
)
from flowray.spark.block_source import ArrowBlockSource, BlockSplit, InMemoryBlockStore
from flowray.state.key_groups import KeyGroupRange
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state
from flowray.state.snapshot import SPLIT_DISTRIBUTE, OperatorStateEntry
from flowray.testing import FAIL, TestingFailure, TestingSource

RESCALES = [(1, 3), (3, 2), (2, 2), (3, 1)]
_STATE = "splits"


# ---------------------------------------------------------------------------------------
# the sources under test, each with the records it must produce
# ---------------------------------------------------------------------------------------

LINES = {"a.txt": [f"a{i}" for i in range(7)], "b.txt": [], "c.txt": ["c0", "", "c2"],
         "d.txt": [f"d{i}" for i in range(11)], "e.txt": ["e0"], "f.txt": ["f0", "f1"]}


def _files(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name, lines in LINES.items():
        # the last line of some files has no terminator, some end in \r\n
        text = "".join(f"{line}\r\n" if name == "d.txt" else f"{line}\n" for line in lines)
        if name == "a.txt":
            text = text[:-1]
        (folder / name).write_text(text)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(folder)).build()
    return source, [line for name in sorted(LINES) for line in LINES[name]]


def _blocks(tmp_path):
    sizes = [4, 0, 7, 1, 5, 3]
    tables = [pa.table({"k": [f"b{b}-{i}" for i in range(n)], "v": list(range(n))})
              for b, n in enumerate(sizes)]
    return (ArrowBlockSource(InMemoryBlockStore(tables)),
            [(f"b{b}-{i}", i) for b, n in enumerate(sizes) for i in range(n)])


def _testing(tmp_path):
    items = [("t", i) for i in range(23)]
    return TestingSource(items, ledger_dir=str(tmp_path / "ledger")), items


SOURCES = {
    "collection": lambda tmp_path: (CollectionSource([f"x{i}" for i in range(23)]),
                                    [f"x{i}" for i in range(23)]),
    "sequence": lambda tmp_path: (NumberSequenceSource(5, 30), list(range(5, 31))),
    "file": _files,
    "blocks": _blocks,
    "testing": _testing,
}


def record_key(record):
    """Rows of the block source as plain tuples (hashable, comparable)."""
    return (record.k, record.v) if hasattr(record, "as_dict") else record


# ---------------------------------------------------------------------------------------
# reader level
# ---------------------------------------------------------------------------------------

def start_readers(source, parallelism):
    splits = source.create_splits(parallelism)
    readers = []
    for i in range(parallelism):
        reader = source.create_reader(SourceReaderContext(i, parallelism))
        reader.add_splits(splits[i::parallelism])
        readers.append(reader)
    return readers


def poll(reader, times, max_records):
    out = []
    for _ in range(times):
        batch = reader.poll_next(max_records)
        if batch is None:
            break
        out.extend(batch)
    return out


def drain(reader, max_records=4):
    out = []
    while (batch := reader.poll_next(max_records)) is not None:
        out.extend(batch)
    reader.close()
    return out


def rescale(states, new_parallelism):
    """The split states of the old subtasks dealt to ``new_parallelism`` new ones, through
    the runtime's redistribution of a SPLIT_DISTRIBUTE list state (pickled elements)."""
    previous = [{_STATE: OperatorStateEntry(SPLIT_DISTRIBUTE, [pickle.dumps(s) for s in st])}
                for st in states]
    parts = redistribute_operator_state(previous, new_parallelism)
    return [[pickle.loads(b) for b in part[_STATE].items] if _STATE in part else []
            for part in parts]


def read_across_rescale(source, p, q, polls=2, max_records=3):
    readers = start_readers(source, p)
    before = [r for reader in readers for r in poll(reader, polls, max_records)]
    states = [reader.snapshot_state() for reader in readers]
    for st in states:
        assert isinstance(st, list)
        assert pickle.loads(pickle.dumps(st)) == st
        assert cloudpickle.loads(cloudpickle.dumps(st)) == st
    for reader in readers:
        reader.close()
    copy = pickle.loads(pickle.dumps(source))  # the restored job runs a fresh copy
    after = []
    for i, share in enumerate(rescale(states, q)):
        reader = copy.create_reader(SourceReaderContext(i, q))
        reader.add_splits(share)
        after.extend(drain(reader))
    return before, after


@pytest.mark.parametrize("p, q", RESCALES)
@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_every_record_once_across_a_rescale(tmp_path, kind, p, q):
    source, expected = SOURCES[kind](tmp_path)
    before, after = read_across_rescale(source, p, q)
    assert before and after  # the cut is inside the input
    assert Counter(map(record_key, before + after)) == Counter(map(record_key, expected))


@pytest.mark.parametrize("kind", sorted(SOURCES))
@pytest.mark.parametrize("max_records", [1, 2, 5])
def test_restore_at_every_cut(tmp_path, kind, max_records):
    """A snapshot after any number of polls, restored at 2, gives exactly the rest."""
    source, expected = SOURCES[kind](tmp_path)
    total = len(expected)
    for polls in range(total // max_records + 2):
        before, after = read_across_rescale(source, 3, 2, polls, max_records)
        assert Counter(map(record_key, before + after)) == Counter(map(record_key, expected))


@pytest.mark.parametrize("kind", ["file", "blocks", "testing"])
@pytest.mark.parametrize("parallelism", [1, 2, 3, 4])
def test_first_start_reads_what_it_did_without_splits(tmp_path, kind, parallelism):
    """At a fixed parallelism, subtask i reads the same records in the same order as a
    reader given no splits (the assignment before sources had splits)."""
    source, _ = SOURCES[kind](tmp_path)
    split_based = [drain(r) for r in start_readers(source, parallelism)]
    plain = [drain(source.create_reader(SourceReaderContext(i, parallelism)))
             for i in range(parallelism)]
    assert split_based == plain


def test_file_splits_are_the_files_in_order_with_offsets(tmp_path):
    source, _ = _files(tmp_path)
    assert source.create_splits(4) == [FileSourceSplit(f) for f in source.files]
    reader = source.create_reader(SourceReaderContext(0, 1))
    reader.add_splits(source.create_splits(1))
    assert reader.poll_next(3) == ["a0", "a1", "a2"]
    state = reader.snapshot_state()
    assert state[0] == FileSourceSplit(source.files[0], len("a0\na1\na2\n"))
    assert state[1:] == [FileSourceSplit(f) for f in source.files[1:]]
    drain(reader)
    assert reader.snapshot_state() == []  # finished files are left out


def test_file_reader_errors(tmp_path):
    source, _ = _files(tmp_path)
    reader = source.create_reader(SourceReaderContext(0, 1))
    with pytest.raises(TypeError, match="FileSourceSplit"):
        reader.add_splits([source.files[0]])
    with pytest.raises(ValueError, match="offset"):
        reader.add_splits([FileSourceSplit(source.files[0], -1)])
    with pytest.raises(RuntimeError, match="restore_state on a reader that was given splits"):
        reader.restore_state((0, 0))
    plain = source.create_reader(SourceReaderContext(0, 1))
    plain.poll_next(1)
    with pytest.raises(RuntimeError, match="add_splits on a reader that already reads"):
        plain.add_splits([FileSourceSplit(source.files[0])])


def test_block_splits_and_errors(tmp_path):
    source, _ = _blocks(tmp_path)
    assert source.create_splits(2) == [BlockSplit(b) for b in range(6)]
    reader = source.create_reader(SourceReaderContext(0, 1))
    reader.add_splits([BlockSplit(2, 5), BlockSplit(0)])
    assert [record_key(r) for r in reader.poll_next(10)] == [("b2-5", 5), ("b2-6", 6)]
    # a finished block is left out at once (a restore does not read it again)
    assert reader.snapshot_state() == [BlockSplit(0, 0)]
    with pytest.raises(TypeError, match="BlockSplit"):
        reader.add_splits([(1, 0)])
    with pytest.raises(ValueError, match="does not fit"):
        reader.add_splits([BlockSplit(6)])
    with pytest.raises(RuntimeError, match="was given splits"):
        reader.restore_state((0, 0))


def test_testing_source_splits_and_errors(tmp_path):
    source = TestingSource(list(range(10)), ledger_dir=str(tmp_path / "l"))
    assert source.create_splits(3) == [IndexRangeSplit(0, 3), IndexRangeSplit(3, 6),
                                       IndexRangeSplit(6, 10)]
    reader = source.create_reader(SourceReaderContext(0, 1))
    reader.add_splits([IndexRangeSplit(7, 9), IndexRangeSplit(2, 4)])
    assert reader.poll_next(10) == [7, 8]  # a batch stops at the end of its split
    assert reader.snapshot_state() == [IndexRangeSplit(2, 4)]
    assert drain(reader) == [2, 3]
    with pytest.raises(TypeError, match="IndexRangeSplit"):
        reader.add_splits([3])
    with pytest.raises(ValueError, match="does not fit"):
        reader.add_splits([IndexRangeSplit(5, 11)])
    with pytest.raises(RuntimeError, match="was given splits"):
        reader.restore_state(0)
    everything = TestingSource([1, 2], parallelism_split=False, ledger_dir=str(tmp_path / "e"))
    assert everything.create_splits(2) is None


@pytest.mark.parametrize("p, q", RESCALES)
def test_testing_source_fail_fires_once_across_a_rescale(tmp_path, p, q):
    items = list(range(8)) + [FAIL()] + list(range(8, 20))
    source = TestingSource(items, ledger_dir=str(tmp_path / "ledger"))
    readers = start_readers(source, p)
    before = [r for reader in readers for r in poll(reader, 1, 2)]
    checkpoint = [reader.snapshot_state() for reader in readers]
    # after the checkpoint the job runs on until the marker fails it
    with pytest.raises(TestingFailure, match="item 8"):
        for reader in readers:
            drain(reader)
    assert source.fired_markers() == [8]
    # recovery at parallelism q from the checkpoint: the failure does not come again
    copy = cloudpickle.loads(cloudpickle.dumps(source))
    after = []
    for i, share in enumerate(rescale(checkpoint, q)):
        reader = copy.create_reader(SourceReaderContext(i, q))
        reader.add_splits(share)
        after.extend(drain(reader))
    assert Counter(before + after) == Counter(range(20))
    assert source.fired_markers() == [8]


# ---------------------------------------------------------------------------------------
# SourceOperator end to end
# ---------------------------------------------------------------------------------------

class SourceSubtask:
    """One subtask's SourceOperator driven as a task drives it."""

    def __init__(self, source, index, parallelism, restored=None):
        self.op = SourceOperator(cloudpickle.loads(cloudpickle.dumps(source)))
        self.op.uid = "the-source"
        ctx = OperatorContext("task", index, parallelism, 128, KeyGroupRange(0, 127),
                              ProcessingTimeService(ManualClock(0)))
        self.output = CollectingOutput()
        self.op.setup(ctx, self.output, {})
        self.store = (OperatorStateStore.restore(restored) if restored is not None
                      else OperatorStateStore())
        self.op.initialize_state(StateInitializationContext(
            self.store, None, 1 if restored is not None else None))
        self.op.open()

    def emit(self, times, max_records=3):
        for _ in range(times):
            if self.op.emit_next(max_records) is None:
                break

    def run_to_end(self):
        while self.op.emit_next(4) is not None:
            pass
        self.op.close()

    def snapshot(self):
        self.op.snapshot_state(StateSnapshotContext(1, 0))
        return self.store.snapshot()


def run_and_restore(source, p, q, polls=2):
    """Run ``p`` subtasks a little, checkpoint, restore at ``q`` and run to the end; the
    records emitted before the checkpoint and after the restore."""
    first = [SourceSubtask(source, i, p) for i in range(p)]
    for s in first:
        s.emit(polls)
    snapshots = [s.snapshot() for s in first]
    before = [r for s in first for r in s.output.records]
    parts = redistribute_operator_state(snapshots, q)
    second = [SourceSubtask(source, i, q, parts[i]) for i in range(q)]
    for s in second:
        s.run_to_end()
    return before, [r for s in second for r in s.output.records]


@pytest.mark.parametrize("p, q", RESCALES)
@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_source_operator_rescales_split_based_sources(tmp_path, kind, p, q):
    source, expected = SOURCES[kind](tmp_path)
    before, after = run_and_restore(source, p, q)
    assert before and after
    assert Counter(map(record_key, before + after)) == Counter(map(record_key, expected))


class _CountingReader(SourceReader):
    def __init__(self, n):
        self.n, self.pos = n, 0

    def poll_next(self, max_records):
        if self.pos >= self.n:
            return None
        stop = min(self.n, self.pos + max_records)
        batch, self.pos = list(range(self.pos, stop)), stop
        return batch

    def snapshot_state(self):
        return self.pos

    def restore_state(self, state):
        self.pos = state


class CountingSource(Source):
    """Not split-based: every subtask counts 0..n-1 and keeps its own position."""

    default_name = "Counting Source"

    def __init__(self, n):
        self.n = n

    def create_reader(self, context):
        return _CountingReader(self.n)


def test_non_split_source_restores_at_the_same_parallelism():
    before, after = run_and_restore(CountingSource(10), 2, 2, polls=1)
    assert sorted(before + after) == sorted(list(range(10)) * 2)


@pytest.mark.parametrize("p, q", [(2, 3), (3, 2), (2, 1)])
def test_non_split_source_refuses_another_parallelism(p, q):
    first = [SourceSubtask(CountingSource(10), i, p) for i in range(p)]
    for s in first:
        s.emit(1)
    parts = redistribute_operator_state([s.snapshot() for s in first], q)
    with pytest.raises(SourceRescaleError) as raised:
        SourceSubtask(CountingSource(10), 0, q, parts[0])
    message = str(raised.value)
    assert "Source: Counting Source" in message and "the-source" in message
    assert f"parallelism {p}" in message and f"parallelism {q}" in message


def test_testing_source_without_split_keeps_its_position_per_subtask(tmp_path):
    source = TestingSource(list(range(6)), parallelism_split=False,
                           ledger_dir=str(tmp_path / "l"))
    before, after = run_and_restore(source, 2, 2, polls=1)
    assert sorted(before + after) == sorted(list(range(6)) * 2)
    first = [SourceSubtask(source, i, 2) for i in range(2)]
    parts = redistribute_operator_state([s.snapshot() for s in first], 3)
    with pytest.raises(SourceRescaleError, match="parallelism 2.*parallelism 3"):
        SourceSubtask(source, 0, 3, parts[0])


def test_a_position_from_a_run_without_splits_still_restores(tmp_path):
    """A checkpoint holding a per-subtask position (taken when the source was not
    split-based) restores at the same parallelism: the reader reads on from it."""
    source, expected = _files(tmp_path)
    restored = {_READER_STATE: OperatorStateEntry(SPLIT_DISTRIBUTE, [cloudpickle.dumps(
        _SubtaskPosition(0, 1, (0, len("a0\na1\n"))))])}
    subtask = SourceSubtask(source, 0, 1, restored)
    subtask.run_to_end()
    assert subtask.output.records == expected[2:]
