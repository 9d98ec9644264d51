"""Windows: the finite buckets elements are grouped into, as in ``pyflink.datastream.window``.

Windows are immutable values: hashable (they name the state of a pane), picklable, and a
:class:`TimeWindow` orders by ``(start, end)``.

>>> w = TimeWindow(0, 5)
>>> w, w.max_timestamp(), w.intersects(TimeWindow(5, 10)), w.cover(TimeWindow(3, 8))
(TimeWindow(start=0, end=5), 4, True, TimeWindow(start=0, end=8))
>>> TimeWindow.get_window_start_with_offset(-1, 0, 5)
-5
>>> GlobalWindow.get() is GlobalWindow(), CountWindow(3)
(True, CountWindow(id=3))
"""

from __future__ import annotations

import abc
from typing import Any, Iterable, List, Optional, Tuple

from flowray.common.constants import MAX_WATERMARK

__all__ = ["Window", "TimeWindow", "CountWindow", "GlobalWindow"]


class Window(abc.ABC):
    """A bucket of elements; all of them have arrived once time passes ``max_timestamp()``."""

    __slots__ = ()

    @abc.abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


class TimeWindow(tuple, Window):
    """The interval ``[start, end)`` in milliseconds. A ``(start, end)`` tuple underneath, so
    hashing, comparing and ordering windows (every record looks its pane up by window) run
    in C; it equals the plain tuple ``(start, end)``."""

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> "TimeWindow":
        return tuple.__new__(cls, (start, end))

    @property
    def start(self) -> int:
        return self[0]

    @property
    def end(self) -> int:
        return self[1]

    def max_timestamp(self) -> int:
        return self[1] - 1

    def intersects(self, other: "TimeWindow") -> bool:
        """True if the windows overlap or touch (``[0, 5)`` and ``[5, 10)`` intersect, as in
        Flink: session windows that touch merge)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        """The smallest window containing both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (shifted by ``offset``) holding ``timestamp``;
        negative timestamps round down, as in Flink."""
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback: Any) -> None:
        """Flink's ``TimeWindow.mergeWindows``: sort by start, fold intersecting windows into
        their cover, and call ``callback.merge(to_be_merged, merge_result)`` for every group of
        two or more distinct windows (``to_be_merged`` is a list sorted by start)."""
        current: Optional[TimeWindow] = None
        group: List[TimeWindow] = []
        groups: List[Tuple[TimeWindow, List[TimeWindow]]] = []
        for candidate in sorted(set(windows)):
            if current is not None and current.intersects(candidate):
                current = current.cover(candidate)
                group.append(candidate)
                continue
            if current is not None:
                groups.append((current, group))
            current, group = candidate, [candidate]
        if current is not None:
            groups.append((current, group))
        for merge_result, to_be_merged in groups:
            if len(to_be_merged) > 1:
                callback.merge(to_be_merged, merge_result)

    def __reduce__(self) -> Tuple[Any, Tuple[int, int]]:
        return TimeWindow, (self.start, self.end)

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


class CountWindow(Window):
    """The ``id``-th count window of a key; never ends in time."""

    __slots__ = ("id",)
    id: int

    def __init__(self, id: int) -> None:  # PyFlink's parameter name
        object.__setattr__(self, "id", id)

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __eq__(self, other: object) -> bool:
        return type(other) is CountWindow and self.id == other.id  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash(("CountWindow", self.id))

    def __reduce__(self) -> Tuple[Any, Tuple[int]]:
        return CountWindow, (self.id,)

    def __repr__(self) -> str:
        return f"CountWindow(id={self.id})"


class GlobalWindow(Window):
    """The one window of :class:`GlobalWindows`; a singleton (``GlobalWindow.get()``)."""

    __slots__ = ()
    _instance: Optional["GlobalWindow"] = None

    def __new__(cls) -> "GlobalWindow":
        if cls._instance is None:
            type.__setattr__(cls, "_instance", super().__new__(cls))
        return cls._instance  # type: ignore[return-value]

    @staticmethod
    def get() -> "GlobalWindow":
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    def __eq__(self, other: object) -> bool:
        return type(other) is GlobalWindow

    def __hash__(self) -> int:
        return hash("GlobalWindow")

    def __reduce__(self) -> Tuple[Any, Tuple[()]]:
        return GlobalWindow, ()

    def __repr__(self) -> str:
        return "GlobalWindow"
