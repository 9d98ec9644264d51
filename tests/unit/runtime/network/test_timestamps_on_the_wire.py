"""Record timestamps on the wire: the frame codec (with and without key groups, None kept
as None), WatermarkStatus frames, partitioners routing each timestamp with its record, and
RecordWriter padding with None when a stream starts carrying timestamps."""

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.runtime.network.elements import (
    EndOfPartition,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)
from flowray.runtime.network.frame_codec import (
    HEADER,
    decode_frame,
    encode_frame,
    frame_sequence_number,
)
from flowray.runtime.network.in_process import InProcessChannel
from flowray.runtime.network.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    RecordWriter,
    ShufflePartitioner,
)
from flowray.state.key_groups import assign_to_key_group

MAXP = 128


def round_trip(frame, seq=1):
    data = encode_frame(frame, seq)
    length, kind, got_seq = HEADER.unpack_from(data)
    assert got_seq == seq == frame_sequence_number(data)
    assert length == len(data) - HEADER.size
    return decode_frame(kind, memoryview(data)[HEADER.size:])


# ---------------------------------------------------------------------------------------
# frame codec
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key_groups", [None, [0, 127, 5, 64]], ids=["plain", "keyed"])
@pytest.mark.parametrize("timestamps", [
    None,
    [1, 2, 3, 4],
    [None, 0, -5, MAX_WATERMARK],
    [None, None, None, None],
    [1_700_000_000_000, None, -(1 << 62), 7],
], ids=["none", "ints", "mixed", "all-none", "large"])
def test_record_batch_round_trip(key_groups, timestamps):
    records = [("a", 1), {"b": [2]}, None, "é"]
    got = round_trip(RecordBatch(records, key_groups, timestamps), seq=42)
    assert type(got) is RecordBatch
    assert got.records == records
    assert got.key_groups == key_groups
    assert got.timestamps == timestamps  # a list of None stays a list, None stays None
    if timestamps is not None:
        assert all(t is None or type(t) is int for t in got.timestamps)


def test_empty_and_large_batches_round_trip():
    assert round_trip(RecordBatch([], None, [])).timestamps == []
    n = 10_000
    batch = RecordBatch(list(range(n)), [i % MAXP for i in range(n)],
                        [None if i % 3 == 0 else i * 7 for i in range(n)])
    got = round_trip(batch, seq=2 ** 40)
    assert (got.records, got.key_groups, got.timestamps) == (
        batch.records, batch.key_groups, batch.timestamps)


@pytest.mark.parametrize("idle", [True, False])
def test_watermark_status_frames(idle):
    got = round_trip(WatermarkStatus(idle), seq=9)
    assert got == WatermarkStatus(idle) and got.idle is idle
    assert len(encode_frame(WatermarkStatus(idle), 9)) == HEADER.size  # no payload


def test_watermark_and_status_frames_differ_on_the_wire():
    kinds = {HEADER.unpack_from(encode_frame(f, 0))[1]
             for f in (WatermarkStatus(True), WatermarkStatus(False), Watermark(5),
                       EndOfPartition(), RecordBatch([1]), RecordBatch([1], [0]),
                       RecordBatch([1], None, [1]), RecordBatch([1], [0], [1]))}
    assert len(kinds) == 8


def test_frames_in_order_through_a_channel():
    ch = InProcessChannel("e/0->0", 100)
    frames = [RecordBatch([1, 2], None, [10, None]), WatermarkStatus(True), Watermark(10),
              WatermarkStatus(False), RecordBatch([3], [4], [30]), EndOfPartition()]
    for f in frames:
        ch.writer.write(f)
    got = []
    while (f := ch.reader.poll()) is not None:
        got.append(f)
    assert [type(f) for f in got] == [type(f) for f in frames]
    assert [got[1], got[2], got[3]] == [WatermarkStatus(True), Watermark(10),
                                        WatermarkStatus(False)]
    assert (got[0].records, got[0].timestamps) == ([1, 2], [10, None])
    assert (got[4].records, got[4].key_groups, got[4].timestamps) == ([3], [4], [30])


# ---------------------------------------------------------------------------------------
# partitioners
# ---------------------------------------------------------------------------------------

def stamp(record):
    """Each test record's timestamp: its id * 10, none for every fifth."""
    return None if record[1] % 5 == 0 else record[1] * 10


PARTITIONERS = [
    ("forward", ForwardPartitioner, 1),
    ("rebalance-1", RebalancePartitioner, 1),
    ("rebalance-3", RebalancePartitioner, 3),
    ("shuffle", ShufflePartitioner, 4),
    ("broadcast", BroadcastPartitioner, 3),
    ("global", GlobalPartitioner, 3),
    ("hash", lambda: KeyGroupStreamPartitioner(lambda r: r[0], MAXP), 3),
]


