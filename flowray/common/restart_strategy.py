"""``RestartStrategies``, as PyFlink's: each returns a configuration that sets Flink's
``restart-strategy.*`` keys (``env.set_restart_strategy(...)``).

>>> RestartStrategies.fixed_delay_restart(3, 10_000).to_dict()["restart-strategy.type"]
'fixed-delay'
>>> RestartStrategies.fixed_delay_restart(3, "10 s").to_dict()["restart-strategy.fixed-delay.delay"]
'10000 ms'
"""

from __future__ import annotations

from typing import Any, Dict

from flowray.common.configuration import Configuration, duration_setting

__all__ = ["RestartStrategyConfiguration", "RestartStrategies"]


class RestartStrategyConfiguration:
    """A restart strategy as configuration keys (``env.set_restart_strategy(...)``)."""

    def __init__(self, settings: Dict[str, Any]) -> None:
        Configuration(settings)  # validate now
        self._settings = dict(settings)

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._settings)

    def get_description(self) -> str:
        """The strategy in words, e.g. ``fixed-delay (attempts=3, delay=10000 ms)``."""
        kind = self._settings.get("restart-strategy.type", "the configured default")
        prefix = f"restart-strategy.{kind}."
        details = ", ".join(f"{k[len(prefix):]}={v}" for k, v in sorted(self._settings.items())
                            if k.startswith(prefix))
        return f"{kind} ({details})" if details else str(kind)

    def __repr__(self) -> str:
        return f"RestartStrategyConfiguration({self._settings!r})"


class RestartStrategies:
    """PyFlink's ``RestartStrategies`` factory; delays in milliseconds or duration text."""

    @staticmethod
    def fall_back_restart() -> RestartStrategyConfiguration:
        """The restart strategy the configuration gives (``restart-strategy.*`` keys set
        elsewhere, or flowray's default): ``set_restart_strategy`` clears the program's."""
        return RestartStrategyConfiguration({})

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration({"restart-strategy.type": "none"})

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: Any
    ) -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration(
            {
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": restart_attempts,
                "restart-strategy.fixed-delay.delay": duration_setting(delay_between_attempts, "delay"),
            }
        )

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: Any, delay_interval: Any
    ) -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration(
            {
                "restart-strategy.type": "failure-rate",
                "restart-strategy.failure-rate.max-failures-per-interval": failure_rate,
                "restart-strategy.failure-rate.failure-rate-interval": duration_setting(
                    failure_interval, "failure interval"
                ),
                "restart-strategy.failure-rate.delay": duration_setting(delay_interval, "delay"),
            }
        )

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: Any,
        max_backoff: Any,
        backoff_multiplier: float,
        reset_backoff_threshold: Any,
        jitter_factor: float,
    ) -> RestartStrategyConfiguration:
        prefix = "restart-strategy.exponential-delay."
        return RestartStrategyConfiguration(
            {
                "restart-strategy.type": "exponential-delay",
                prefix + "initial-backoff": duration_setting(initial_backoff, "initial backoff"),
                prefix + "max-backoff": duration_setting(max_backoff, "max backoff"),
                prefix + "backoff-multiplier": backoff_multiplier,
                prefix + "reset-backoff-threshold": duration_setting(reset_backoff_threshold, "threshold"),
                prefix + "jitter-factor": jitter_factor,
            }
        )
