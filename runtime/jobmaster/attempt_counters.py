"""Records counted across every attempt of a job (pure).

A restarted task counts from zero again, so the counters of the attempts that ended would
be lost from the job's totals (a 120,000-record job restarted once reported 60,000 source
records). :class:`AttemptCounters` keeps the highest count seen for each attempt of each
subtask (counters only grow within an attempt, so a heartbeat seen after the final result
changes nothing), and :meth:`AttemptCounters.earlier` adds up the attempts that are not
current. Records replayed after a restore are counted again, as each attempt read them.

>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> src = SubtaskId("v1", 0)
>>> c = AttemptCounters()
>>> c.observe(src, 0, {"is_source": True, "records_in": 500})   # a heartbeat
>>> c.observe(src, 0, {"is_source": True, "records_in": 600})   # its final result
>>> c.observe(src, 0, {"is_source": True, "records_in": 550})   # a late heartbeat
>>> c.observe(src, 1, {"is_source": True, "records_in": 100})   # the current attempt
>>> c.earlier({src: 1})
{'records_in': 600, 'source_records': 600}
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["AttemptCounters"]


class AttemptCounters:
    """The highest ``records_in`` seen per subtask and attempt, and whether it is a
    source."""

    def __init__(self) -> None:
        self._seen: Dict[Any, Dict[int, Tuple[int, bool]]] = {}

    def observe(self, subtask: Any, attempt: int, metrics: Optional[Mapping[str, Any]]) -> None:
        """A task's metrics (a heartbeat's or its final result's), of ``attempt``."""
        if not metrics or "records_in" not in metrics:
            return
        attempts = self._seen.setdefault(subtask, {})
        count = int(metrics["records_in"])
        before = attempts.get(attempt)
        if before is None or count > before[0]:
            attempts[attempt] = (count, bool(metrics.get("is_source")))

    def earlier(self, current: Mapping[Any, int]) -> Dict[str, int]:
        """What the attempts other than each subtask's ``current`` one counted."""
        records = sources = 0
        # (copies: a progress report may read while the scheduler's thread observes)
        for subtask, attempts in list(self._seen.items()):
            now = current.get(subtask)
            for attempt, (count, is_source) in list(attempts.items()):
                if attempt != now:
                    records += count
                    if is_source:
                        sources += count
        return {"records_in": records, "source_records": sources}
