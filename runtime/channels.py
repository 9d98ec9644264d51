"""The channel contract, the frame codec and the in-process twin.

A channel is FIFO from one producer subtask to one consumer subtask. Contract:

* ``ChannelWriter.write(frame)`` sends one frame. It blocks while the writer holds
  ``credits`` unacknowledged frames (credit-based back-pressure), so a slow consumer bounds
  its producers' memory. Every frame gets the next sequence number.
* ``ChannelReader.poll()`` returns the next frame or ``None`` when none has arrived yet; it
  never blocks. Taking a frame returns its credit to the writer. A gap or a replayed
  sequence number raises :class:`ChannelSequenceError`; a peer that vanished before
  end-of-partition raises :class:`ChannelClosedError`.
* ``close()`` is idempotent on both ends.
* An :class:`InputGate` waits until one of several readers has a frame.

Transports: :class:`InProcessChannel` (threads; unit tests and the local executor),
``transport_socket`` (unix/TCP stream per channel) and ``transport_ray`` (actor calls).
"""

from __future__ import annotations

import abc
import pickle
import struct
import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from flowray.runtime.elements import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    Frame,
    RecordBatch,
    Watermark,
)

__all__ = [
    "ChannelError",
    "ChannelClosedError",
    "ChannelSequenceError",
    "ChannelStats",
    "ChannelWriter",
    "ChannelReader",
    "InputGate",
    "encode_frame",
    "frame_sequence_number",
    "decode_frame",
    "HEADER",
    "InProcessChannel",
    "InProcessGate",
]

# header: payload length (u32), kind (u8), sequence number (u64)
HEADER = struct.Struct("<IBQ")
_KG_COUNT = struct.Struct("<I")
_WM = struct.Struct("<q")

_RECORDS, _RECORDS_KG, _WATERMARK, _EOP, _BARRIER, _CANCEL = 1, 2, 3, 4, 5, 6


class ChannelError(RuntimeError):
    """A channel broke: the peer is gone or frames arrived out of order."""


class ChannelClosedError(ChannelError):
    pass


class ChannelSequenceError(ChannelError):
    pass


def encode_frame(frame: Frame, seq: int) -> bytes:
    """Header + payload bytes of one frame."""
    if type(frame) is RecordBatch:
        body = pickle.dumps(frame.records, protocol=5)
        if frame.key_groups is None:
            kind = _RECORDS
        else:
            kind = _RECORDS_KG
            kgs = array("H", frame.key_groups).tobytes()
            body = _KG_COUNT.pack(len(kgs)) + kgs + body
    elif type(frame) is Watermark:
        kind, body = _WATERMARK, _WM.pack(frame.timestamp)
    elif type(frame) is EndOfPartition:
        kind, body = _EOP, b""
    elif type(frame) is CheckpointBarrier:
        kind, body = _BARRIER, pickle.dumps(
            (frame.checkpoint_id, frame.timestamp, frame.is_savepoint))
    elif type(frame) is CancelCheckpointMarker:
        kind, body = _CANCEL, pickle.dumps(frame.checkpoint_id)
    else:
        raise TypeError(f"not a channel frame: {frame!r}")
    return HEADER.pack(len(body), kind, seq) + body


def frame_sequence_number(data: bytes) -> int:
    """The sequence number in an encoded frame's header."""
    return HEADER.unpack_from(data, 0)[2]


_EOP_FRAME = EndOfPartition()


def decode_frame(kind: int, body: Any) -> Frame:
    """The frame of ``kind`` whose payload is the bytes-like ``body``."""
    if kind == _RECORDS:
        return RecordBatch(pickle.loads(body))
    if kind == _RECORDS_KG:
        (n,) = _KG_COUNT.unpack_from(body, 0)
        kgs = array("H")
        kgs.frombytes(body[4:4 + n])
        return RecordBatch(pickle.loads(body[4 + n:]), kgs.tolist())
    if kind == _WATERMARK:
        return Watermark(_WM.unpack_from(body, 0)[0])
    if kind == _EOP:
        return _EOP_FRAME
    if kind == _BARRIER:
        cid, ts, sp = pickle.loads(body)
        return CheckpointBarrier(cid, ts, sp)
    if kind == _CANCEL:
        return CancelCheckpointMarker(pickle.loads(body))
    raise ChannelError(f"unknown frame kind {kind}")


@dataclass
class ChannelStats:
    """What a writer observed; ``max_in_flight`` never exceeds the credits."""

    frames: int = 0
    bytes: int = 0
    records: int = 0
    max_in_flight: int = 0
    blocked: int = 0  # times a write waited for credit (back-pressure)
    blocked_ms: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


class ChannelWriter(abc.ABC):
    channel_id: str
    credits: int
    stats: ChannelStats

    @abc.abstractmethod
    def write(self, frame: Frame) -> None: ...

    @abc.abstractmethod
    def in_flight(self) -> int:
        """Frames written but not yet taken by the reader."""

    @abc.abstractmethod
    def close(self) -> None: ...


