"""Async I/O user interfaces, as PyFlink 2.x's: :class:`AsyncFunction` (``async def
async_invoke(value) -> list``, ``timeout(value)``), :class:`AsyncRetryStrategy` and
:class:`AsyncRetryPredicate`, and the built-in strategies (PyFlink's
``pyflink.datastream.async_retry_strategies``; re-exported there by
``flowray.datastream``).

>>> s = AsyncRetryStrategy.exponential_backoff(3, 100, 1000, 2.0, None, None)
>>> [s.get_backoff_time_millis(a) for a in (1, 2, 3, 4)], s.can_retry(3), s.can_retry(4)
([100, 200, 400, 800], True, False)
"""

from __future__ import annotations

import abc
import enum
from typing import Any, Callable, List, Optional

from flowray.operators.functions import Function

__all__ = [
    "AsyncFunction",
    "AsyncFunctionDescriptor",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "RetryPredicate",
    "NoRetryStrategy",
    "FixedDelayRetryStrategy",
    "ExponentialBackoffDelayRetryStrategy",
    "NO_RETRY_STRATEGY",
    "empty_result_predicate",
    "has_exception_predicate",
    "exception_type_predicate",
]


class AsyncRetryPredicate(abc.ABC):
    """When a result or an exception of ``async_invoke`` asks for another attempt."""

    @abc.abstractmethod
    def result_predicate(self) -> Optional[Callable[[List[Any]], bool]]:
        """Optional: called with an attempt's results; True asks for a retry."""

    @abc.abstractmethod
    def exception_predicate(self) -> Optional[Callable[[Exception], bool]]:
        """Optional: called with an attempt's exception; True asks for a retry."""


class AsyncRetryStrategy(abc.ABC):
    """Whether and when to retry (attempts are counted from 1)."""

    @abc.abstractmethod
    def can_retry(self, current_attempts: int) -> bool:
        """Whether another attempt may follow attempt number ``current_attempts``."""

    @abc.abstractmethod
    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """Delay in ms before the attempt after ``current_attempts``."""

    @abc.abstractmethod
    def get_retry_predicate(self) -> AsyncRetryPredicate:
        """The predicates that decide whether an attempt is retried."""

    @staticmethod
    def no_restart() -> "AsyncRetryStrategy":
        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(max_attempts: int, backoff_time_millis: int,
                    result_predicate: Optional[Callable[[List[Any]], bool]],
                    exception_predicate: Optional[Callable[[Exception], bool]]
                    ) -> "FixedDelayRetryStrategy":
        return FixedDelayRetryStrategy(max_attempts, backoff_time_millis, result_predicate,
                                       exception_predicate)

    @staticmethod
    def exponential_backoff(max_attempts: int, initial_delay: int, max_retry_delay: int,
                            multiplier: float,
                            result_predicate: Optional[Callable[[List[Any]], bool]],
                            exception_predicate: Optional[Callable[[Exception], bool]]
                            ) -> "ExponentialBackoffDelayRetryStrategy":
        return ExponentialBackoffDelayRetryStrategy(
            max_attempts, initial_delay, max_retry_delay, multiplier, result_predicate,
            exception_predicate)


class AsyncFunction(Function):
    """Enriches each record asynchronously: ``async_invoke`` returns the list of results
    for one input (raising fails the job, unless the retry strategy retries it);
    ``timeout`` gives the results when the whole operation (retries included) took longer
    than the operator's timeout (by default it raises :class:`TimeoutError`: job failure).
    ``open``/``close`` run in the task's thread, ``async_invoke`` in the operator's event
    loop thread."""

    @abc.abstractmethod
    async def async_invoke(self, value: Any) -> List[Any]:
        """The results for ``value`` (a list, possibly empty)."""

    def timeout(self, value: Any) -> List[Any]:
        raise TimeoutError("Async function call has timed out for input: " + str(value))


class AsyncFunctionDescriptor:
    """The settings of one async operator (PyFlink's descriptor, kept for its shape)."""

    class OutputMode(enum.Enum):
        ORDERED = 0
        UNORDERED = 1

    def __init__(self, async_function: AsyncFunction, timeout: Any, capacity: int,
                 async_retry_strategy: AsyncRetryStrategy, output_mode: "OutputMode") -> None:
        self.async_function = async_function
        self.timeout = timeout
        self.capacity = capacity
        self.async_retry_strategy = async_retry_strategy
        self.output_mode = output_mode


# -- built-in strategies (pyflink.datastream.async_retry_strategies) -------------------------

class RetryPredicate(AsyncRetryPredicate):
    def __init__(self, result_predicate: Optional[Callable[[List[Any]], bool]],
                 exception_predicate: Optional[Callable[[Exception], bool]]) -> None:
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> Optional[Callable[[List[Any]], bool]]:
        return self._result_predicate

    def exception_predicate(self) -> Optional[Callable[[Exception], bool]]:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy):
    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(None, None)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} should be greater than zero, got {value!r}")


class FixedDelayRetryStrategy(AsyncRetryStrategy):
    """Up to ``max_attempts`` retries, ``backoff_time_millis`` apart."""

    def __init__(self, max_attempts: int, backoff_time_millis: int,
                 result_predicate: Optional[Callable[[List[Any]], bool]],
                 exception_predicate: Optional[Callable[[Exception], bool]]) -> None:
        _positive("max_attempts", max_attempts)
        _positive("backoff_time_millis", backoff_time_millis)
        self._max_attempts = max_attempts
        self._backoff_time_millis = backoff_time_millis
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(self._result_predicate, self._exception_predicate)


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy):
    """Up to ``max_attempts`` retries; the delay starts at ``initial_delay`` and grows by
    ``multiplier`` up to ``max_retry_delay``."""

    def __init__(self, max_attempts: int, initial_delay: int, max_retry_delay: int,
                 multiplier: float,
                 result_predicate: Optional[Callable[[List[Any]], bool]],
                 exception_predicate: Optional[Callable[[Exception], bool]]) -> None:
        _positive("max_attempts", max_attempts)
        _positive("initial_delay", initial_delay)
        _positive("max_retry_delay", max_retry_delay)
        _positive("multiplier", multiplier)
        self._max_attempts = max_attempts
        self._initial_delay = initial_delay
        self._max_retry_delay = max_retry_delay
        self._multiplier = multiplier
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        # a pure function of the attempt (PyFlink keeps the last delay in the strategy,
        # which one strategy shared by many in-flight records would mix up)
        delay = float(self._initial_delay)
        for _ in range(max(0, current_attempts - 1)):
            delay = min(delay * self._multiplier, self._max_retry_delay)
        return int(min(delay, self._max_retry_delay))

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(self._result_predicate, self._exception_predicate)


NO_RETRY_STRATEGY: AsyncRetryStrategy = NoRetryStrategy()


# -- predicates (pyflink.datastream.async_retry_predicates) ----------------------------------

def empty_result_predicate(result: Optional[List[Any]]) -> bool:
    return result is None or len(result) == 0


def has_exception_predicate(error: Optional[BaseException]) -> bool:
    return error is not None


def exception_type_predicate(error: Optional[BaseException], expected_error_type: type) -> bool:
    return isinstance(error, expected_error_type)
