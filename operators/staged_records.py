"""Records a sink stages between checkpoints, in bounded memory: :class:`StagedRecords`.

A transactional sink that writes a transaction's records only at its pre-commit (one
Parquet file per checkpoint epoch) must keep them until then -- a whole checkpoint
interval, without end when checkpointing is off. :class:`StagedRecords` keeps them in
memory up to ``threshold`` bytes (``flowray.sink.spill-threshold``); past it every record
held goes, pickled, to a spill file and later ones follow the same way, so memory holds
at most about ``threshold`` bytes of records. :meth:`StagedRecords.batches` gives them
back in arrival order, in lists of about ``threshold`` bytes, reading the spill file
piece by piece.

Sizes are the records' pickled sizes, estimated from a sample of each write (pickling
every record only to measure it would cost more than writing them): held Python objects
take several times more. Records reach the spill file only past the threshold, so
below it nothing is pickled twice.

The spill file is an anonymous temporary file in ``spill_dir`` (the task's local temp
folder by default, :func:`default_spill_dir`): it has no name, so it disappears when the
buffer is discarded or the process dies, and nothing is left behind by a killed task.
It is never part of a checkpoint: the sinks using this buffer checkpoint a transaction
only after its pre-commit has written every staged record to its own staging file, and a
transaction that was still staging at a failure is aborted and its records replayed.

>>> staged = StagedRecords(threshold=100)
>>> staged.append([("a", 1), ("b", 2)])
>>> staged.spilled
False
>>> staged.append([("c", i) for i in range(50)])   # past 100 bytes: to the spill file
>>> staged.spilled, len(staged)
(True, 52)
>>> [r for batch in staged.batches() for r in batch][:3]
[('a', 1), ('b', 2), ('c', 0)]
>>> staged.discard(); len(staged)
0
"""

from __future__ import annotations

import os
import pickle
import struct
import tempfile
from typing import IO, Any, Iterator, List, Mapping, Optional

import cloudpickle

from flowray.common.configuration import Configuration
from flowray.common.options import SINK_SPILL_THRESHOLD

__all__ = ["StagedRecords", "default_spill_dir", "spill_threshold_of", "SAMPLE_RECORDS"]

#: records of each write pickled to estimate the bytes per record of that write
SAMPLE_RECORDS = 16

_LENGTH = struct.Struct(">Q")


def spill_threshold_of(config: Mapping[str, Any]) -> int:
    """``flowray.sink.spill-threshold`` of a job's configuration (its default if unset).

    >>> spill_threshold_of({"flowray.sink.spill-threshold": "1 mb"}), spill_threshold_of({})
    (1048576, 67108864)
    """
    raw = config.get(SINK_SPILL_THRESHOLD.key)
    if raw is None:
        return SINK_SPILL_THRESHOLD.default
    return Configuration({SINK_SPILL_THRESHOLD.key: raw}).get(SINK_SPILL_THRESHOLD)


def default_spill_dir() -> str:
    """``<system temp>/flowray-<uid>/spill``: this user's own folder (mode 0700)."""
    uid = getattr(os, "getuid", lambda: "user")()
    base = os.path.join(tempfile.gettempdir(), f"flowray-{uid}")
    path = os.path.join(base, "spill")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _dumps(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return cloudpickle.dumps(obj, protocol=5)


def _estimate(records: List[Any]) -> int:
    """The pickled size of ``records``, from the first :data:`SAMPLE_RECORDS` of them."""
    n = len(records)
    if n <= SAMPLE_RECORDS:
        return len(_dumps(records))
    return len(_dumps(records[:SAMPLE_RECORDS])) * n // SAMPLE_RECORDS


class StagedRecords:
    """Records of one transaction, in arrival order, held in memory up to ``threshold``
    bytes and spilled to a file past it (see the module doc). Not thread-safe; not
    picklable (a transaction drops it when it is checkpointed).

    Contract: :meth:`batches` yields every appended record exactly once, in append order,
    in lists of about ``threshold`` bytes at most (one list when nothing spilled, so a
    small transaction is converted whole, as before); it may be called again (the
    records stay until :meth:`discard`). :meth:`discard` frees memory and deletes the
    spill file; the buffer is then empty and usable again."""

    def __init__(self, threshold: int, spill_dir: Optional[str] = None) -> None:
        if threshold < 0:
            raise ValueError(f"the spill threshold must not be negative, got {threshold}")
        self.threshold = threshold
        self.spill_dir = spill_dir
        self._held: List[List[Any]] = []
        self._held_bytes = 0
        self._count = 0
        self._file: Optional[IO[bytes]] = None
        #: bytes written to the spill file so far
        self.spilled_bytes = 0
        #: records written to the spill file so far
        self.spilled_records = 0

    def __len__(self) -> int:
        return self._count

    def __reduce__(self) -> Any:
        raise TypeError("staged records are never pickled (nor checkpointed)")

    @property
    def spilled(self) -> bool:
        """True once records went to the spill file."""
        return self._file is not None

    @property
    def held_bytes(self) -> int:
        """Estimated pickled bytes of the records held in memory."""
        return self._held_bytes

    def append(self, records: List[Any]) -> None:
        """Stage ``records`` (after every earlier one); spills if memory passes the
        threshold."""
        if not records:
            return
        records = list(records)
        self._held.append(records)
        self._count += len(records)
        self._held_bytes += _estimate(records)
        if self._held_bytes > self.threshold:
            self._spill()

    def _spill(self) -> None:
        """Move every held record to the end of the spill file (one frame per write)."""
        if self._file is None:
            directory = self.spill_dir or default_spill_dir()
            os.makedirs(directory, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=directory, prefix="flowray-sink-")
        f = self._file
        f.seek(0, os.SEEK_END)
        for records in self._held:
            data = _dumps(records)
            f.write(_LENGTH.pack(len(data)))
            f.write(data)
            self.spilled_bytes += _LENGTH.size + len(data)
            self.spilled_records += len(records)
        self._held = []
        self._held_bytes = 0

    def batches(self) -> Iterator[List[Any]]:
        """Every staged record, in order, in lists of about ``threshold`` bytes (spilled
        records read back frame by frame, then the ones in memory)."""
        if self._file is not None:
            yield from self._spilled_batches(self._file)
        held = [r for records in self._held for r in records]
        if held:
            yield held

    def _spilled_batches(self, f: IO[bytes]) -> Iterator[List[Any]]:
        f.flush()
        end = self.spilled_bytes
        pos = 0
        batch: List[Any] = []
        batch_bytes = 0
        while pos < end:
            f.seek(pos)
            (n,) = _LENGTH.unpack(f.read(_LENGTH.size))
            data = f.read(n)
            if len(data) != n:
                raise IOError(f"spill file of staged records truncated at byte {pos}")
            pos += _LENGTH.size + n
            batch.extend(pickle.loads(data))
            batch_bytes += n
            del data
            if batch_bytes >= self.threshold:
                yield batch
                batch, batch_bytes = [], 0
        if batch:
            yield batch

    def discard(self) -> None:
        """Drop every record and delete the spill file. Idempotent."""
        self._held = []
        self._held_bytes = 0
        self._count = 0
        f, self._file = self._file, None
        self.spilled_bytes = self.spilled_records = 0
        if f is not None:
            f.close()
