"""The channel contract's priority path (unaligned checkpoints), on every in-process
transport: a writer in overdraft never blocks and holds what has no credit as unsent; a
priority barrier goes out at once, ahead of the unsent frames and without a credit; a
reader takes it out of the stream with the record frames before it (or since recording
started), and the frames around it are polled in order with their sequence numbers."""

import threading
import time

import pytest

from flowray.runtime.network.elements import CheckpointBarrier, RecordBatch, Watermark
from flowray.runtime.network.frame_codec import HEADER, decode_frame
from tests.support.channels import WAIT_S
from tests.unit.runtime.network.test_channels import make_pair  # noqa: F401 - fixture

BARRIER = CheckpointBarrier(7, 1_000)


def _records(encoded):
    """The records of encoded frames, in order."""
    out = []
    for data in encoded:
        length, kind, _ = HEADER.unpack_from(data, 0)
        out.extend(decode_frame(kind, memoryview(data)[HEADER.size:HEADER.size + length])
                   .records)
    return out


def _receive(pair, reader=None, wanted=1):
    """``reader.receive()`` until ``wanted`` priority barriers came (waiting on the gate)."""
    reader = reader or pair.reader
    found, deadline = [], time.monotonic() + WAIT_S
    while len(found) < wanted:
        found.extend(reader.receive())
        if len(found) >= wanted:
            break
        assert time.monotonic() < deadline, f"no priority barrier within {WAIT_S} s"
        pair.gate.wait([reader], 0.05)
    return found


def _poll_all(pair, n):
    return [pair.next_frame() for _ in range(n)]


def test_overdraft_never_blocks_and_sends_as_credits_come_back(make_pair):
    pair = make_pair(credits=2)
    w = pair.writer
    w.overdraft = True
    for i in range(5):
        w.write(RecordBatch([i]))          # would block from the third on
    assert [f.records for f in w.unsent()] == [[2], [3], [4]]
    assert not w.is_available()
    got = []
    while len(got) < 5:
        got.append(pair.next_frame().records)
        w.is_available()                    # credits came back: unsent frames go out
    assert got == [[0], [1], [2], [3], [4]]
    assert w.is_available() and w.unsent() == []


def test_a_priority_barrier_overtakes_unsent_and_unread_frames(make_pair):
    pair = make_pair(credits=2)
    w, r = pair.writer, pair.reader
    r.eager = True
    w.overdraft = True
    for i in range(4):
        w.write(RecordBatch([i]))
    overtaken = [f.records for f in w.unsent()]   # what the sender keeps as its state
    w.write_priority(BARRIER)
    (barrier, before), = _receive(pair)
    assert barrier == BARRIER
    assert _records(before) == [0, 1]            # in flight, not polled: the reader's state
    assert overtaken == [[2], [3]]
    # the stream goes on in order without the barrier; no credit was spent on it
    got = []
    while len(got) < 4:
        got.append(pair.next_frame().records)
        w.is_available()
    assert got == [[0], [1], [2], [3]]
    w.write(RecordBatch([4]))
    assert pair.next_frame().records == [4]


def test_recording_keeps_record_frames_until_the_priority_barrier(make_pair):
    pair = make_pair(credits=8)
    w, r = pair.writer, pair.reader
    r.eager = True
    w.write(RecordBatch(["a"]))
    assert pair.next_frame().records == ["a"]    # polled before recording: not kept
    w.write(RecordBatch(["b"]))
    _receive(pair, wanted=0)
    r.start_recording()
    w.write(Watermark(5))                         # not records: not kept
    w.write(RecordBatch(["c"]))
    w.write_priority(BARRIER)
    w.write(RecordBatch(["d"]))                   # after the barrier: not kept
    (barrier, recorded), = _receive(pair)
    assert barrier == BARRIER and _records(recorded) == ["b", "c"]
    assert r.stop_recording() == []               # the barrier ended the recording
    frames = _poll_all(pair, 4)
    assert [getattr(f, "records", f) for f in frames] == [["b"], Watermark(5), ["c"], ["d"]]


def test_stop_recording_returns_what_was_recorded(make_pair):
    pair = make_pair()
    w, r = pair.writer, pair.reader
    r.eager = True
    r.start_recording()
    w.write(RecordBatch([1]))
    assert pair.next_frame().records == [1]
    assert _records(r.stop_recording()) == [1]


def test_an_aligned_barrier_stays_in_the_stream(make_pair):
    pair = make_pair()
    w, r = pair.writer, pair.reader
    r.eager = True
    w.write(RecordBatch([1]))
    w.write(BARRIER)                              # in band, with a credit
    assert pair.next_frame().records == [1]
    assert r.receive() == []
    assert pair.next_frame() == BARRIER


def test_only_a_barrier_goes_ahead(make_pair):
    pair = make_pair()
    with pytest.raises(TypeError, match="only a checkpoint barrier"):
        pair.writer.write_priority(RecordBatch([1]))


def test_end_of_partition_in_overdraft_waits_for_its_credit_at_the_end(make_pair):
    from flowray.runtime.network.elements import EndOfPartition
    pair = make_pair(credits=1)
    w = pair.writer
    w.overdraft = True
    w.write(RecordBatch([1]))
    w.write(EndOfPartition())                     # unsent: no credit
    assert not w.is_available()
    assert pair.next_frame().records == [1]
    # await_taken sends what is left, then waits until the reader took it
    done = threading.Thread(target=w.await_taken, args=(WAIT_S,), daemon=True)
    done.start()
    assert pair.next_frame() == EndOfPartition()
    done.join(WAIT_S)
    assert not done.is_alive()
