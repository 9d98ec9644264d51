"""Partitioners route batches over channels; RecordWriter batches per channel."""

import collections

import pytest

from flowray.runtime.network.channel import ChannelClosedError
from flowray.runtime.network.in_process import InProcessChannel
from flowray.runtime.network.elements import (
    CheckpointBarrier,
    EndOfPartition,
    RecordBatch,
    Watermark,
)
from flowray.runtime.network.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    KeySelectorError,
    RebalancePartitioner,
    RecordWriter,
    ShufflePartitioner,
)
from flowray.state.key_groups import assign_to_key_group, compute_operator_index_for_key_group


def _route(partitioner, n, batches, subtask=0, keyed=False):
    partitioner.setup(n, subtask)
    out = [[] for _ in range(n)]
    kgs = [[] for _ in range(n)] if keyed else None
    for b in batches:
        partitioner.route(list(b), out, kgs)
    return out, kgs


# ---------------------------------------------------------------------------------------
# partitioners
# ---------------------------------------------------------------------------------------

def test_forward_keeps_everything_on_its_one_channel_in_order():
    out, _ = _route(ForwardPartitioner(), 1, [[1, 2, 3], [4], [5, 6]])
    assert out == [[1, 2, 3, 4, 5, 6]]
    assert ForwardPartitioner.is_pointwise and not ForwardPartitioner.is_broadcast


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("subtask", [0, 1, 7])
def test_rebalance_is_round_robin_across_batches(n, subtask):
    batches = [range(0, 7), range(7, 8), range(8, 13), range(13, 23), range(23, 25), range(25, 25),
               range(25, 61)]
    out, _ = _route(RebalancePartitioner(), n, batches, subtask)
    channel_of = {r: c for c, recs in enumerate(out) for r in recs}
    # every record exactly once, per-channel order preserved
    assert sorted(channel_of) == list(range(61))
    assert sum(len(o) for o in out) == 61
    for recs in out:
        assert recs == sorted(recs)
    # strictly round robin, continuing across batch boundaries
    for r in range(60):
        assert channel_of[r + 1] == (channel_of[r] + 1) % n, (r, channel_of[r], channel_of[r + 1])
    # balanced after every batch prefix, too
    counts = [len(o) for o in out]
    assert max(counts) - min(counts) <= 1, counts


def test_rebalance_balanced_when_batches_are_single_records():
    out, _ = _route(RebalancePartitioner(), 4, [[i] for i in range(1001)])
    counts = [len(o) for o in out]
    assert sum(counts) == 1001 and max(counts) - min(counts) <= 1, counts


def test_rebalance_single_channel():
    out, _ = _route(RebalancePartitioner(), 1, [[1, 2], [3]])
    assert out == [[1, 2, 3]]


def test_broadcast_sends_every_record_to_every_channel():
    out, _ = _route(BroadcastPartitioner(), 3, [[1, 2], [3]])
    assert out == [[1, 2, 3]] * 3
    assert BroadcastPartitioner.is_broadcast


def test_shuffle_delivers_every_record_exactly_once():
    records = list(range(2000))
    out, _ = _route(ShufflePartitioner(), 4, [records[:1000], records[1000:]])
    delivered = [r for o in out for r in o]
    assert sorted(delivered) == records
    assert collections.Counter(delivered) == collections.Counter(records)
    assert all(o for o in out)  # 2000 random draws over 4 channels reach all of them
    for o in out:
        assert o == sorted(o)  # per channel, input order


def test_global_sends_everything_to_channel_zero():
    out, _ = _route(GlobalPartitioner(), 3, [[1, 2], [3]])
    assert out == [[1, 2, 3], [], []]


@pytest.mark.parametrize("n,maxp", [(1, 128), (3, 128), (4, 7), (5, 1000)])
def test_key_group_partitioner_routes_to_owner_of_key_group(n, maxp):
    records = [(f"user-{i % 97}", i) for i in range(1500)]
    out, kgs = _route(KeyGroupStreamPartitioner(lambda r: r[0], maxp), n,
                      [records[:700], records[700:]], keyed=True)
    assert sum(len(o) for o in out) == len(records)
    for c in range(n):
        assert len(out[c]) == len(kgs[c])
        for r, kg in zip(out[c], kgs[c]):
            assert kg == assign_to_key_group(r[0], maxp)  # the key group travels alongside
            assert compute_operator_index_for_key_group(maxp, n, kg) == c
        assert [r[1] for r in out[c]] == sorted(r[1] for r in out[c])
    # each key goes to exactly one channel
    channels_of_key = collections.defaultdict(set)
    for c in range(n):
        for r in out[c]:
            channels_of_key[r[0]].add(c)
    assert all(len(cs) == 1 for cs in channels_of_key.values())
    if n > 1:
        assert sum(1 for o in out if o) > 1  # 97 keys do not all share one channel