class ChannelReader(abc.ABC):
    channel_id: str

    @abc.abstractmethod
    def poll(self) -> Optional[Frame]: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class InputGate(abc.ABC):
    """Waits for frames on any of a set of readers."""

    @abc.abstractmethod
    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        """Readers among ``readers`` that may have a frame; empty after ``timeout_s``."""

    def close(self) -> None:
        pass


class _SequenceChecker:
    __slots__ = ("channel_id", "expected")

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.expected = 0

    def check(self, seq: int) -> None:
        if seq != self.expected:
            what = "gap" if seq > self.expected else "replayed frame"
            raise ChannelSequenceError(
                f"channel {self.channel_id}: {what}: expected frame {self.expected}, got {seq}"
            )
        self.expected += 1


# ---------------------------------------------------------------------------------------
# In-process twin: encoded frames in a deque, credits under a condition variable.
# ---------------------------------------------------------------------------------------


class InProcessGate(InputGate):
    """Gate over in-process readers: writers notify it when they add a frame."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._version = 0

    def notify(self) -> None:
        with self.cond:
            self._version += 1
            self.cond.notify_all()

    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        with self.cond:
            ready = [r for r in readers if r.has_frames()]  # type: ignore[attr-defined]
            if ready or timeout_s <= 0:
                return ready
            self.cond.wait(timeout_s)
            return [r for r in readers if r.has_frames()]  # type: ignore[attr-defined]


class InProcessChannel:
    """A channel whose two ends live in one process (threads). Frames go through the same
    codec as the network transports, so the contract tests cover the codec too.

    >>> ch = InProcessChannel("a->b", credits=2)
    >>> ch.writer.write(RecordBatch([1, 2])); ch.reader.poll().records
    [1, 2]
    """

    def __init__(self, channel_id: str, credits: int = 8,
                 gate: Optional[InProcessGate] = None) -> None:
        self.channel_id = channel_id
        self.credits = credits
        self.gate = gate
        self._cond = threading.Condition()
        self._frames: Deque[bytes] = deque()
        self._writer_closed = False
        self._reader_closed = False
        self.writer = _InProcessWriter(self)
        self.reader = _InProcessReader(self)

    def attach_gate(self, gate: InProcessGate) -> None:
        self.gate = gate


class _InProcessWriter(ChannelWriter):
    def __init__(self, ch: InProcessChannel) -> None:
        self._ch = ch
        self.channel_id = ch.channel_id
        self.credits = ch.credits
        self.stats = ChannelStats()
        self._seq = 0
        self.closed = False

    def in_flight(self) -> int:
        return len(self._ch._frames)

    def write(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        data = encode_frame(frame, self._seq)
        self.push_encoded(data, len(frame) if type(frame) is RecordBatch else 0)

    def push_encoded(self, data: bytes, records: int = 0) -> None:
        ch = self._ch
        with ch._cond:
            if len(ch._frames) >= ch.credits:
                self.stats.blocked += 1
                t0 = time.monotonic()
                while len(ch._frames) >= ch.credits and not ch._reader_closed:
                    ch._cond.wait(0.5)
                self.stats.blocked_ms += (time.monotonic() - t0) * 1000
            if ch._reader_closed:
                raise ChannelClosedError(f"channel {self.channel_id}: the reader is gone")
            ch._frames.append(data)
            n = len(ch._frames)
        self._seq += 1
        st = self.stats
        st.frames += 1
        st.bytes += len(data)
        st.records += records
        if n > st.max_in_flight:
            st.max_in_flight = n
        if ch.gate is not None:
            ch.gate.notify()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._ch._cond:
            self._ch._writer_closed = True
        if self._ch.gate is not None:
            self._ch.gate.notify()


class _InProcessReader(ChannelReader):
    def __init__(self, ch: InProcessChannel) -> None:
        self._ch = ch
        self.channel_id = ch.channel_id
        self._seqs = _SequenceChecker(ch.channel_id)
        self._ended = False

    def has_frames(self) -> bool:
        return bool(self._ch._frames) or (self._ch._writer_closed and not self._ended)

    def poll(self) -> Optional[Frame]:
        ch = self._ch
        with ch._cond:
            if not ch._frames:
                if ch._writer_closed and not self._ended:
                    self._ended = True
                    raise ChannelClosedError(
                        f"channel {self.channel_id}: the producer closed the channel "
                        "before end-of-partition")
                return None
            data = ch._frames.popleft()
            ch._cond.notify_all()
        length, kind, seq = HEADER.unpack_from(data, 0)
        self._seqs.check(seq)
        frame = decode_frame(kind, memoryview(data)[HEADER.size:HEADER.size + length])
        if type(frame) is EndOfPartition:
            self._ended = True
        return frame

    def close(self) -> None:
        with self._ch._cond:
            self._ch._reader_closed = True
            self._ch._cond.notify_all()


def make_in_process_channels(
    ids: Sequence[str], credits: int, gate: InProcessGate
) -> Dict[str, InProcessChannel]:
    return {cid: InProcessChannel(cid, credits, gate) for cid in ids}
