"""Blocking result partitions (BATCH mode): files written by a producer, read later, as often
as needed, also from another process. No Ray."""

import os
import pickle
import subprocess
import sys
import threading
import time

import pytest

from flowray.runtime.network.blocking_partition import (
    INPROGRESS_SUFFIX,
    BlockingChannelReader,
    BlockingChannelWriter,
    BlockingPartitionStore,
    CorruptPartitionError,
    MixedInputGate,
    PartitionNotFoundError,
    safe_file_name,
)
from flowray.runtime.network.channel import (
    ChannelClosedError,
    ChannelError,
    ChannelReader,
    ChannelSequenceError,
    ChannelWriter,
    InputGate,
)
from flowray.runtime.network.in_process import InProcessChannel, InProcessGate
from flowray.runtime.network.frame_codec import encode_frame
from flowray.runtime.network.elements import EndOfPartition, RecordBatch, Watermark
from tests.support.channels import (
    WAIT_S,
    Pair,
    close_is_idempotent_on_both_ends,
    closing_writer_after_end_of_partition_is_clean,
    mixed_frames,
    norm,
)

CID = "e3/0->1"


@pytest.fixture
def store(tmp_path):
    return BlockingPartitionStore(str(tmp_path / "blocking"), "job-1")


def _publish(store, channel_id, frames):
    w = store.writer(channel_id)
    for f in frames:
        w.write(f)
    w.close()
    return w


def _read_all(reader, limit=1_000_000):
    got = []
    for _ in range(limit):
        f = reader.poll()
        if f is None:
            break
        got.append(f)
    return got


def _files(store):
    return sorted(os.listdir(store.job_dir)) if os.path.isdir(store.job_dir) else []


# ---------------------------------------------------------------------------------------
# the shared channel contract, where it applies to a write-then-read channel
# ---------------------------------------------------------------------------------------

@pytest.fixture
def make_blocking_pair(store):
    made = []

    def make(n=1, credits=8):
        ids = [f"e1/0->{i}" for i in range(n)]
        writers = [store.writer(cid) for cid in ids]
        readers = [store.reader(cid) for cid in ids]  # opens its file at the first poll

        def push_raw(i, data):
            writers[i]._file.write(data)

        def cleanup():
            for w in writers:
                w.close()
            for r in readers:
                r.close()

        p = Pair(writers, readers, MixedInputGate(None), push_raw, cleanup)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.mark.parametrize("contract_test", [
    closing_writer_after_end_of_partition_is_clean,
    close_is_idempotent_on_both_ends,
], ids=lambda f: f"test_{f.__name__}")
def test_channel_contract(contract_test, make_blocking_pair):
    contract_test(make_blocking_pair)


def test_ends_are_channel_ends(store):
    w = store.writer(CID)
    r = store.reader(CID)
    assert isinstance(w, ChannelWriter) and isinstance(r, ChannelReader)
    assert isinstance(w, BlockingChannelWriter) and isinstance(r, BlockingChannelReader)
    assert isinstance(MixedInputGate(None), InputGate)
    assert issubclass(PartitionNotFoundError, ChannelError)
    assert issubclass(CorruptPartitionError, PartitionNotFoundError)
    assert w.channel_id == r.channel_id == CID
    w.close()


# ---------------------------------------------------------------------------------------
# round trips and streaming reads
# ---------------------------------------------------------------------------------------

def test_round_trip_of_mixed_frames_and_writer_stats(store):
    frames = mixed_frames(40)
    w = _publish(store, CID, frames)
    assert w.published and w.closed
    got = _read_all(store.reader(CID))
    assert [norm(f) for f in got] == [norm(f) for f in frames]
    st = w.stats
    assert st.frames == len(frames)
    assert st.records == sum(len(f) for f in frames if type(f) is RecordBatch)
    assert st.bytes == os.path.getsize(store.path(CID)) == store.size_bytes([CID])
    assert st.blocked == 0 and st.max_in_flight == 0 and w.in_flight() == 0 and w.credits == 0


