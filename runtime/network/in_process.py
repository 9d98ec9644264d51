"""The in-process twin of a channel: :class:`InProcessChannel` connects a writer and a reader
in one process (threads), with the same credits, sequence numbers and close semantics as
the socket transport. Used by unit tests and the local executor.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

from flowray.runtime.network.channel import (
    ChannelClosedError,
    ChannelReader,
    ChannelStats,
    ChannelWriter,
    InputGate,
    _SequenceChecker,
)
from flowray.runtime.network.elements import (
    CheckpointBarrier,
    EndOfPartition,
    Frame,
    RecordBatch,
)
from flowray.runtime.network.frame_codec import (
    HEADER,
    PRIORITY_BARRIER,
    RECORD_KINDS,
    decode_frame,
    encode_frame,
    encode_priority_barrier,
)

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
        self._credited = 0   # frames in _frames that took a credit (not priority ones)
        self._writer_closed = False
        self._reader_closed = False
        self.writer = _InProcessWriter(self)
        self.reader = _InProcessReader(self)

    def attach_gate(self, gate: InProcessGate) -> None:
        self.gate = gate


class _InProcessWriter(ChannelWriter):
    carries_batch_limit = True  # the reader sets batch_limit directly
    supports_priority = True

    def __init__(self, ch: InProcessChannel) -> None:
        self._ch = ch
        self.channel_id = ch.channel_id
        self.credits = ch.credits
        self.stats = ChannelStats()
        self._seq = 0
        self.closed = False
        self.overdraft = False
        self._unsent: Deque[Frame] = deque()

    def in_flight(self) -> int:
        return self._ch._credited

    def write(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if self._unsent or (self.overdraft and self._ch._credited >= self._ch.credits):
            if self.overdraft:
                self._unsent.append(frame)
                self.is_available()
                return
            self._send_unsent_blocking()
        data = encode_frame(frame, self._seq)
        self.push_encoded(data, len(frame) if type(frame) is RecordBatch else 0)

    def write_priority(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if type(frame) is not CheckpointBarrier:
            raise TypeError(f"only a checkpoint barrier goes ahead of the queue, not {frame!r}")
        self.push_encoded(encode_priority_barrier(frame, self._seq), credited=False)

    def is_available(self) -> bool:
        ch = self._ch
        while self._unsent and ch._credited < ch.credits and not ch._reader_closed:
            frame = self._unsent.popleft()
            self.push_encoded(encode_frame(frame, self._seq),
                              len(frame) if type(frame) is RecordBatch else 0)
        return not self._unsent

    def _send_unsent_blocking(self) -> None:
        while self._unsent:
            frame = self._unsent.popleft()
            self.push_encoded(encode_frame(frame, self._seq),
                              len(frame) if type(frame) is RecordBatch else 0)

    def unsent(self) -> List[Frame]:
        return list(self._unsent)

    def await_taken(self, timeout_s: float) -> None:
        if self._unsent and not self.closed:
            self._send_unsent_blocking()

    def push_encoded(self, data: bytes, records: int = 0, credited: bool = True) -> None:
        ch = self._ch
        with ch._cond:
            if credited and ch._credited >= ch.credits:
                self.stats.blocked += 1
                t0 = time.monotonic()
                self.stats.blocked_since = t0
                while ch._credited >= ch.credits and not ch._reader_closed:
                    ch._cond.wait(0.5)
                self.stats.blocked_ms += (time.monotonic() - t0) * 1000
                self.stats.blocked_since = None
            if ch._reader_closed:
                raise ChannelClosedError(f"channel {self.channel_id}: the reader is gone")
            ch._frames.append(data)
            if credited:
                ch._credited += 1
            n = ch._credited
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
        # unaligned checkpoints (as the socket reader): the frames at the left of the
        # queue already looked at, taken-out sequence numbers, the recording
        self.eager = False
        self._scanned = 0
        self._excised: Set[int] = set()
        self._recording: Optional[List[bytes]] = None
        self._found: List[Tuple[Any, List[bytes]]] = []

    def has_frames(self) -> bool:
        return bool(self._ch._frames) or (self._ch._writer_closed and not self._ended)

    def poll(self) -> Optional[Frame]:
        ch = self._ch
        with ch._cond:
            if (self.eager or self._recording is not None) and ch._frames \
                    and self._scanned == 0:
                self._scan_locked()   # look at each frame before it is polled
            if self._found:   # a priority barrier goes first: receive() hands it over
                return None
            if not ch._frames:
                if ch._writer_closed and not self._ended:
                    self._ended = True
                    raise ChannelClosedError(
                        f"channel {self.channel_id}: the producer closed the channel "
                        "before end-of-partition"
                    )
                return None
            data = ch._frames.popleft()
            if self._scanned:
                self._scanned -= 1
            length, kind, seq = HEADER.unpack_from(data, 0)
            if kind != PRIORITY_BARRIER:
                ch._credited -= 1
            ch._cond.notify_all()
        on_credit = ch.writer.on_credit
        if on_credit is not None and kind != PRIORITY_BARRIER:
            on_credit()   # a producer in overdraft waits for it
        seqs = self._seqs
        while seqs.expected in self._excised:
            self._excised.discard(seqs.expected)
            seqs.expected += 1
        self._seqs.check(seq)
        frame = decode_frame(kind, memoryview(data)[HEADER.size : HEADER.size + length])
        if type(frame) is EndOfPartition:
            self._ended = True
        return frame

    def announce_batch_size(self, records: int) -> None:
        self._ch.writer.batch_limit = max(1, int(records))

    # -- unaligned checkpoints ---------------------------------------------------------
    def receive(self) -> List[Tuple[Any, List[bytes]]]:
        with self._ch._cond:
            if not self._found:
                self._scan_locked()
            found, self._found = self._found, []
            if found:
                self._ch._cond.notify_all()
        return found

    def priority_pending(self) -> bool:
        return bool(self._found)

    def start_recording(self) -> None:
        with self._ch._cond:
            frames = list(self._ch._frames)[:self._scanned]
            self._recording = [d for d in frames if HEADER.unpack_from(d, 0)[1] in RECORD_KINDS]

    def stop_recording(self) -> List[bytes]:
        recorded, self._recording = self._recording, None
        return recorded or []

    def _scan_locked(self) -> None:
        """As the socket reader's scan: record while recording, stop at (and take out)
        the next priority barrier until receive() hands it over."""
        frames = self._ch._frames
        i = self._scanned
        while not self._found and i < len(frames):
            data = frames[i]
            _, kind, seq = HEADER.unpack_from(data, 0)
            if kind == PRIORITY_BARRIER:
                barrier = decode_frame(kind, memoryview(data)[HEADER.size:])
                if self._recording is not None:
                    before, self._recording = self._recording, None
                else:
                    before = [d for d in list(frames)[:i]
                              if HEADER.unpack_from(d, 0)[1] in RECORD_KINDS]
                del frames[i]
                self._excised.add(seq)
                self._found.append((barrier, before))
                break
            if self._recording is not None and kind in RECORD_KINDS:
                self._recording.append(data)
            i += 1
        self._scanned = i

    def close(self) -> None:
        with self._ch._cond:
            self._ch._reader_closed = True
            self._ch._cond.notify_all()


def make_in_process_channels(
    ids: Sequence[str], credits: int, gate: InProcessGate
) -> Dict[str, InProcessChannel]:
    return {cid: InProcessChannel(cid, credits, gate) for cid in ids}
