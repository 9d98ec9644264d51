"""The one "no value here" mark flowray's modules share (a value can be ``None``).

>>> MISSING, MISSING is _Missing()
(MISSING, True)
>>> import pickle
>>> pickle.loads(pickle.dumps(MISSING)) is MISSING
True
"""

from __future__ import annotations

__all__ = ["MISSING"]


class _Missing:
    """A singleton: every construction and every unpickling gives the same object."""

    __slots__ = ()
    _instance: "_Missing | None" = None

    def __new__(cls) -> "_Missing":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"   # pickled by reference to this module's MISSING


MISSING = _Missing()
