"""``flowray.common.restart_strategy``: as ``pyflink.common.restart_strategy``."""

from flowray.runtime.checkpoint_config import RestartStrategies, RestartStrategyConfiguration

__all__ = ["RestartStrategies", "RestartStrategyConfiguration"]
