"""Amounts and points of time, as ``pyflink.common.time``: ``Time``, ``Duration``, ``Instant``.

PyFlink's ``Duration`` wraps ``java.time.Duration``; ours is pure Python with the same
semantics (whole nanoseconds, negative amounts allowed, ``to_*`` conversions that floor as
Java's do). All three are immutable, hashable and picklable.

>>> Duration.of_seconds(5).to_milliseconds()
5000
>>> Time.minutes(2).to_milliseconds()
120000
>>> Instant.of_epoch_milli(1500).to_epoch_milli()
1500
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Tuple

__all__ = ["Time", "Duration", "Instant"]

_NANOS_PER_MILLI = 1_000_000
_NANOS_PER_SECOND = 1_000_000_000
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
# java.time.Instant.MIN / MAX in epoch seconds
_INSTANT_MIN_SECOND = -31557014167219200
_INSTANT_MAX_SECOND = 31556889864403199


def _as_int(what: str, value: Any) -> int:
    """``value`` as an int; ``bool``, ``float`` and anything non-integral raise TypeError."""
    if type(value) is int:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)  # e.g. numpy.int64
    hint = ""
    if isinstance(value, float):
        hint = " (a whole number is needed: use a smaller unit or int(...))"
    raise TypeError(f"{what} must be an int, got {value!r} of type "
                    f"{type(value).__name__}{hint}")


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"{type(self).__name__} is immutable")


@functools.total_ordering
class Time:
    """A time interval in milliseconds (window sizes, offsets, slides). Negative intervals
    are allowed, as in PyFlink (window offsets such as ``Time.hours(-8)``).

    >>> Time.seconds(3)
    Time.milliseconds(3000)
    >>> str(Time.days(1))
    '86400000 ms'
    >>> Time.seconds(1) == Time.milliseconds(1000)
    True
    """

    __slots__ = ("_milliseconds",)
    __setattr__ = _frozen_setattr

    def __init__(self, milliseconds: int) -> None:
        object.__setattr__(self, "_milliseconds", _as_int("milliseconds", milliseconds))

    def to_milliseconds(self) -> int:
        """The interval in milliseconds."""
        return self._milliseconds

    @staticmethod
    def milliseconds(milliseconds: int) -> "Time":
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> "Time":
        return Time(_as_int("seconds", seconds) * 1000)

    @staticmethod
    def minutes(minutes: int) -> "Time":
        return Time(_as_int("minutes", minutes) * 60_000)

    @staticmethod
    def hours(hours: int) -> "Time":
        return Time(_as_int("hours", hours) * 3_600_000)

    @staticmethod
    def days(days: int) -> "Time":
        return Time(_as_int("days", days) * 86_400_000)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Time:
            return NotImplemented
        return self._milliseconds == other._milliseconds

    def __lt__(self, other: "Time") -> bool:
        if type(other) is not Time:
            return NotImplemented
        return self._milliseconds < other._milliseconds

    def __hash__(self) -> int:
        return hash((Time, self._milliseconds))

    def __str__(self) -> str:
        return f"{self._milliseconds} ms"

    def __repr__(self) -> str:
        return f"Time.milliseconds({self._milliseconds})"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Time, (self._milliseconds,))


@functools.total_ordering
class Duration:
    """A time-based amount of time, such as '34.5 seconds' (``java.time.Duration``): a whole
    number of nanoseconds, possibly negative. Build with the ``of_*`` constructors.

    ``to_milliseconds``/``to_seconds`` floor (``of_nanos(-1).to_milliseconds() == -1``);
    ``to_minutes``/``to_hours``/``to_days`` truncate the seconds toward zero, as Java's do.

    >>> Duration.of_seconds(34, 500_000_000).to_milliseconds()
    34500
    >>> Duration.of_minutes(2)
    Duration.of_minutes(2)
    >>> Duration.of_millis(1500) > Duration.of_seconds(1)
    True
    >>> Duration.of_seconds(1.5)
    Traceback (most recent call last):
    ...
    TypeError: seconds must be an int, got 1.5 of type float (a whole number is needed: use a smaller unit or int(...))
    """

    __slots__ = ("_nanos",)
    __setattr__ = _frozen_setattr

    #: the zero duration (set below the class)
    ZERO: "Duration"

    def __init__(self, nanos: int = 0) -> None:
        """Prefer the ``of_*`` constructors; ``nanos`` is the whole amount in nanoseconds."""
        nanos = _as_int("nanos", nanos)
        seconds = nanos // _NANOS_PER_SECOND
        if not _LONG_MIN <= seconds <= _LONG_MAX:
            raise ValueError(f"duration of {nanos} ns is out of range (its seconds must fit "
                             f"a 64-bit long, as in java.time.Duration)")
        object.__setattr__(self, "_nanos", nanos)

    # -- constructors ----------------------------------------------------------------------

    @staticmethod
    def of_days(days: int) -> "Duration":
        return Duration(_as_int("days", days) * 86_400 * _NANOS_PER_SECOND)

    @staticmethod
    def of_hours(hours: int) -> "Duration":
        return Duration(_as_int("hours", hours) * 3_600 * _NANOS_PER_SECOND)

    @staticmethod
    def of_minutes(minutes: int) -> "Duration":
        return Duration(_as_int("minutes", minutes) * 60 * _NANOS_PER_SECOND)

    @staticmethod
    def of_seconds(seconds: int, nano_adjustment: int = 0) -> "Duration":
        """``seconds`` plus ``nano_adjustment`` nanoseconds (which may be negative)."""
        return Duration(_as_int("seconds", seconds) * _NANOS_PER_SECOND
                        + _as_int("nano_adjustment", nano_adjustment))

    @staticmethod
    def of_millis(millis: int) -> "Duration":
        return Duration(_as_int("millis", millis) * _NANOS_PER_MILLI)

    @staticmethod
    def of_nanos(nanos: int) -> "Duration":
        return Duration(_as_int("nanos", nanos))

    # -- conversions -----------------------------------------------------------------------

    def to_nanos(self) -> int:
        return self._nanos

    def to_milliseconds(self) -> int:
        """Whole milliseconds, floored (Java's ``toMillis``)."""
        return self._nanos // _NANOS_PER_MILLI

    def to_millis(self) -> int:
        """Java's name for :meth:`to_milliseconds`."""
        return self._nanos // _NANOS_PER_MILLI

    def to_seconds(self) -> int:
        """Whole seconds, floored (Java's ``toSeconds``/``getSeconds``)."""
        return self._nanos // _NANOS_PER_SECOND

    def get_seconds(self) -> int:
        """The seconds part: ``get_seconds() * 10**9 + get_nano() == to_nanos()``."""
        return self._nanos // _NANOS_PER_SECOND

    def get_nano(self) -> int:
        """The nanosecond part within the second, 0..999,999,999."""
        return self._nanos % _NANOS_PER_SECOND

    def _seconds_over(self, unit: int) -> int:
        seconds = self.get_seconds()
        whole = abs(seconds) // unit
        return -whole if seconds < 0 else whole

    def to_minutes(self) -> int:
        return self._seconds_over(60)

    def to_hours(self) -> int:
        return self._seconds_over(3_600)

    def to_days(self) -> int:
        return self._seconds_over(86_400)

    def is_zero(self) -> bool:
        return self._nanos == 0

    def is_negative(self) -> bool:
        return self._nanos < 0

    # -- object protocol -------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is not Duration:
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: "Duration") -> bool:
        if type(other) is not Duration:
            return NotImplemented
        return self._nanos < other._nanos

    def __hash__(self) -> int:
        return hash((Duration, self._nanos))

    def __repr__(self) -> str:
        n = self._nanos
        if n == 0:
            return "Duration.ZERO"
        for name, size in (("days", 86_400 * _NANOS_PER_SECOND),
                           ("hours", 3_600 * _NANOS_PER_SECOND),
                           ("minutes", 60 * _NANOS_PER_SECOND),
                           ("seconds", _NANOS_PER_SECOND),
                           ("millis", _NANOS_PER_MILLI)):
            if n % size == 0:
                return f"Duration.of_{name}({n // size})"
        return f"Duration.of_nanos({n})"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Duration, (self._nanos,))


