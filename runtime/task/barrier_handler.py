"""Checkpoint barrier handling for the inputs of one task (pure: no Ray, no threads).

A task reads several input channels; checkpoint barriers, cancellation markers and
end-of-partition arrive in band, FIFO per channel.  The task loop hands each such event to
a :class:`BarrierHandler` and acts on the returned actions, in order:

* :class:`TriggerCheckpoint` -- forward the barrier downstream and take the snapshot now;
* :class:`AbortCheckpoint` -- decline the checkpoint (and forward a cancellation marker).

While :meth:`BarrierHandler.is_blocked` is true for a channel the task must not read it.

Two handlers, chosen by :func:`create_barrier_handler`:

* :class:`AlignedBarrierHandler` (``EXACTLY_ONCE``, Flink's ``SingleCheckpointBarrierHandler``
  in aligned mode): a channel that delivered barrier *n* is blocked until every other
  channel has delivered barrier *n* or ended; then the checkpoint triggers and all unblock.
* :class:`TrackingBarrierHandler` (``AT_LEAST_ONCE``, Flink's ``CheckpointBarrierTracker``):
  never blocks; triggers when the last channel's barrier arrives.

An ended channel (end-of-partition) counts as aligned for every checkpoint from then on.

>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.network.elements import CheckpointBarrier
>>> clock = ManualClock()
>>> h = create_barrier_handler("EXACTLY_ONCE", ["a", "b"], clock)
>>> h.on_barrier("a", CheckpointBarrier(1, 1000))
[]
>>> sorted(h.blocked_channels), h.pending_checkpoint
(['a'], 1)
>>> clock.advance(5)
>>> h.on_barrier("b", CheckpointBarrier(1, 1000))
[TriggerCheckpoint(barrier=CheckpointBarrier(checkpoint_id=1, ...), alignment_ms=5.0, unaligned=False, ...)]
>>> h.is_blocked("a"), h.pending_checkpoint, h.latest_checkpoint_id
(False, None, 1)
"""

from __future__ import annotations

import abc
import enum
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple, Type, Union

from flowray.common.clock import Clock
from flowray.runtime.network.elements import CheckpointBarrier

__all__ = [
    "AbortReason",
    "TriggerCheckpoint",
    "AbortCheckpoint",
    "ChannelStateComplete",
    "Action",
    "BarrierHandler",
    "AlignedBarrierHandler",
    "TrackingBarrierHandler",
    "UnalignedBarrierHandler",
    "create_barrier_handler",
]


class AbortReason(enum.Enum):
    """Why a task gives up a checkpoint; the value is short human text."""

    SUBSUMED_BY_NEWER_BARRIER = "subsumed by a newer checkpoint before alignment completed"
    CANCELLATION_MARKER = "cancellation marker received from an input"
    TOO_MANY_PENDING_CHECKPOINTS = "too many incomplete checkpoints tracked at once"


@dataclass(frozen=True)
class TriggerCheckpoint:
    """Take the snapshot for ``barrier`` now (after forwarding the barrier downstream).

    ``alignment_ms``: time from the first barrier (or direct trigger) of this checkpoint at
    this task to its completion, by the handler's clock; 0 when a single event completed it.

    ``unaligned``: an unaligned checkpoint. The barrier goes downstream ahead of the
    output's queued frames (which are kept as output channel state), and ``recording``
    names the input channels whose barrier has not come yet. What arrives on them until
    it comes is input channel state; :class:`ChannelStateComplete` says when all came.
    """

    barrier: CheckpointBarrier
    alignment_ms: float
    unaligned: bool = False
    recording: FrozenSet[str] = frozenset()


@dataclass(frozen=True)
class ChannelStateComplete:
    """Every input's barrier of unaligned checkpoint ``checkpoint_id`` has come (or the
    input ended): its input channel state is whole."""

    checkpoint_id: int


@dataclass(frozen=True)
class AbortCheckpoint:
    """Decline checkpoint ``checkpoint_id`` at this task."""

    checkpoint_id: int
    reason: AbortReason


Action = Union[TriggerCheckpoint, AbortCheckpoint, ChannelStateComplete]


