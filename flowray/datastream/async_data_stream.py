"""``AsyncDataStream``: applies an :class:`~flowray.datastream.functions.AsyncFunction` to a
stream, as PyFlink 2.x's ``pyflink.datastream.async_data_stream`` (see
``flowray.operators.async_wait`` for how it runs and checkpoints).

>>> import asyncio
>>> from flowray.common import Configuration, Time
>>> from flowray.datastream import StreamExecutionEnvironment
>>> class Twice(AsyncFunction):
...     async def async_invoke(self, value):
...         await asyncio.sleep(0)
...         return [value, value]
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> ds = AsyncDataStream.ordered_wait(env.from_collection([1, 2]), Twice(), Time.seconds(5))
>>> list(ds.execute_and_collect())
[1, 1, 2, 2]
"""

from __future__ import annotations

import inspect
from typing import Any

from flowray.datastream.data_stream import DataStream
from flowray.operators.async_functions import (
    NO_RETRY_STRATEGY,
    AsyncFunction,
    AsyncRetryStrategy,
)
from flowray.operators.async_wait import ORDERED, UNORDERED, AsyncWaitOperator

__all__ = ["AsyncDataStream"]


class AsyncDataStream:
    """Adds an async wait operator to a data stream."""

    @staticmethod
    def unordered_wait(data_stream: DataStream, async_function: AsyncFunction, timeout: Any,
                       capacity: int = 100, output_type: Any = None) -> DataStream:
        """Results in completion order (not across watermarks); ``timeout`` is a ``Time``
        (or ``Duration``) for the whole operation; ``capacity`` bounds the records in
        flight."""
        return AsyncDataStream.unordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type)

    @staticmethod
    def unordered_wait_with_retry(data_stream: DataStream, async_function: AsyncFunction,
                                  timeout: Any, async_retry_strategy: AsyncRetryStrategy,
                                  capacity: int = 100, output_type: Any = None) -> DataStream:
        """As :meth:`unordered_wait`, retrying attempts as ``async_retry_strategy`` says."""
        return AsyncDataStream._add(data_stream, async_function, timeout,
                                    async_retry_strategy, capacity, output_type, UNORDERED)

    @staticmethod
    def ordered_wait(data_stream: DataStream, async_function: AsyncFunction, timeout: Any,
                     capacity: int = 100, output_type: Any = None) -> DataStream:
        """Results in input order."""
        return AsyncDataStream.ordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type)

    @staticmethod
    def ordered_wait_with_retry(data_stream: DataStream, async_function: AsyncFunction,
                                timeout: Any, async_retry_strategy: AsyncRetryStrategy,
                                capacity: int = 100, output_type: Any = None) -> DataStream:
        """As :meth:`ordered_wait`, retrying attempts as ``async_retry_strategy`` says."""
        return AsyncDataStream._add(data_stream, async_function, timeout,
                                    async_retry_strategy, capacity, output_type, ORDERED)

    @staticmethod
    def _add(data_stream: DataStream, async_function: AsyncFunction, timeout: Any,
             async_retry_strategy: AsyncRetryStrategy, capacity: int, output_type: Any,
             mode: str) -> DataStream:
        if not isinstance(data_stream, DataStream):
            raise TypeError(f"data_stream must be a DataStream, got {data_stream!r}")
        timeout_ms = AsyncDataStream._validate(async_function, timeout, async_retry_strategy)
        op = AsyncWaitOperator(async_function, timeout_ms, capacity, async_retry_strategy,
                               mode)
        return data_stream._one_input(op, output_type)

    @staticmethod
    def _validate(async_function: AsyncFunction, timeout: Any,
                  async_retry_strategy: AsyncRetryStrategy) -> int:
        invoke = getattr(async_function, "async_invoke", None)
        if invoke is None or not inspect.iscoroutinefunction(invoke):
            raise TypeError(f"Method 'async_invoke' of class '{type(async_function).__name__}' "
                            "should be declared as 'async def'.")
        if async_retry_strategy is None:
            raise ValueError("Async retry strategy should not be None.")
        to_ms = getattr(timeout, "to_milliseconds", None)
        if callable(to_ms):
            timeout_ms = int(to_ms())
        elif isinstance(timeout, int) and not isinstance(timeout, bool):
            timeout_ms = timeout
        else:
            raise TypeError(f"timeout must be a Time or Duration (or milliseconds), "
                            f"got {timeout!r}")
        if async_retry_strategy is not NO_RETRY_STRATEGY and timeout_ms <= 0:
            raise ValueError("Timeout should be configured when do async with retry.")
        if async_retry_strategy.get_retry_predicate() is None:
            raise ValueError(f"Retry predicate of the async retry strategy "
                             f"'{type(async_retry_strategy).__name__}' is None.")
        return timeout_ms
