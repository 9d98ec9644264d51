"""Checks and converters for configuration values, public so a plug-in's options
(``flowray.spark.options``) use the same ones: ``check=positive``, ``bounded(1, 10)``...
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from flowray.common.configuration import (
    parse_duration_ms,
)

__all__ = ["positive", "max_parallelism_range", "show_count", "show_bytes", "show_ms",
           "bounded", "HOUR_MS", "DAY_MS", "seconds_or_duration", "at_least_one", "at_most_1mb",
           "not_negative", "parse_port_range", "ports_of"]


def positive(v: Any) -> Optional[str]:
    return None if v > 0 else "must be positive"


def max_parallelism_range(v: int) -> Optional[str]:
    return None if 0 < v <= 32768 else "must be in [1, 32768]"


def show_count(n: int) -> str:
    return str(n)


def show_bytes(n: int) -> str:
    """``1024`` -> ``'1 kb'``: sizes in the units a user writes them in."""
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} b"


def show_ms(ms: int) -> str:
    """``86_400_000`` -> ``'24 h'``: durations in the units a user writes them in."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def bounded(low: int, high: int, show: Callable[[int], str] = show_count,
             below: str = "must be positive") -> Callable[[Any], Optional[str]]:
    """A ``check=`` keeping a value in ``[low, high]`` (both included); either message
    gives the allowed range, e.g. ``must be at most 10000; allowed range [1, 10000]``."""
    allowed = f"allowed range [{show(low)}, {show(high)}]"

    def check(v: Any) -> Optional[str]:
        if v < low:
            return f"{below}; {allowed}"
        if v > high:
            return f"must be at most {show(high)}; {allowed}"
        return None

    return check


HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

def seconds_or_duration(value: Any) -> float:
    """Seconds: a bare number is seconds, as Flink's ``jobstore.expiration-time`` was;
    ``"10 min"`` style durations work too.

    >>> seconds_or_duration(3600), seconds_or_duration("90"), seconds_or_duration("2 min")
    (3600, 90, 120)
    """
    if isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = parse_duration_ms(value * 1000) / 1000
    else:
        seconds = parse_duration_ms(value) / 1000
    return int(seconds) if float(seconds).is_integer() else seconds

def at_least_one(v: Any) -> Optional[str]:
    return None if v >= 1 else "must be at least 1"

def at_most_1mb(v: Any) -> Optional[str]:
    return None if 0 <= v <= (1 << 20) else "must be between 0 and 1 mb"

def not_negative(v: Any) -> Optional[str]:
    return None if v >= 0 else "must not be negative"

def parse_port_range(value: Any) -> str:
    """A port (``8081``), a range (``8081-8090``) or a list (``8081,8085``), as Flink's
    ``rest.port``/``rest.bind-port``; kept as text, checked here."""
    text = str(value).strip()
    ports_of(text)
    return text


def ports_of(text: str) -> List[int]:
    """The ports a ``rest.port`` value allows, in order (``0``: any free port); one port
    ``P`` allows ``P`` and, when it is taken, the next 100 after it.

    >>> ports_of("8081")[:3], len(ports_of("8081")), ports_of("0"), ports_of("80-82,90")
    ([8081, 8082, 8083], 101, [0], [80, 81, 82, 90])
    """
    out: List[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"a port, a range a-b or a list of them, got {text!r}") from None
        if not (0 <= a <= b <= 65535):
            raise ValueError(f"ports are 0..65535 and a range goes up, got {part!r}")
        out.extend(range(a, b + 1))
    if not out:
        raise ValueError(f"no port in {text!r}")
    if len(out) == 1 and out[0] != 0:
        out = list(range(out[0], min(65535, out[0] + 100) + 1))
    return out