class BarrierHandler(abc.ABC):
    """The barrier state of one task's input channels.

    Contract, for both handlers:

    * every method raises ``ValueError`` for a channel id not given at construction, and
      the ``on_*`` event methods raise ``ValueError`` for an event on a channel that has
      already ended (end-of-partition is the last frame of a channel);
    * each checkpoint id is triggered at most once, and never after it was aborted;
    * ``latest_checkpoint_id`` never decreases.
    """

    def __init__(self, channel_ids: Iterable[str], clock: Clock) -> None:
        channels: Tuple[str, ...] = tuple(channel_ids)
        if not channels:
            raise ValueError("a barrier handler needs at least one input channel")
        if len(set(channels)) != len(channels):
            raise ValueError(f"duplicate input channel ids: {list(channels)!r}")
        self._channels = channels
        self._known: FrozenSet[str] = frozenset(channels)
        self._open: Set[str] = set(channels)  # not ended yet
        self._clock = clock
        self._latest_id = -1

    # -- events -----------------------------------------------------------------------------
    @abc.abstractmethod
    def on_barrier(self, channel_id: str, barrier: CheckpointBarrier) -> List[Action]:
        """Barrier ``barrier`` was read from ``channel_id``."""

    @abc.abstractmethod
    def on_cancel_marker(self, channel_id: str, checkpoint_id: int) -> List[Action]:
        """A cancellation marker for ``checkpoint_id`` was read from ``channel_id``."""

    @abc.abstractmethod
    def on_end_of_partition(self, channel_id: str) -> List[Action]:
        """``channel_id`` ended: it counts as aligned for every checkpoint from now on."""

    @abc.abstractmethod
    def on_direct_trigger(self, checkpoint_id: int, timestamp: int,
                          is_savepoint: bool = False,
                          location: Optional[str] = None) -> List[Action]:
        """The job master triggered this task directly (all its inputs' producers have
        finished, so every channel not ended yet will end).  Acts as if barrier
        ``checkpoint_id`` had arrived on every ended channel.  Returns ``[]`` when this id
        (or a newer one) was already completed, aborted or superseded here."""

    # -- queries ----------------------------------------------------------------------------
    @abc.abstractmethod
    def is_blocked(self, channel_id: str) -> bool:
        """True while the task must not read ``channel_id``."""

    @property
    @abc.abstractmethod
    def blocked_channels(self) -> FrozenSet[str]:
        """The channels the task must not read now."""

    @property
    @abc.abstractmethod
    def pending_checkpoint(self) -> Optional[int]:
        """The checkpoint being aligned (or tracked), if any."""

    @property
    def latest_checkpoint_id(self) -> int:
        """The highest checkpoint id seen (by barrier, cancellation or direct trigger); -1
        initially."""
        return self._latest_id

    @property
    def channel_ids(self) -> Tuple[str, ...]:
        """All input channels, in construction order."""
        return self._channels

    @property
    def open_channels(self) -> FrozenSet[str]:
        """The channels that have not ended."""
        return frozenset(self._open)

    # -- helpers ----------------------------------------------------------------------------
    def _check_known(self, channel_id: str) -> None:
        if channel_id not in self._known:
            raise ValueError(f"unknown input channel {channel_id!r}")

    def _check_open(self, channel_id: str, what: str) -> None:
        self._check_known(channel_id)
        if channel_id not in self._open:
            raise ValueError(f"{what} on input channel {channel_id!r} after its end of partition")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(pending={self.pending_checkpoint}, "
                f"latest={self._latest_id}, open={sorted(self._open)}, "
                f"blocked={sorted(self.blocked_channels)})")


