"""``flowray.datastream.async_retry_strategies``: as PyFlink's module of that name."""

from flowray.operators.async_functions import (
    NO_RETRY_STRATEGY,
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
    NoRetryStrategy,
    RetryPredicate,
)

__all__ = ["RetryPredicate", "NoRetryStrategy", "FixedDelayRetryStrategy",
           "ExponentialBackoffDelayRetryStrategy", "NO_RETRY_STRATEGY"]
