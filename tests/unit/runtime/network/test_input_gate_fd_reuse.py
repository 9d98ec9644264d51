"""The socket input gate keeps its selector registrations by descriptor number: a new
connection that gets the number of a closed one must still be registered (issue 14: a
restarted sink's output never reached the driver)."""

import os
import socket

from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.frame_codec import encode_frame
from flowray.runtime.network.socket_transport import SocketChannelReader, SocketInputGate


def _reader_on(sock, name):
    sock.setblocking(False)
    return SocketChannelReader(name, sock)


def test_a_reused_descriptor_number_is_registered_again():
    gate = SocketInputGate()
    first, first_peer = socket.socketpair()
    old = _reader_on(first, "e1/0->0")
    fd = old.fileno()
    assert gate.wait([old], 0.0) == []  # registered, nothing to read
    old.close()
    first_peer.close()

    second, second_peer = socket.socketpair()
    if second.fileno() != fd:  # make the new connection take the old number for sure
        os.dup2(second.fileno(), fd)
        second.close()
        second = socket.socket(fileno=fd)
    new = _reader_on(second, "e1/0->0")
    assert new.fileno() == fd
    second_peer.sendall(encode_frame(RecordBatch(["after the restart"]), seq=0))
    assert gate.wait([new], 30.0) == [new]  # an event: the frame is there
    frame = new.poll()
    assert frame.records == ["after the restart"]
    new.close()
    second_peer.close()
    gate.close()
