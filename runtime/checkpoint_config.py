"""Checkpoint and restart settings as PyFlink spells them, stored as Flink config keys.

``env.enable_checkpointing(1000)`` and ``env.get_checkpoint_config().set_...`` write the
same keys as ``Configuration`` (``execution.checkpointing.*``, ``restart-strategy.*``), so
every path is validated the same way and the job sees one configuration.

>>> from flowray.runtime.config import Configuration
>>> conf = Configuration()
>>> cc = CheckpointConfig(conf)
>>> _ = cc.set_checkpoint_interval(500).set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
>>> conf.to_dict()["execution.checkpointing.interval"], cc.get_checkpointing_mode().name
('500 ms', 'AT_LEAST_ONCE')
>>> RestartStrategies.fixed_delay_restart(3, 10_000).to_dict()["restart-strategy.type"]
'fixed-delay'
"""

from __future__ import annotations

import enum
from typing import Any, Dict, Optional

from flowray.runtime.config import (
    CHECKPOINTING_INTERVAL,
    CHECKPOINTING_MAX_CONCURRENT,
    CHECKPOINTING_MIN_PAUSE,
    CHECKPOINTING_MODE,
    CHECKPOINTING_TIMEOUT,
    CHECKPOINTING_TOLERABLE_FAILURES,
    CHECKPOINTS_DIR,
    CHECKPOINTS_NUM_RETAINED,
    Configuration,
    parse_duration_ms,
)

__all__ = ["CheckpointingMode", "CheckpointConfig", "RestartStrategies",
           "RestartStrategyConfiguration"]


class CheckpointingMode(enum.Enum):
    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


def _ms(value: Any, what: str) -> str:
    try:
        return f"{parse_duration_ms(value)} ms"
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


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
        self._conf.set_string(CHECKPOINTING_INTERVAL.key,
                              _ms(checkpoint_interval, "checkpoint interval"))
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
        self._conf.set_string(CHECKPOINTING_TIMEOUT.key,
                              _ms(checkpoint_timeout, "checkpoint timeout"))
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self._conf.get(CHECKPOINTING_MIN_PAUSE)

    def set_min_pause_between_checkpoints(self, min_pause: int) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_MIN_PAUSE.key, _ms(min_pause, "min pause"))
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


class RestartStrategyConfiguration:
    """A restart strategy as configuration keys (``env.set_restart_strategy(...)``)."""

    def __init__(self, settings: Dict[str, Any]) -> None:
        Configuration(settings)  # validate now
        self._settings = dict(settings)

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._settings)

    def __repr__(self) -> str:
        return f"RestartStrategyConfiguration({self._settings!r})"


class RestartStrategies:
    """PyFlink's ``RestartStrategies`` factory; delays in milliseconds or duration text."""

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration({"restart-strategy.type": "none"})

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: Any
                            ) -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration({
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": restart_attempts,
            "restart-strategy.fixed-delay.delay": _ms(delay_between_attempts, "delay")})

    @staticmethod
    def failure_rate_restart(failure_rate: int, failure_interval: Any, delay_interval: Any
                             ) -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration({
            "restart-strategy.type": "failure-rate",
            "restart-strategy.failure-rate.max-failures-per-interval": failure_rate,
            "restart-strategy.failure-rate.failure-rate-interval":
                _ms(failure_interval, "failure interval"),
            "restart-strategy.failure-rate.delay": _ms(delay_interval, "delay")})

    @staticmethod
    def exponential_delay_restart(initial_backoff: Any, max_backoff: Any,
                                  backoff_multiplier: float, reset_backoff_threshold: Any,
                                  jitter_factor: float) -> RestartStrategyConfiguration:
        prefix = "restart-strategy.exponential-delay."
        return RestartStrategyConfiguration({
            "restart-strategy.type": "exponential-delay",
            prefix + "initial-backoff": _ms(initial_backoff, "initial backoff"),
            prefix + "max-backoff": _ms(max_backoff, "max backoff"),
            prefix + "backoff-multiplier": backoff_multiplier,
            prefix + "reset-backoff-threshold": _ms(reset_backoff_threshold, "threshold"),
            prefix + "jitter-factor": jitter_factor})
