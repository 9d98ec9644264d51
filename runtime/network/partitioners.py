"""Partitioners decide which downstream channel gets each record; ``RecordWriter`` batches.

Partitioners are picklable definitions; ``route`` works a whole batch at a time so the
per-record cost stays a few list operations.
"""

from __future__ import annotations

import pickle
import random
from typing import Any, Callable, List, Optional, Sequence, Tuple

from flowray.state.key_groups import KeyGroupAssigner, compute_operator_index_for_key_group
from flowray.runtime.network.channel import ChannelWriter
from flowray.runtime.network.frame_codec import RecordSerializationError
from flowray.runtime.network.elements import Frame, RecordBatch

__all__ = [
    "StreamPartitioner",
    "ForwardPartitioner",
    "RebalancePartitioner",
    "RescalePartitioner",
    "rescale_pairs",
    "ShufflePartitioner",
    "BroadcastPartitioner",
    "GlobalPartitioner",
    "KeyGroupStreamPartitioner",
    "RecordWriter",
]


class StreamPartitioner:
    """Routes batches over ``n`` channels. ``setup`` is called once per producer subtask.

    ``route`` appends each record to ``out[channel]`` (and its key group to
    ``out_kgs[channel]`` for keyed exchanges); when ``timestamps`` is given (the records'
    event times, in order) each record's timestamp goes to ``out_ts[channel]`` alongside.
    """

    name = "?"
    is_pointwise = False  # forward: producer i talks only to consumer i
    is_broadcast = False

    def setup(self, num_channels: int, subtask_index: int) -> None:
        self.n = num_channels

    def route(self, records: List[Any], out: List[List[Any]],
              out_kgs: Optional[List[List[int]]],
              timestamps: Optional[List[Optional[int]]] = None,
              out_ts: Optional[List[List[Optional[int]]]] = None) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class ForwardPartitioner(StreamPartitioner):
    name = "FORWARD"
    is_pointwise = True

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        out[0].extend(records)
        if timestamps is not None:
            out_ts[0].extend(timestamps)


class RebalancePartitioner(StreamPartitioner):
    """Round robin, starting at a random channel per producer (as Flink)."""

    name = "REBALANCE"

    def setup(self, num_channels: int, subtask_index: int) -> None:
        super().setup(num_channels, subtask_index)
        self._next = random.Random(subtask_index).randrange(num_channels)

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        n = self.n
        if n == 1:
            out[0].extend(records)
            if timestamps is not None:
                out_ts[0].extend(timestamps)
            return
        start = self._next
        for i in range(n):
            out[(start + i) % n].extend(records[i::n])
            if timestamps is not None:
                out_ts[(start + i) % n].extend(timestamps[i::n])
        self._next = (start + len(records)) % n


class RescalePartitioner(RebalancePartitioner):
    """Round robin over the few consumers this producer is connected to (Flink's rescale):
    the edge is pointwise with unequal parallelism (:func:`rescale_pairs`), so each
    producer has channels to only its share of the consumers."""

    name = "RESCALE"
    is_rescale = True


