"""Test utilities shipped with flowray: a replayable source with in-band fault markers.

:class:`TestingSource` is a bounded source over a list, like :class:`CollectionSource`,
whose reader position is exactly restorable. The list may hold *markers*, which are never
emitted as records:

* ``FAIL()`` raises :class:`TestingFailure` when the reader reaches it, once;
* ``KILL()`` kills the process when the reader runs inside a Ray actor (``os._exit``), or
  raises :class:`SimulatedCrash` when it runs in a plain thread (the local executor), once;
* ``PAUSE(seconds)`` makes the reader return ``[]`` (without sleeping or blocking) until
  ``seconds`` have passed on the source's clock since it reached the marker;
* ``HOLD()`` makes the reader return ``[]`` for as long as the job runs (until it is stopped,
  e.g. with a savepoint), the first time it is reached; recorded in the ledger, so a test
  can wait for it (``fired_markers()``) and a reader restored before it reads on past it;
* ``WAIT_UNTIL(condition)`` makes the reader return ``[]`` until ``condition()`` (a
  picklable callable, asked at each poll) is true: the job goes on at an event the test
  names (say, records committed by a checkpoint), not after a guessed time.

A batch returned by ``poll_next`` stops just before a marker, so a fault happens exactly at
its place among the records. "Once" holds across recovery: the source rewinds to a
checkpoint taken before the marker, but a marker that fired is recorded first in a *fault
ledger* (a directory shared by every process on the machine; one file per marker index,
created with ``O_CREAT | O_EXCL``), and the process that creates the file is the only one
that fires. ``PAUSE`` and ``WAIT_UNTIL`` are not faults and are not recorded: a reader that
reaches one again after a restore waits again.

With ``parallelism_split=True`` (the default) the source is split-based, as
:class:`~flowray.operators.sources.CollectionSource`: its splits are
:class:`~flowray.operators.sources.IndexRangeSplit` s of item indices, so a job may be
restored at another parallelism. A reader fails at the marker; a recovered reader (a fresh
copy of the source, given the split states of an earlier checkpoint) replays the records but
not the failure:

>>> import pickle
>>> source = TestingSource(["a", "b", FAIL(), "c", "d"])
>>> context = SourceReaderContext(subtask_index=0, parallelism=1)
>>> reader = source.create_reader(context)
>>> reader.add_splits(source.create_splits(1))
>>> reader.poll_next(1)
['a']
>>> checkpoint = reader.snapshot_state(); checkpoint
[IndexRangeSplit(next=1, end=5)]
>>> reader.poll_next(10)
['b']
>>> try:
...     reader.poll_next(10)
... except TestingFailure as e:
...     print("failed:", e)
failed: FAIL() at item 2
>>> source.fired_markers()
[2]
>>> recovered = pickle.loads(pickle.dumps(source)).create_reader(context)
>>> recovered.add_splits(checkpoint)
>>> recovered.poll_next(10)
['b']
>>> recovered.poll_next(10)
['c', 'd']
>>> recovered.poll_next(10) is None
True

With ``parallelism_split=False`` every subtask reads every item and the source is not
split-based: a reader's position is the index of its next item (``restore_state``), and a
job must be restored at the parallelism it ran with. A reader given no splits reads the
same way (its contiguous share when ``parallelism_split=True``):

>>> everything = TestingSource(["x", "y"], parallelism_split=False)
>>> everything.create_splits(2) is None
True
>>> reader = everything.create_reader(SourceReaderContext(subtask_index=1, parallelism=2))
>>> reader.restore_state(1)
>>> reader.poll_next(10), reader.snapshot_state()
(['y'], 2)
>>> source.cleanup(); everything.cleanup()
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

from flowray.common.clock import Clock, SystemClock
from flowray.operators.sources import (
    Boundedness,
    IndexRangeSplit,
    Source,
    ShareOrSplitReader,
    SourceReaderContext,
    _split,
    index_range_splits,
)

__all__ = [
    "TestingSource",
    "TestingSourceReader",
    "TestingFailure",
    "SimulatedCrash",
    "Marker",
    "FailMarker",
    "KillMarker",
    "PauseMarker",
    "HoldMarker",
    "WaitMarker",
    "WAIT_UNTIL",
    "HOLD",
    "FAIL",
    "KILL",
    "PAUSE",
]

_LEDGER_PREFIX = "flowray-faults-"
_MARKER_FILE = "marker-{}"


class TestingFailure(Exception):
    """Raised by a reader at a ``FAIL()`` marker (the first time it is reached)."""

    __test__ = False  # not a pytest test class


class SimulatedCrash(Exception):
    """Raised at a ``KILL()`` marker when not in a Ray actor (the driver process survives)."""


class Marker:
    """Base of the in-band markers; never emitted as a record."""

    #: whether reaching it is a fault, recorded in the ledger and fired at most once
    is_fault = False


@dataclass(frozen=True)
class FailMarker(Marker):
    """Raise :class:`TestingFailure` here, once."""

    is_fault = True

    def __repr__(self) -> str:
        return "FAIL()"


@dataclass(frozen=True)
class KillMarker(Marker):
    """Kill the process here (``os._exit(exit_code)`` in a Ray actor; else raise
    :class:`SimulatedCrash`), once."""

    exit_code: int = 1
    is_fault = True

    def __repr__(self) -> str:
        return "KILL()" if self.exit_code == 1 else f"KILL(exit_code={self.exit_code})"


@dataclass(frozen=True)
class PauseMarker(Marker):
    """Return ``[]`` until ``seconds`` have passed since the reader reached this marker."""

    seconds: float

    def __post_init__(self) -> None:
        if self.seconds < 0:
            raise ValueError(f"PAUSE: negative duration {self.seconds}")

    def __repr__(self) -> str:
        return f"PAUSE({self.seconds!r})"


@dataclass(frozen=True)
class HoldMarker(Marker):
    """Return ``[]`` from here on, the first time (recorded in the ledger); later readers
    (after a restore) go past it."""

    def __repr__(self) -> str:
        return "HOLD()"


@dataclass(frozen=True)
class WaitMarker(Marker):
    """Return ``[]`` until ``condition()`` is true (asked at each poll), then go on."""

    condition: Callable[[], bool]

    def __post_init__(self) -> None:
        if not callable(self.condition):
            raise TypeError(f"WAIT_UNTIL: expected a callable, got {self.condition!r}")

    def __repr__(self) -> str:
        return f"WAIT_UNTIL({getattr(self.condition, '__name__', self.condition)!r})"


def WAIT_UNTIL(condition: Callable[[], bool]) -> WaitMarker:
    """A marker: the reader has nothing until ``condition()`` is true (never sleeps)."""
    return WaitMarker(condition)


def HOLD() -> HoldMarker:
    """A marker: the reader has nothing more until the job is stopped (once)."""
    return HoldMarker()


def FAIL() -> FailMarker:
    """A marker: the reader raises :class:`TestingFailure` here (once)."""
    return FailMarker()


def KILL(exit_code: int = 1) -> KillMarker:
    """A marker: the process dies here (once); :class:`SimulatedCrash` outside Ray actors."""
    return KillMarker(exit_code)


def PAUSE(seconds: float) -> PauseMarker:
    """A marker: the reader has nothing for ``seconds`` (it returns ``[]``, never sleeps)."""
    return PauseMarker(float(seconds))


def _in_ray_actor() -> bool:
    """Whether this code runs inside a Ray actor (not the driver, not a plain process)."""
    if "ray" not in sys.modules:  # an actor's worker process has always imported ray
        return False
    try:
        import ray
    except ImportError:
        return False
    try:
        return bool(ray.is_initialized()) and ray.get_runtime_context().get_actor_id() is not None
    except Exception:  # noqa: BLE001 - Ray half set up or torn down: not an actor
        return False


class TestingSource(Source):
    """A bounded, replayable source over ``items``, with fault markers (see the module doc).

    ``parallelism_split=True`` splits ``items`` over the subtasks in contiguous shares, as
    :class:`CollectionSource`, through splits (``create_splits``: one
    :class:`IndexRangeSplit` per subtask; a reader's ``snapshot_state`` is the list of its
    ranges not finished, each at the index of its next item), so a job may be restored at
    another parallelism. ``False`` gives every subtask all the items (a marker then still
    fires in one subtask only) and is not split-based: a reader's position
    (``snapshot_state``) is the index in ``items`` of the next item to read, and
    ``restore_state`` rewinds to it exactly.

    The fault ledger is the directory ``ledger_dir``, or a new temporary one made by this
    constructor; copies of the source (pickled to subtasks and recoveries) share it. Call
    :meth:`cleanup` to remove it (markers would then fire again). ``clock`` times ``PAUSE``
    markers (``monotonic_ms``); it is pickled with the source.
    """

    __test__ = False  # not a pytest test class
    default_name = "Testing Source"

    def __init__(self, items: Sequence[Any], parallelism_split: bool = True, *,
                 ledger_dir: Optional[str] = None, clock: Optional[Clock] = None) -> None:
        self.items: List[Any] = list(items)
        self.parallelism_split = bool(parallelism_split)
        if ledger_dir is None:
            ledger_dir = tempfile.mkdtemp(prefix=_LEDGER_PREFIX)
        else:
            os.makedirs(ledger_dir, exist_ok=True)
        self.ledger_dir: str = os.path.abspath(ledger_dir)
        self.clock: Clock = clock if clock is not None else SystemClock()

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_splits(self, parallelism: int) -> Optional[List[IndexRangeSplit]]:
        """``parallelism_split=True``: ``items`` in ``parallelism`` contiguous ranges;
        ``False``: ``None`` (not split-based)."""
        if not self.parallelism_split:
            return None
        return index_range_splits(len(self.items), parallelism)

    def create_reader(self, context: SourceReaderContext) -> "TestingSourceReader":
        # the share below is read only if the reader is given no splits
        if self.parallelism_split:
            share = _split(len(self.items), context.parallelism, context.subtask_index)
        else:
            share = range(len(self.items))
        return TestingSourceReader(self, share.start, share.stop, context)

    # -- the fault ledger ----------------------------------------------------------------
    def _marker_path(self, index: int) -> str:
        return os.path.join(self.ledger_dir, _MARKER_FILE.format(index))

    def _claim(self, index: int, context: SourceReaderContext) -> bool:
        """Record marker ``index`` as fired; True only for the one caller that created it."""
        try:
            fd = os.open(self._marker_path(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"pid={os.getpid()} subtask={context.subtask_index}/"
                         f"{context.parallelism} marker={self.items[index]!r}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def fired_markers(self) -> List[int]:
        """Indices in ``items`` of the markers that fired (read from the ledger), sorted."""
        try:
            names = os.listdir(self.ledger_dir)
        except FileNotFoundError:
            return []
        prefix = _MARKER_FILE.format("")
        return sorted(int(n[len(prefix):]) for n in names
                      if n.startswith(prefix) and n[len(prefix):].isdigit())

    def cleanup(self) -> None:
        """Remove the ledger directory."""
        shutil.rmtree(self.ledger_dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"TestingSource({len(self.items)} items, ledger={self.ledger_dir!r})"


class TestingSourceReader(ShareOrSplitReader):
    source_label = "TestingSource"

    """Reads items of a :class:`TestingSource`: the :class:`IndexRangeSplit` s it is given,
    in order (state: the ranges not finished); or, given no splits, ``items[start:end]``
    (position: the index of the next item)."""

    __test__ = False

    def __init__(self, source: TestingSource, start: int, end: int,
                 context: SourceReaderContext) -> None:
        self._source = source
        self._items = source.items
        self._start, self._end = start, end       # the share read without splits
        self._ranges: List[List[int]] = []        # [next, end] per range not finished
        self._context = context
        self._pause_until: Optional[float] = None  # set while waiting at the PAUSE at the head
        self._holding: Optional[int] = None  # index of the HOLD this reader claimed

    def _read_own_share(self) -> None:
        self._ranges = [[self._start, self._end]]

    def add_splits(self, splits: List[Any]) -> None:
        self._mode(True, "add_splits")
        n = len(self._items)
        for split in splits:
            if not isinstance(split, IndexRangeSplit):
                raise TypeError(f"TestingSource: expected an IndexRangeSplit, got {split!r}")
            if not 0 <= split.next <= split.end <= n:
                raise ValueError(f"TestingSource: split {split!r} does not fit the source's "
                                 f"{n} item(s)")
            self._ranges.append([split.next, split.end])

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        if self._split_based is None:
            self._mode(False, "poll_next")
        ranges, items = self._ranges, self._items
        # markers at the head of the remaining items
        while True:
            while ranges and ranges[0][0] >= ranges[0][1]:
                ranges.pop(0)
            if not ranges:
                return None
            head = ranges[0]
            marker = items[head[0]]
            if not isinstance(marker, Marker):
                break
            if isinstance(marker, PauseMarker):
                now = self._source.clock.monotonic_ms()
                if self._pause_until is None:
                    self._pause_until = now + marker.seconds * 1000.0
                if now < self._pause_until:
                    return []
                self._pause_until = None
                head[0] += 1
            elif isinstance(marker, WaitMarker):
                if not marker.condition():
                    return []
                head[0] += 1
            elif isinstance(marker, HoldMarker):
                index = head[0]
                if self._holding == index or self._source._claim(index, self._context):
                    self._holding = index  # its position stays before the marker
                    return []
                head[0] += 1  # held by an earlier reader: go on
            elif marker.is_fault:
                index = head[0]
                head[0] += 1  # a caller that goes on polling this reader moves past it
                if self._source._claim(index, self._context):
                    self._fire(marker, index)
            else:
                head[0] += 1
        batch: List[Any] = []
        pos, end = head
        while len(batch) < max_records and pos < end and not isinstance(items[pos], Marker):
            batch.append(items[pos])
            pos += 1
        head[0] = pos
        return batch

    def _fire(self, marker: Marker, index: int) -> None:
        if isinstance(marker, KillMarker):
            if _in_ray_actor():
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:  # noqa: BLE001 - the crash goes ahead regardless
                        pass
                os._exit(marker.exit_code)
            raise SimulatedCrash(f"{marker!r} at item {index} (subtask "
                                 f"{self._context.subtask_index}; not in a Ray actor)")
        raise TestingFailure(f"{marker!r} at item {index}")

    def snapshot_state(self) -> Any:
        """Split-based: the ranges not finished (:class:`IndexRangeSplit` s); else the index
        of the next item. A PAUSE being waited at is still ahead (it pauses again after a
        restore)."""
        if self._split_based is None:
            self._mode(False, "snapshot_state")
        if self._split_based:
            return [IndexRangeSplit(a, b) for a, b in self._ranges if a < b]
        return self._ranges[0][0] if self._ranges else self._end

    def restore_state(self, state: Any) -> None:
        """Without splits: rewind to the index ``state`` (in this reader's share)."""
        self._mode(False, "restore_state")
        pos = int(state)
        if not self._start <= pos <= self._end:
            raise ValueError(f"TestingSource: position {pos} is outside this subtask's share "
                             f"[{self._start}, {self._end}]")
        self._ranges = [[pos, self._end]]
        self._pause_until = None
