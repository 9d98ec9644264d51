"""The pure parts of an iteration head (docs/iterations.md): the feedback queue, and the
back-edge log of the snapshot algorithm for cycles.

* :class:`FeedbackQueue` holds the records that came back over the back edge and wait to
  go round again. It is a FIFO in bounded memory: past ``threshold`` bytes, new records go
  to an anonymous spill file and come back in order. The head therefore always takes what
  the back edge brings, even while its own output is back-pressured, and a full cycle
  cannot deadlock.
* :class:`BackEdgeLog` is the ABS algorithm's log for cycles (Carbone et al., 2015,
  Algorithm 2). When a checkpoint starts at the head, every record arriving on a back-edge
  channel is logged until that channel brings the checkpoint's barrier back. The log,
  with the queue as it was when the checkpoint started, is the head's share of the
  snapshot, and a restore replays it before new input.

>>> q = FeedbackQueue(threshold_bytes=64)
>>> q.push(["a", "b"]); q.push([f"r{i}" for i in range(40)])   # the second one spills
>>> q.spilled, len(q)
(True, 42)
>>> q.pop(3)
(['a', 'b'], None)
>>> q.pop(3)[0]
['r0', 'r1', 'r2']
"""

from __future__ import annotations

import os
import pickle
import struct
import tempfile
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Any, Deque, Dict, Iterable, List, Optional, Set, Tuple

__all__ = ["FeedbackQueue", "BackEdgeLog", "Batch"]

#: (records, timestamps or None): one batch as it travels
Batch = Tuple[List[Any], Optional[List[Any]]]

_LENGTH = struct.Struct(">Q")
#: records of a batch pickled to estimate its size
_SAMPLE = 16


def _estimated_size(records: List[Any]) -> int:
    if not records:
        return 0
    sample = records[:_SAMPLE]
    return len(pickle.dumps(sample, protocol=5)) * len(records) // len(sample)


