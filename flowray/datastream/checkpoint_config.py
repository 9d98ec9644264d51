"""Checkpoint settings as PyFlink spells them, stored as Flink config keys.

``env.enable_checkpointing(1000)`` and ``env.get_checkpoint_config().set_...`` write the
same keys as ``Configuration`` (``execution.checkpointing.*``, ``state.checkpoints.*``), so
every path is validated the same way and the job sees one configuration.

>>> from flowray.common import Configuration
>>> from flowray.datastream.checkpointing_mode import CheckpointingMode
>>> conf = Configuration()
>>> cc = CheckpointConfig(conf)
>>> _ = cc.set_checkpoint_interval(500).set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
>>> conf.to_dict()["execution.checkpointing.interval"], cc.get_checkpointing_mode().name
('500 ms', 'AT_LEAST_ONCE')
"""

from __future__ import annotations

from typing import Optional

from flowray.common.configuration import Configuration, duration_setting
from flowray.common.options import (
    CHECKPOINTING_INTERVAL,
    CHECKPOINTING_MAX_CONCURRENT,
    CHECKPOINTING_MIN_PAUSE,
    CHECKPOINTING_MODE,
    CHECKPOINTING_TIMEOUT,
    CHECKPOINTING_TOLERABLE_FAILURES,
    CHECKPOINTS_DIR,
    CHECKPOINTS_NUM_RETAINED,
)
from flowray.datastream.checkpointing_mode import CheckpointingMode

__all__ = ["CheckpointConfig"]


class CheckpointConfig:
    """PyFlink's ``CheckpointConfig``; reads and writes the environment's configuration."""

    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration

    def is_checkpointing_enabled(self) -> bool:
        return self._conf.get(CHECKPOINTING_INTERVAL) is not None

    def get_checkpoint_interval(self) -> int:
        interval = self._conf.get(CHECKPOINTING_INTERVAL)
        return -1 if interval is None else interval

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        self._conf.set_string(
            CHECKPOINTING_INTERVAL.key, duration_setting(checkpoint_interval, "checkpoint interval")
        )
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode(self._conf.get(CHECKPOINTING_MODE))

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> "CheckpointConfig":
        if not isinstance(mode, CheckpointingMode):
            raise TypeError(f"expected a CheckpointingMode, got {mode!r}")
        self._conf.set_string(CHECKPOINTING_MODE.key, mode.value)
        return self

    def get_checkpoint_timeout(self) -> int:
        return self._conf.get(CHECKPOINTING_TIMEOUT)

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        self._conf.set_string(
            CHECKPOINTING_TIMEOUT.key, duration_setting(checkpoint_timeout, "checkpoint timeout")
        )
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self._conf.get(CHECKPOINTING_MIN_PAUSE)

    def set_min_pause_between_checkpoints(self, min_pause: int) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_MIN_PAUSE.key, duration_setting(min_pause, "min pause"))
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self._conf.get(CHECKPOINTING_MAX_CONCURRENT)

    def set_max_concurrent_checkpoints(self, max_concurrent: int) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_MAX_CONCURRENT.key, max_concurrent)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self._conf.get(CHECKPOINTING_TOLERABLE_FAILURES)

    def set_tolerable_checkpoint_failure_number(self, number: int) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_TOLERABLE_FAILURES.key, number)
        return self

    def get_checkpoint_storage_path(self) -> Optional[str]:
        return self._conf.get(CHECKPOINTS_DIR)

    def set_checkpoint_storage_dir(self, path: str) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTS_DIR.key, str(path))
        return self

    def get_num_retained_checkpoints(self) -> int:
        return self._conf.get(CHECKPOINTS_NUM_RETAINED)

    def set_num_retained_checkpoints(self, number: int) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTS_NUM_RETAINED.key, number)
        return self
