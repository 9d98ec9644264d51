"""Python's cyclic garbage collector while a task runs in a process of its own.

A task allocates a container per record (a tuple, a list, a row) and frees nearly all of
them again by reference counting. With Python's default young-generation threshold (700
allocations) the collector runs every few hundred records and walks every young object
still alive, and its full collections walk everything the process holds, Ray's own objects
included. :class:`CollectorTuning` raises the threshold and freezes what the process held
before the task, for the task's run only (``flowray.task.gc-threshold``).
"""

from __future__ import annotations

import gc
from types import TracebackType
from typing import Optional, Tuple, Type

__all__ = ["CollectorTuning"]


class CollectorTuning:
    """A context manager: inside it, the collector's young-generation threshold is
    ``young_threshold`` (the older generations' stay as they were) and the objects alive on
    entry are frozen (``gc.freeze``); on exit the thresholds are those on entry again and
    the frozen objects go back to the collector (``gc.unfreeze``), so a process that runs
    task after task (a pooled task actor) frees the cycles an earlier task left.
    ``young_threshold == 0`` changes nothing. Not reentrant, and process-wide: one task per
    process at a time.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> with CollectorTuning(100_000):
    ...     gc.get_threshold()[0]
    100000
    >>> gc.get_threshold() == before
    True
    """

    def __init__(self, young_threshold: int) -> None:
        if young_threshold < 0:
            raise ValueError(f"young_threshold must not be negative, got {young_threshold}")
        self.young_threshold = young_threshold
        self._saved: Optional[Tuple[int, ...]] = None

    def __enter__(self) -> "CollectorTuning":
        if self._saved is not None:
            raise RuntimeError("CollectorTuning is not reentrant")
        if self.young_threshold:
            saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(self.young_threshold, *saved[1:])
            self._saved = saved
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            gc.set_threshold(*saved)
            gc.unfreeze()
