"""The metric kinds behind :mod:`flowray.metrics`, as Flink's: ``SimpleCounter``,
``MeterView`` (a rate over a time span, from counts sampled every ``UPDATE_INTERVAL_S``), a
distribution (count, sum, min, max, mean) and a gauge reading a function."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional

from flowray.metrics import Counter, Distribution, Gauge, Meter

__all__ = ["SimpleCounter", "FunctionCounter", "MeterView", "DistributionView",
           "FunctionGauge", "UPDATE_INTERVAL_S"]

#: seconds between two samples of a meter's count (Flink's ``View.UPDATE_INTERVAL_SECONDS``)
UPDATE_INTERVAL_S = 5


class SimpleCounter(Counter):
    """A count; not thread-safe (one task thread updates it, as in Flink).

    >>> c = SimpleCounter(); c.inc(); c.inc(4); c.dec(); c.get_count()
    4
    """

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class FunctionCounter(Counter):
    """A count the runtime keeps anyway, read through ``fn`` (no update per record): a task's
    records in, say. Read only.

    >>> seen = [3]; c = FunctionCounter(lambda: seen[0]); seen[0] += 2; c.get_count()
    5
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def inc(self, n: int = 1) -> None:
        raise TypeError("this counter reads a count the runtime keeps; it cannot be changed")

    dec = inc

    def get_count(self) -> Any:
        return self.fn()


class MeterView(Meter):
    """Events per second over ``time_span_in_seconds`` (rounded up to a multiple of
    ``UPDATE_INTERVAL_S``, at least one interval), from the count sampled by ``update()``,
    which the registry calls every ``UPDATE_INTERVAL_S`` (Flink's ``MeterView``).

    >>> m = MeterView(10)
    >>> m.mark_event(50); m.update(); m.get_rate()
    5.0
    >>> m.mark_event(100); m.update(); m.get_rate()
    15.0
    """

    def __init__(self, time_span_in_seconds: int = 60,
                 counter: Optional[Counter] = None) -> None:
        if time_span_in_seconds <= 0:
            raise ValueError(f"a meter's time span must be positive, got "
                             f"{time_span_in_seconds!r} s")
        intervals = max(1, math.ceil(time_span_in_seconds / UPDATE_INTERVAL_S))
        self.time_span_s = intervals * UPDATE_INTERVAL_S
        self._counter = counter if counter is not None else SimpleCounter()
        self._values: List[int] = [0] * (intervals + 1)
        self._at = 0
        self._rate = 0.0

    def mark_event(self, value: int = 1) -> None:
        self._counter.inc(value)

    def get_count(self) -> int:
        return self._counter.get_count()

    def get_rate(self) -> float:
        return self._rate

    def update(self) -> None:
        """Sample the count (every ``UPDATE_INTERVAL_S``)."""
        n = len(self._values)
        self._at = (self._at + 1) % n
        self._values[self._at] = self._counter.get_count()
        oldest = self._values[(self._at + 1) % n]
        self._rate = (self._values[self._at] - oldest) / self.time_span_s


class DistributionView(Distribution):
    """Count, sum, minimum, maximum and mean of the values given.

    >>> d = DistributionView(); d.update(3); d.update(5); d.values()
    {'count': 2, 'sum': 8, 'min': 3, 'max': 5, 'mean': 4.0}
    """

    __slots__ = ("count", "sum", "min", "max")

    def __init__(self) -> None:
        self.count = 0
        self.sum: Any = 0
        self.min: Any = None
        self.max: Any = None

    def update(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"Distribution.update takes an int or a float, got "
                            f"{value!r} ({type(value).__name__})")
        self.count += 1
        self.sum += value
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value

    def values(self) -> Dict[str, Any]:
        return {"count": self.count, "sum": self.sum, "min": self.min, "max": self.max,
                "mean": self.sum / self.count if self.count else None}


class FunctionGauge(Gauge):
    """A gauge reading ``fn()``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"a gauge needs a function giving its value, got {fn!r}")
        self.fn = fn

    def get_value(self) -> Any:
        return self.fn()
