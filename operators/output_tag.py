"""Side outputs: :class:`OutputTag` names one; :class:`ResultCollector` sorts what a user
function yields into the main output and the side outputs.

A process function sends ``value`` to a side output by yielding ``(output_tag, value)``
(PyFlink's convention); ``DataStream.get_side_output(output_tag)`` reads it.

>>> from flowray.operators.base import CollectingOutput
>>> late = OutputTag("late")
>>> main, side = CollectingOutput(), CollectingOutput()
>>> c = ResultCollector(main, {"late": side})
>>> c.collect(["a", (late, "b")], 7); c.flush()
>>> main.records, main.timestamps, side.records
(['a'], [7], ['b'])
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from flowray.common.compat import not_implemented

__all__ = ["OutputTag", "ResultCollector"]


class OutputTag:
    """Names a side output (PyFlink's ``OutputTag(tag_id, type_info=None)``); two tags with
    the same name are the same side output."""

    def __init__(self, tag_id: str, type_info: Any = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"an OutputTag needs a non-empty name (tag_id), got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    get_java_output_tag = not_implemented(
        "OutputTag.get_java_output_tag", "nothing: flowray runs no JVM; use the tag itself")

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"


class ResultCollector:
    """Buffers the results of user calls for one batch, each with the timestamp it
    inherits, and hands them on at :meth:`flush`: main records to ``main``, tagged ones to
    ``side_outputs[tag]`` (dropped when nobody reads that tag, as in Flink)."""

    __slots__ = ("main", "side_outputs", "_records", "_timestamps", "_has_ts", "_side")

    def __init__(self, main: Any, side_outputs: Dict[str, Any]) -> None:
        self.main = main
        self.side_outputs = side_outputs
        self._records: List[Any] = []
        self._timestamps: List[Optional[int]] = []
        self._has_ts = False
        self._side: Dict[str, Tuple[List[Any], List[Optional[int]]]] = {}

    def collect(self, results: Optional[Iterable[Any]], timestamp: Optional[int]) -> None:
        """Add the outputs of one call (an iterable or ``None``), all stamped ``timestamp``."""
        if results is None:
            return
        records = self._records
        if timestamp is None and not self._has_ts:   # no timestamps yet: none kept
            for v in results:
                if type(v) is tuple and len(v) == 2 and isinstance(v[0], OutputTag):
                    self.collect_side(v[0], v[1], None)
                else:
                    records.append(v)
            return
        if not self._has_ts:   # the first timestamp: the records before it had none
            self._has_ts = True
            self._timestamps = [None] * len(records)
        stamps = self._timestamps
        for v in results:
            if type(v) is tuple and len(v) == 2 and isinstance(v[0], OutputTag):
                self.collect_side(v[0], v[1], timestamp)
            else:
                records.append(v)
                stamps.append(timestamp)

    def collect_side(self, tag: OutputTag, value: Any, timestamp: Optional[int]) -> None:
        recs, ts = self._side.setdefault(tag.tag_id, ([], []))
        recs.append(value)
        ts.append(timestamp)

    def flush(self) -> None:
        if self._records:
            records, stamps = self._records, self._timestamps
            self._records = []
            self.main.emit(records, stamps if self._has_ts else None)
        self._timestamps = []
        self._has_ts = False
        if self._side:
            side, self._side = self._side, {}
            for tag, (recs, ts) in side.items():
                out = self.side_outputs.get(tag)
                if out is not None:
                    out.emit(recs, ts if any(t is not None for t in ts) else None)
