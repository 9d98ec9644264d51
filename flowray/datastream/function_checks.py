"""Checks of user functions when the graph is built (a mistake named there, not at run
time)."""

from __future__ import annotations

import inspect
from typing import Any

from flowray.operators.functions import ReduceFunction
from flowray.runtime.graph.transformations import GraphError

__all__ = ["check_reduce_function"]


def check_reduce_function(fn: Any, what: str) -> None:
    """A reduce function takes two values: refused at build time if it cannot (a
    function without a readable signature is let through)."""
    call = getattr(fn, "reduce", fn) if isinstance(fn, ReduceFunction) else fn
    if not callable(call):
        raise GraphError(f"{what}: expected a ReduceFunction or a function of two values, "
                         f"got {fn!r}")
    try:
        signature = inspect.signature(call)
    except (TypeError, ValueError):   # a builtin without a signature
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise GraphError(f"{what}: the function must take two values (the value so far and "
                         f"the new one), but its signature is {signature}") from None
