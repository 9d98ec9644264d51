"""The checkpoint settings a job runs with (:class:`CheckpointSettings`), read from the
``execution.checkpointing.*`` and ``state.checkpoints.*`` keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["CheckpointSettings"]


@dataclass(frozen=True)
class CheckpointSettings:
    """Checkpointing options (Flink's keys, durations in ms).

    >>> s = CheckpointSettings.from_config({"execution.checkpointing.interval": "10 s",
    ...                                     "execution.checkpointing.min-pause": "500 ms"})
    >>> s.enabled, s.interval_ms, s.min_pause_ms, s.timeout_ms, s.max_concurrent
    (True, 10000, 500, 600000, 1)
    >>> CheckpointSettings.from_config({}).enabled
    False
    """

    interval_ms: Optional[int] = None
    mode: str = "EXACTLY_ONCE"
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    num_retained: int = 1

    def __post_init__(self) -> None:
        if self.interval_ms is not None and self.interval_ms <= 0:
            raise ValueError(f"checkpoint interval must be positive, got {self.interval_ms}")
        if self.timeout_ms <= 0:
            raise ValueError(f"checkpoint timeout must be positive, got {self.timeout_ms}")
        if self.min_pause_ms < 0:
            raise ValueError(f"min pause must not be negative, got {self.min_pause_ms}")
        if self.max_concurrent < 1:
            raise ValueError(f"max concurrent must be at least 1, got {self.max_concurrent}")
        if self.tolerable_failures < 0:
            raise ValueError(
                f"tolerable failures must not be negative, got {self.tolerable_failures}"
            )
        if self.num_retained < 1:
            raise ValueError(f"num retained must be at least 1, got {self.num_retained}")

    @property
    def enabled(self) -> bool:
        """Periodic checkpoints are on (an interval is set)."""
        return self.interval_ms is not None

    @staticmethod
    def from_config(config: Any) -> "CheckpointSettings":
        """From a :class:`~flowray.common.configuration.Configuration` or a dict of keys."""
        from flowray.common.configuration import Configuration
        from flowray.common.options import (
            CHECKPOINTING_INTERVAL,
            CHECKPOINTING_MAX_CONCURRENT,
            CHECKPOINTING_MIN_PAUSE,
            CHECKPOINTING_MODE,
            CHECKPOINTING_TIMEOUT,
            CHECKPOINTING_TOLERABLE_FAILURES,
            CHECKPOINTS_NUM_RETAINED,
        )

        if config is None:
            config = Configuration()
        elif not isinstance(config, Configuration):
            config = Configuration(config)
        return CheckpointSettings(
            interval_ms=config.get(CHECKPOINTING_INTERVAL),
            mode=config.get(CHECKPOINTING_MODE),
            timeout_ms=config.get(CHECKPOINTING_TIMEOUT),
            min_pause_ms=config.get(CHECKPOINTING_MIN_PAUSE),
            max_concurrent=config.get(CHECKPOINTING_MAX_CONCURRENT),
            tolerable_failures=config.get(CHECKPOINTING_TOLERABLE_FAILURES),
            num_retained=config.get(CHECKPOINTS_NUM_RETAINED),
        )
