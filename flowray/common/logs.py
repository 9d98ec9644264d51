"""flowray's logger: quiet libraries, one readable line per event of ours."""

from __future__ import annotations

import logging
import sys

__all__ = ["get_logger"]

_configured = False


def get_logger() -> logging.Logger:
    """The ``flowray`` logger; prints INFO to stderr unless the program configured logging."""
    global _configured
    log = logging.getLogger("flowray")
    if not _configured:
        _configured = True
        if not log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
            log.propagate = False
    return log
