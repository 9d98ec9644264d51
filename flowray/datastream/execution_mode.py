"""``RuntimeExecutionMode`` (STREAMING, BATCH, AUTOMATIC), as PyFlink's
``pyflink.datastream.execution_mode``.
"""

from __future__ import annotations

import enum

__all__ = ["RuntimeExecutionMode"]


class RuntimeExecutionMode(enum.Enum):
    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"