Duration.ZERO = Duration(0)


@functools.total_ordering
class Instant:
    """An instantaneous point on the time-line (``java.time.Instant``): ``seconds`` since the
    epoch and ``nanos`` (0..999,999,999) within that second.

    >>> Instant.of_epoch_milli(-1)
    Instant<-1, 999000000>
    >>> Instant.of_epoch_milli(-1).to_epoch_milli()
    -1
    >>> Instant.of_epoch_second(3, -1)
    Instant<2, 999999999>
    """

    __slots__ = ("_seconds", "_nanos")
    __setattr__ = _frozen_setattr

    def __init__(self, seconds: int, nanos: int) -> None:
        seconds = _as_int("seconds", seconds)
        nanos = _as_int("nanos", nanos)
        if not 0 <= nanos < _NANOS_PER_SECOND:
            raise ValueError(f"nanos must be in 0..999999999, got {nanos} "
                             f"(use Instant.of_epoch_second(seconds, nano_adjustment))")
        if not _INSTANT_MIN_SECOND <= seconds <= _INSTANT_MAX_SECOND:
            raise ValueError(f"instant of {seconds} epoch seconds is out of range "
                             f"(java.time.Instant's MIN..MAX)")
        object.__setattr__(self, "_seconds", seconds)
        object.__setattr__(self, "_nanos", nanos)

    @property
    def seconds(self) -> int:
        """Seconds since 1970-01-01T00:00:00Z."""
        return self._seconds

    @property
    def nanos(self) -> int:
        """Nanoseconds within the second, 0..999,999,999."""
        return self._nanos

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> "Instant":
        epoch_milli = _as_int("epoch_milli", epoch_milli)
        return Instant(epoch_milli // 1000, (epoch_milli % 1000) * _NANOS_PER_MILLI)

    @staticmethod
    def of_epoch_second(epoch_second: int, nano_adjustment: int = 0) -> "Instant":
        """``epoch_second`` plus ``nano_adjustment`` nanoseconds (which may be negative)."""
        total = (_as_int("epoch_second", epoch_second) * _NANOS_PER_SECOND
                 + _as_int("nano_adjustment", nano_adjustment))
        return Instant(total // _NANOS_PER_SECOND, total % _NANOS_PER_SECOND)

    def get_epoch_second(self) -> int:
        return self._seconds

    def get_nano(self) -> int:
        return self._nanos

    def to_epoch_milli(self) -> int:
        """Milliseconds since the epoch, floored; ValueError when it does not fit a 64-bit
        long (Java's ``ArithmeticException``)."""
        millis = self._seconds * 1000 + self._nanos // _NANOS_PER_MILLI
        if not _LONG_MIN <= millis <= _LONG_MAX:
            raise ValueError(f"{self!r} in epoch milliseconds ({millis}) does not fit a "
                             f"64-bit long")
        return millis

    def __eq__(self, other: object) -> bool:
        if type(other) is not Instant:
            return NotImplemented
        return self._seconds == other._seconds and self._nanos == other._nanos

    def __lt__(self, other: "Instant") -> bool:
        if type(other) is not Instant:
            return NotImplemented
        return (self._seconds, self._nanos) < (other._seconds, other._nanos)

    def __hash__(self) -> int:
        return hash((Instant, self._seconds, self._nanos))

    def __repr__(self) -> str:
        return f"Instant<{self._seconds}, {self._nanos}>"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Instant, (self._seconds, self._nanos))