class FeedbackQueue:
    """A FIFO of record batches in at most about ``threshold_bytes`` of memory; the rest
    waits, pickled, in an anonymous temporary file in ``spill_dir`` (gone with the
    process). ``pop(n)`` gives back at most ``n`` records of the oldest batch."""

    def __init__(self, threshold_bytes: int, spill_dir: Optional[str] = None) -> None:
        if threshold_bytes < 1:
            raise ValueError(f"the spill threshold must be at least 1 byte, got "
                             f"{threshold_bytes}")
        self.threshold = threshold_bytes
        self.spill_dir = spill_dir
        self._memory: Deque[Batch] = deque()
        self._sizes: Deque[int] = deque()   # each memory batch's estimated bytes
        self._memory_bytes = 0
        self._count = 0
        self._file: Optional[IO[bytes]] = None
        self._read_at = 0      # the next unread batch in the file
        self._written_at = 0   # the end of what was written
        self._in_file = 0      # batches in the file not read yet
        #: batches that went through the spill file, in all
        self.spilled_batches = 0

    def __len__(self) -> int:
        return self._count

    @property
    def spilled(self) -> bool:
        """Some records wait in the spill file."""
        return self._in_file > 0

    def push(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        if not records:
            return
        batch: Batch = (list(records), list(timestamps) if timestamps is not None else None)
        self._count += len(records)
        size = _estimated_size(batch[0])
        if self._in_file == 0 and self._memory_bytes + size <= self.threshold:
            self._keep(batch, size)
            return
        self._spill(batch)   # once spilling, later batches follow (the order holds)

    def pop(self, max_records: int) -> Optional[Batch]:
        """At most ``max_records`` of the oldest records (``None``: the queue is empty)."""
        if not self._memory and self._in_file:
            self._refill()
        if not self._memory:
            return None
        records, timestamps = self._memory[0]
        if len(records) <= max_records:
            self._memory.popleft()
            self._memory_bytes -= self._sizes.popleft()
            self._count -= len(records)
            return records, timestamps
        head, rest = records[:max_records], records[max_records:]
        ts_head = timestamps[:max_records] if timestamps is not None else None
        ts_rest = timestamps[max_records:] if timestamps is not None else None
        self._memory[0] = (rest, ts_rest)
        taken = self._sizes[0] * len(head) // len(records)
        self._sizes[0] -= taken
        self._memory_bytes -= taken
        self._count -= len(head)
        return head, ts_head

    def batches(self) -> List[Batch]:
        """Every batch, oldest first, without taking them (a snapshot's view)."""
        out = list(self._memory)
        if self._in_file:
            f = self._file
            assert f is not None
            f.seek(self._read_at)
            for _ in range(self._in_file):
                (n,) = _LENGTH.unpack(f.read(_LENGTH.size))
                out.append(pickle.loads(f.read(n)))
            f.seek(self._written_at)
        return out

    def _keep(self, batch: Batch, size: int) -> None:
        self._memory.append(batch)
        self._sizes.append(size)
        self._memory_bytes += size

    def discard(self) -> None:
        self._memory.clear()
        self._sizes.clear()
        self._memory_bytes = self._count = self._in_file = 0
        self._read_at = self._written_at = 0
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spill(self, batch: Batch) -> None:
        if self._file is None:
            directory = self.spill_dir or tempfile.gettempdir()
            os.makedirs(directory, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=directory)
        data = pickle.dumps(batch, protocol=5)
        self._file.seek(self._written_at)
        self._file.write(_LENGTH.pack(len(data)))
        self._file.write(data)
        self._written_at = self._file.tell()
        self._in_file += 1
        self.spilled_batches += 1

    def _refill(self) -> None:
        """Read batches back from the file, up to about the threshold; an emptied file
        starts over from its beginning."""
        f = self._file
        assert f is not None
        f.seek(self._read_at)
        while self._in_file and (not self._memory or self._memory_bytes < self.threshold):
            (n,) = _LENGTH.unpack(f.read(_LENGTH.size))
            self._keep(pickle.loads(f.read(n)), n)
            self._in_file -= 1
        self._read_at = f.tell()
        if self._in_file == 0:
            f.seek(0)
            f.truncate()
            self._read_at = self._written_at = 0


@dataclass
class _PendingLog:
    open_channels: Set[str]
    batches: List[Batch] = field(default_factory=list)


class BackEdgeLog:
    """The records in transit on a cycle's back edge for each checkpoint under way at an
    iteration head whose back edge has ``channels``.

    Contract: :meth:`start` when the head takes its snapshot and forwards the barrier;
    every batch read from a back-edge channel goes through :meth:`on_records`; a barrier
    read from one through :meth:`on_barrier`, which returns the checkpoint's log once the
    barrier has come back on every channel. :meth:`abort` forgets a checkpoint.

    >>> log = BackEdgeLog(["t0", "t1"])
    >>> log.on_records("t0", ["before"])          # no checkpoint under way: not logged
    >>> log.start(1)
    >>> log.on_records("t0", ["x"]); log.on_records("t1", ["y"])
    >>> log.on_barrier("t0", 1) is None           # t1's barrier is still on its way
    True
    >>> log.on_records("t0", ["after"])           # t0 is past the barrier: not logged
    >>> log.on_records("t1", ["z"])
    >>> log.on_barrier("t1", 1)
    [(['x'], None), (['y'], None), (['z'], None)]
    """

    def __init__(self, channels: Iterable[str]) -> None:
        self.channels = list(channels)
        self._pending: Dict[int, _PendingLog] = {}

    @property
    def logging(self) -> bool:
        return bool(self._pending)

    def start(self, checkpoint_id: int) -> None:
        if checkpoint_id in self._pending:
            raise ValueError(f"checkpoint {checkpoint_id} already started at this head")
        self._pending[checkpoint_id] = _PendingLog(set(self.channels))

    def on_records(self, channel: str, records: List[Any],
                   timestamps: Optional[List[Any]] = None) -> None:
        if not self._pending or not records:
            return
        batch: Batch = (list(records), list(timestamps) if timestamps is not None else None)
        for pending in self._pending.values():
            if channel in pending.open_channels:
                pending.batches.append(batch)

    def on_barrier(self, channel: str, checkpoint_id: int) -> Optional[List[Batch]]:
        pending = self._pending.get(checkpoint_id)
        if pending is None:
            return None   # aborted, or a barrier of a checkpoint this head did not start
        pending.open_channels.discard(channel)
        if pending.open_channels:
            return None
        del self._pending[checkpoint_id]
        return pending.batches

    def on_channel_ended(self, channel: str) -> List[Tuple[int, List[Batch]]]:
        """A back-edge channel ended: no barrier comes on it any more. The checkpoints it
        completes, with their logs."""
        done = []
        for cid in sorted(self._pending):
            pending = self._pending[cid]
            pending.open_channels.discard(channel)
            if not pending.open_channels:
                done.append((cid, pending.batches))
        for cid, _ in done:
            del self._pending[cid]
        return done

    def abort(self, checkpoint_id: int) -> None:
        self._pending.pop(checkpoint_id, None)