def test_key_groups_watermarks_and_end_of_partition_survive(store):
    _publish(store, CID, [RecordBatch([("a", 1), ("b", 2)], [3, 127]), Watermark(-5),
                          RecordBatch([]), EndOfPartition()])
    r = store.reader(CID)
    b = r.poll()
    assert b.records == [("a", 1), ("b", 2)] and b.key_groups == [3, 127]
    assert r.poll() == Watermark(-5)
    assert r.poll().records == []
    assert r.poll() == EndOfPartition()
    assert r.poll() is None and r.poll() is None
    assert not r.has_frames()


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 4096])
def test_many_frames_stream_across_chunk_boundaries(store, chunk_size):
    n = 3000
    frames = []
    for i in range(n):
        if i % 500 == 7:
            frames.append(RecordBatch([b"x" * 20_000, i]))  # larger than any chunk here
        elif i % 3 == 0:
            frames.append(Watermark(i))
        else:
            frames.append(RecordBatch([i, str(i)]))
    frames.append(EndOfPartition())
    _publish(store, CID, frames)
    size = os.path.getsize(store.path(CID))
    biggest = max(len(encode_frame(f, 0)) for f in frames)
    r = store.reader(CID, chunk_size=chunk_size)
    got = []
    max_buffered = 0
    while True:
        f = r.poll()
        max_buffered = max(max_buffered, len(r._buf))
        if f is None:
            break
        got.append(f)
    assert [norm(f) for f in got] == [norm(f) for f in frames]
    assert r.bytes_read == size and r.frames_read == len(frames)
    # streaming: never more than a chunk plus one frame buffered, far less than the file
    assert max_buffered <= chunk_size + biggest
    assert max_buffered < size / 10


def test_reader_holds_only_a_chunk_of_a_big_file(store):
    w = store.writer(CID)
    for i in range(2000):
        w.write(RecordBatch([i] * 200))
    w.write(EndOfPartition())
    w.close()
    r = store.reader(CID, chunk_size=16 * 1024)
    assert r.poll().records == [0] * 200
    assert r.bytes_read == 16 * 1024 < os.path.getsize(store.path(CID)) / 50
    assert len(_read_all(r)) == 2000


# ---------------------------------------------------------------------------------------
# re-reads
# ---------------------------------------------------------------------------------------

def test_re_read_many_times(store):
    frames = [RecordBatch([i, i * i]) for i in range(50)] + [Watermark(9), EndOfPartition()]
    _publish(store, CID, frames)
    want = [norm(f) for f in frames]
    for attempt in range(25):
        r = store.reader(CID, chunk_size=(attempt % 5 + 1) * 13)
        assert [norm(f) for f in _read_all(r)] == want
        r.close()
    assert store.is_available(CID)  # reading consumes nothing


def test_two_readers_interleaved_and_concurrent(store):
    frames = [RecordBatch(list(range(i, i + 30))) for i in range(400)] + [EndOfPartition()]
    _publish(store, CID, frames)
    want = [norm(f) for f in frames]

    # interleaved in one thread: independent positions
    a, b = store.reader(CID, chunk_size=100), store.reader(CID, chunk_size=333)
    got_a, got_b = [], []
    while len(got_b) < len(frames):  # a reads two frames for each one b reads
        got_a += [f for f in (a.poll(), a.poll()) if f is not None]
        got_b.append(b.poll())
    assert len(got_a) == len(frames) and a.poll() is None and b.poll() is None
    assert [norm(f) for f in got_a] == want == [norm(f) for f in got_b]

    # concurrently from threads
    results, errors = {}, []

    def read(name):
        try:
            results[name] = [norm(f) for f in _read_all(store.reader(CID, chunk_size=512))]
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=read, args=(f"t{i}",), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not errors, errors
    assert len(results) == 4 and all(v == want for v in results.values())


# ---------------------------------------------------------------------------------------
# availability and failed producers
# ---------------------------------------------------------------------------------------

def test_available_only_after_end_of_partition_and_close(store):
    w = store.writer(CID)
    w.write(RecordBatch([1]))
    assert not store.is_available(CID)
    assert os.path.exists(store.inprogress_path(CID))
    w.write(EndOfPartition())
    assert not store.is_available(CID)  # end-of-partition written but not yet closed
    with pytest.raises(PartitionNotFoundError, match="has not finished"):
        store.reader(CID).poll()
    with pytest.raises(ChannelError, match="after end-of-partition"):
        w.write(RecordBatch([2]))
    w.close()
    assert store.is_available(CID) and w.published
    assert _files(store) == [safe_file_name(CID)]  # no in-progress file left
    w.close()  # idempotent
    with pytest.raises(ChannelClosedError):
        w.write(RecordBatch([3]))


