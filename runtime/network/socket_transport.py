"""Socket transport: one stream connection per channel (unix socket on one node, TCP across).

The consumer task listens; each producer connects and authenticates, names its channel,
then writes frames. The handshake is a mutual challenge-response over the job's secret
(handed to every task through Ray), as ``multiprocessing.connection`` does, before a single
byte from the peer is decoded: the listener sends 32 random bytes; the producer answers
``HMAC-SHA256(secret, b"producer" + challenge)``, its own 32-byte challenge and a hello
naming the channel (``msgpack``, length-prefixed, read only once the HMAC checked out); the
listener checks the HMAC, then answers
``HMAC-SHA256(secret, b"listener" + producer challenge)``, which the producer checks. Only
after that are frames (pickled record batches) read. A peer that fails the handshake, sends
garbage or stays silent past :data:`HANDSHAKE_TIMEOUT_S` is logged and dropped; the task
goes on accepting. With ``security.ssl.internal.enabled`` a TCP connection is TLS first
(:mod:`flowray.runtime.network.tls`), and the handshake above runs inside it. The reader
returns credits on the same connection (a 4-byte count of taken frames), and the writer
blocks reading credits when it has none left. The reader announces taken record frames
a few at a time (:func:`credit_announcement_interval`: half the writer's credits), and
everything it owes once it has no whole frame left and the socket has nothing more (it
would wait), so a writer never waits on credits the reader holds back, and a reader
that catches up with a busy writer does not wake it with a few credits; any other frame
(a watermark, a barrier, the end) is announced with the credits owed at once. A 4-byte
word with the top bit set is not a credit but the batch size the consumer asks for
(buffer debloating, :mod:`flowray.runtime.network.debloat`); the writer reads it with
the credits. A blocked (aligning) input is simply not read: its credits run out and its
producer slows, which is Flink's behaviour.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import queue
import re
import selectors
import socket
import ssl
import struct
import tempfile
import threading
import time
import uuid
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

import msgpack

from flowray.common.files import user_temp_dir
from flowray.runtime.network.frame_codec import (
    HEADER,
    PRIORITY_BARRIER,
    RECORD_KINDS,
    decode_frame,
    encode_frame,
    encode_priority_barrier,
)
from flowray.runtime.network.channel import (
    ChannelClosedError,
    ChannelError,
    ChannelReader,
    ChannelStats,
    ChannelWriter,
    InputGate,
    _SequenceChecker,
)
from flowray.runtime.network.selecting import ChannelSelector
from flowray.runtime.network.elements import (
    CheckpointBarrier,
    EndOfPartition,
    Frame,
    RecordBatch,
)
from flowray.runtime.network.tls import TlsSettings, client_context, server_context

__all__ = ["SocketListener", "SocketChannelWriter", "SocketChannelReader", "SocketInputGate",
           "connect_channel", "credit_announcement_interval", "HandshakeError",
           "HANDSHAKE_TIMEOUT_S", "encode_hello", "decode_hello", "remove_stale_sockets"]

log = logging.getLogger(__name__)

_CREDIT = struct.Struct("<I")
#: the top bit of a credit word: the rest is an announced batch size, not a credit count
_BATCH_LIMIT_FLAG = 1 << 31
_HELLO_LEN = struct.Struct("<I")
_CHALLENGE_BYTES = 32
_DIGEST_BYTES = 32
_MAX_HELLO = 4096
#: seconds a TCP channel may be idle before keepalive probes start
KEEPALIVE_IDLE_S = 30
_HELLO_VERSION = 1


def encode_hello(channel_id: str) -> bytes:
    """The producer's hello (after it authenticated): ``msgpack`` of
    ``{"v": 1, "channel": <id>}``."""
    return msgpack.packb({"v": _HELLO_VERSION, "channel": channel_id}, use_bin_type=True)


def decode_hello(data: bytes) -> str:
    """The channel id in a hello; :class:`HandshakeError` for anything else.

    >>> decode_hello(encode_hello("e1/0->1"))
    'e1/0->1'
    """
    try:
        hello = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as e:  # whatever msgpack says, it is not a hello
        raise HandshakeError(f"malformed hello: {type(e).__name__}") from e
    if (not isinstance(hello, dict) or hello.get("v") != _HELLO_VERSION
            or not isinstance(hello.get("channel"), str)):
        raise HandshakeError("malformed hello")
    return hello["channel"]
#: longest a connecting peer may take to authenticate before it is dropped
HANDSHAKE_TIMEOUT_S = 5.0


class HandshakeError(ChannelError):
    """A peer did not authenticate (wrong secret, garbage, silence)."""


def _digest(secret: bytes, role: bytes, challenge: bytes) -> bytes:
    return hmac.new(secret, role + challenge, hashlib.sha256).digest()
_RECV_CHUNK = 1 << 20


def _socket_dir() -> str:
    """``/tmp/flowray-<uid>/sockets`` (0700; unix socket paths must stay under ~107 bytes,
    so a short base rather than a long TMPDIR)."""
    base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    return user_temp_dir("sockets", base)


_SOCKET_NAME = re.compile(r"^(\d+)-[0-9a-f]{16}\.sock$")


def remove_stale_sockets(folder: str) -> int:
    """Remove socket files in ``folder`` left by processes that died without closing their
    listener (a killed task actor cannot): a file whose process is gone *and* which refuses
    a connection. Returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        m = _SOCKET_NAME.match(name)
        if m is None or _process_alive(int(m.group(1))):
            continue
        path = os.path.join(folder, name)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(0.5)
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
        except OSError:
            pass  # someone listens (another process namespace?): leave it
        finally:
            probe.close()
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _keepalive(sock: socket.socket) -> None:
    """TCP keepalive, so a peer whose machine vanished is noticed in about a minute (the
    heartbeat notices a hung task; this a half-open connection)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", 10),
                          ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
            except OSError:
                pass


class SocketListener:
    """A task's data-plane endpoint: a unix socket and a TCP socket, both listening."""

    _swept = False  # stale socket files removed by this process already

    def __init__(self, node_id: str = "", host: str = "127.0.0.1",
                 secret: bytes = b"", handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 tls: Optional[TlsSettings] = None, credits: int = 1) -> None:
        """``credits``: what each producer's writer holds (the job's
        ``flowray.channel.credits``); readers return them as
        :func:`credit_announcement_interval` says."""
        self.node_id = node_id
        self._announce_every = credit_announcement_interval(credits)
        self._secret = secret
        self._tls = tls  # TCP connections must speak TLS first
        self.handshake_timeout_s = handshake_timeout_s
        folder = _socket_dir()
        if not SocketListener._swept:
            SocketListener._swept = True  # once per process: killed actors' files
            remove_stale_sockets(folder)
        self.unix_path = os.path.join(folder, f"{os.getpid()}-{uuid.uuid4().hex[:16]}.sock")
        self._unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._unix.bind(self.unix_path)  # in a 0700 folder; the file itself 0600 too
        os.chmod(self.unix_path, 0o600)
        self._unix.listen(1024)
        self._tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._tcp.bind((host, 0))
        self._tcp.listen(1024)
        self.tcp_address = (host, self._tcp.getsockname()[1])
        self._ready: "queue.Queue[SocketChannelReader]" = queue.Queue()
        self._closed = False

    def address(self) -> Dict[str, Any]:
        return {"node_id": self.node_id, "unix": self.unix_path, "tcp": self.tcp_address}

    def accept(self, channel_ids: Sequence[str], timeout_s: float,
               should_stop: Any = None) -> Dict[str, "SocketChannelReader"]:
        """Accept until every channel in ``channel_ids`` has connected."""
        wanted = set(channel_ids)
        readers: Dict[str, SocketChannelReader] = {}
        deadline = time.monotonic() + timeout_s
        while wanted - set(readers):
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(wanted - set(readers))
                raise ChannelError(
                    f"timed out waiting for producers to connect: {', '.join(missing[:5])}"
                    + (" ..." if len(missing) > 5 else ""))
            if should_stop is not None and should_stop():
                raise ChannelClosedError("cancelled while waiting for producers")
            for reader in self._authenticated(min(left, 0.2)):
                channel_id = reader.channel_id
                if channel_id not in wanted or channel_id in readers:
                    log.warning("flowray: dropped a connection for unexpected channel %r",
                                channel_id)
                    reader.close()
                    continue
                readers[channel_id] = reader
        return readers

    def accept_ready(self, allowed: Any, timeout_s: float) -> List["SocketChannelReader"]:
        """Connections authenticated within about ``timeout_s`` for channels in
        ``allowed``; a channel may connect again (a restarted producer). Others are
        closed."""
        out: List[SocketChannelReader] = []
        for reader in self._authenticated(timeout_s):
            if reader.channel_id in allowed:
                out.append(reader)
            else:
                log.warning("flowray: dropped a connection for unexpected channel %r",
                            reader.channel_id)
                reader.close()
        return out

    def _authenticated(self, timeout_s: float) -> List["SocketChannelReader"]:
        """Accept what connects within ``timeout_s`` and return the connections that
        have authenticated so far. Each handshake runs in a thread of its own, so a peer
        that stays silent delays nothing but itself (it is dropped after
        :attr:`handshake_timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        sel = selectors.DefaultSelector()
        sel.register(self._unix, selectors.EVENT_READ)
        sel.register(self._tcp, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in sel.select(max(0.0, min(deadline - time.monotonic(), 0.02))):
                    self._start_handshake(key.fileobj)
                ready = self._take_ready()
                if ready or time.monotonic() >= deadline:
                    return ready
        finally:
            sel.close()

    def _take_ready(self) -> List["SocketChannelReader"]:
        out = []
        while True:
            try:
                out.append(self._ready.get_nowait())
            except queue.Empty:
                return out

    def _start_handshake(self, listening: Any) -> None:
        try:
            conn, peer = listening.accept()
        except OSError:
            return
        threading.Thread(target=self._handshake_then_queue, args=(conn, peer), daemon=True,
                         name="flowray-handshake").start()

    def _handshake_then_queue(self, conn: socket.socket, peer: Any) -> None:
        """Authenticate one connection and queue its reader; log and close it if it
        fails."""
        try:
            reader = self._handshake(conn)
        except (OSError, ValueError, ChannelError) as e:
            log.warning("flowray: dropped a connection from %s that did not authenticate: %s",
                        peer or "a local socket", e)
            try:
                conn.close()
            except OSError:
                pass
            return
        if self._closed:
            reader.close()
        else:
            self._ready.put(reader)

    def _handshake(self, conn: socket.socket) -> "SocketChannelReader":
        conn.setblocking(True)
        conn.settimeout(self.handshake_timeout_s)
        if self._tls is not None and conn.family == socket.AF_INET:
            conn = server_context(self._tls).wrap_socket(conn, server_side=True)
        challenge = os.urandom(_CHALLENGE_BYTES)
        conn.sendall(challenge)
        answer = _recv_exact(conn, _DIGEST_BYTES)
        if not hmac.compare_digest(answer, _digest(self._secret, b"producer", challenge)):
            raise HandshakeError("wrong authentication (not this job's secret)")
        theirs = _recv_exact(conn, _CHALLENGE_BYTES)
        (n,) = _HELLO_LEN.unpack(_recv_exact(conn, _HELLO_LEN.size))
        if n > _MAX_HELLO:
            raise HandshakeError(f"a hello of {n} bytes")
        channel_id = decode_hello(_recv_exact(conn, n))
        conn.sendall(_digest(self._secret, b"listener", theirs))
        conn.settimeout(None)
        if conn.family == socket.AF_INET:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _keepalive(conn)
        conn.setblocking(False)
        return SocketChannelReader(channel_id, conn, self._announce_every)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in (self._unix, self._tcp):
            try:
                s.close()
            except OSError:
                pass
        try:
            os.unlink(self.unix_path)
        except OSError:
            pass
        for reader in self._take_ready():
            reader.close()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ChannelClosedError("connection closed during handshake")
        buf += chunk
    return bytes(buf)


def credit_announcement_interval(credits: int) -> int:
    """How many taken record frames a reader returns in one credit announcement when the
    writer holds ``credits``: half of them (at least 1), so a writer keeps half its window
    in flight while the reader saves all but one send of every few frames (each send
    wakes the writer's process)."""
    return max(1, int(credits) // 2)


def connect_channel(address: Dict[str, Any], channel_id: str, credits: int,
                    my_node_id: str = "", timeout_s: float = 30.0,
                    secret: bytes = b"", tls: Optional[TlsSettings] = None,
                    same_node: str = "unix") -> "SocketChannelWriter":
    """Open the producer end of ``channel_id`` to the listener at ``address`` and
    authenticate both ways with the job's ``secret`` (:class:`HandshakeError` if the
    listener does not know it). A unix socket on the same node (unless ``same_node`` is
    ``"tcp"``), TCP otherwise, in TLS when ``tls`` is given."""
    if (same_node == "unix" and address.get("node_id", "") == my_node_id
            and os.path.exists(address["unix"])):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        sock.connect(address["unix"])
    else:
        sock = socket.create_connection(tuple(address["tcp"]), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _keepalive(sock)
        if tls is not None:
            try:
                sock = client_context(tls).wrap_socket(sock)
            except (OSError, ssl.SSLError) as e:
                sock.close()
                raise HandshakeError(f"channel {channel_id!r}: TLS with the listener at "
                                     f"{address} failed: {e}") from e
    try:
        challenge = _recv_exact(sock, _CHALLENGE_BYTES)
        mine = os.urandom(_CHALLENGE_BYTES)
        hello = encode_hello(channel_id)
        sock.sendall(_digest(secret, b"producer", challenge) + mine
                     + _HELLO_LEN.pack(len(hello)) + hello)
        answer = _recv_exact(sock, _DIGEST_BYTES)
    except (OSError, ChannelClosedError) as e:
        sock.close()
        raise HandshakeError(f"channel {channel_id!r}: the listener at {address} closed the "
                             f"handshake ({type(e).__name__}: {e}); a wrong secret?") from e
    if not hmac.compare_digest(answer, _digest(secret, b"listener", mine)):
        sock.close()
        raise HandshakeError(f"channel {channel_id!r}: the listener at {address} did not "
                             "authenticate (not this job's secret)")
    sock.settimeout(None)
    return SocketChannelWriter(channel_id, sock, credits)


_CREDIT_READ = 4096   # bytes a writer reads of returned credits at a time


def _recv_nowait(sock: socket.socket) -> Optional[bytes]:
    """What ``sock`` has to read now (None: nothing, or it failed); TLS sockets take no
    flags, so they are made non-blocking for the call."""
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock.setblocking(False)
            try:
                return sock.recv(_CREDIT_READ)
            finally:
                sock.setblocking(True)
        return sock.recv(_CREDIT_READ, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None
    except OSError:
        return None


class SocketChannelWriter(ChannelWriter):
    carries_batch_limit = True  # announcements arrive with the credits
    supports_priority = True

    def __init__(self, channel_id: str, sock: socket.socket, credits: int) -> None:
        self.channel_id = channel_id
        self.credits = credits
        self.stats = ChannelStats()
        self._sock = sock
        self._available = credits
        self._seq = 0
        self._pending_credit = b""
        self._ended = False  # end-of-partition sent
        self.closed = False
        self.overdraft = False
        self._unsent: Deque[Frame] = deque()  # written in overdraft, no credit yet
        self._consumer_gone = False   # the reader closed the connection
        self._tls = isinstance(sock, ssl.SSLSocket)   # decrypted bytes a select cannot see

    def fileno(self) -> int:
        """The connection's descriptor: readable when credits came back (-1 once the
        reader closed it: it would stay readable for a selector for good)."""
        return -1 if self._consumer_gone else self._sock.fileno()

    def in_flight(self) -> int:
        """Frames not yet taken by the reader (reads returned credits without blocking);
        0 once the reader closed the connection (nothing more will be taken)."""
        if self._consumer_gone:
            return 0
        while True:
            data = _recv_nowait(self._sock)
            if data is None:
                break
            if not data:
                self._consumer_gone = True
                return 0
            self._take_credits(data)
            if len(data) < _CREDIT_READ and not self._tls:
                break
        return self.credits - self._available

    def _take_credits(self, data: bytes) -> None:
        data = self._pending_credit + data
        whole = len(data) - len(data) % 4
        for (c,) in _CREDIT.iter_unpack(data[:whole]):
            if c & _BATCH_LIMIT_FLAG:
                self.batch_limit = c & ~_BATCH_LIMIT_FLAG
            else:
                self._available += c
        self._pending_credit = data[whole:]

    def write(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if self._unsent or self._available <= 0:
            if self.overdraft:   # never block: it goes out when a credit comes back
                self._unsent.append(frame)
                self.is_available()
                return
            self._send_unsent_blocking()
            self._await_credit()
        self._send(frame, encode_frame(frame, self._seq), credited=True)

    def _await_credit(self) -> None:
        """Block until the reader returned a credit (back-pressure)."""
        if self._available > 0:
            return
        self.stats.blocked += 1
        t0 = time.monotonic()
        self.stats.blocked_since = t0
        try:
            while self._available <= 0:
                data = self._sock.recv(4096)
                if not data:
                    raise ChannelClosedError(
                        f"channel {self.channel_id}: the consumer closed the connection")
                self._take_credits(data)
        finally:
            self.stats.blocked_ms += (time.monotonic() - t0) * 1000
            self.stats.blocked_since = None

    def _send_unsent_blocking(self) -> None:
        while self._unsent:
            self._await_credit()
            frame = self._unsent.popleft()
            self._send(frame, encode_frame(frame, self._seq), credited=True)

    def write_priority(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if type(frame) is not CheckpointBarrier:
            raise TypeError(f"only a checkpoint barrier goes ahead of the queue, not {frame!r}")
        self._send(frame, encode_priority_barrier(frame, self._seq), credited=False)

    def is_available(self) -> bool:
        if not self._unsent:
            return True
        while True:
            data = _recv_nowait(self._sock)
            if data is None:
                break
            if not data:   # without a consumer the frames waiting here can never go
                self._consumer_gone = True
                raise ChannelClosedError(
                    f"channel {self.channel_id}: the consumer closed the connection")
            self._take_credits(data)
            if len(data) < _CREDIT_READ and not self._tls:   # all there was (TLS: may hold more)
                break
        while self._unsent and self._available > 0:
            frame = self._unsent.popleft()
            self._send(frame, encode_frame(frame, self._seq), credited=True)
        return not self._unsent

    def unsent(self) -> List[Frame]:
        return list(self._unsent)

    def _send(self, frame: Frame, data: bytes, credited: bool) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise ChannelClosedError(f"channel {self.channel_id}: send failed: {e}") from e
        self._seq += 1
        if credited:
            self._available -= 1
        if type(frame) is EndOfPartition:
            self._ended = True
        st = self.stats
        st.frames += 1
        st.bytes += len(data)
        if type(frame) is RecordBatch:
            st.records += len(frame.records)
        flight = self.credits - self._available
        if flight > st.max_in_flight:
            st.max_in_flight = flight

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass

    def await_taken(self, timeout_s: float) -> None:
        """After end-of-partition, wait until the reader has taken every frame (its credits
        are back): a TCP socket closed with credits unread, or one that credits arrive at
        after it closed, answers with a reset, and a reset may cost the reader the frames
        it has not read yet. Waiting counts as back-pressure, not as a hang."""
        if self._unsent and not self.closed:
            self._send_unsent_blocking()   # end-of-partition may be among them
        if not self._ended or self.closed:
            return
        deadline = time.monotonic() + timeout_s
        self.stats.blocked_since = time.monotonic()
        try:
            while self._available < self.credits:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("flowray: channel %s: closing with %d frames not taken by "
                                "the reader after %.0f s", self.channel_id,
                                self.credits - self._available, timeout_s)
                    return
                self._sock.settimeout(min(left, 1.0))
                try:
                    data = self._sock.recv(4096)
                except (socket.timeout, ssl.SSLWantReadError):
                    continue
                if not data:
                    return  # the reader closed: nothing more to wait for
                self._take_credits(data)
        except OSError:
            return  # the reader is gone
        finally:
            self.stats.blocked_since = None
            try:
                self._sock.settimeout(None)
            except OSError:
                pass


class SocketChannelReader(ChannelReader):
    def __init__(self, channel_id: str, sock: socket.socket, announce_every: int = 1) -> None:
        """``announce_every``: record frames taken before their credits go back in one
        announcement (1: each at once); owed credits also go back before the reader
        reads the socket and with any frame that is not records."""
        self.channel_id = channel_id
        self._announce_every = max(1, int(announce_every))
        self._unannounced = 0   # frames taken whose credits were not sent yet
        self.sock = sock
        self._buf = bytearray()
        self._pos = 0
        self._seqs = _SequenceChecker(channel_id)
        self._ended = False
        self._eof = False
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._credit_out = b""  # credits not sent yet (the socket had no room)
        self.closed = False
        # unaligned checkpoints: frames up to _scan were looked at for priority barriers;
        # the sequence numbers of the ones taken out; the record frames being recorded
        self._scan = 0
        self._excised: Set[int] = set()
        self._recording: Optional[List[bytes]] = None
        self._found: List[Tuple[Any, List[bytes]]] = []   # for the next receive()
        #: look at every frame for priority barriers before polling it (unaligned mode)
        self.eager = False

    def fileno(self) -> int:
        """The connection's descriptor (-1 once the end of the stream was read: it would
        stay readable for a selector for good)."""
        return -1 if self._eof else self.sock.fileno()

    def ready_without_io(self) -> bool:
        """Whether :meth:`poll` has something without the socket becoming readable:
        whole frames buffered, the end seen, credits owed or not sent yet (the next poll
        sends them), or (TLS) decrypted bytes inside the TLS layer that a selector cannot
        see."""
        return (self.has_frames() or self._eof or bool(self._credit_out)
                or self._unannounced > 0 or (self._tls and self.sock.pending() > 0))

    def _send_credit(self, count: int = 1) -> None:
        out = self._credit_out + (_CREDIT.pack(count) if count else b"")
        if not out:
            return
        try:
            sent = self.sock.send(out)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                ssl.SSLWantWriteError):
            sent = 0  # sent with the next one
        except OSError:
            # The producer may close right after end-of-partition while frames are still
            # buffered here; a producer that died shows up as end-of-stream without EOP.
            sent = len(out)
        self._credit_out = out[sent:]

    def _announce_taken(self) -> None:
        """Send the credits of the frames taken and not announced yet."""
        count, self._unannounced = self._unannounced, 0
        self._send_credit(count)

    def announce_batch_size(self, records: int) -> None:
        """Send the batch size with the credits (buffered if the socket has no room)."""
        if self.closed:
            return
        records = max(1, min(int(records), _BATCH_LIMIT_FLAG - 1))
        self._credit_out += _CREDIT.pack(_BATCH_LIMIT_FLAG | records)
        self._announce_taken()

    def has_frames(self) -> bool:
        avail = len(self._buf) - self._pos
        if avail < HEADER.size:
            return False
        return avail >= HEADER.size + HEADER.unpack_from(self._buf, self._pos)[0]

    def _next_buffered(self) -> Optional[Frame]:
        buf, pos = self._buf, self._pos
        avail = len(buf) - pos
        if avail < HEADER.size:
            return None
        if (self.eager or self._recording is not None) and self._scan <= pos:
            # every frame is looked at before it is polled: a priority barrier is taken
            # out (receive() returns it), a recorded frame is recorded
            self._scan_buffer()
            if self._scan <= pos:
                return None   # the frame at pos is not whole yet
        if self._found:   # a priority barrier goes first: receive() hands it over
            return None
        length, kind, seq = HEADER.unpack_from(buf, pos)
        end = pos + HEADER.size + length
        if len(buf) < end:
            return None
        seqs = self._seqs
        while seqs.expected in self._excised:   # priority frames taken out earlier
            self._excised.discard(seqs.expected)
            seqs.expected += 1
        seqs.check(seq)
        self.bytes_read += end - pos
        with memoryview(buf) as view:
            frame = decode_frame(kind, view[pos + HEADER.size:end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
            self._scan = 0
        elif end > _RECV_CHUNK:
            del buf[:end]
            self._pos = 0
            self._scan = max(0, self._scan - end)
        else:
            self._pos = end
        if kind != PRIORITY_BARRIER:   # a priority frame took no credit
            self._unannounced += 1
            if self._unannounced >= self._announce_every or kind not in RECORD_KINDS:
                self._announce_taken()
        if type(frame) is EndOfPartition:
            self._ended = True
        return frame

    def poll(self) -> Optional[Frame]:
        if self._credit_out:
            self._send_credit(0)
        frame = self._next_buffered()
        if frame is not None or self._eof:
            if frame is None and not self._ended:
                self._ended = True
                raise ChannelClosedError(
                    f"channel {self.channel_id}: the producer closed the connection "
                    "before end-of-partition (did its task die?)")
            return frame
        try:
            data = self.sock.recv(_RECV_CHUNK)
            if self._tls and data:  # a TLS read returns one record: take what is decrypted
                while self.sock.pending():
                    data += self.sock.recv(self.sock.pending())
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            data = None   # nothing more has come: the reader may wait now
        except OSError as e:
            raise ChannelClosedError(f"channel {self.channel_id}: {e}") from e
        if data == b"":
            self._eof = True
            return self.poll()
        if data is not None:
            self._buf += data
            frame = self._next_buffered()
        if frame is None and self._unannounced:
            # all it owes before it waits: a writer out of credits is never left waiting
            # on credits held back here (owed ones make the reader ready_without_io, so
            # a gate polls once more before it waits, and that poll ends here)
            self._announce_taken()
        return frame

    # -- unaligned checkpoints ---------------------------------------------------------
    def receive(self) -> List[Tuple[Any, List[bytes]]]:
        if not self._eof and not self.closed:
            while True:   # credits bound what the producer sends: this ends
                try:
                    data = self.sock.recv(_RECV_CHUNK)
                    if self._tls and data:
                        while self.sock.pending():
                            data += self.sock.recv(self.sock.pending())
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    break
                except OSError as e:
                    raise ChannelClosedError(f"channel {self.channel_id}: {e}") from e
                if not data:
                    self._eof = True
                    break
                self._buf += data
        if not self._found:
            self._scan_buffer()
        found, self._found = self._found, []
        return found

    def priority_pending(self) -> bool:
        return bool(self._found)

    def start_recording(self) -> None:
        self._recording = self._record_frames(self._pos, max(self._scan, self._pos))

    def stop_recording(self) -> List[bytes]:
        recorded, self._recording = self._recording, None
        return recorded or []

    def _record_frames(self, start: int, stop: int) -> List[bytes]:
        """The encoded record frames between offsets ``start`` and ``stop`` of the
        buffer (whole frames)."""
        out, buf, pos = [], self._buf, start
        while pos < stop:
            length, kind, _ = HEADER.unpack_from(buf, pos)
            end = pos + HEADER.size + length
            if kind in RECORD_KINDS:
                out.append(bytes(buf[pos:end]))
            pos = end
        return out

    def _scan_buffer(self) -> None:
        """Look at the whole frames not looked at yet: record record frames while
        recording, and take the next priority barrier out (for :meth:`receive`). The scan
        stops there, and polling stops before it, until receive() has handed it over, so
        nothing after a barrier is polled or recorded before the barrier is handled."""
        found = self._found
        buf = self._buf
        pos = max(self._scan, self._pos)
        while not found and len(buf) - pos >= HEADER.size:
            length, kind, seq = HEADER.unpack_from(buf, pos)
            end = pos + HEADER.size + length
            if len(buf) < end:
                break
            if kind == PRIORITY_BARRIER:
                with memoryview(buf) as view:
                    barrier = decode_frame(kind, view[pos + HEADER.size:end])
                if self._recording is not None:
                    before, self._recording = self._recording, None
                else:
                    before = self._record_frames(self._pos, pos)
                del buf[pos:end]
                self._excised.add(seq)
                found.append((barrier, before))
                break
            if self._recording is not None and kind in RECORD_KINDS:
                self._recording.append(bytes(buf[pos:end]))
            pos = end
        self._scan = pos

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class SocketInputGate(InputGate):
    def __init__(self) -> None:
        self._selector = ChannelSelector()

    def wakeup(self) -> None:
        self._selector.wake()

    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        ready = [r for r in readers if r.ready_without_io()]  # type: ignore[attr-defined]
        if ready:
            return ready
        wanted = {r.fileno(): r for r in readers}  # type: ignore[attr-defined]
        timeout_s = max(0.0, timeout_s if wanted else min(timeout_s, 0.05))
        return self._selector.select(wanted, timeout_s)[1]

    def close(self) -> None:
        self._selector.close()
