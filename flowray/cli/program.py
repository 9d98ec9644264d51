"""How ``flowray run`` runs a user's program: ``python -m flowray.cli.program script.py
args...`` behaves as ``python script.py args...`` (``__main__``, ``sys.argv``, the script's
folder first on ``sys.path``), and ``... -m module args...`` as ``python -m module args...``, with the CLI's settings in ``FLOWRAY_CLIENT_CONFIG`` (read
by ``StreamExecutionEnvironment.get_execution_environment()``).

An error flowray raises while submitting (a bad setting, a savepoint path that does not
exist, a parallelism above the max parallelism, no Ray cluster for a detached job) ends
the program with one line on stderr and exit code 1; anything else is reported as Python
would (``FLOWRAY_TRACEBACK=1`` shows the traceback of flowray's errors too).

>>> from flowray.common.configuration import ConfigurationError
>>> try:
...     from flowray.common.configuration import Configuration
...     Configuration().set_string("no.such.key", "1")
... except ConfigurationError as e:
...     print(submission_error(e))
unknown configuration key 'no.such.key'
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import List, Optional

__all__ = ["main", "submission_error"]

#: errors flowray raises about what the user asked for; one line is all a person needs
_USER_ERRORS = ("ConfigurationError", "GraphError", "FileNotFoundError", "NoRayClusterError",
                "SavepointError", "StateAssignmentError", "ValueError", "TypeError")


def _flowray_dirs() -> List[str]:
    import flowray
    import flowray.operators
    import flowray.runtime
    import flowray.state

    dirs = []
    for pkg in (flowray, flowray.runtime, flowray.operators, flowray.state):
        dirs.extend(os.path.abspath(d) + os.sep for d in pkg.__path__)
    return dirs


def submission_error(e: BaseException) -> Optional[str]:
    """The one line to print for ``e`` if flowray raised it about the user's request
    (``None``: not one of those; show the traceback)."""
    names = {c.__name__ for c in type(e).__mro__}
    if not names.intersection(_USER_ERRORS):
        return None
    tb = e.__traceback__
    if tb is not None:
        while tb.tb_next is not None:
            tb = tb.tb_next
        where = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not any(where.startswith(d) for d in _flowray_dirs()):
            return None  # the user's own code raised it
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m flowray.cli.program (SCRIPT | -m MODULE) [ARGS...]",
              file=sys.stderr)
        return 2
    try:
        if argv[0] == "-m":   # as `python -m MODULE ARGS`: the current folder on sys.path
            sys.argv = [argv[1]] + argv[2:]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = [argv[0]] + argv[1:]
            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # reported as Python would, or in one line
        sys.last_type, sys.last_value = type(e), e   # as Python's own uncaught exception
        line = submission_error(e)
        if line is None or os.environ.get("FLOWRAY_TRACEBACK"):
            raise
        print(f"flowray run: error: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