def test_close_without_end_of_partition_leaves_nothing(store):
    w = store.writer(CID)
    for i in range(10):
        w.write(RecordBatch([i]))
    w.close()
    assert not w.published
    assert not store.is_available(CID)
    assert _files(store) == []
    with pytest.raises(PartitionNotFoundError):
        store.reader(CID).poll()


def test_discard_after_end_of_partition_publishes_nothing(store):
    w = store.writer(CID)
    w.write(EndOfPartition())
    w.discard()
    w.close()
    assert not store.is_available(CID) and _files(store) == []


def test_restarted_producer_replaces_a_failed_attempt_and_a_zombie_cannot_publish(store):
    old = store.writer(CID)
    old.write(RecordBatch(["old"]))
    new = store.writer(CID)  # a restarted attempt while the old one still runs
    new.write(RecordBatch(["new"]))
    new.write(EndOfPartition())
    old.write(EndOfPartition())
    new.close()
    with pytest.raises(ChannelError, match="replaced by another attempt"):
        old.close()
    assert [norm(f) for f in _read_all(store.reader(CID))] == \
        [norm(RecordBatch(["new"])), EndOfPartition()]
    # a later successful attempt is published over an available file atomically
    r = store.reader(CID)
    assert r.poll().records == ["new"]  # this reader keeps its file
    _publish(store, CID, [RecordBatch(["third"]), EndOfPartition()])
    assert r.poll() == EndOfPartition()
    assert store.reader(CID).poll().records == ["third"]


def test_partition_availability_needs_every_subpartition(store):
    ids = [f"e2/3->{i}" for i in range(3)]
    assert store.is_partition_available([]) is True
    assert not store.is_partition_available(ids)
    for cid in ids[:2]:
        _publish(store, cid, [RecordBatch([cid]), EndOfPartition()])
    assert not store.is_partition_available(ids)
    assert store.is_partition_available(iter(ids[:2]))  # any iterable
    _publish(store, ids[2], [EndOfPartition()])
    assert store.is_partition_available(ids)
    assert store.size_bytes(ids) == sum(os.path.getsize(store.path(c)) for c in ids) > 0
    assert store.size_bytes(ids[0]) == os.path.getsize(store.path(ids[0]))  # a lone id


# ---------------------------------------------------------------------------------------
# lost and damaged partitions
# ---------------------------------------------------------------------------------------

def test_lost_file_raises_partition_not_found(store):
    _publish(store, CID, [RecordBatch([1]), EndOfPartition()])
    os.unlink(store.path(CID))  # the partition is lost
    r = store.reader(CID)
    with pytest.raises(PartitionNotFoundError) as info:
        r.poll()
    err = info.value
    assert err.channel_id == CID and err.path == store.path(CID)
    assert CID in str(err) and store.path(CID) in str(err) and "lost" in str(err)
    assert r.has_frames()  # the gate hands it out again, so the failure surfaces
    with pytest.raises(PartitionNotFoundError):
        store.reader(CID).open()  # eagerly, at open
    with pytest.raises(PartitionNotFoundError):
        r.poll()  # still missing
    # a job whose folder never existed
    other = BlockingPartitionStore(store.root_dir, "never-ran")
    with pytest.raises(PartitionNotFoundError):
        other.reader(CID).poll()


def test_reader_that_opened_the_file_survives_its_release(store):
    _publish(store, CID, [RecordBatch([1]), RecordBatch([2]), EndOfPartition()])
    r = store.reader(CID, chunk_size=8)
    assert r.poll().records == [1]
    store.release([CID])
    assert r.poll().records == [2] and r.poll() == EndOfPartition()


def test_truncated_file_raises_corrupt_partition(store):
    _publish(store, CID, [RecordBatch(list(range(100))), RecordBatch([1]), EndOfPartition()])
    path = store.path(CID)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 20)
    r = store.reader(CID, chunk_size=64)
    assert r.poll().records == list(range(100))
    with pytest.raises(CorruptPartitionError, match="without end-of-partition"):
        r.poll()
    assert r.poll() is None  # reported once, like a vanished peer on other channels