class AlignedBarrierHandler(BarrierHandler):
    """``EXACTLY_ONCE``: align barriers by blocking each channel that delivered the barrier of
    the current checkpoint until all open channels have (Flink's aligned
    ``SingleCheckpointBarrierHandler``).  At most one checkpoint is aligned at a time; a
    newer barrier aborts an older alignment (``SUBSUMED_BY_NEWER_BARRIER``)."""

    def __init__(self, channel_ids: Iterable[str], clock: Clock) -> None:
        super().__init__(channel_ids, clock)
        self._pending = False                       # aligning self._latest_id
        self._barrier: Optional[CheckpointBarrier] = None
        self._received: Set[str] = set()            # delivered the pending barrier: blocked
        self._start_ms = 0.0

    # -- events -----------------------------------------------------------------------------
    def on_barrier(self, channel_id: str, barrier: CheckpointBarrier) -> List[Action]:
        self._check_open(channel_id, f"barrier {barrier.checkpoint_id}")
        n = barrier.checkpoint_id
        if self._is_obsolete(n):
            return []
        actions: List[Action] = []
        if n > self._latest_id:
            self._start(barrier, actions)
        self._received.add(channel_id)
        self._maybe_complete(actions)
        return actions

    def on_cancel_marker(self, channel_id: str, checkpoint_id: int) -> List[Action]:
        self._check_open(channel_id, f"cancellation marker {checkpoint_id}")
        n = checkpoint_id
        if n < self._latest_id or (n == self._latest_id and not self._pending):
            return []  # trailing marker of a checkpoint already finished here
        actions: List[Action] = []
        if self._pending and n > self._latest_id:
            # Flink drops the older alignment silently; we decline it explicitly
            actions.append(AbortCheckpoint(self._latest_id, AbortReason.SUBSUMED_BY_NEWER_BARRIER))
        # n is the pending checkpoint, or newer than anything seen: remembered as finished, so
        # its barriers from other channels are ignored
        actions.append(AbortCheckpoint(n, AbortReason.CANCELLATION_MARKER))
        self._latest_id = n
        self._reset()
        return actions

    def on_end_of_partition(self, channel_id: str) -> List[Action]:
        self._check_open(channel_id, "end of partition")
        self._open.discard(channel_id)
        self._received.discard(channel_id)
        actions: List[Action] = []
        self._maybe_complete(actions)
        return actions

    def on_direct_trigger(self, checkpoint_id: int, timestamp: int,
                          is_savepoint: bool = False,
                          location: Optional[str] = None) -> List[Action]:
        n = checkpoint_id
        if self._is_obsolete(n):
            return []
        actions: List[Action] = []
        if n > self._latest_id:
            self._start(CheckpointBarrier(n, timestamp, is_savepoint, location), actions)
        self._maybe_complete(actions)
        return actions

    # -- queries ----------------------------------------------------------------------------
    def is_blocked(self, channel_id: str) -> bool:
        if channel_id in self._received:
            return True
        self._check_known(channel_id)
        return False

    @property
    def blocked_channels(self) -> FrozenSet[str]:
        return frozenset(self._received)

    @property
    def pending_checkpoint(self) -> Optional[int]:
        return self._latest_id if self._pending else None

    # -- internals --------------------------------------------------------------------------
    def _is_obsolete(self, n: int) -> bool:
        """Older than the latest seen, or the latest seen but already finished here."""
        return n < self._latest_id or (n == self._latest_id and not self._pending)

    def _start(self, barrier: CheckpointBarrier, actions: List[Action]) -> None:
        if self._pending:
            actions.append(AbortCheckpoint(self._latest_id, AbortReason.SUBSUMED_BY_NEWER_BARRIER))
            self._reset()
        self._latest_id = barrier.checkpoint_id
        self._pending = True
        self._barrier = barrier
        self._received = set()
        self._start_ms = self._clock.monotonic_ms()

    def _maybe_complete(self, actions: List[Action]) -> None:
        if not self._pending or not self._open <= self._received:
            return
        barrier = self._barrier
        assert barrier is not None
        alignment_ms = max(0.0, float(self._clock.monotonic_ms() - self._start_ms))
        self._reset()
        actions.append(TriggerCheckpoint(barrier, alignment_ms))

    def _reset(self) -> None:
        self._pending = False
        self._barrier = None
        self._received = set()


class _Tracked:
    """One checkpoint id tracked by :class:`TrackingBarrierHandler`."""

    __slots__ = ("barrier", "seen", "aborted", "start_ms")

    def __init__(self, barrier: Optional[CheckpointBarrier], start_ms: float) -> None:
        self.barrier = barrier        # None for an id first seen through a cancellation marker
        self.seen: Set[str] = set()   # channels that delivered its barrier or cancel marker
        self.aborted = barrier is None
        self.start_ms = start_ms


