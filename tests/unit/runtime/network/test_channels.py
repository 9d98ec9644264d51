"""The channel contract, run against every transport that can live in one process:
the in-process twin and the socket transport (unix socket and TCP), with threads.
"""

import threading
import time

import pytest

from flowray.runtime.network.channel import ChannelClosedError, ChannelSequenceError
from flowray.runtime.network.in_process import InProcessChannel, InProcessGate
from flowray.runtime.network.frame_codec import decode_frame, encode_frame, HEADER
from flowray.runtime.network.elements import EndOfPartition, RecordBatch, Watermark
from flowray.runtime.network.socket_transport import (
    SocketInputGate,
    SocketListener,
    connect_channel,
    credit_announcement_interval,
)
from tests.support.channels import (
    WAIT_S,
    Pair,
    close_is_idempotent_on_both_ends,
    closing_writer_after_end_of_partition_is_clean,
    mixed_frames,
    norm,
)


def _in_process(n, credits):
    gate = InProcessGate()
    chans = [InProcessChannel(f"e1/0->{i}", credits, gate) for i in range(n)]

    def push_raw(i, data):
        chans[i].writer.push_encoded(data)

    def cleanup():
        for c in chans:
            c.writer.close()
            c.reader.close()

    return Pair([c.writer for c in chans], [c.reader for c in chans], gate, push_raw, cleanup)


def _socket(n, credits, tcp, listener_credits=1):
    """``listener_credits``: the writers' credits as the listener knows them (a job's
    listener knows ``credits``, and its readers return them a few frames at a time); 1:
    one announcement per frame."""
    listener = SocketListener(node_id="node-a", credits=listener_credits)
    ids = [f"e1/0->{i}" for i in range(n)]
    accepted, errors = {}, []

    def accept():
        try:
            accepted.update(listener.accept(ids, timeout_s=WAIT_S))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    my_node = "node-b" if tcp else "node-a"  # another node id forces TCP
    writers = [connect_channel(listener.address(), cid, credits, my_node_id=my_node,
                               timeout_s=WAIT_S) for cid in ids]
    t.join(WAIT_S)
    assert not errors, errors
    assert set(accepted) == set(ids)
    family = writers[0]._sock.family.name
    assert family == ("AF_INET" if tcp else "AF_UNIX")
    readers = [accepted[cid] for cid in ids]
    gate = SocketInputGate()

    def push_raw(i, data):
        writers[i]._sock.sendall(data)

    def cleanup():
        for w in writers:
            w.close()
        for r in readers:
            r.close()
        gate.close()
        listener.close()

    return Pair(writers, readers, gate, push_raw, cleanup)


TRANSPORTS = {
    "in-process": _in_process,
    "unix-socket": lambda n, credits: _socket(n, credits, tcp=False),
    "tcp-socket": lambda n, credits: _socket(n, credits, tcp=True),
    "unix-socket-grouped-credits": lambda n, credits: _socket(n, credits, tcp=False,
                                                              listener_credits=credits),
}


@pytest.fixture(params=list(TRANSPORTS))
def make_pair(request):
    made = []

    def make(n=1, credits=8):
        p = TRANSPORTS[request.param](n, credits)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


# ---------------------------------------------------------------------------------------
# codec
# ---------------------------------------------------------------------------------------

def test_codec_round_trip_and_header():
    for seq, frame in enumerate(mixed_frames(8)):
        data = encode_frame(frame, seq + 100)
        length, kind, got_seq = HEADER.unpack_from(data, 0)
        assert got_seq == seq + 100
        assert length == len(data) - HEADER.size
        assert norm(decode_frame(kind, data[HEADER.size:])) == norm(frame)


def test_codec_rejects_non_frames():
    with pytest.raises(TypeError):
        encode_frame("not a frame", 0)


# ---------------------------------------------------------------------------------------
# the contract, per transport
# ---------------------------------------------------------------------------------------

