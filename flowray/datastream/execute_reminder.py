"""A warning at exit for a program that built transformations and never executed them.

A PyFlink program does nothing until it calls ``env.execute()``; a script that forgets the
call ends quietly with no job and no output. flowray warns at the interpreter's exit when an
environment that the program's main script created (``__main__``: ``python job.py``,
``flowray run job.py``) still holds transformations that no ``execute()``,
``execute_async()`` or ``execute_and_collect()`` took. It says nothing when the program
ended with an uncaught exception, and environments built by libraries and tests (not
``__main__``) are never watched.

>>> class Env:
...     _transformations = ["Map", "Sink: Print"]
>>> print(never_executed_message(Env()))
flowray: the program defined 2 transformation(s) but never ran them: call env.execute() (or execute_async(), or execute_and_collect() on a stream) at its end
>>> Env._transformations = []
>>> never_executed_message(Env()) is None
True
"""

from __future__ import annotations

import atexit
import logging
import sys
from typing import Any, Optional

__all__ = ["watch_if_main", "never_executed_message"]

log = logging.getLogger(__name__)


def never_executed_message(env: Any) -> Optional[str]:
    """The warning for ``env`` if it holds transformations that never ran, else ``None``."""
    pending = len(getattr(env, "_transformations", ()))
    if not pending or getattr(env, "_plan_shown", False):
        return None
    return (f"flowray: the program defined {pending} transformation(s) but never ran them: "
            "call env.execute() (or execute_async(), or execute_and_collect() on a stream) "
            "at its end")


def _created_by_main(skip_frames: int) -> bool:
    """Whether the first caller outside flowray is the ``__main__`` module's code."""
    frame = sys._getframe(skip_frames + 1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("flowray"):
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__") == "__main__"


def _check_at_exit(env: Any) -> None:
    if getattr(sys, "last_value", None) is not None:
        return   # the program failed: its traceback says more than this would
    message = never_executed_message(env)
    if message is not None:
        log.warning(message)


def watch_if_main(env: Any) -> None:
    """Check ``env`` at exit (see the module docstring) if ``__main__`` created it."""
    if _created_by_main(skip_frames=1):
        atexit.register(_check_at_exit, env)