class TrackingBarrierHandler(BarrierHandler):
    """``AT_LEAST_ONCE``: never blocks; counts barriers per checkpoint id (Flink's
    ``CheckpointBarrierTracker``).

    When an id has been delivered by every open channel it triggers, and every older id
    still tracked is dropped (aborted with ``SUBSUMED_BY_NEWER_BARRIER`` unless already
    aborted -- Flink drops them silently).  Barriers for ids not tracked and not newer than
    the latest seen are ignored.  A cancellation marker aborts its id (once) and every older
    tracked id.  ``alignment_ms`` is the time from the first to the last barrier of the id
    (records keep flowing meanwhile, so it measures barrier skew, not blocking).
    ``pending_checkpoint`` is the newest tracked id that is not aborted.
    """

    MAX_CHECKPOINTS_TO_TRACK = 50

    def __init__(self, channel_ids: Iterable[str], clock: Clock) -> None:
        super().__init__(channel_ids, clock)
        self._tracked: "OrderedDict[int, _Tracked]" = OrderedDict()  # ascending ids

    # -- events -----------------------------------------------------------------------------
    def on_barrier(self, channel_id: str, barrier: CheckpointBarrier) -> List[Action]:
        self._check_open(channel_id, f"barrier {barrier.checkpoint_id}")
        n = barrier.checkpoint_id
        actions: List[Action] = []
        entry = self._tracked.get(n)
        if entry is None:
            if n <= self._latest_id:
                return []
            entry = self._track(n, barrier, actions)
        entry.seen.add(channel_id)
        self._sweep(actions)
        return actions

    def on_cancel_marker(self, channel_id: str, checkpoint_id: int) -> List[Action]:
        self._check_open(channel_id, f"cancellation marker {checkpoint_id}")
        n = checkpoint_id
        actions: List[Action] = []
        for older in [i for i in self._tracked if i < n]:
            e = self._tracked.pop(older)
            if not e.aborted:
                actions.append(AbortCheckpoint(older, AbortReason.SUBSUMED_BY_NEWER_BARRIER))
        entry = self._tracked.get(n)
        if entry is None:
            if n <= self._latest_id:
                return actions  # trailing marker of a checkpoint already finished here
            entry = self._track(n, None, actions)
            actions.append(AbortCheckpoint(n, AbortReason.CANCELLATION_MARKER))
        elif not entry.aborted:
            entry.aborted = True
            actions.append(AbortCheckpoint(n, AbortReason.CANCELLATION_MARKER))
        entry.seen.add(channel_id)  # still counted, to forget the id once all have arrived
        self._sweep(actions)
        return actions

    def on_end_of_partition(self, channel_id: str) -> List[Action]:
        self._check_open(channel_id, "end of partition")
        self._open.discard(channel_id)
        actions: List[Action] = []
        self._sweep(actions)
        return actions

    def on_direct_trigger(self, checkpoint_id: int, timestamp: int,
                          is_savepoint: bool = False,
                          location: Optional[str] = None) -> List[Action]:
        n = checkpoint_id
        actions: List[Action] = []
        entry = self._tracked.get(n)
        if entry is None:
            if n <= self._latest_id:
                return []
            self._track(n, CheckpointBarrier(n, timestamp, is_savepoint, location), actions)
        elif entry.aborted:
            return []
        self._sweep(actions)
        return actions

    # -- queries ----------------------------------------------------------------------------
    def is_blocked(self, channel_id: str) -> bool:
        self._check_known(channel_id)
        return False

    @property
    def blocked_channels(self) -> FrozenSet[str]:
        return frozenset()

    @property
    def pending_checkpoint(self) -> Optional[int]:
        for n in reversed(self._tracked):
            if not self._tracked[n].aborted:
                return n
        return None

    @property
    def tracked_checkpoints(self) -> List[int]:
        """The ids tracked now (incomplete, including aborted ones awaiting their markers)."""
        return list(self._tracked)

    # -- internals --------------------------------------------------------------------------
    def _track(self, n: int, barrier: Optional[CheckpointBarrier],
               actions: List[Action]) -> _Tracked:
        """Start tracking ``n`` (newer than everything seen)."""
        entry = _Tracked(barrier, self._clock.monotonic_ms())
        self._latest_id = n
        self._tracked[n] = entry
        while len(self._tracked) > self.MAX_CHECKPOINTS_TO_TRACK:
            oldest, e = self._tracked.popitem(last=False)
            if not e.aborted:
                actions.append(AbortCheckpoint(oldest, AbortReason.TOO_MANY_PENDING_CHECKPOINTS))
        return entry

    def _sweep(self, actions: List[Action]) -> None:
        """Trigger the newest complete id (if any) and drop it and everything older."""
        complete: Optional[int] = None
        for n in reversed(self._tracked):
            if self._open <= self._tracked[n].seen:
                complete = n
                break
        if complete is None:
            return
        while self._tracked:
            n, e = self._tracked.popitem(last=False)
            if n < complete:
                if not e.aborted:
                    actions.append(AbortCheckpoint(n, AbortReason.SUBSUMED_BY_NEWER_BARRIER))
                continue
            if not e.aborted:
                assert e.barrier is not None
                alignment_ms = max(0.0, float(self._clock.monotonic_ms() - e.start_ms))
                actions.append(TriggerCheckpoint(e.barrier, alignment_ms))
            break