def test_fifo_round_trip_of_mixed_frames(make_pair):
    pair = make_pair(credits=3)
    frames = mixed_frames(120)
    errors = []

    def produce():
        try:
            for f in frames:
                pair.writer.write(f)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    got = []
    while True:
        f = pair.next_frame()
        got.append(f)
        assert pair.writer.stats.max_in_flight <= 3
        if type(f) is EndOfPartition:
            break
    t.join(WAIT_S)
    assert not errors, errors
    assert [norm(f) for f in got] == [norm(f) for f in frames]
    st = pair.writer.stats
    assert st.frames == len(frames)
    assert st.records == sum(len(f) for f in frames if type(f) is RecordBatch)
    assert st.bytes > 5000
    assert pair.reader.poll() is None  # ended: nothing more, no error


def test_poll_returns_none_when_empty(make_pair):
    pair = make_pair()
    assert pair.reader.poll() is None
    assert pair.reader.poll() is None
    pair.writer.write(Watermark(1))
    assert pair.next_frame() == Watermark(1)
    assert pair.reader.poll() is None


def test_writer_blocks_without_credit_until_reader_takes_a_frame(make_pair):
    pair = make_pair(credits=2)
    two_written, three_written = threading.Event(), threading.Event()
    errors = []

    def produce():
        try:
            pair.writer.write(RecordBatch([1]))
            pair.writer.write(RecordBatch([2]))
            two_written.set()
            pair.writer.write(RecordBatch([3]))  # no credit left: must block
            three_written.set()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    assert two_written.wait(WAIT_S), errors  # two frames fit the credits
    # negative check: while the reader has taken nothing, the third write cannot complete
    assert not three_written.wait(0.3)
    assert pair.writer.stats.max_in_flight == 2
    assert pair.next_frame().records == [1]  # taking one frame returns one credit
    assert three_written.wait(WAIT_S), errors
    t.join(WAIT_S)
    assert not errors
    assert pair.next_frame().records == [2]
    assert pair.next_frame().records == [3]
    st = pair.writer.stats
    assert st.blocked >= 1
    assert st.max_in_flight == 2


def test_in_flight_never_exceeds_credits(make_pair):
    credits = 3
    pair = make_pair(credits=credits)
    n = 300
    errors = []

    def produce():
        try:
            for i in range(n):
                pair.writer.write(RecordBatch([i]))
                assert pair.writer.in_flight() <= credits
            pair.writer.write(EndOfPartition())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    got = []
    while True:
        f = pair.next_frame()
        assert pair.writer.stats.max_in_flight <= credits
        if type(f) is EndOfPartition:
            break
        got.extend(f.records)
    t.join(WAIT_S)
    assert not errors, errors
    assert got == list(range(n))
    assert 1 <= pair.writer.stats.max_in_flight <= credits


def test_closing_writer_before_end_of_partition_raises_on_reader(make_pair):
    pair = make_pair()
    pair.writer.write(RecordBatch(["last"]))
    pair.writer.close()
    # frames sent before the close still arrive, then the reader learns the producer is gone
    assert pair.next_frame().records == ["last"]
    err = pair.poll_until_raises(ChannelClosedError)
    assert "e1/0->0" in str(err)


def test_closing_writer_after_end_of_partition_is_clean(make_pair):
    closing_writer_after_end_of_partition_is_clean(make_pair)


def test_close_is_idempotent_on_both_ends(make_pair):
    close_is_idempotent_on_both_ends(make_pair)


def test_sequence_gap_raises(make_pair):
    pair = make_pair()
    pair.push_raw(encode_frame(RecordBatch(["a"]), 0))
    pair.push_raw(encode_frame(RecordBatch(["b"]), 2))  # frame 1 is missing
    assert pair.next_frame().records == ["a"]
    err = pair.poll_until_raises(ChannelSequenceError)
    assert "gap" in str(err) and "expected frame 1, got 2" in str(err)


def test_replayed_frame_raises(make_pair):
    pair = make_pair()
    pair.push_raw(encode_frame(Watermark(1), 0))
    pair.push_raw(encode_frame(Watermark(2), 1))
    pair.push_raw(encode_frame(Watermark(2), 1))
    assert pair.next_frame() == Watermark(1)
    assert pair.next_frame() == Watermark(2)
    err = pair.poll_until_raises(ChannelSequenceError)
    assert "replayed" in str(err)