@pytest.mark.parametrize("seqs, message", [((0, 2), "gap"), ((0, 1, 1), "replayed")])
def test_sequence_errors_in_a_file(store, seqs, message):
    os.makedirs(store.job_dir, exist_ok=True)
    with open(store.path(CID), "wb") as f:
        for seq in seqs:
            f.write(encode_frame(Watermark(seq), seq))
        f.write(encode_frame(EndOfPartition(), seqs[-1] + 1))
    r = store.reader(CID)
    with pytest.raises(ChannelSequenceError, match=message):
        _read_all(r)


def test_poll_after_reader_close_raises(store):
    _publish(store, CID, [RecordBatch([1]), EndOfPartition()])
    r = store.reader(CID)
    r.close()
    assert not r.has_frames()
    with pytest.raises(ChannelClosedError):
        r.poll()


# ---------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------

def test_release_and_release_all_are_idempotent(store):
    ids = ["e1/0->0", "e1/0->1", "e2/1->0"]
    for cid in ids:
        _publish(store, cid, [RecordBatch([cid]), EndOfPartition()])
    in_progress = store.writer("e9/0->0")
    in_progress.write(RecordBatch([0]))
    store.release(ids[:2])
    store.release(ids[:2])
    assert [store.is_available(c) for c in ids] == [False, False, True]
    store.release(ids[2])  # a lone id, not its characters
    assert not store.is_available(ids[2])
    store.release(["never-written"])
    store.release_all()
    assert not os.path.exists(store.job_dir)
    store.release_all()
    in_progress.close()  # its file is gone: nothing to publish, nothing raised
    assert not os.path.exists(store.job_dir)


def test_release_all_keeps_other_jobs(tmp_path):
    a = BlockingPartitionStore(str(tmp_path), "job-a")
    b = BlockingPartitionStore(str(tmp_path), "job-b")
    _publish(a, CID, [EndOfPartition()])
    _publish(b, CID, [EndOfPartition()])
    a.release_all()
    assert not a.is_available(CID) and b.is_available(CID)


# ---------------------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------------------

TRICKY_IDS = [
    "e3/0->1", "e3/0->10", "e30->1", "e3%2F0-%3E1", "e3_0-_1", "A", "a", "..", ".", "...",
    "x", "x.inprogress", "x" + INPROGRESS_SUFFIX.upper(), "a b", "a\\b", "a\tb\nc", "/", "//",
    "~", "ü/ü", "日本/0->1", "e1/0->0\x00", "-", "_", "%", "%25", "CON", "nul",
    "e" + "1" * 500, "e" + "1" * 499 + "2", "ab" * 300,
]


def test_safe_names_are_collision_free_and_portable():
    names = [safe_file_name(c) for c in TRICKY_IDS]
    assert len({n.lower() for n in names}) == len(TRICKY_IDS)  # also case-insensitive FS
    for n in names:
        assert n and "/" not in n and "\\" not in n and "." not in n and "\x00" not in n
        assert len(n.encode()) <= 200
        assert not n.endswith(INPROGRESS_SUFFIX)
    assert safe_file_name("e3/0->1") == "e3%2F0-%3E1"
    with pytest.raises(ValueError):
        safe_file_name("")


def test_tricky_channel_ids_live_side_by_side(store):
    for i, cid in enumerate(TRICKY_IDS):
        _publish(store, cid, [RecordBatch([i, cid]), EndOfPartition()])
    assert len(_files(store)) == len(TRICKY_IDS)
    for i, cid in enumerate(TRICKY_IDS):
        assert store.reader(cid).poll().records == [i, cid]
        assert os.path.dirname(store.path(cid)) == store.job_dir


def test_bad_job_ids_are_refused(tmp_path):
    for bad in ["", ".", "..", "a/b", "a\\b"]:
        with pytest.raises(ValueError):
            BlockingPartitionStore(str(tmp_path), bad)


# ---------------------------------------------------------------------------------------
# other processes
# ---------------------------------------------------------------------------------------

_CHILD = r"""
import pickle, sys
from flowray.runtime.network.elements import EndOfPartition, RecordBatch
store, cid, back = pickle.loads(sys.stdin.buffer.read())
r = store.reader(cid, chunk_size=50)
got = []
while True:
    f = r.poll()
    if f is None:
        break
    got.append(f.records if type(f) is RecordBatch else type(f).__name__)
w = store.writer(back)
w.write(RecordBatch([len(got), "from the child"]))
w.write(EndOfPartition())
w.close()
sys.stdout.buffer.write(pickle.dumps((got, store.is_partition_available([cid, back]))))
"""


