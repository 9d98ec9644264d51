"""Batch folding for aligned event-time windows: the window operator's fast path.

Tumbling and sliding event-time windows under their default trigger (``EventTimeTrigger``)
need nothing per record but the fold: the trigger only registers a timer at the window's
end, which exists from the moment the pane does. :class:`AlignedPanes` folds a batch of
records straight into the panes and reports the panes it created, so that the operator
registers one timer per (key, window) instead of consulting the trigger per record.

How this relates to the per-record path is in ``docs/internals/windows.md``.

>>> from flowray.operators.windowing.assigners import TumblingEventTimeWindows
>>> panes = AlignedPanes(TumblingEventTimeWindows.of(10), lambda acc, r: (acc or 0) + r)
>>> state = {}   # one key's panes: window -> contents
>>> new = panes.fold_into(state, [1, 2, 3], [0, 4, 12])
>>> [(tuple(w), v) for w, v in sorted(state.items())], [tuple(w) for w in new]
([((0, 10), 3), ((10, 20), 3)], [(0, 10), (10, 20)])
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from flowray.common.native import native
from flowray.common.sentinels import MISSING
from flowray.operators.windowing.assigners import (
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowAssigner,
)
from flowray.operators.windowing.triggers import EventTimeTrigger, Trigger
from flowray.operators.windowing.windows import TimeWindow

__all__ = ["AlignedPanes", "CONTENTS_FIRST", "RECORD_FIRST", "APPEND"]

#: how the C half folds a record into contents that are not None (``native_combine``):
#: ``combine(contents, record)`` (a reduce function)
CONTENTS_FIRST = 0
#: ``combine(record, contents)`` (an aggregate function's ``add``)
RECORD_FIRST = 1
#: ``contents.append(record)`` (list contents: a process window function's)
APPEND = 2

#: folds one record into a pane's contents (``None``: a new pane)
Fold = Callable[[Any, Any], Any]
#: a pane created by a batch: (key, key group, window)
NewPane = Tuple[Any, int, TimeWindow]

_WINDOW_CACHE = 4096  # distinct window starts kept as TimeWindow objects

# the C half of _fold_tumbling and _fold_sliding (operators/_windows.c), or None
_windows: Any = native("flowray.operators._windows")


class AlignedPanes:
    """Folds records into the panes of tumbling or sliding event-time windows.

    Contract: every record goes into each of its windows (the assigner's windows, latest
    first, as ``assign_windows``), folded with ``fold(contents, record)`` in input order,
    and every pane that did not exist before is reported once, in the order created. The
    caller hands over only records whose windows all end after the watermark (a record at
    or behind the watermark may need to fire or be late: that is the per-record path's).
    """

    __slots__ = ("size", "slide", "offset", "fold", "combine", "native_combine", "_windows")

    @staticmethod
    def applies(assigner: WindowAssigner, trigger: Trigger) -> bool:
        """Whether the operator with ``assigner`` and ``trigger`` may fold in batches."""
        return (type(trigger) is EventTimeTrigger
                and type(assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows))

    def __init__(self, assigner: WindowAssigner, fold: Fold,
                 combine: Optional[Callable[[Any, Any], Any]] = None,
                 native_combine: Optional[Tuple[int, Any]] = None) -> None:
        """``combine(contents, record)``, if given, is ``fold`` for contents that are not
        ``None`` (a reduce function: one call per record instead of two).
        ``native_combine``: ``(how, function)``, the same for the C half (``fold_aligned``'s
        ``how``: :data:`CONTENTS_FIRST`, :data:`RECORD_FIRST` for an aggregate function's
        ``add``, :data:`APPEND` for list contents); by default ``combine``'s."""
        if type(assigner) is TumblingEventTimeWindows:
            self.size = self.slide = assigner._size
        elif type(assigner) is SlidingEventTimeWindows:
            self.size, self.slide = assigner._size, assigner._slide
        else:
            raise TypeError(f"not an aligned event-time assigner: {assigner!r}")
        self.offset = assigner._offset
        self.fold = fold
        self.combine = combine
        self.native_combine = (native_combine if native_combine is not None
                               else (CONTENTS_FIRST, combine))
        self._windows: Dict[int, TimeWindow] = {}

    def window(self, start: int) -> TimeWindow:
        """The window starting at ``start`` (one object per start, shared by the panes)."""
        windows = self._windows
        w = windows.get(start)
        if w is None:
            if len(windows) >= _WINDOW_CACHE:
                windows.clear()
            w = windows[start] = TimeWindow(start, start + self.size)
        return w

    def starts(self, timestamp: int) -> range:
        """The starts of ``timestamp``'s windows, latest first."""
        last = timestamp - (timestamp - self.offset) % self.slide
        return range(last, timestamp - self.size, -self.slide)

    # -- one key's panes ---------------------------------------------------------------
    def fold_into(self, panes: Dict[TimeWindow, Any], records: Sequence[Any],
                  timestamps: Sequence[int]) -> List[TimeWindow]:
        """Fold ``records`` (of one key) into ``panes``; the windows of new panes."""
        return [w for _, w in self._fold_into(panes, records, timestamps, range(len(records)))]

    def _fold_into(self, panes: Dict[TimeWindow, Any], records: Sequence[Any],
                   timestamps: Sequence[int], positions: Sequence[int]
                   ) -> List[Tuple[int, TimeWindow]]:
        fold, window, new = self.fold, self.window, []
        for r, ts, pos in zip(records, timestamps, positions):
            for s in self.starts(ts):
                w = window(s)
                cur = panes.get(w, MISSING)
                if cur is MISSING:
                    new.append((pos, w))
                    cur = None
                panes[w] = fold(cur, r)
        return new

    # -- the heap backend's dicts ------------------------------------------------------
    def fold_heap(self, table: Any, first_key_group: int, records: Sequence[Any],
                  keys: Sequence[Any], key_groups: Sequence[int],
                  timestamps: Sequence[int]) -> List[NewPane]:
        """Fold a batch into a heap state table laid out window first (one dict per key
        group, ``maps[key group - first_key_group][window][key] -> contents``:
        :class:`~flowray.state.heap_table.NamespaceFirstTable`), copying on write what a
        pending snapshot holds. ``keys`` are canonical (as the backend stores them)."""
        if table.holds:  # a snapshot is pending: copy what the batch will change first
            _make_private(table, first_key_group, key_groups)
        # from here to the end of the batch no snapshot can take hold (they are taken
        # between batches, on this thread): the dicts are written as they are
        by_group = table.maps if first_key_group == 0 else \
            [None] * first_key_group + table.maps
        if _windows is not None:   # the twins below, in C
            how, combine = self.native_combine
            new = _windows.fold_aligned(by_group, records, keys, key_groups, timestamps,
                                        self.size, self.slide, self.offset, self._windows,
                                        self.window, self.fold, combine, how)
            if new is not None:    # None: timestamps out of its reach, nothing done
                return new
        fold = self._fold_tumbling if self.size == self.slide else self._fold_sliding
        return fold(by_group, records, keys, key_groups, timestamps)

    # _fold_tumbling and _fold_sliding fold a pane in the same lines, written out in both:
    # a call per record is what this path exists to save. They are the pure-Python twins of
    # _windows.fold_aligned (whose docstring is the contract of both)

    def _fold_tumbling(self, by_group: List[Dict[Any, Any]], records: Sequence[Any],
                       keys: Sequence[Any], key_groups: Sequence[int],
                       timestamps: Sequence[int]) -> List[NewPane]:
        fold, combine, window = self.fold, self.combine, self.window
        size, offset, missing = self.size, self.offset, MISSING
        new: List[NewPane] = []
        last: Optional[int] = None
        w: Any = None
        for r, k, kg, ts in zip(records, keys, key_groups, timestamps):
            s = ts - (ts - offset) % size
            if s != last:
                w, last = window(s), s
            m = by_group[kg]
            keyed = m.get(w)
            if keyed is None:
                keyed = m[w] = {}
            cur = keyed.get(k, missing)
            if cur is missing:
                new.append((k, kg, w))
                keyed[k] = fold(None, r)
            elif combine is not None and cur is not None:
                keyed[k] = combine(cur, r)
            else:
                keyed[k] = fold(cur, r)
        return new

    def _fold_sliding(self, by_group: List[Dict[Any, Any]], records: Sequence[Any],
                      keys: Sequence[Any], key_groups: Sequence[int],
                      timestamps: Sequence[int]) -> List[NewPane]:
        fold, combine, window, windows = self.fold, self.combine, self.window, self._windows
        size, slide, offset, missing = self.size, self.slide, self.offset, MISSING
        new: List[NewPane] = []
        for r, k, kg, ts in zip(records, keys, key_groups, timestamps):
            m = by_group[kg]
            for s in range(ts - (ts - offset) % slide, ts - size, -slide):
                w = windows.get(s)
                if w is None:
                    w = window(s)
                keyed = m.get(w)
                if keyed is None:
                    keyed = m[w] = {}
                cur = keyed.get(k, missing)
                if cur is missing:
                    new.append((k, kg, w))
                    keyed[k] = fold(None, r)
                elif combine is not None and cur is not None:
                    keyed[k] = combine(cur, r)
                else:
                    keyed[k] = fold(cur, r)
        return new

    # -- any backend -------------------------------------------------------------------
    def fold_by_key(self, state: Any, set_key: Callable[[Any, int], None],
                    records: Sequence[Any], keys: Sequence[Any], key_groups: Sequence[int],
                    timestamps: Sequence[int]) -> List[NewPane]:
        """Fold a batch into a map state (window -> contents) through its backend: the
        batch grouped by key, each touched pane read once and written once however many
        records it takes (one access per pane where an access costs: RocksDB). New panes
        come back in the order their first records came."""
        groups: Dict[Tuple[Any, int], Tuple[List[Any], List[int], List[int]]] = {}
        for pos, (r, k, kg, ts) in enumerate(zip(records, keys, key_groups, timestamps)):
            g = groups.get((k, kg))
            if g is None:
                g = groups[(k, kg)] = ([], [], [])
            g[0].append(r)
            g[1].append(ts)
            g[2].append(pos)
        window, starts = self.window, self.starts
        new: List[Tuple[int, Any, int, TimeWindow]] = []
        for (k, kg), (recs, stamps, positions) in groups.items():
            set_key(k, kg)
            touched = {window(s) for ts in set(stamps) for s in starts(ts)}
            panes: Dict[TimeWindow, Any] = {}
            for w in touched:
                cur = state.get(w)
                if cur is not None:
                    panes[w] = cur
            new.extend((pos, k, kg, w)
                       for pos, w in self._fold_into(panes, recs, stamps, positions))
            for w in touched:
                state.put(w, panes[w])
        new.sort(key=lambda e: e[0])
        return [(k, kg, w) for _, k, kg, w in new]


def _make_private(table: Any, first_key_group: int, key_groups: Sequence[int]) -> None:
    """Make the key-group dicts of ``key_groups`` in ``table`` (window first) and their
    windows' dicts of keys safe to change in place while a snapshot holds some of them
    (``StateTable.writable`` and ``private``: each is copied once a checkpoint, however
    many batches then write it)."""
    shared = table.shared
    for kg in set(key_groups):
        off = kg - first_key_group
        if shared[off] is not None:
            m = table.writable(off)
            for w, keyed in list(m.items()):
                table.private(off, w, keyed)
