"""Shipping user code: cloudpickle, by value for modules the workers cannot import."""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any, Iterable

import cloudpickle

__all__ = ["FunctionSerializationError", "dumps_checked", "register_user_modules"]


class FunctionSerializationError(TypeError):
    """A user function (or what it captures) cannot be pickled; names the operator."""


_SYSTEM_PREFIXES = tuple({p for p in (sysconfig.get_paths().get("stdlib"),
                                      sysconfig.get_paths().get("purelib"),
                                      sysconfig.get_paths().get("platlib")) if p})


def _is_user_module(module: types.ModuleType) -> bool:
    name = module.__name__
    if name == "__main__" or name.startswith("flowray"):
        return False
    path = getattr(module, "__file__", None)
    if not path:
        return False
    path = os.path.abspath(path)
    return not any(path.startswith(p) for p in _SYSTEM_PREFIXES)


def register_user_modules(objects: Iterable[Any]) -> None:
    """Pickle the program's own modules by value, so workers need not import them
    (tests and scripts are usually not on the workers' ``sys.path``)."""
    for obj in objects:
        candidates = {getattr(obj, "__module__", None), getattr(type(obj), "__module__", None)}
        for name in candidates:
            module = sys.modules.get(name) if name else None
            if module is not None and _is_user_module(module):
                try:
                    cloudpickle.register_pickle_by_value(module)
                except (ValueError, TypeError):
                    pass


def dumps_checked(obj: Any, what: str) -> bytes:
    """``cloudpickle.dumps(obj)``, or an error that says which operator could not be sent."""
    try:
        return cloudpickle.dumps(obj)
    except Exception as e:  # pickling raises many types
        raise FunctionSerializationError(
            f"{what} cannot be serialized to run on a task: {type(e).__name__}: {e}. "
            "Functions must be picklable (do not capture locks, open files, sockets or "
            "clients; create those in open())") from e
