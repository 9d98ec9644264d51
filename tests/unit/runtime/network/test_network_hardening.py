"""Data-plane hardening (issue 14): control frames and hellos are never unpickled, frames
have 64-bit lengths, TCP channels have keepalive, socket files and temp folders are
private to the user, and killed processes' socket files are removed."""

import os
import pickle
import socket
import stat
import struct
import threading

import pytest

from flowray.common.files import UnsafeTempDirError, user_temp_dir
from flowray.runtime.network.channel import ChannelError, ChannelStats
from flowray.runtime.network.elements import CancelCheckpointMarker, CheckpointBarrier
from flowray.runtime.network.frame_codec import HEADER, decode_frame, encode_frame
from flowray.runtime.network.socket_transport import (
    HandshakeError,
    SocketListener,
    connect_channel,
    decode_hello,
    encode_hello,
    remove_stale_sockets,
)


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.fixture
def no_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle.loads called on a control frame")
    monkeypatch.setattr(pickle, "loads", refuse)


def _body(data):
    length, kind, _ = HEADER.unpack_from(data)
    return kind, data[HEADER.size:HEADER.size + length]


def test_control_frames_round_trip_without_pickle(no_unpickling):
    for frame in (CheckpointBarrier(7, 1234, True, "s3://bucket/sp-1"),
                  CheckpointBarrier(8, 99), CancelCheckpointMarker(9)):
        assert decode_frame(*_body(encode_frame(frame, 3))) == frame


def test_a_pickle_where_a_control_frame_belongs_is_refused(no_unpickling):
    kind, _ = _body(encode_frame(CheckpointBarrier(1, 2), 0))
    with pytest.raises(ChannelError, match="control frame"):
        decode_frame(kind, pickle.dumps(_Boom()))


def test_frame_lengths_are_64_bit():
    header = HEADER.pack(5 << 32, 1, 0)  # a 20 GiB frame's header
    assert HEADER.unpack(header)[0] == 5 << 32
    with pytest.raises(struct.error):
        struct.Struct("<IBQ").pack(5 << 32, 1, 0)  # what the 32-bit header could not say


def test_hello_is_msgpack_and_anything_else_is_refused(no_unpickling):
    assert decode_hello(encode_hello("e3/1->2")) == "e3/1->2"
    for bad in (pickle.dumps(_Boom()), b"\x00\xff garbage", b"", encode_hello("x")[:-1]):
        with pytest.raises(HandshakeError):
            decode_hello(bad)


def test_tcp_channels_have_keepalive_and_socket_files_are_private():
    secret = os.urandom(32)
    listener = SocketListener("node-a", secret=secret, handshake_timeout_s=5)
    try:
        mode = stat.S_IMODE(os.stat(listener.unix_path).st_mode)
        assert mode == 0o600
        folder = os.path.dirname(listener.unix_path)
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        result = {}
        thread = threading.Thread(
            target=lambda: result.update(listener.accept(["c"], timeout_s=30)), daemon=True)
        thread.start()
        writer = connect_channel(listener.address(), "c", 4, "node-b", timeout_s=30,
                                 secret=secret)
        thread.join(30)
        reader = result["c"]
        for sock in (writer._sock, reader.sock):
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        writer.close()
        reader.close()
    finally:
        listener.close()
    assert not os.path.exists(listener.unix_path)


def _dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_socket_files_of_dead_processes_are_removed(tmp_path):
    dead = tmp_path / f"{_dead_pid()}-0123456789abcdef.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(dead))
    bound.close()  # what a killed process leaves: the file, nobody listening
    live = tmp_path / f"{os.getpid()}-fedcba9876543210.sock"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(live))
    listening.listen(1)
    other = tmp_path / "notes.txt"
    other.write_text("not a socket of ours")
    try:
        assert remove_stale_sockets(str(tmp_path)) == 1
        assert not dead.exists() and live.exists() and other.exists()
    finally:
        listening.close()