def test_input_gate_returns_the_ready_reader(make_pair):
    pair = make_pair(n=3)
    r0, r1, r2 = pair.readers
    assert pair.gate.wait([r0, r1, r2], 0) == []
    pair.writers[1].write(RecordBatch(["for r1"]))
    ready = pair.gate.wait([r0, r1, r2], WAIT_S)
    assert ready == [r1]
    assert pair.next_frame(r1).records == ["for r1"]
    assert r0.poll() is None and r2.poll() is None


def test_input_gate_wakes_up_for_a_later_write(make_pair):
    pair = make_pair(n=2)
    r0, r1 = pair.readers
    started = threading.Event()

    def later():
        started.wait(WAIT_S)
        pair.writers[0].write(Watermark(9))

    t = threading.Thread(target=later, daemon=True)
    t.start()
    started.set()
    deadline = time.monotonic() + WAIT_S
    ready = []
    while not ready and time.monotonic() < deadline:
        ready = pair.gate.wait([r0, r1], 1.0)
    t.join(WAIT_S)
    assert r0 in ready and r1 not in ready
    assert pair.next_frame(r0) == Watermark(9)


def test_channels_are_independent(make_pair):
    pair = make_pair(n=2, credits=2)
    for i in range(2):
        pair.writers[0].write(RecordBatch([("a", i)]))
        pair.writers[1].write(RecordBatch([("b", i)]))
    assert [pair.next_frame(pair.readers[1]).records for _ in range(2)] == \
        [[("b", 0)], [("b", 1)]]
    assert [pair.next_frame(pair.readers[0]).records for _ in range(2)] == \
        [[("a", 0)], [("a", 1)]]


# ---------------------------------------------------------------------------------------
# in-process specifics
# ---------------------------------------------------------------------------------------

def test_in_process_writer_fails_when_reader_is_gone():
    ch = InProcessChannel("x", credits=1)
    ch.writer.write(RecordBatch([1]))
    errors = []
    blocked = threading.Event()

    def produce():
        try:
            blocked.set()
            ch.writer.write(RecordBatch([2]))  # no credit: blocks until the reader closes
        except ChannelClosedError as e:
            errors.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    blocked.wait(WAIT_S)
    ch.reader.close()
    t.join(WAIT_S)
    assert not t.is_alive()
    assert len(errors) == 1 and "reader is gone" in str(errors[0])


def test_in_process_in_flight_counts_unread_frames():
    ch = InProcessChannel("x", credits=4)
    for i in range(3):
        ch.writer.write(RecordBatch([i]))
    assert ch.writer.in_flight() == 3
    ch.reader.poll()
    assert ch.writer.in_flight() == 2


# ---------------------------------------------------------------------------------------
# socket specifics
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("tcp", [False, True], ids=["unix-socket", "tcp-socket"])
def test_socket_in_flight_drops_when_reader_takes_frames(tcp):
    pair = _socket(1, credits=4, tcp=tcp)
    try:
        pair.writer.write(RecordBatch([1]))
        pair.writer.write(RecordBatch([2]))
        assert pair.writer.in_flight() == 2
        assert pair.next_frame().records == [1]
        assert pair.next_frame().records == [2]
        deadline = time.monotonic() + 0.5
        while pair.writer.in_flight() and time.monotonic() < deadline:
            pair.gate.wait([pair.reader], 0.05)  # a pause without sleeping
        assert pair.writer.in_flight() == 0
    finally:
        pair.close()


# -- credits returned a few frames at a time ----------------------------------------------

def test_credit_announcement_interval_is_half_the_credits_and_at_least_one():
    assert [credit_announcement_interval(c) for c in (1, 2, 3, 4, 8, 9, 100)] == \
        [1, 1, 1, 2, 4, 4, 50]


def _written(pair, frames):
    for f in frames:
        pair.writer.write(f)


def test_record_frames_are_announced_in_groups_and_the_rest_before_reading_more():
    pair = _socket(1, credits=8, tcp=False, listener_credits=8)   # every 4 frames
    try:
        _written(pair, [RecordBatch([i]) for i in range(6)])
        assert pair.writer.in_flight() == 6
        for i in range(3):   # all six arrive in one read; three taken, none announced
            assert pair.reader.poll().records == [i]
            assert pair.writer.in_flight() == 6
            assert pair.reader.ready_without_io()
        assert pair.reader.poll().records == [3]    # the fourth: four credits in one word
        assert pair.writer.in_flight() == 2
        assert [pair.reader.poll().records for _ in range(2)] == [[4], [5]]
        assert pair.writer.in_flight() == 2       # two owed, frames 4 and 5
        assert pair.reader.ready_without_io()     # owed credits make the reader ready
        assert pair.reader.poll() is None          # nothing buffered: it pays what it owes
        assert pair.writer.in_flight() == 0
        assert not pair.reader.ready_without_io()
    finally:
        pair.close()


