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


# ---------------------------------------------------------------------------------------
# every listener of a running job on Ray: the tasks' and the driver's
# ---------------------------------------------------------------------------------------

class _WaitForFile:
    """A map that holds its first record until ``path`` exists (the test's go signal),
    then passes records through."""

    def __init__(self, path):
        self.path = path
        self.released = False

    def __call__(self, x):
        import time
        while not self.released:
            if os.path.exists(self.path):
                self.released = True
            else:
                time.sleep(0.01)
        return x


def _attack(address, marker):
    """Garbage, a pickle that would create ``marker``, silence and a wrong HMAC, on the
    unix socket and on TCP of ``address``. Returns the silent connections (closed later)."""
    silent = []
    for family in ("unix", "tcp"):
        def raw():
            if family == "tcp":
                return socket.create_connection(tuple(address["tcp"]), timeout=5)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(address["unix"])
            return s
        s = raw()
        s.sendall(b"\x00\xff garbage \x13\x37" * 8)
        s.close()
        s = raw()
        payload = pickle.dumps(_WritesAFile(marker))
        s.sendall(payload + len(payload).to_bytes(4, "little") + payload)
        s.close()
        silent.append(raw())
        with pytest.raises(HandshakeError):
            connect_channel(address, CHANNEL, 4,
                            address["node_id"] if family == "unix" else "elsewhere",
                            timeout_s=2, secret=os.urandom(32))
    return silent


def test_hostile_connections_to_every_listener_of_a_running_job(ray_session, tmp_path):
    from flowray import StreamExecutionEnvironment
    from flowray.testing import wait_until

    n, parallelism = 3_000, 2
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    go = str(tmp_path / "go")
    marker = str(tmp_path / "pwned")
    # the map is chained to the source (both parallelism 1): no task ends before the go
    it = (env.from_collection(list(range(n)))
          .map(_WaitForFile(go)).set_parallelism(1)
          .map(lambda x: (x % 5, x)).set_parallelism(1)
          .key_by(lambda kv: kv[0])
          .reduce(lambda a, b: (a[0], a[1] + b[1]))
          .execute_and_collect("hostile peers"))
    master = it._client.job_master_actor()
    import ray

    def endpoints():
        return ray.get(master.data_endpoints.remote())
    tasks = 1 + parallelism + 1  # source+map, the reduce subtasks, the collecting sink
    wait_until(lambda: len(endpoints()["tasks"]) == tasks, 120, "every task to listen")
    found = endpoints()
    listeners = list(found["tasks"].values()) + list(found["driver"].values())
    # the collect sink's endpoint and the tasks' stdout (flowray.task-stdout-to-client)
    assert len(found["driver"]) == 2 and "task-stdout" in found["driver"]
    assert len(listeners) == tasks + 2
    silent = []
    for address in listeners:
        silent += _attack(address, marker)
    open(go, "w").close()
    got = list(it)
    for s in silent:
        s.close()
    final = {}
    for key, total in got:
        final[key] = max(final.get(key, -1), total)
    assert len(got) == n
    assert final == {k: sum(x for x in range(n) if x % 5 == k) for k in range(5)}
    assert it._client.wait().outcome.restarts == 0
    assert not os.path.exists(marker), "a pickle from an unauthenticated peer was loaded"


def test_a_job_over_tls(ray_session, tmp_path):
    """TCP channels in TLS (security.ssl.internal.*; same-node tcp so that one machine
    uses TCP): the job's output is right and a peer without TLS is refused."""
    from flowray import Configuration, StreamExecutionEnvironment
    from flowray.testing import wait_until
    from flowray.runtime.network.tls import TlsSettings
    from tests.support.certificates import make_ca, make_leaf

    import ray

    ca_path, ca = make_ca(str(tmp_path))
    settings = {"security.ssl.internal.enabled": "true",
                "security.ssl.internal.keystore": make_leaf(str(tmp_path), ca),
                "security.ssl.internal.truststore": ca_path,
                "flowray.channel.same-node": "tcp"}
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(settings))
    env.set_parallelism(2)
    n, go = 2_000, str(tmp_path / "go")
    it = (env.from_collection(list(range(n)))
          .map(_WaitForFile(go)).set_parallelism(1)
          .map(lambda x: (x % 3, x)).set_parallelism(1)
          .key_by(lambda kv: kv[0])
          .reduce(lambda a, b: (a[0], a[1] + b[1]))
          .execute_and_collect("tls"))
    master = it._client.job_master_actor()
    wait_until(lambda: len(ray.get(master.data_endpoints.remote())["tasks"]) == 4, 120,
               "every task to listen")
    found = ray.get(master.data_endpoints.remote())
    other_ca_path, other_ca = make_ca(str(tmp_path), "another CA")
    stranger = TlsSettings(make_leaf(str(tmp_path), other_ca, "stranger"), other_ca_path)
    # the driver's listener (accepting all along) speaks TLS to its own CA only; the tasks'
    # channels are TLS on both ends or the job could not deliver to it: a task's producer
    # and listener use the same settings
    for address in found["driver"].values():
        with pytest.raises(HandshakeError, match="TLS"):
            connect_channel(address, CHANNEL, 4, "elsewhere", timeout_s=10,
                            secret=os.urandom(32), tls=stranger)
    open(go, "w").close()
    final = {}
    for key, total in it:
        final[key] = max(final.get(key, -1), total)
    assert final == {k: sum(x for x in range(n) if x % 3 == k) for k in range(3)}
