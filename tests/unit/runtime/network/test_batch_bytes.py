"""RecordWriter bounds a channel batch by bytes as well as by records (issue 14): each
channel's record limit follows the bytes per record its writer measured; before the first
batch the first record is pickled once to size it."""

from flowray.runtime.network.channel import ChannelStats, ChannelWriter
from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.in_process import InProcessChannel
from flowray.runtime.network.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RecordWriter,
)
from flowray.state.key_groups import assign_to_key_group, compute_operator_index_for_key_group

KB = 1 << 10


def _drain(ch):
    frames = []
    while (f := ch.reader.poll()) is not None:
        frames.append(f)
    return frames


def _big(i, size=10_000):
    """A record of ``size`` bytes; distinct objects (pickle would share equal objects)."""
    return i.to_bytes(4, "big") + bytes(size - 4)


class _NoBytesWriter(ChannelWriter):
    """Keeps what it is given and counts no bytes (as the print() writer): no measurement."""

    def __init__(self):
        self.channel_id = "e/0->0"
        self.credits = 1
        self.stats = ChannelStats()
        self.frames = []

    def write(self, frame):
        self.frames.append(frame)

    def in_flight(self):
        return 0

    def close(self):
        pass


def test_10kb_records_flush_in_batches_of_about_6_at_64kb():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000,
                      batch_bytes=64 * KB)
    records = [_big(i) for i in range(100)]
    for r in records:  # one record at a time, as a map emits
        rw.emit([r])
    assert rw.pending_since_ms is not None  # a remainder waits for the buffer timeout
    rw.flush()
    frames = _drain(ch)
    sizes = [len(f) for f in frames]
    assert sizes == [6] * 16 + [4], sizes
    assert [r for f in frames for r in f.records] == records
    per_frame = ch.writer.stats.bytes / ch.writer.stats.frames
    assert per_frame <= 64 * KB


def test_one_large_emit_is_split_by_the_byte_limit():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000,
                      batch_bytes=64 * KB)
    records = [_big(i) for i in range(20)]
    rw.emit(records)
    frames = _drain(ch)
    assert [len(f) for f in frames] == [6, 6, 6, 2]
    assert [r for f in frames for r in f.records] == records


def test_small_records_still_batch_at_batch_size():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000)  # 1 mb
    for start in range(0, 2500, 100):
        rw.emit(list(range(start, start + 100)))
    assert [len(f) for f in _drain(ch)] == [1000, 1000]  # measured, and still 1000
    rw.flush()
    assert [f.records for f in _drain(ch)] == [list(range(2000, 2500))]


def test_a_channel_whose_records_grow_adapts_after_one_batch():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=50,
                      batch_bytes=64 * KB)
    rw.emit(list(range(50)))  # small records: a full batch of 50
    for i in range(80):
        rw.emit([_big(i)])
    rw.flush()
    sizes = [len(f) for f in _drain(ch)]
    # the first batch of large records still used the limit measured on small ones;
    # the bytes it measured bring the next batches down to about 64 kb
    assert sizes == [50, 50] + [6] * 5, sizes


def test_a_channel_whose_records_shrink_grows_back_to_batch_size():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=100,
                      batch_bytes=64 * KB)
    rw.emit([_big(i) for i in range(6)])
    rw.emit(list(range(300)))
    # the first 6 small records still went with the limit of the large ones; then 100
    assert [len(f) for f in _drain(ch)] == [6, 6, 100, 100, 94]


def test_first_batch_of_huge_records_is_bounded_by_the_one_record_probe():
    # the writer counts no bytes, so only the probe of the first record bounds batches
    w = _NoBytesWriter()
    rw = RecordWriter(ForwardPartitioner(), [w], 0, batch_size=1000, batch_bytes=KB << 10)
    for i in range(10):
        rw.emit([_big(i, 300 * KB)])  # 300 kb records, 1 mb batches: 3 records
    assert [len(f) for f in w.frames] == [3, 3, 3]
    rw.flush()
    assert [len(f) for f in w.frames] == [3, 3, 3, 1]


def test_first_batch_on_a_measuring_channel_is_bounded_by_the_probe():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000,
                      batch_bytes=KB << 10)
    rw.emit([_big(i, 300 * KB) for i in range(7)])
    assert [len(f) for f in _drain(ch)] == [3, 3, 1]


def test_an_unpicklable_first_record_keeps_batch_size():
    w = _NoBytesWriter()
    rw = RecordWriter(ForwardPartitioner(), [w], 0, batch_size=5, batch_bytes=KB)
    records = [(lambda i=i: i) for i in range(12)]  # plain pickle cannot size a lambda
    rw.emit(records)
    rw.flush()
    assert [len(f) for f in w.frames] == [5, 5, 2]
    assert all(type(f) is RecordBatch for f in w.frames)


def test_limits_are_per_channel():
    maxp, n = 128, 2
    chs = [InProcessChannel(f"e/0->{i}", 1000) for i in range(n)]
    channel_of = {k: compute_operator_index_for_key_group(maxp, n, assign_to_key_group(k, maxp))
                  for k in ("a", "b", "c", "d", "e", "f")}
    small_key = next(k for k, c in channel_of.items() if c == 0)
    large_key = next(k for k, c in channel_of.items() if c == 1)
    rw = RecordWriter(KeyGroupStreamPartitioner(lambda r: r[0], maxp),
                      [c.writer for c in chs], 0, batch_size=20, batch_bytes=64 * KB)
    for i in range(40):
        rw.emit([(small_key, i), (large_key, _big(i))])
    small, large = (_drain(c) for c in chs)
    assert [len(f) for f in small] == [20, 20]
    assert [len(f) for f in large] == [6] * 6
    for f in large:
        assert len(f.key_groups) == len(f.records)
        assert all(r[0] == large_key for r in f.records)


def test_broadcast_sizes_every_channel():
    chs = [InProcessChannel(f"e/0->{i}", 1000) for i in range(3)]
    rw = RecordWriter(BroadcastPartitioner(), [c.writer for c in chs], 0, batch_size=1000,
                      batch_bytes=64 * KB)
    records = [_big(i) for i in range(13)]
    rw.emit(records)
    rw.flush()
    for c in chs:
        frames = _drain(c)
        assert [len(f) for f in frames] == [6, 6, 1]
        assert [r for f in frames for r in f.records] == records


def test_default_batch_bytes_is_one_mb():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000)
    assert rw.batch_bytes == 1 << 20
