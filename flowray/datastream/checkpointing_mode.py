"""``CheckpointingMode`` (EXACTLY_ONCE, AT_LEAST_ONCE), as PyFlink's."""

from __future__ import annotations

import enum

__all__ = ["CheckpointingMode"]


class CheckpointingMode(enum.Enum):
    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
