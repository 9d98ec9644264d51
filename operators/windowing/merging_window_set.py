"""The in-flight windows of one key under a merging assigner, as Flink's ``MergingWindowSet``.

Each window the user sees maps to a *state window*: the namespace its contents and trigger
state live under. When windows merge, the result keeps the state window of one of them, so
state is never copied, only the other merged state windows are folded into it.

The operator, per element and key: builds the set from the pairs it stored in keyed state,
calls :meth:`MergingWindowSet.add_window` for each assigned window, then stores
:meth:`MergingWindowSet.persist` again when :meth:`MergingWindowSet.has_changed`.

>>> from flowray.operators.windowing.assigners import EventTimeSessionWindows
>>> from flowray.operators.windowing.windows import TimeWindow
>>> merges = []
>>> windows = MergingWindowSet(EventTimeSessionWindows.with_gap(5))
>>> windows.add_window(TimeWindow(0, 5), lambda *args: merges.append(args))
TimeWindow(start=0, end=5)
>>> windows.add_window(TimeWindow(3, 8), lambda *args: merges.append(args))
TimeWindow(start=0, end=8)
>>> windows.get_state_window(TimeWindow(0, 8))
TimeWindow(start=0, end=5)
>>> result, merged, state_window, merged_state_windows = merges[0]
>>> result, merged, merged_state_windows
(TimeWindow(start=0, end=8), [TimeWindow(start=0, end=5)], [])
>>> windows.persist()
[(TimeWindow(start=0, end=8), TimeWindow(start=0, end=5))]
"""

from __future__ import annotations

import abc
from typing import Any, Collection, Dict, Generic, Iterable, List, Mapping, Optional, Tuple
from typing import TypeVar, Union

from flowray.operators.windowing.assigners import MergingWindowAssigner
from flowray.operators.windowing.windows import Window

__all__ = ["MergingWindowSet"]

W = TypeVar("W", bound=Window)


class _CollectMerges(MergingWindowAssigner.MergeCallback):
    def __init__(self) -> None:
        self.results: List[Tuple[Any, List[Any]]] = []

    def merge(self, to_be_merged: Collection[Any], merge_result: Any) -> None:
        self.results.append((merge_result, list(dict.fromkeys(to_be_merged))))


class MergingWindowSet(Generic[W]):
    """Maps in-flight windows to state windows; pure (no state access of its own).

    ``restored``: the pairs a previous :meth:`persist` returned (or a dict), or nothing.
    """

    class MergeFunction(abc.ABC, Generic[W]):
        """Told about each merge :meth:`MergingWindowSet.add_window` performs."""

        @abc.abstractmethod
        def merge(self, merge_result: W, merged_windows: Collection[W], state_window_result: W,
                  merged_state_windows: Collection[W]) -> None:
            """``merged_windows`` became ``merge_result``, whose state lives in
            ``state_window_result``; fold the state of ``merged_state_windows`` into it (and
            run the trigger's ``on_merge`` / ``clear`` for the windows)."""

    def __init__(self, assigner: MergingWindowAssigner,
                 restored: Union[None, Mapping[W, W], Iterable[Tuple[W, W]]] = None) -> None:
        self._assigner = assigner
        pairs = restored.items() if isinstance(restored, Mapping) else (restored or ())
        self._mapping: Dict[W, W] = {window: state_window for window, state_window in pairs}
        self._persisted: Dict[W, W] = dict(self._mapping)

    def get_state_window(self, window: W) -> Optional[W]:
        """The state window of in-flight ``window``, or None if it is not in flight."""
        return self._mapping.get(window)

    def retire_window(self, window: W) -> None:
        """Forget ``window`` (its state was cleared); KeyError if it is not in flight."""
        if window not in self._mapping:
            raise KeyError(f"Window {window!r} is not in the in-flight window set")
        del self._mapping[window]

    def add_window(self, new_window: W, merge_function: Any) -> W:
        """Add ``new_window``, merging as the assigner decides; returns the window the new
        one now belongs to (itself, or the merge result that swallowed it).

        ``merge_function``: a :class:`MergeFunction` or a callable with its ``merge``
        signature, called for every merge except the one that only absorbs the new window
        into a pre-existing window without extending it (no state moves then).
        """
        merge = getattr(merge_function, "merge", merge_function)
        collect = _CollectMerges()
        self._assigner.merge_windows([*self._mapping, new_window], collect)

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in collect.results:
            if new_window in merged_windows:
                merged_new_window = True
                result_window = merge_result
                if new_window not in self._mapping:  # else it is an in-flight window too
                    merged_windows.remove(new_window)
            # the result takes over the state window of one merged window (the first)
            state_window = self._mapping[merged_windows[0]]
            merged_state_windows = [self._mapping.pop(w) for w in merged_windows
                                    if w in self._mapping]
            self._mapping[merge_result] = state_window
            merged_state_windows.remove(state_window)
            if not (len(merged_windows) == 1 and merged_windows[0] == merge_result):
                merge(merge_result, merged_windows, state_window, merged_state_windows)

        # a self-contained new window; if it equals an in-flight window (possible with dynamic
        # gaps) that window keeps its state window rather than being reset to itself
        if not merged_new_window and result_window not in self._mapping:
            self._mapping[result_window] = result_window
        return result_window

    def has_changed(self) -> bool:
        """True if the mapping differs from the one restored or last persisted."""
        return self._mapping != self._persisted

    def persist(self) -> List[Tuple[W, W]]:
        """The mapping as picklable ``(window, state_window)`` pairs (empty: no window in
        flight, the operator may clear its state); marks it persisted."""
        self._persisted = dict(self._mapping)
        return list(self._mapping.items())

    def __len__(self) -> int:
        return len(self._mapping)

    def __repr__(self) -> str:
        return f"MergingWindowSet({self._mapping!r})"
