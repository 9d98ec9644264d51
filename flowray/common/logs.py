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


class _UnlessConfigured(logging.StreamHandler):
    """Writes a record only while the program has configured no logging of its own (the
    root logger has no handler); once it has, the record reaches the program's handlers
    by propagation, and only there."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


def configure_logging() -> logging.Logger:
    """Print the ``flowray`` logger's INFO records to stderr while the program has not
    configured logging; records always propagate, so logging the program configures (now
    or later) receives them. Idempotent; the ``flowray`` logger."""
    global _configured
    log = logging.getLogger("flowray")
    if not _configured:
        _configured = True
        if not log.handlers and not logging.getLogger().handlers:
            handler = _UnlessConfigured(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
    return log
