"""Clocks: wall time for the runtime, a manual clock for tests."""

from __future__ import annotations

import time

__all__ = ["Clock", "SystemClock", "ManualClock"]


class Clock:
    """Milliseconds: ``now_ms`` is wall time (for timers), ``monotonic_ms`` for intervals."""

    def now_ms(self) -> int:
        raise NotImplementedError

    def monotonic_ms(self) -> float:
        raise NotImplementedError


class SystemClock(Clock):
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0


class ManualClock(Clock):
    """A clock that moves only when told to.

    >>> c = ManualClock(100); c.advance(50); c.now_ms()
    150
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> float:
        return float(self._now)

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._now += ms

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("a clock does not go back")
        self._now = now_ms
