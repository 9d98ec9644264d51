"""Restart strategies (Flink's RestartStrategyOptions)."""

from __future__ import annotations

from flowray.common.configuration import (
    INFINITE,
    parse_count_or_infinite,
    parse_duration_ms,
    parse_float,
    parse_int,
    parse_str,
    register_option,
)
from flowray.common.options.validators import at_least_one, positive

__all__ = ["RESTART_STRATEGY_TYPE", "FIXED_DELAY_ATTEMPTS", "FIXED_DELAY_DELAY",
           "FAILURE_RATE_MAX_FAILURES", "FAILURE_RATE_INTERVAL", "FAILURE_RATE_DELAY",
           "EXP_DELAY_INITIAL_BACKOFF", "EXP_DELAY_MAX_BACKOFF", "EXP_DELAY_MULTIPLIER",
           "EXP_DELAY_RESET_THRESHOLD", "EXP_DELAY_JITTER", "EXP_DELAY_ATTEMPTS_BEFORE_RESET"]


# -- restart strategies ------------------------------------------------------------------
RESTART_STRATEGY_TYPE = register_option(
    "restart-strategy.type",
    parse_str,
    None,
    "none | fixed-delay | failure-rate | exponential-delay; unset: none without "
    "checkpointing, exponential-delay with it.",
    choices=("none", "fixed-delay", "failure-rate", "exponential-delay"),
    aliases={
        "off": "none",
        "disable": "none",
        "fixeddelay": "fixed-delay",
        "failurerate": "failure-rate",
        "exponentialdelay": "exponential-delay",
    },
)

FIXED_DELAY_ATTEMPTS = register_option(
    "restart-strategy.fixed-delay.attempts",
    parse_count_or_infinite,
    1,
    "Restarts allowed before the job fails.",
)


FIXED_DELAY_DELAY = register_option(
    "restart-strategy.fixed-delay.delay",
    parse_duration_ms,
    1_000,
    "Wait between a failure and the restart.",
)

FAILURE_RATE_MAX_FAILURES = register_option(
    "restart-strategy.failure-rate.max-failures-per-interval",
    parse_int,
    1,
    "Failures within one interval that are still restarted.",
    check=at_least_one,
)


FAILURE_RATE_INTERVAL = register_option(
    "restart-strategy.failure-rate.failure-rate-interval",
    parse_duration_ms,
    60_000,
    "The window in which failures are counted.",
    check=positive,
)

FAILURE_RATE_DELAY = register_option(
    "restart-strategy.failure-rate.delay",
    parse_duration_ms,
    1_000,
    "Wait between a failure and the restart.",
)


EXP_DELAY_INITIAL_BACKOFF = register_option(
    "restart-strategy.exponential-delay.initial-backoff",
    parse_duration_ms,
    1_000,
    "First wait after a failure.",
)

EXP_DELAY_MAX_BACKOFF = register_option(
    "restart-strategy.exponential-delay.max-backoff",
    parse_duration_ms,
    60_000,
    "Longest wait between restarts.",
)


EXP_DELAY_MULTIPLIER = register_option(
    "restart-strategy.exponential-delay.backoff-multiplier",
    parse_float,
    1.5,
    "Factor applied to the wait after each failure.",
    check=lambda v: None if v > 1.0 else "must be greater than 1.0",
)

EXP_DELAY_RESET_THRESHOLD = register_option(
    "restart-strategy.exponential-delay.reset-backoff-threshold",
    parse_duration_ms,
    3_600_000,
    "A job that ran this long without failing starts again from the initial backoff.",
    check=positive,
)


EXP_DELAY_JITTER = register_option(
    "restart-strategy.exponential-delay.jitter-factor",
    parse_float,
    0.1,
    "Random spread of the wait, as a fraction of it (0 to 1).",
    check=lambda v: None if 0.0 <= v <= 1.0 else "must be between 0 and 1",
)

EXP_DELAY_ATTEMPTS_BEFORE_RESET = register_option(
    "restart-strategy.exponential-delay.attempts-before-reset-backoff",
    parse_count_or_infinite,
    INFINITE,
    "Restarts allowed before the backoff is reset; more fail the job.",
    check=at_least_one,
)