def test_owed_credits_wait_while_the_socket_has_more_frames():
    # a reader that catches up with its buffer but finds more frames in the socket keeps
    # what it owes (the writer is not out of credits: it sent them); it pays once the
    # socket has nothing more
    pair = _socket(1, credits=8, tcp=False, listener_credits=8)   # every 4 frames
    try:
        _written(pair, [RecordBatch([0]), RecordBatch([1])])
        assert [pair.reader.poll().records for _ in range(2)] == [[0], [1]]
        assert pair.writer.in_flight() == 2       # two owed, nothing buffered
        _written(pair, [RecordBatch([2])])
        assert pair.reader.poll().records == [2]  # read from the socket: still owed
        assert pair.writer.in_flight() == 3
        assert pair.reader.ready_without_io()
        assert pair.reader.poll() is None          # the socket is empty: it pays
        assert pair.writer.in_flight() == 0
        assert not pair.reader.ready_without_io()
    finally:
        pair.close()


@pytest.mark.parametrize("other", [Watermark(7), EndOfPartition()],
                         ids=["watermark", "end-of-partition"])
def test_a_frame_that_is_not_records_is_announced_at_once_with_what_is_owed(other):
    pair = _socket(1, credits=8, tcp=False, listener_credits=8)
    try:
        _written(pair, [RecordBatch([1]), RecordBatch([2]), other])
        assert [pair.reader.poll().records for _ in range(2)] == [[1], [2]]
        assert pair.writer.in_flight() == 3
        assert pair.reader.poll() == other
        assert pair.writer.in_flight() == 0
    finally:
        pair.close()


def test_a_writer_out_of_credits_is_never_left_waiting_on_owed_credits():
    # the reader returns credits every 4 frames, the writer has 3: it runs out with all 3
    # taken and owed, and gets them back once the reader has nothing buffered
    pair = _socket(1, credits=3, tcp=False, listener_credits=8)
    try:
        _written(pair, [RecordBatch([i]) for i in range(3)])
        assert [pair.reader.poll().records for _ in range(3)] == [[0], [1], [2]]
        assert pair.writer.in_flight() == 3
        assert pair.reader.poll() is None
        assert pair.writer.in_flight() == 0
        _written(pair, [RecordBatch([3]), EndOfPartition()])   # would block without them
        assert pair.next_frame().records == [3]
        assert type(pair.next_frame()) is EndOfPartition
        assert pair.writer.in_flight() == 0
    finally:
        pair.close()


# -- wakeup: the task's mailbox ends a wait for input (async I/O results, triggers) ------

def _wait_in_thread(gate, readers):
    out = {}

    def run():
        out["ready"] = gate.wait(readers, 300)  # only a wakeup (or a frame) ends it early

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_wakeup_ends_a_wait_in_progress(make_pair):
    p = make_pair()
    t, out = _wait_in_thread(p.gate, p.readers)
    p.gate.wakeup()
    t.join(WAIT_S)
    assert not t.is_alive(), "a wakeup did not end the wait"
    assert out["ready"] == []


def test_wakeup_before_the_wait_is_not_lost_and_is_consumed(make_pair):
    p = make_pair()
    p.gate.wakeup()
    p.gate.wakeup()  # several wakeups before a wait end one wait
    t, out = _wait_in_thread(p.gate, p.readers)
    t.join(WAIT_S)
    assert not t.is_alive() and out["ready"] == []
    assert p.gate.wait(p.readers, 0) == []  # consumed: nothing pending
    p.writer.write(RecordBatch(["x"]))
    t, out = _wait_in_thread(p.gate, p.readers)
    t.join(WAIT_S)
    assert out["ready"] == [p.readers[0]]


def test_wakeup_after_close_is_harmless(make_pair):
    p = make_pair()
    p.gate.close()
    p.gate.wakeup()
