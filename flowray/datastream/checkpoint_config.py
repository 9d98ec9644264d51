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

from typing import Any, Optional

from flowray.common.configuration import Configuration, duration_setting
from flowray.common.options import (
    CHECKPOINTS_RETENTION,
    CHECKPOINTING_INTERVAL,
    CHECKPOINTING_MAX_CONCURRENT,
    CHECKPOINTING_MIN_PAUSE,
    CHECKPOINTING_MODE,
    CHECKPOINTING_TIMEOUT,
    CHECKPOINTING_TOLERABLE_FAILURES,
    CHECKPOINTS_DIR,
    CHECKPOINTS_NUM_RETAINED,
    CHECKPOINTING_ALIGNED_TIMEOUT,
    CHECKPOINTING_UNALIGNED_ENABLED,
    CHECKPOINTING_UNALIGNED_FORCED,
    unaligned_checkpoints_enabled,
)
from flowray.common.time import Duration
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

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode
                               ) -> "CheckpointConfig":
        if not isinstance(checkpointing_mode, CheckpointingMode):
            raise TypeError(f"expected a CheckpointingMode, got {checkpointing_mode!r}")
        self._conf.set_string(CHECKPOINTING_MODE.key, checkpointing_mode.value)
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

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int
                                          ) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_MIN_PAUSE.key,
                              duration_setting(min_pause_between_checkpoints, "min pause"))
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self._conf.get(CHECKPOINTING_MAX_CONCURRENT)

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int
                                       ) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_MAX_CONCURRENT.key, max_concurrent_checkpoints)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self._conf.get(CHECKPOINTING_TOLERABLE_FAILURES)

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int
                                                ) -> "CheckpointConfig":
        self._conf.set_string(CHECKPOINTING_TOLERABLE_FAILURES.key,
                              tolerable_checkpoint_failure_number)
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

    # -- retention of checkpoints when the job ends ------------------------------------
    def set_externalized_checkpoint_retention(self, retention_mode: Any) -> "CheckpointConfig":
        """An ``ExternalizedCheckpointRetention``: which of a job's checkpoints outlive it."""
        from flowray.datastream.externalized_checkpoint_retention import (
            ExternalizedCheckpointRetention,
        )

        if not isinstance(retention_mode, ExternalizedCheckpointRetention):
            raise TypeError(f"expected an ExternalizedCheckpointRetention, got "
                            f"{retention_mode!r}")
        self._conf.set_string(CHECKPOINTS_RETENTION.key, retention_mode.value)
        return self

    def get_externalized_checkpoint_retention(self) -> Any:
        from flowray.datastream.externalized_checkpoint_retention import (
            ExternalizedCheckpointRetention,
        )

        return ExternalizedCheckpointRetention(self._conf.get(CHECKPOINTS_RETENTION))

    def is_externalized_checkpoints_enabled(self) -> bool:
        return self._conf.get(CHECKPOINTS_RETENTION) != "NO_EXTERNALIZED_CHECKPOINTS"

    # -- deprecated Flink switch, mapped to the tolerable failure number -----------------
    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool
                                         ) -> "CheckpointConfig":
        """``True``: a failed checkpoint fails the job (tolerable failures 0); ``False``:
        failed checkpoints are tolerated (up to 10000, the most flowray allows)."""
        return self.set_tolerable_checkpoint_failure_number(
            0 if fail_on_checkpointing_errors else 10000)

    def is_fail_on_checkpointing_errors(self) -> bool:
        return self.get_tolerable_checkpoint_failure_number() == 0

    # -- unaligned checkpoints (docs/internals/unaligned-checkpoints.md) --------------
    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        """Barriers overtake the records in flight, which are stored with the checkpoint
        (``execution.checkpointing.unaligned.enabled``): checkpoints stay fast under
        back-pressure. Savepoints stay aligned."""
        self._conf.set_string(CHECKPOINTING_UNALIGNED_ENABLED.key, str(bool(enabled)).lower())
        return self

    def disable_unaligned_checkpoints(self) -> "CheckpointConfig":
        return self.enable_unaligned_checkpoints(False)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return unaligned_checkpoints_enabled(self._conf)

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True
                                        ) -> "CheckpointConfig":
        """Unaligned also for the tasks of iterations
        (``execution.checkpointing.unaligned.forced``)."""
        self._conf.set_string(CHECKPOINTING_UNALIGNED_FORCED.key,
                              str(bool(force_unaligned_checkpoints)).lower())
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        return bool(self._conf.get(CHECKPOINTING_UNALIGNED_FORCED))

    def set_aligned_checkpoint_timeout(self, alignment_timeout: Any) -> "CheckpointConfig":
        """Start each checkpoint aligned and switch it to unaligned at a task once its
        barrier is this old (a :class:`~flowray.common.time.Duration` or ms;
        ``execution.checkpointing.aligned-checkpoint-timeout``)."""
        ms = alignment_timeout.to_milliseconds() if hasattr(
            alignment_timeout, "to_milliseconds") else alignment_timeout
        self._conf.set_string(CHECKPOINTING_ALIGNED_TIMEOUT.key,
                              duration_setting(ms, "aligned checkpoint timeout"))
        return self

    def get_aligned_checkpoint_timeout(self) -> "Duration":
        return Duration.of_millis(self._conf.get(CHECKPOINTING_ALIGNED_TIMEOUT))

    def set_alignment_timeout(self, alignment_timeout: Any) -> "CheckpointConfig":
        """Deprecated name of :meth:`set_aligned_checkpoint_timeout`."""
        return self.set_aligned_checkpoint_timeout(alignment_timeout)

    def get_alignment_timeout(self) -> "Duration":
        """Deprecated name of :meth:`get_aligned_checkpoint_timeout`."""
        return self.get_aligned_checkpoint_timeout()