class UnalignedBarrierHandler(AlignedBarrierHandler):
    """``EXACTLY_ONCE`` with unaligned checkpoints (Flink's ``SingleCheckpointBarrierHandler``
    in unaligned mode; docs/internals/unaligned-checkpoints.md).

    The first barrier of a checkpoint triggers it at once, unaligned: nothing is blocked,
    and the channels whose barrier has not come are recorded until it does (then
    :class:`ChannelStateComplete`). ``aligned_timeout_ms`` > 0 starts each checkpoint
    aligned and switches it to unaligned once its barrier is that old (now minus the
    barrier's trigger timestamp, checked at each event and at :meth:`on_time`): the
    channels that delivered the barrier already are not recorded. Savepoints are always
    aligned. A newer barrier, or a cancellation marker, aborts the checkpoint under way,
    aligning or recording.

    >>> from flowray.common.clock import ManualClock
    >>> h = UnalignedBarrierHandler(["a", "b"], ManualClock())
    >>> h.on_barrier("a", CheckpointBarrier(1, 0))
    [TriggerCheckpoint(barrier=..., alignment_ms=0.0, unaligned=True, recording=frozenset({'b'}))]
    >>> h.is_blocked("a"), h.recording_channels
    (False, frozenset({'b'}))
    >>> h.on_barrier("b", CheckpointBarrier(1, 0))
    [ChannelStateComplete(checkpoint_id=1)]
    """

    def __init__(self, channel_ids: Iterable[str], clock: Clock,
                 aligned_timeout_ms: int = 0) -> None:
        super().__init__(channel_ids, clock)
        if aligned_timeout_ms < 0:
            raise ValueError(f"the aligned checkpoint timeout must not be negative, got "
                             f"{aligned_timeout_ms}")
        self.aligned_timeout_ms = aligned_timeout_ms
        self._recording: Set[str] = set()   # owe the barrier of the unaligned _latest_id
        self._unaligned = False             # _latest_id was triggered unaligned

    # -- events -----------------------------------------------------------------------
    def on_barrier(self, channel_id: str, barrier: CheckpointBarrier) -> List[Action]:
        self._check_open(channel_id, f"barrier {barrier.checkpoint_id}")
        n = barrier.checkpoint_id
        if self._unaligned and n == self._latest_id:
            return self._arrived(channel_id)
        if n <= self._latest_id and not self._pending:
            return []
        actions = self._end_recording(AbortReason.SUBSUMED_BY_NEWER_BARRIER) \
            if n > self._latest_id else []
        actions += super().on_barrier(channel_id, barrier)
        self._maybe_switch(actions)
        return actions

    def on_cancel_marker(self, channel_id: str, checkpoint_id: int) -> List[Action]:
        if self._unaligned and checkpoint_id >= self._latest_id:
            self._check_open(channel_id, f"cancellation marker {checkpoint_id}")
            actions = self._end_recording(
                AbortReason.CANCELLATION_MARKER if checkpoint_id == self._latest_id
                else AbortReason.SUBSUMED_BY_NEWER_BARRIER)
            if checkpoint_id > self._latest_id:
                actions.append(AbortCheckpoint(checkpoint_id, AbortReason.CANCELLATION_MARKER))
                self._latest_id = checkpoint_id
            return actions
        return super().on_cancel_marker(channel_id, checkpoint_id)

    def on_end_of_partition(self, channel_id: str) -> List[Action]:
        if self._unaligned:
            self._check_open(channel_id, "end of partition")
            self._open.discard(channel_id)
            return self._arrived(channel_id)
        actions = super().on_end_of_partition(channel_id)
        self._maybe_switch(actions)
        return actions

    def on_direct_trigger(self, checkpoint_id: int, timestamp: int,
                          is_savepoint: bool = False,
                          location: Optional[str] = None) -> List[Action]:
        n = checkpoint_id
        if n <= self._latest_id and not self._pending:
            return []
        actions = self._end_recording(AbortReason.SUBSUMED_BY_NEWER_BARRIER) \
            if n > self._latest_id else []
        actions += super().on_direct_trigger(n, timestamp, is_savepoint, location)
        self._maybe_switch(actions)
        return actions

    def on_time(self) -> List[Action]:
        """Switch an alignment that has taken longer than the timeout to unaligned."""
        actions: List[Action] = []
        self._maybe_switch(actions)
        return actions

    # -- queries ------------------------------------------------------------------------
    @property
    def pending_checkpoint(self) -> Optional[int]:
        return self._latest_id if (self._pending or self._unaligned) else None

    @property
    def recording_channels(self) -> FrozenSet[str]:
        """The input channels whose barrier of the unaligned checkpoint has not come."""
        return frozenset(self._recording)

    # -- internals ----------------------------------------------------------------------
    def _maybe_complete(self, actions: List[Action]) -> None:
        self._maybe_switch(actions)   # unaligned when due, even if every input is aligned
        super()._maybe_complete(actions)

    def _maybe_switch(self, actions: List[Action]) -> None:
        """An aligned (non-savepoint) checkpoint becomes unaligned: at once without a
        timeout, else once its barrier is older than the timeout."""
        barrier = self._barrier
        if not self._pending or barrier is None or barrier.is_savepoint:
            return
        if self.aligned_timeout_ms and \
                self._clock.now_ms() - barrier.timestamp < self.aligned_timeout_ms:
            return
        alignment_ms = max(0.0, float(self._clock.monotonic_ms() - self._start_ms))
        waiting = self._open - self._received
        self._reset()
        self._unaligned = True
        self._recording = set(waiting)
        actions.append(TriggerCheckpoint(barrier, alignment_ms, unaligned=True,
                                         recording=frozenset(waiting)))
        if not waiting:
            actions.extend(self._arrived(None))

    def _arrived(self, channel_id: Optional[str]) -> List[Action]:
        self._recording.discard(channel_id)  # type: ignore[arg-type]
        if self._recording or not self._unaligned:
            return []
        self._unaligned = False
        return [ChannelStateComplete(self._latest_id)]

    def _end_recording(self, reason: AbortReason) -> List[Action]:
        """Abort the unaligned checkpoint still recording, if any."""
        if not self._unaligned:
            return []
        self._unaligned = False
        self._recording = set()
        return [AbortCheckpoint(self._latest_id, reason)]


_MODES: Dict[str, Type[BarrierHandler]] = {
    "EXACTLY_ONCE": AlignedBarrierHandler,
    "AT_LEAST_ONCE": TrackingBarrierHandler,
}


def create_barrier_handler(mode: str, channel_ids: Iterable[str], clock: Clock,
                           unaligned: bool = False,
                           aligned_timeout_ms: int = 0) -> BarrierHandler:
    """The handler for checkpointing ``mode``: ``"EXACTLY_ONCE"`` (aligned, or unaligned
    with ``unaligned``) or ``"AT_LEAST_ONCE"`` (tracking); case and ``-``/``_`` are not
    significant."""
    key = str(mode).strip().upper().replace("-", "_")
    cls = _MODES.get(key)
    if cls is None:
        raise ValueError(f"unknown checkpointing mode {mode!r}; "
                         f"expected one of {sorted(_MODES)}")
    if unaligned and cls is AlignedBarrierHandler:
        return UnalignedBarrierHandler(channel_ids, clock, aligned_timeout_ms)
    return cls(channel_ids, clock)
