"""Durations given to window assigners and triggers, turned into milliseconds.

Accepted: an ``int`` of milliseconds, anything with ``to_milliseconds()`` (``Time``), or a
``datetime.timedelta``.

>>> to_millis(250, "size"), to_millis(datetime.timedelta(seconds=2), "size")
(250, 2000)
"""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["to_millis"]


def to_millis(value: Any, what: str) -> int:
    """``value`` in milliseconds; TypeError naming ``what`` if it is no duration."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a duration (Time or int milliseconds), got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    convert = getattr(value, "to_milliseconds", None)
    if callable(convert):
        millis = convert()
        if isinstance(millis, int) and not isinstance(millis, bool):
            return millis
    raise TypeError(f"{what} must be a duration (Time or int milliseconds), got {value!r}")
