"""Hostile connections to a task's data listener (real sockets, no Ray): a wrong secret,
garbage, a pickle payload and silence are dropped before anything from the peer is
decoded, and the listener goes on to accept the job's own producers (issue 14)."""

import os
import pickle
import socket
import threading

import pytest

from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.socket_transport import (
    HandshakeError,
    SocketInputGate,
    SocketListener,
    connect_channel,
)

SECRET = os.urandom(32)
CHANNEL = "e1/0->0"


class _WritesAFile:
    """A pickle that creates ``path`` when loaded (what an attacker would send)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def listener():
    listener = SocketListener("node-a", secret=SECRET, handshake_timeout_s=0.5)
    yield listener
    listener.close()


def _accept_in_background(listener, channels):
    result, errors = {}, []

    def run():
        try:
            result.update(listener.accept(channels, timeout_s=30))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result, errors


def _raw(listener, tcp):
    if tcp:
        return socket.create_connection(tuple(listener.address()["tcp"]), timeout=5)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(listener.address()["unix"])
    return sock


@pytest.mark.parametrize("tcp", [False, True], ids=["unix", "tcp"])
def test_hostile_peers_are_dropped_and_the_producer_still_connects(listener, tmp_path, tcp):
    thread, accepted, errors = _accept_in_background(listener, [CHANNEL])
    marker = tmp_path / "pwned"
    hostile = []
    # a pickle whose loading would create a file, where the answer is expected
    s = _raw(listener, tcp)
    s.recv(32)
    payload = pickle.dumps(_WritesAFile(str(marker)))
    s.sendall(len(payload).to_bytes(4, "little") + payload)
    hostile.append(s)
    # garbage
    s = _raw(listener, tcp)
    s.sendall(b"\x00\xff garbage \x13\x37" * 8)
    hostile.append(s)
    # silence
    hostile.append(_raw(listener, tcp))
    # a producer with the wrong secret is refused and learns it
    with pytest.raises(HandshakeError):
        connect_channel(listener.address(), CHANNEL, 4, "node-b" if tcp else "node-a",
                        timeout_s=10, secret=os.urandom(32))
    # the job's own producer gets through and its records arrive
    writer = connect_channel(listener.address(), CHANNEL, 4, "node-b" if tcp else "node-a",
                             timeout_s=10, secret=SECRET)
    thread.join(30)
    assert not errors and set(accepted) == {CHANNEL}
    writer.write(RecordBatch([1, 2, 3]))
    reader = accepted[CHANNEL]
    gate = SocketInputGate()
    assert gate.wait([reader], 30) == [reader]  # an event: the frame arrived
    frame = reader.poll()
    assert frame is not None and frame.records == [1, 2, 3]
    assert not marker.exists(), "a pickle from an unauthenticated peer was loaded"
    for s in hostile:
        s.close()
    writer.close()
    reader.close()
    gate.close()


def test_a_listener_with_another_secret_is_not_trusted_by_the_producer(tmp_path):
    impostor = SocketListener("node-a", secret=os.urandom(32), handshake_timeout_s=0.5)
    try:
        thread, accepted, errors = _accept_in_background(impostor, [CHANNEL])
        with pytest.raises(HandshakeError):
            connect_channel(impostor.address(), CHANNEL, 4, "node-a", timeout_s=10,
                            secret=SECRET)
        assert accepted == {}
    finally:
        impostor.close()