def test_key_group_partitioner_wraps_key_selector_errors():
    def bad_selector(r):
        raise KeyError("no such field")

    p = KeyGroupStreamPartitioner(bad_selector, 128)
    with pytest.raises(KeySelectorError) as info:
        _route(p, 2, [[1]], keyed=True)
    assert "bad_selector" in str(info.value) and "KeyError" in str(info.value)
    assert isinstance(info.value.cause, KeyError)


def test_key_group_partitioner_rejects_unsupported_key_type():
    p = KeyGroupStreamPartitioner(lambda r: [r], 128)
    with pytest.raises(KeySelectorError, match="list"):
        _route(p, 2, [[1]], keyed=True)


# ---------------------------------------------------------------------------------------
# RecordWriter over in-process channels
# ---------------------------------------------------------------------------------------

def _channels(n, credits=1000):
    return [InProcessChannel(f"e/0->{i}", credits) for i in range(n)]


def _drain(ch):
    frames = []
    while True:
        f = ch.reader.poll()
        if f is None:
            return frames
        frames.append(f)


def test_record_writer_flushes_at_batch_size():
    (ch,) = _channels(1)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=10)
    rw.emit(list(range(9)), now_ms=5.0)
    assert _drain(ch) == []  # below batch size: held back
    assert rw.pending_since_ms == 5.0
    rw.emit([9], now_ms=6.0)
    frames = _drain(ch)
    assert [f.records for f in frames] == [list(range(10))]
    assert frames[0].key_groups is None


def test_record_writer_never_sends_batches_above_batch_size():
    (ch,) = _channels(1)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=10)
    rw.emit(list(range(25)))
    rw.emit(list(range(25, 31)))
    rw.flush()
    frames = _drain(ch)
    assert all(1 <= len(f) <= 10 for f in frames), [len(f) for f in frames]
    assert [r for f in frames for r in f.records] == list(range(31))
    assert rw.records_out == 31


def test_record_writer_flush_sends_remainders_on_every_channel():
    chs = _channels(3)
    rw = RecordWriter(RebalancePartitioner(), [c.writer for c in chs], 0, batch_size=100)
    rw.emit(list(range(7)))
    assert all(_drain(c) == [] for c in chs)
    rw.flush()
    assert rw.pending_since_ms is None
    got = [_drain(c) for c in chs]
    assert all(len(frames) == 1 for frames in got)  # one frame per channel with its share
    assert sorted(r for frames in got for r in frames[0].records) == list(range(7))
    rw.flush()  # nothing pending: nothing sent
    assert all(_drain(c) == [] for c in chs)


def test_broadcast_event_sends_pending_data_before_the_event_on_every_channel():
    chs = _channels(3)
    rw = RecordWriter(RebalancePartitioner(), [c.writer for c in chs], 0, batch_size=100)
    rw.emit([1, 2])  # only two of three channels get data
    rw.broadcast_event(Watermark(42))
    rw.broadcast_event(CheckpointBarrier(1, 1000))
    got = [_drain(c) for c in chs]
    data_channels = 0
    for frames in got:
        assert frames[-2:] == [Watermark(42), CheckpointBarrier(1, 1000)]
        data = frames[:-2]
        assert all(type(f) is RecordBatch for f in data)
        data_channels += bool(data)
    assert data_channels == 2
    assert sorted(r for frames in got for f in frames[:-2] for r in f.records) == [1, 2]


def test_broadcast_event_end_of_partition_then_close():
    chs = _channels(2)
    rw = RecordWriter(BroadcastPartitioner(), [c.writer for c in chs], 0, batch_size=100)
    rw.emit(["x"])
    rw.broadcast_event(EndOfPartition())
    rw.close()
    for c in chs:
        frames = _drain(c)
        assert [type(f) for f in frames] == [RecordBatch, EndOfPartition]
        assert frames[0].records == ["x"]
        assert c.reader.poll() is None  # ended cleanly: no ChannelClosedError


def test_record_writer_close_without_end_of_partition_is_seen_by_reader():
    (ch,) = _channels(1)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=100)
    rw.close()
    with pytest.raises(ChannelClosedError):
        ch.reader.poll()


def test_keyed_record_writer_frames_carry_key_groups():
    maxp, n = 128, 3
    chs = _channels(n)
    rw = RecordWriter(KeyGroupStreamPartitioner(lambda r: r[0], maxp), [c.writer for c in chs],
                      0, batch_size=8)
    records = [(f"k{i % 13}", i) for i in range(100)]
    rw.emit(records[:50])
    rw.emit(records[50:])
    rw.flush()
    seen = []
    for c, ch in enumerate(chs):
        for f in _drain(ch):
            assert type(f) is RecordBatch and f.key_groups is not None
            assert len(f.key_groups) == len(f.records) <= 8
            for r, kg in zip(f.records, f.key_groups):
                assert kg == assign_to_key_group(r[0], maxp)
                assert compute_operator_index_for_key_group(maxp, n, kg) == c
                seen.append(r)
    assert sorted(seen, key=lambda r: r[1]) == records
