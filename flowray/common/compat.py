"""Helpers for PyFlink API names flowray does not implement, or accepts and ignores.

:func:`not_implemented` makes a method that raises ``NotImplementedError`` naming itself and
what to use instead; :func:`warn_once` logs a warning the first time a key is seen.

>>> class Env:
...     add_thing = not_implemented("Env.add_thing", "use add_other()")
>>> Env().add_thing(1)
Traceback (most recent call last):
...
NotImplementedError: Env.add_thing is not implemented in flowray; instead: use add_other()
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Set

__all__ = ["not_implemented", "warn_once"]

log = logging.getLogger("flowray")
_warned: Set[str] = set()


def not_implemented(name: str, instead: str) -> Callable[..., Any]:
    """A method raising ``NotImplementedError("<name> is not implemented in flowray;
    instead: <instead>")`` whatever its arguments."""

    def method(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is not implemented in flowray; instead: {instead}")

    method.__name__ = name.rsplit(".", 1)[-1]
    method.__doc__ = f"Not implemented in flowray; instead: {instead}"
    method.__flowray_not_implemented__ = True  # type: ignore[attr-defined]
    return method


def warn_once(key: str, message: str) -> None:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    if key not in _warned:
        _warned.add(key)
        log.warning(message)