def rescale_pairs(producers: int, consumers: int) -> List[Tuple[int, int]]:
    """The (producer, consumer) channels of a rescale edge (Flink's pointwise pattern):
    with fewer consumers each producer feeds one, with more each feeds a contiguous share;
    every consumer has at least one producer.

    >>> rescale_pairs(2, 4)
    [(0, 0), (0, 1), (1, 2), (1, 3)]
    >>> rescale_pairs(4, 2)
    [(0, 0), (1, 0), (2, 1), (3, 1)]
    >>> rescale_pairs(2, 3)
    [(0, 0), (1, 1), (1, 2)]
    """
    if producers >= consumers:
        return [(p, p * consumers // producers) for p in range(producers)]
    return [(p, c) for p in range(producers)
            for c in range(p * consumers // producers, (p + 1) * consumers // producers)]


class ShufflePartitioner(StreamPartitioner):
    name = "SHUFFLE"

    def setup(self, num_channels: int, subtask_index: int) -> None:
        super().setup(num_channels, subtask_index)
        self._rand = random.Random().randrange

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        n, rand = self.n, self._rand
        if timestamps is None:
            for r in records:
                out[rand(n)].append(r)
            return
        for r, t in zip(records, timestamps):
            c = rand(n)
            out[c].append(r)
            out_ts[c].append(t)


class BroadcastPartitioner(StreamPartitioner):
    name = "BROADCAST"
    is_broadcast = True

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        for o in out:
            o.extend(records)
        if timestamps is not None:
            for o in out_ts:
                o.extend(timestamps)


class GlobalPartitioner(StreamPartitioner):
    name = "GLOBAL"

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        out[0].extend(records)
        if timestamps is not None:
            out_ts[0].extend(timestamps)


class KeyGroupStreamPartitioner(StreamPartitioner):
    """``key_by``: record -> key -> key group -> the subtask owning that key group.

    The key group travels with the record so the consumer does not hash it again.
    """

    name = "HASH"

    def __init__(self, key_selector: Callable[[Any], Any], max_parallelism: int) -> None:
        self.key_selector = key_selector
        self.max_parallelism = max_parallelism

    def setup(self, num_channels: int, subtask_index: int) -> None:
        super().setup(num_channels, subtask_index)
        maxp = self.max_parallelism
        self._assign = KeyGroupAssigner(maxp)
        self._channel_of = [compute_operator_index_for_key_group(maxp, num_channels, kg)
                            for kg in range(maxp)]

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        assert out_kgs is not None
        key_of = self.key_selector
        try:
            keys = [key_of(r) for r in records]
            groups = self._assign.assign_batch(keys)
        except Exception as e:
            raise KeySelectorError(self.key_selector, e) from e
        if len(out) == 1:  # one consumer: the batch goes as it is
            out[0].extend(records)
            out_kgs[0].extend(groups)
            if timestamps is not None:
                out_ts[0].extend(timestamps)
            return
        channel_of = self._channel_of
        if timestamps is None:
            for r, kg in zip(records, groups):
                c = channel_of[kg]
                out[c].append(r)
                out_kgs[c].append(kg)
        else:
            for r, kg, t in zip(records, groups, timestamps):
                c = channel_of[kg]
                out[c].append(r)
                out_kgs[c].append(kg)
                out_ts[c].append(t)


class KeySelectorError(Exception):
    """The user's key selector raised or returned an unhashable key."""

    def __init__(self, selector: Any, cause: BaseException) -> None:
        super().__init__(f"key selector {getattr(selector, '__name__', selector)!r} failed: "
                         f"{type(cause).__name__}: {cause}")
        self.cause = cause


class RecordWriter:
    """One output edge of a task: partition, batch per channel, flush at size or timeout.

    A channel's batch is flushed at ``batch_size`` records or at about ``batch_bytes``
    serialized bytes, whichever comes first. Records are Python objects whose size is only
    known once a channel writer encodes them, so each channel keeps a record limit that
    follows the bytes per record its writer measured for the last batch sent
    (``stats.bytes``); before the first batch, the channel's first pending record is
    pickled once to size it, so that a stream of huge records never builds a batch of
    ``batch_size`` of them. The per-record path stays a length check against the limit.

    Timestamps travel beside the records once any batch had them (records without one
    carry ``None``); a stream that never had timestamps pays nothing for them.

    ``buffer_timeout_ms`` (Flink's buffer timeout): the task flushes a batch that waited
    this long (:attr:`pending_since_ms`); ``0`` flushes every channel at the end of each
    :meth:`emit` (every batch an operator emits goes out at once), ``-1`` never by time
    (only when full, and at events: barriers, watermark stalls, end of input).

    Buffer debloating: with ``debloat_initial`` set, each writer that carries its
    consumer's announcements starts with that ``batch_limit`` and a channel's limit is
    the smaller of the bytes-derived one and the writer's ``batch_limit`` (read after every
    write, which is when a transport learns a new one).
    """

    def __init__(self, partitioner: StreamPartitioner, writers: Sequence[ChannelWriter],
                 subtask_index: int, batch_size: int, batch_bytes: int = 1 << 20,
                 debloat_initial: Optional[int] = None, buffer_timeout_ms: int = 100) -> None:
        if buffer_timeout_ms < -1:
            raise ValueError(f"buffer timeout must be -1 (flush only when full) or more, got "
                             f"{buffer_timeout_ms}")
        self.partitioner = partitioner
        self.writers = list(writers)
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.buffer_timeout_ms = buffer_timeout_ms
        if debloat_initial is not None:
            for w in self.writers:
                if getattr(w, "carries_batch_limit", False) and w.batch_limit is None:
                    w.batch_limit = max(1, debloat_initial)
        partitioner.setup(len(self.writers), subtask_index)
        self._keyed = isinstance(partitioner, KeyGroupStreamPartitioner)
        n = len(self.writers)
        self._pending: List[List[Any]] = [[] for _ in range(n)]
        self._pending_kgs: Optional[List[List[int]]] = (
            [[] for _ in range(n)] if self._keyed else None)
        self._pending_ts: Optional[List[List[Optional[int]]]] = None
        #: records per batch on each channel from the bytes per record alone
        self._byte_limit: List[int] = [batch_size] * n
        #: records per batch on each channel: the byte limit, or the consumer's if smaller
        self._limit: List[int] = [self._capped(i, batch_size) for i in range(n)]
        #: channels whose record size is not known yet (neither probed nor measured)
        self._unsized: List[int] = list(range(n))
        self.pending_since_ms: Optional[float] = None
        self.records_out = 0
        #: the operator whose records these are (named in serialization errors)
        self.producer = ""

    def emit(self, records: List[Any], now_ms: float = 0.0,
             timestamps: Optional[List[Optional[int]]] = None) -> None:
        if not records:
            return
        pending_ts = self._pending_ts
        if timestamps is not None and pending_ts is None:
            # the first timestamped batch: records already waiting have no timestamp
            pending_ts = self._pending_ts = [[None] * len(p) for p in self._pending]
        elif timestamps is None and pending_ts is not None:
            timestamps = [None] * len(records)
        self.partitioner.route(records, self._pending, self._pending_kgs, timestamps,
                               pending_ts)
        self.records_out += len(records)
        pending = self._pending
        if self._unsized:
            self._probe(pending)
        if self.buffer_timeout_ms == 0:
            self.flush()
            return
        limit = self._limit
        for i in range(len(pending)):
            if len(pending[i]) >= limit[i]:
                self._flush_channel(i)
        if self.pending_since_ms is None and any(pending):
            self.pending_since_ms = now_ms

    def _probe(self, pending: List[List[Any]]) -> None:
        """Size the first pending record of each channel not sized yet, once per channel
        (a broadcast record is pickled once for all channels)."""
        sized: dict = {}
        still: List[int] = []
        for i in self._unsized:
            if not pending[i]:
                still.append(i)
                continue
            first = pending[i][0]
            size = sized.get(id(first))
            if size is None:
                try:
                    size = len(pickle.dumps(first, protocol=5))
                except Exception:  # noqa: BLE001 - unpicklable: keep batch_size (the writer says)
                    size = 0
                sized[id(first)] = size
            if size > 0:
                self._byte_limit[i] = self._records_for(size, 1)
                self._limit[i] = self._capped(i, self._byte_limit[i])
        self._unsized = still

    def _capped(self, i: int, limit: int) -> int:
        """``limit``, or channel ``i``'s announced batch limit if that is smaller."""
        cap = getattr(self.writers[i], "batch_limit", None)
        return limit if cap is None or cap >= limit else cap

    def capacity(self) -> int:
        """Records that fill about one batch on every channel (the smallest channel's
        limit for a broadcast): how much a source should emit at a time so that a
        back-pressured output does not hold it long."""
        if self.partitioner.is_broadcast:
            return min(self._limit, default=self.batch_size)
        return sum(self._limit)

    def _records_for(self, nbytes: int, records: int) -> int:
        """Records per batch for ``records`` records that took ``nbytes`` bytes."""
        return max(1, min(self.batch_size, self.batch_bytes * records // nbytes))

    def _flush_channel(self, i: int) -> None:
        records = self._pending[i]
        if not records:
            return
        kgs = self._pending_kgs[i] if self._pending_kgs is not None else None
        ts = self._pending_ts[i] if self._pending_ts is not None else None
        writer = self.writers[i]
        stats = getattr(writer, "stats", None)
        limit = self._limit
        start, total = 0, len(records)
        while start < total:
            end = start + self._capped(i, self._byte_limit[i])
            before = stats.bytes if stats is not None else 0
            try:
                writer.write(RecordBatch(records[start:end],
                                         None if kgs is None else kgs[start:end],
                                         None if ts is None else ts[start:end]))
            except RecordSerializationError as e:
                if not self.producer:
                    raise
                raise RecordSerializationError(f"the output of operator {self.producer!r}: {e}",
                                               e.recoverable) from e
            written = (stats.bytes - before) if stats is not None else 0
            if written > 0:  # a writer that counts no bytes: no adaptation
                self._byte_limit[i] = self._records_for(written, min(end, total) - start)
            limit[i] = self._capped(i, self._byte_limit[i])
            start = end
        self._pending[i] = []
        if self._pending_kgs is not None:
            self._pending_kgs[i] = []
        if self._pending_ts is not None:
            self._pending_ts[i] = []

    def flush(self) -> None:
        for i in range(len(self.writers)):
            self._flush_channel(i)
        self.pending_since_ms = None

    def flush_if_due(self, now_ms: float) -> Optional[float]:
        """Flush if the oldest pending record has waited the buffer timeout; milliseconds
        until it will have (``None``: nothing waits, or the timeout is ``-1``)."""
        since = self.pending_since_ms
        if since is None or self.buffer_timeout_ms < 0:
            return None
        left = since + self.buffer_timeout_ms - now_ms
        if left <= 0:
            self.flush()
            return None
        return left

    def broadcast_event(self, frame: Frame) -> None:
        """Flush, then send ``frame`` on every channel (events follow the data before them)."""
        self.flush()
        for w in self.writers:
            w.write(frame)

    def await_taken(self, timeout_s: float) -> None:
        """After end-of-partition: wait until every channel's reader has taken its frames
        (:meth:`ChannelWriter.await_taken`)."""
        for w in self.writers:
            w.await_taken(timeout_s)

    def close(self) -> None:
        for w in self.writers:
            w.close()