@pytest.mark.parametrize("make, n", [(m, n) for _, m, n in PARTITIONERS],
                         ids=[name for name, _, _ in PARTITIONERS])
def test_every_partitioner_routes_timestamps_with_their_records(make, n):
    partitioner = make()
    partitioner.setup(n, 1)
    keyed = isinstance(partitioner, KeyGroupStreamPartitioner)
    out = [[] for _ in range(n)]
    out_kgs = [[] for _ in range(n)] if keyed else None
    out_ts = [[] for _ in range(n)]
    records = [(f"k{i % 7}", i) for i in range(53)]
    for batch in (records[:20], records[20:21], records[21:]):
        partitioner.route(batch, out, out_kgs, [stamp(r) for r in batch], out_ts)
    delivered = []
    for c in range(n):
        assert len(out_ts[c]) == len(out[c])
        assert out_ts[c] == [stamp(r) for r in out[c]]
        if keyed:
            assert out_kgs[c] == [assign_to_key_group(r[0], MAXP) for r in out[c]]
        delivered.extend(out[c])
    copies = n if partitioner.is_broadcast else 1
    assert sorted(delivered) == sorted(records * copies)


@pytest.mark.parametrize("make, n", [(m, n) for _, m, n in PARTITIONERS],
                         ids=[name for name, _, _ in PARTITIONERS])
def test_partitioners_without_timestamps_leave_the_timestamp_lists_alone(make, n):
    partitioner = make()
    partitioner.setup(n, 0)
    keyed = isinstance(partitioner, KeyGroupStreamPartitioner)
    out = [[] for _ in range(n)]
    partitioner.route([("a", 1), ("b", 2)], out, [[] for _ in range(n)] if keyed else None)
    assert sum(len(o) for o in out) == (2 * n if partitioner.is_broadcast else 2)


# ---------------------------------------------------------------------------------------
# RecordWriter
# ---------------------------------------------------------------------------------------

def drain(ch):
    frames = []
    while (f := ch.reader.poll()) is not None:
        frames.append(f)
    return frames


def test_record_writer_pads_untimestamped_records_with_none():
    (ch,) = [InProcessChannel("e/0->0", 100)]
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=100)
    rw.emit([1, 2])                       # no timestamps yet
    rw.emit([3, 4], timestamps=[30, None])
    rw.emit([5])                          # after timestamps appeared: padded
    rw.flush()
    (frame,) = drain(ch)
    assert frame.records == [1, 2, 3, 4, 5]
    assert frame.timestamps == [None, None, 30, None, None]


def test_record_writer_never_timestamped_sends_none():
    ch = InProcessChannel("e/0->0", 100)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=3)
    rw.emit(list(range(7)))
    rw.flush()
    frames = drain(ch)
    assert [f.records for f in frames] == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(f.timestamps is None for f in frames)


def test_record_writer_splits_timestamps_with_batches_and_channels():
    chs = [InProcessChannel(f"e/0->{i}", 100) for i in range(3)]
    rw = RecordWriter(KeyGroupStreamPartitioner(lambda r: r[0], MAXP),
                      [c.writer for c in chs], 0, batch_size=4)
    records = [(f"k{i % 5}", i) for i in range(40)]
    rw.emit(records[:10])  # untimestamped records wait in the pending lists
    rw.emit(records[10:], timestamps=[stamp(r) for r in records[10:]])
    rw.flush()
    seen = []
    for ch in chs:
        for f in drain(ch):
            assert len(f.records) == len(f.key_groups) <= 4
            if f.timestamps is None:  # flushed before any record had a timestamp
                assert all(r[1] < 10 for r in f.records)
                seen.extend(f.records)
                continue
            assert len(f.timestamps) == len(f.records)
            for r, t, kg in zip(f.records, f.timestamps, f.key_groups):
                assert t == (None if r[1] < 10 else stamp(r))
                assert kg == assign_to_key_group(r[0], MAXP)
                seen.append(r)
    assert sorted(seen, key=lambda r: r[1]) == records


def test_record_writer_pads_what_is_pending_on_every_channel():
    chs = [InProcessChannel(f"e/0->{i}", 100) for i in range(2)]
    rw = RecordWriter(BroadcastPartitioner(), [c.writer for c in chs], 0, batch_size=4)
    rw.emit(["a", "b"])
    rw.flush()                          # sent without timestamps
    rw.emit(["c", "d", "e"])            # pending on both channels
    rw.emit(["f"], timestamps=[6])      # the fourth record: both channels flush
    rw.emit(["g"])
    rw.broadcast_event(Watermark(6))
    for ch in chs:
        frames = drain(ch)
        assert [(f.records, f.timestamps) for f in frames[:-2]] == [
            (["a", "b"], None), (["c", "d", "e", "f"], [None, None, None, 6])]
        assert frames[-2].records == ["g"] and frames[-2].timestamps in (None, [None])
        assert frames[-1] == Watermark(6)
