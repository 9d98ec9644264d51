"""The in-process twin of a channel: :class:`InProcessChannel` connects a writer and a reader
in one process (threads), with the same credits, sequence numbers and close semantics as
the socket transport. Used by unit tests and the local executor.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Deque, Dict, List, Optional, Sequence

from flowray.runtime.network.channel import (
    ChannelClosedError,
    ChannelReader,
    ChannelStats,
    ChannelWriter,
    InputGate,
    _SequenceChecker,
)
from flowray.runtime.network.elements import (
    EndOfPartition,
    Frame,
    RecordBatch,
)
from flowray.runtime.network.frame_codec import HEADER, decode_frame, encode_frame

__all__ = ["InProcessGate", "InProcessChannel"]


# ---------------------------------------------------------------------------------------
# In-process twin: encoded frames in a deque, credits under a condition variable.
# ---------------------------------------------------------------------------------------


class InProcessGate(InputGate):
    """Gate over in-process readers: writers notify it when they add a frame."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._version = 0
        self._woken = False

    def notify(self) -> None:
        with self.cond:
            self._version += 1
            self.cond.notify_all()

    def wakeup(self) -> None:
        with self.cond:
            self._woken = True  # kept until a wait consumes it: a wakeup is never lost
            self.cond.notify_all()

    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        with self.cond:
            ready = [r for r in readers if r.has_frames()]  # type: ignore[attr-defined]
            if ready or timeout_s <= 0 or self._woken:
                self._woken = False
                return ready
            self.cond.wait(timeout_s)
            self._woken = False
            return [r for r in readers if r.has_frames()]  # type: ignore[attr-defined]


class InProcessChannel:
    """A channel whose two ends live in one process (threads). Frames go through the same
    codec as the network transports, so the contract tests cover the codec too.

    >>> ch = InProcessChannel("a->b", credits=2)
    >>> ch.writer.write(RecordBatch([1, 2])); ch.reader.poll().records
    [1, 2]
    """

    def __init__(
        self, channel_id: str, credits: int = 8, gate: Optional[InProcessGate] = None
    ) -> None:
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
    carries_batch_limit = True  # the reader sets batch_limit directly

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
                self.stats.blocked_since = t0
                while len(ch._frames) >= ch.credits and not ch._reader_closed:
                    ch._cond.wait(0.5)
                self.stats.blocked_ms += (time.monotonic() - t0) * 1000
                self.stats.blocked_since = None
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
                        "before end-of-partition"
                    )
                return None
            data = ch._frames.popleft()
            ch._cond.notify_all()
        length, kind, seq = HEADER.unpack_from(data, 0)
        self._seqs.check(seq)
        frame = decode_frame(kind, memoryview(data)[HEADER.size : HEADER.size + length])
        if type(frame) is EndOfPartition:
            self._ended = True
        return frame

    def announce_batch_size(self, records: int) -> None:
        self._ch.writer.batch_limit = max(1, int(records))

    def close(self) -> None:
        with self._ch._cond:
            self._ch._reader_closed = True
            self._ch._cond.notify_all()


def make_in_process_channels(
    ids: Sequence[str], credits: int, gate: InProcessGate
) -> Dict[str, InProcessChannel]:
    return {cid: InProcessChannel(cid, credits, gate) for cid in ids}
