"""Test utilities shipped with flowray: a replayable source with in-band fault markers.

:class:`TestingSource` is a bounded source over a list, like :class:`CollectionSource`,
whose reader position is exactly restorable. The list may hold *markers*, which are never
emitted as records:

* ``FAIL()`` raises :class:`TestingFailure` when the reader reaches it, once;
* ``KILL()`` kills the process when the reader runs inside a Ray actor (``os._exit``), or
  raises :class:`SimulatedCrash` when it runs in a plain thread (the local executor), once;
* ``PAUSE(seconds)`` makes the reader return ``[]`` (without sleeping or blocking) until
  ``seconds`` have passed on the source's clock since it reached the marker.

A batch returned by ``poll_next`` stops just before a marker, so a fault happens exactly at
its place among the records. "Once" holds across recovery: the source rewinds to a
checkpoint taken before the marker, but a marker that fired is recorded first in a *fault
ledger* (a directory shared by every process on the machine; one file per marker index,
created with ``O_CREAT | O_EXCL``), and the process that creates the file is the only one
that fires. ``PAUSE`` is not a fault and is not recorded: a reader that reaches it again after
a restore pauses again.

A reader fails at the marker; a recovered reader (a fresh copy of the source, restored to an
earlier position) replays the records but not the failure:

>>> import pickle
>>> source = TestingSource(["a", "b", FAIL(), "c", "d"])
>>> context = SourceReaderContext(subtask_index=0, parallelism=1)
>>> reader = source.create_reader(context)
>>> reader.poll_next(10)
['a', 'b']
>>> try:
...     reader.poll_next(10)
... except TestingFailure as e:
...     print("failed:", e)
failed: FAIL() at item 2
>>> source.fired_markers()
[2]
>>> recovered = pickle.loads(pickle.dumps(source)).create_reader(context)
>>> recovered.restore_state(1)          # a checkpoint taken after 'a'
>>> recovered.poll_next(10)
['b']
>>> recovered.poll_next(10)
['c', 'd']
>>> recovered.poll_next(10) is None
True
>>> source.cleanup()
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from flowray.common.clock import Clock, SystemClock
from flowray.operators.sources import (
    Boundedness,
    Source,
    SourceReader,
    SourceReaderContext,
    _split,
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
    except Exception:
        return False


class TestingSource(Source):
    """A bounded, replayable source over ``items``, with fault markers (see the module doc).

    ``parallelism_split=True`` splits ``items`` over the subtasks in contiguous shares, as
    :class:`CollectionSource`; ``False`` gives every subtask all the items (a marker then
    still fires in one subtask only). A reader's position (``snapshot_state``) is the index
    in ``items`` of the next item to read; ``restore_state`` rewinds to it exactly.

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

    def create_reader(self, context: SourceReaderContext) -> "TestingSourceReader":
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


class TestingSourceReader(SourceReader):
    """Reads ``items[start:end]`` of a :class:`TestingSource`; position = next index."""

    __test__ = False

    def __init__(self, source: TestingSource, start: int, end: int,
                 context: SourceReaderContext) -> None:
        self._source = source
        self._items = source.items
        self._start, self._end = start, end
        self._pos = start
        self._context = context
        self._pause_until: Optional[float] = None  # set while waiting at a PAUSE at _pos

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        # markers at the head of the remaining items
        while self._pos < self._end and isinstance(self._items[self._pos], Marker):
            marker = self._items[self._pos]
            if isinstance(marker, PauseMarker):
                now = self._source.clock.monotonic_ms()
                if self._pause_until is None:
                    self._pause_until = now + marker.seconds * 1000.0
                if now < self._pause_until:
                    return []
                self._pause_until = None
                self._pos += 1
            elif marker.is_fault:
                index = self._pos
                self._pos += 1  # a caller that goes on polling this reader moves past it
                if self._source._claim(index, self._context):
                    self._fire(marker, index)
            else:
                self._pos += 1
        if self._pos >= self._end:
            return None
        batch: List[Any] = []
        while (len(batch) < max_records and self._pos < self._end
               and not isinstance(self._items[self._pos], Marker)):
            batch.append(self._items[self._pos])
            self._pos += 1
        return batch

    def _fire(self, marker: Marker, index: int) -> None:
        if isinstance(marker, KillMarker):
            if _in_ray_actor():
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                os._exit(marker.exit_code)
            raise SimulatedCrash(f"{marker!r} at item {index} (subtask "
                                 f"{self._context.subtask_index}; not in a Ray actor)")
        raise TestingFailure(f"{marker!r} at item {index}")

    def snapshot_state(self) -> int:
        return self._pos

    def restore_state(self, state: Any) -> None:
        pos = int(state)
        if not self._start <= pos <= self._end:
            raise ValueError(f"TestingSource: position {pos} is outside this subtask's share "
                             f"[{self._start}, {self._end}]")
        self._pos = pos
        self._pause_until = None
