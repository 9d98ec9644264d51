"""Which C halves of flowray's hot paths are in use.

A few hot paths have a C half, an extension module built when flowray is installed
(``pyproject.toml``'s ``ext-modules``), and a pure-Python twin that does the same, slower:
``flowray.common._records`` (``Row``'s ``[]``, attributes and batch operations) and
``flowray.operators._keyed`` (``KeyedStream.sum(field)``). The twin is used where the
module was not built (no C compiler where flowray was installed) or where the environment
variable ``FLOWRAY_PURE_PYTHON`` is set to anything but ``0`` (the tests run both).

>>> native("flowray.common.no_such_module") is None
True
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Optional

__all__ = ["PURE_PYTHON", "native"]

#: ``FLOWRAY_PURE_PYTHON`` is set: every C half is left unused
PURE_PYTHON: bool = os.environ.get("FLOWRAY_PURE_PYTHON", "") not in ("", "0")


def native(module: str) -> Optional[ModuleType]:
    """The C extension module ``module``, or ``None`` when it is not built or
    ``FLOWRAY_PURE_PYTHON`` is set (the caller then uses its pure-Python twin)."""
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