def test_user_temp_dirs_are_private_and_a_symlink_is_refused(tmp_path):
    path = user_temp_dir("rocksdb", str(tmp_path))
    assert path == str(tmp_path / f"flowray-{os.getuid()}" / "rocksdb")
    for folder in (path, os.path.dirname(path)):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    os.chmod(path, 0o777)
    user_temp_dir("rocksdb", str(tmp_path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700  # tightened again
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(tmp_path / f"flowray-{os.getuid()}" / "partitions"))
    with pytest.raises(UnsafeTempDirError, match="partitions"):
        user_temp_dir("partitions", str(tmp_path))


def test_a_record_that_cannot_be_serialized_is_named():
    import threading

    from flowray.runtime.network.elements import RecordBatch
    from flowray.runtime.network.frame_codec import RecordSerializationError

    with pytest.raises(RecordSerializationError) as info:
        encode_frame(RecordBatch(["fine", 2, threading.Lock(), "never reached"]), 0)
    assert "record 2 of a batch of 4" in str(info.value) and "lock" in str(info.value)
    assert info.value.recoverable is False


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_a_finished_producer_closes_only_once_its_frames_are_taken(tls, tmp_path):
    """Closing a TCP connection with credits unread makes the kernel answer with a reset,
    which can cost the reader its unread frames: the producer waits for the reader first
    (``await_taken``), and the reader gets every frame and end-of-partition."""
    from flowray.runtime.network.elements import EndOfPartition, RecordBatch
    from flowray.runtime.network.socket_transport import SocketInputGate

    settings = None
    if tls:
        from flowray.runtime.network.tls import TlsSettings
        from tests.support.certificates import make_ca, make_leaf
        ca_path, ca = make_ca(str(tmp_path))
        settings = TlsSettings(make_leaf(str(tmp_path), ca), ca_path)
    secret = os.urandom(32)
    listener = SocketListener("node-a", secret=secret, tls=settings)
    accepted = {}
    accepting = threading.Thread(
        target=lambda: accepted.update(listener.accept(["c"], timeout_s=30)), daemon=True)
    accepting.start()
    n = 40  # every frame fits in the credits: the producer never waits for one
    writer = connect_channel(listener.address(), "c", n + 2, "node-b", timeout_s=30,
                             secret=secret, tls=settings)
    accepting.join(30)
    reader, gate = accepted["c"], SocketInputGate()
    written, done = threading.Event(), threading.Event()
    waited_or_closed = threading.Event()

    class SignallingStats(ChannelStats):  # tells the test when the producer starts waiting
        def __setattr__(self, name, value):
            object.__setattr__(self, name, value)
            if name == "blocked_since" and value is not None:
                waited_or_closed.set()

    writer.stats = SignallingStats(**writer.stats.to_dict())

    def produce():
        for i in range(n):
            writer.write(RecordBatch([i] + [b"x" * 1024] * 20))  # about 20 KB each
        writer.write(EndOfPartition())
        written.set()
        writer.await_taken(30)
        writer.close()
        waited_or_closed.set()
        done.set()
    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    got, ended = [], False
    # take two frames (their credits go back, and the producer does not read them) ...
    while len(got) < 2:
        assert gate.wait([reader], 30), "no frame within 30 s"
        frame = reader.poll()
        if frame is not None:
            got.append(frame.records[0])
    # ... and read on only once the producer has written everything and waits for its
    # frames to be taken (or, were it not to wait, has closed: with credits unread, its
    # close resets the connection and drops what it had not sent yet)
    assert written.wait(30)
    assert waited_or_closed.wait(30), "the producer neither waited nor closed"
    while not ended:
        assert gate.wait([reader], 30), "no frame within 30 s"
        while True:
            frame = reader.poll()
            if frame is None:
                break
            if type(frame) is EndOfPartition:
                ended = True
                break
            got.append(frame.records[0])
    producing.join(30)
    assert done.is_set() and got == list(range(n))
    reader.close()
    gate.close()
    listener.close()
