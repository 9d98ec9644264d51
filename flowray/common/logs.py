"""flowray's logging: every module logs to ``logging.getLogger(__name__)``, so all records go
through the ``flowray`` logger; :func:`configure_logging` gives that logger one readable
line per event on stderr, unless the program configured logging itself. Ray and Spark are
turned down where they start (``runtime.execution.cluster``, ``flowray.spark.session``).

>>> configure_logging() is logging.getLogger("flowray")
True
"""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]

_configured = False


def configure_logging() -> logging.Logger:
    """Print the ``flowray`` logger's INFO records to stderr unless the program configured
    logging (idempotent); the ``flowray`` logger."""
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
