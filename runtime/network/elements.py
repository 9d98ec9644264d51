"""What travels in a channel: record batches and in-band control events.

Control events (watermarks, end-of-partition, checkpoint barriers) travel after the data
before them, so order holds by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

__all__ = [
    "RecordBatch",
    "Watermark",
    "EndOfPartition",
    "END_OF_INPUT",
    "STOP_DRAIN",
    "STOP_NO_DRAIN",
    "CheckpointBarrier",
    "CancelCheckpointMarker",
    "WatermarkStatus",
    "Frame",
]



class RecordBatch:
    """Records sent together; ``key_groups[i]`` is the key group of ``records[i]`` when the
    batch crossed a key-group (``key_by``) exchange, else ``None``; ``timestamps[i]`` is the
    event time of ``records[i]`` (``None`` for a record without one) when any record of the
    batch has one, else ``timestamps`` is ``None``."""

    __slots__ = ("records", "key_groups", "timestamps")

    def __init__(self, records: List[Any], key_groups: Optional[List[int]] = None,
                 timestamps: Optional[List[Optional[int]]] = None) -> None:
        self.records = records
        self.key_groups = key_groups
        self.timestamps = timestamps

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"RecordBatch({len(self.records)} records)"


@dataclass(frozen=True)
class Watermark:
    timestamp: int


@dataclass(frozen=True)
class WatermarkStatus:
    """The producer's output went idle (it holds no watermark back) or active again."""

    idle: bool


#: why a partition ended (Flink's ``StopMode`` on ``EndOfData``)
END_OF_INPUT = 0       # the input ended (bounded sources): operators finish
STOP_DRAIN = 1         # stop-with-savepoint --drain: operators finish, as at the end
STOP_NO_DRAIN = 2      # stop-with-savepoint: operators keep their state, do not finish


@dataclass(frozen=True)
class EndOfPartition:
    """The producer subtask will send nothing more on this channel; ``stop_mode`` says why
    (:data:`END_OF_INPUT`, :data:`STOP_DRAIN`, :data:`STOP_NO_DRAIN`)."""

    stop_mode: int = END_OF_INPUT


@dataclass(frozen=True)
class CheckpointBarrier:
    """``location``: where a savepoint's files go (its directory, path or URI)."""

    checkpoint_id: int
    timestamp: int
    is_savepoint: bool = False
    location: Optional[str] = None


@dataclass(frozen=True)
class CancelCheckpointMarker:
    checkpoint_id: int


Frame = Any  # RecordBatch | Watermark | WatermarkStatus | EndOfPartition | CheckpointBarrier | CancelCheckpointMarker
