"""TLS on TCP channels (security.ssl.internal.*): records flow encrypted with mutual
certificate checks; a peer without TLS or with a certificate of another CA is refused on
both sides; bad settings fail naming the key or the file."""

import os
import threading

import pytest

from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.socket_transport import (
    HandshakeError,
    SocketInputGate,
    SocketListener,
    connect_channel,
)
from flowray.runtime.network.tls import TlsConfigError, TlsSettings
from tests.support.certificates import make_ca, make_leaf

SECRET = os.urandom(32)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("pki"))
    ca_path, ca = make_ca(folder)
    other_ca_path, other_ca = make_ca(folder, "another CA")
    return {
        "good": TlsSettings(make_leaf(folder, ca, "node a"), ca_path),
        "good_b": TlsSettings(make_leaf(folder, ca, "node b", password="s3cret"), ca_path,
                              "s3cret"),
        "stranger": TlsSettings(make_leaf(folder, other_ca, "stranger"), other_ca_path),
        "ca": ca_path,
    }


def _accept(listener, channel):
    result, errors = {}, []

    def run():
        try:
            result.update(listener.accept([channel], timeout_s=30))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result, errors


def _drain(reader, gate, count):
    got = []
    while len(got) < count:
        assert gate.wait([reader], 30), "no frame within 30 s"
        while True:
            frame = reader.poll()
            if frame is None:
                break
            got.append(frame)
    return got


def test_records_flow_over_tls_with_credits(pki):
    listener = SocketListener("node-a", secret=SECRET, tls=pki["good"])
    try:
        thread, accepted, errors = _accept(listener, "c")
        writer = connect_channel(listener.address(), "c", 2, "node-b", timeout_s=30,
                                 secret=SECRET, tls=pki["good_b"])
        thread.join(30)
        assert not errors
        reader = accepted["c"]
        assert reader.sock.version() in ("TLSv1.2", "TLSv1.3")
        gate = SocketInputGate()
        big = "x" * (3 << 20)  # many TLS records in one frame
        batches = [RecordBatch([i, big if i % 3 == 0 else i]) for i in range(12)]
        sent = threading.Thread(target=lambda: [writer.write(b) for b in batches], daemon=True)
        sent.start()  # 12 frames through 2 credits: the credits must come back over TLS
        got = _drain(reader, gate, len(batches))
        sent.join(30)
        assert [f.records for f in got] == [b.records for b in batches]
        assert writer.in_flight() <= 2
        writer.close()
        reader.close()
        gate.close()
    finally:
        listener.close()


def test_unix_sockets_on_one_node_are_not_wrapped(pki):
    listener = SocketListener("node-a", secret=SECRET, tls=pki["good"])
    try:
        thread, accepted, errors = _accept(listener, "c")
        writer = connect_channel(listener.address(), "c", 2, "node-a", timeout_s=30,
                                 secret=SECRET, tls=pki["good"])
        thread.join(30)
        assert not hasattr(accepted["c"].sock, "version")
        writer.close()
        accepted["c"].close()
    finally:
        listener.close()


@pytest.mark.parametrize("client", ["plain", "stranger"])
def test_a_client_without_a_trusted_certificate_is_refused(pki, client):
    listener = SocketListener("node-a", secret=SECRET, tls=pki["good"],
                              handshake_timeout_s=0.5)
    try:
        thread, accepted, errors = _accept(listener, "c")
        with pytest.raises(HandshakeError):
            connect_channel(listener.address(), "c", 2, "node-b", timeout_s=5, secret=SECRET,
                            tls=None if client == "plain" else pki["stranger"])
        # the job's own producer still gets through
        writer = connect_channel(listener.address(), "c", 2, "node-b", timeout_s=30,
                                 secret=SECRET, tls=pki["good_b"])
        thread.join(30)
        assert set(accepted) == {"c"} and not errors
        writer.close()
        accepted["c"].close()
    finally:
        listener.close()


def test_a_listener_with_a_stranger_certificate_is_not_trusted(pki):
    listener = SocketListener("node-a", secret=SECRET, tls=pki["stranger"],
                              handshake_timeout_s=0.5)
    try:
        _accept(listener, "c")
        with pytest.raises(HandshakeError, match="TLS"):
            connect_channel(listener.address(), "c", 2, "node-b", timeout_s=5, secret=SECRET,
                            tls=pki["good"])
    finally:
        listener.close()


def test_settings_name_what_is_missing_or_broken(pki, tmp_path):
    assert TlsSettings.from_config({}) is None
    with pytest.raises(TlsConfigError, match="security.ssl.internal.truststore"):
        TlsSettings.from_config({"security.ssl.internal.enabled": "true",
                                 "security.ssl.internal.keystore": pki["good"].keystore})
    broken = tmp_path / "broken.pem"
    broken.write_text("not a certificate")
    with pytest.raises(TlsConfigError, match="broken.pem"):
        TlsSettings(str(broken), pki["ca"]).check()
    with pytest.raises(TlsConfigError, match="keystore"):
        TlsSettings(pki["good_b"].keystore, pki["ca"], "wrong password").check()
    settings = TlsSettings.from_config({"security.ssl.internal.enabled": "true",
                                        "security.ssl.internal.keystore": pki["good"].keystore,
                                        "security.ssl.internal.truststore": pki["ca"]})
    settings.check()