def test_pickled_store_works_in_another_process(store, tmp_path):
    frames = [RecordBatch([i, {"k": i}]) for i in range(30)] + [EndOfPartition()]
    _publish(store, CID, frames)
    data = pickle.dumps(store)
    assert pickle.loads(data) == store
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], input=pickle.dumps((store, CID, "e4/1->0")),
        capture_output=True, timeout=120, cwd=str(tmp_path))  # another cwd: paths are absolute
    assert proc.returncode == 0, proc.stderr.decode()
    got, available = pickle.loads(proc.stdout)
    assert got == [[i, {"k": i}] for i in range(30)] + ["EndOfPartition"]
    assert available
    r = store.reader("e4/1->0")
    assert r.poll().records == [31, "from the child"] and r.poll() == EndOfPartition()


# ---------------------------------------------------------------------------------------
# MixedInputGate
# ---------------------------------------------------------------------------------------

def test_mixed_gate_returns_ready_blocking_and_in_process_readers(store):
    _publish(store, "b/0->0", [RecordBatch(["file"]), EndOfPartition()])
    inner = InProcessGate()
    ch0 = InProcessChannel("p/0->0", 4, inner)
    ch1 = InProcessChannel("p/1->0", 4, inner)
    blk = store.reader("b/0->0")
    gate = MixedInputGate(inner)
    readers = [ch0.reader, blk, ch1.reader]
    ch1.writer.write(Watermark(1))
    t0 = time.monotonic()
    # a ready blocking reader: inner readers are only checked, never waited for
    assert gate.wait(readers, WAIT_S) == [blk, ch1.reader]
    assert time.monotonic() - t0 < WAIT_S / 2
    assert blk.poll().records == ["file"]
    assert gate.wait(readers, 0) == [blk, ch1.reader]
    assert blk.poll() == EndOfPartition()
    assert ch1.reader.poll() == Watermark(1)
    # blocking reader exhausted: the gate waits in the inner gate
    assert gate.wait(readers, 0) == []
    t = threading.Timer(0.1, lambda: ch0.writer.write(Watermark(2)))
    t.start()
    deadline = time.monotonic() + WAIT_S
    ready = []
    while not ready and time.monotonic() < deadline:
        ready = gate.wait(readers, 1.0)
    t.join(WAIT_S)
    assert ready == [ch0.reader]
    assert ch0.reader.poll() == Watermark(2)


def test_mixed_gate_over_blocking_readers_only(store):
    _publish(store, "b/0->0", [EndOfPartition()])
    _publish(store, "b/1->0", [RecordBatch([1]), EndOfPartition()])
    r0, r1 = store.reader("b/0->0"), store.reader("b/1->0")
    gate = MixedInputGate(None)
    assert gate.wait([r0, r1], 1.0) == [r0, r1]
    assert r0.poll() == EndOfPartition()
    assert gate.wait([r0, r1], 1.0) == [r1]
    assert _read_all(r1)[-1] == EndOfPartition()
    t0 = time.monotonic()
    assert gate.wait([r0, r1], 5.0) == []  # nothing can come: a short pause, no hang
    assert time.monotonic() - t0 < 2.0
    # a lost partition is "ready" so that polling surfaces the error
    lost = store.reader("b/9->0")
    assert gate.wait([r0, lost], 0) == [lost]
    with pytest.raises(PartitionNotFoundError):
        lost.poll()
    gate.close()


def test_mixed_gate_needs_an_inner_gate_for_other_readers(store):
    ch = InProcessChannel("p/0->0", 2)
    with pytest.raises(ChannelError, match="inner gate"):
        MixedInputGate(None).wait([ch.reader], 0)


def test_mixed_gate_close_closes_the_inner_gate_once():
    class Recording(InputGate):
        closed = 0

        def wait(self, readers, timeout_s):
            return []

        def close(self):
            self.closed += 1

    inner = Recording()
    gate = MixedInputGate(inner)
    gate.close()
    gate.close()
    assert inner.closed == 1
