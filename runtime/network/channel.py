"""The channel contract. A channel is FIFO from one producer subtask to one consumer subtask.

* ``ChannelWriter.write(frame)`` sends one frame. It blocks while the writer holds
  ``credits`` unacknowledged frames (credit-based back-pressure), so a slow consumer bounds
  its producers' memory. Every frame gets the next sequence number.
* ``ChannelReader.poll()`` returns the next frame or ``None`` when none has arrived yet; it
  never blocks. Taking a frame returns its credit to the writer. A gap or a replayed
  sequence number raises :class:`ChannelSequenceError`; a peer that vanished before
  end-of-partition raises :class:`ChannelClosedError`.
* ``close()`` is idempotent on both ends.
* Buffer debloating (:mod:`~flowray.runtime.network.debloat`): a reader may
  ``announce_batch_size(n)``; a writer whose transport carries it back
  (``carries_batch_limit``) then has ``batch_limit == n`` (records per batch the consumer
  asks for; ``None``: no limit), which :class:`RecordWriter` follows.
* An :class:`InputGate` waits until one of several readers has a frame.
* Unaligned checkpoints (``supports_priority``; docs/internals/unaligned-checkpoints.md):
  a writer in ``overdraft`` never blocks, it queues frames without a credit as *unsent*
  and sends them as credits come back (:meth:`ChannelWriter.is_available`);
  :meth:`ChannelWriter.write_priority` sends a barrier at once, ahead of the unsent frames
  and without a credit. A reader's :meth:`ChannelReader.receive` takes in what has
  arrived without blocking and returns the priority barriers in it, each taken out of
  the stream with the record frames before it (or, when recording, since recording
  started: :meth:`ChannelReader.start_recording`).

Transports: :mod:`~flowray.runtime.network.in_process` (threads; unit tests and the local
executor), :mod:`~flowray.runtime.network.socket_transport` (unix/TCP stream per channel),
:mod:`~flowray.runtime.network.ray_transport` (actor calls) and
:mod:`~flowray.runtime.network.blocking_partition` (files, for BATCH exchanges).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from flowray.runtime.network.elements import (
    Frame,
)

__all__ = [
    "ChannelError",
    "ChannelClosedError",
    "ChannelSequenceError",
    "ChannelStats",
    "ChannelWriter",
    "ChannelReader",
    "InputGate",
]


class ChannelError(RuntimeError):
    """A channel broke: the peer is gone or frames arrived out of order."""


class ChannelClosedError(ChannelError):
    pass


class ChannelSequenceError(ChannelError):
    pass


@dataclass
class ChannelStats:
    """What a writer observed; ``max_in_flight`` never exceeds the credits."""

    frames: int = 0
    bytes: int = 0
    records: int = 0
    max_in_flight: int = 0
    blocked: int = 0  # times a write waited for credit (back-pressure)
    blocked_ms: float = 0.0
    #: ``time.monotonic()`` when the write under way began waiting for credit, else None
    blocked_since: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


class ChannelWriter(abc.ABC):
    channel_id: str
    credits: int
    stats: ChannelStats
    #: records per batch the consumer announced (buffer debloating); None: no limit
    batch_limit: Optional[int] = None
    #: whether the consumer's announcements reach this writer
    carries_batch_limit: bool = False

    #: priority barriers, overdraft and eager reading (unaligned checkpoints)
    supports_priority: bool = False
    #: never block in :meth:`write`: frames without a credit wait as unsent frames
    overdraft: bool = False
    #: called (in the reader's thread) when a credit comes back, where the transport can
    #: tell (in-process); a producer waiting in overdraft sets it to wake itself up
    on_credit: Optional[Callable[[], None]] = None

    @abc.abstractmethod
    def write(self, frame: Frame) -> None: ...

    def write_priority(self, frame: Frame) -> None:
        """Send ``frame`` (a checkpoint barrier) now: ahead of the unsent frames, without
        a credit."""
        raise NotImplementedError(f"{type(self).__name__} has no priority path")

    def is_available(self) -> bool:
        """Send what the credits that came back allow; whether nothing is left unsent
        (never blocks)."""
        return True

    def unsent(self) -> List[Frame]:
        """The frames written but not sent yet (what a priority barrier overtakes)."""
        return []

    @abc.abstractmethod
    def in_flight(self) -> int:
        """Frames written but not yet taken by the reader."""

    def await_taken(self, timeout_s: float) -> None:
        """After end-of-partition: block until the reader has taken every frame (at most
        ``timeout_s``), where closing earlier could lose frames the reader has not read.
        Nothing to wait for by default."""

    @abc.abstractmethod
    def close(self) -> None: ...


class ChannelReader(abc.ABC):
    channel_id: str
    #: bytes of the frames read so far (a transport that does not count them keeps 0)
    bytes_read: int = 0

    @abc.abstractmethod
    def poll(self) -> Optional[Frame]: ...

    def announce_batch_size(self, records: int) -> None:
        """Ask the producer for batches of at most ``records`` records (buffer
        debloating); a transport with no way back ignores it."""

    def receive(self) -> List[Tuple[Any, List[bytes]]]:
        """Take in what has arrived without blocking; every priority barrier in it, in
        order, taken out of the stream, each with the encoded record frames before it:
        since :meth:`start_recording` if recording (which then stops), else those not
        polled yet. Nothing on a transport without a priority path."""
        return []

    def priority_pending(self) -> bool:
        """A priority barrier was found in what arrived and waits for :meth:`receive`
        (polling returns nothing until then). Cheap: no I/O."""
        return False

    def start_recording(self) -> None:
        """Keep the encoded record frames not polled yet and those that arrive from now on
        until the next priority barrier (its entry in :meth:`receive` returns them) or
        :meth:`stop_recording`."""
        raise NotImplementedError(f"{type(self).__name__} has no priority path")

    def stop_recording(self) -> List[bytes]:
        """Stop recording; what was recorded (empty if it was not)."""
        return []

    @abc.abstractmethod
    def close(self) -> None: ...


class InputGate(abc.ABC):
    """Waits for frames on any of a set of readers."""

    @abc.abstractmethod
    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        """Readers among ``readers`` that may have a frame; empty after ``timeout_s``."""

    def wakeup(self) -> None:
        """Make a ``wait`` in progress, or the next one, return early (possibly empty).
        Any thread may call it (the task's mailbox does, so an action submitted from
        another thread runs without waiting for input)."""

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
