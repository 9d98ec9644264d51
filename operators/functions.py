"""User-function interfaces, shaped like PyFlink's ``pyflink.datastream.functions``.

Functions may be lambdas, plain functions or instances of these classes. Class instances
get ``open(runtime_context)`` before the first record and ``close()`` at the end,
also when the task is cancelled or fails (as in Flink: release what ``open`` took there).
``flat_map`` and ``process_element`` may ``yield`` any number of outputs (or return an
iterable, or ``None``).

>>> class Doubler(MapFunction):
...     def map(self, value):
...         return value * 2
>>> Doubler().map(21)
42
"""

from __future__ import annotations

import abc
import enum
from typing import TYPE_CHECKING, Any, Iterable, Optional

from flowray.state.keyed_backend import (
    AggregatingState,
    KeyedStateBackend,
    ListState,
    MapState,
    ReducingState,
    StateAccessError,
    ValueState,
)
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)

if TYPE_CHECKING:
    from flowray.metrics import MetricGroup

__all__ = [
    "Function",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "AggregateFunction",
    "KeySelector",
    "ProcessFunction",
    "KeyedProcessFunction",
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "SinkFunction",
    "RuntimeContext",
    "TimerService",
    "TimeDomain",
]


class Function:
    """Base of all user functions: optional ``open``/``close`` hooks."""

    def open(self, runtime_context: "RuntimeContext") -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    @abc.abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map(self, value: Any) -> Optional[Iterable[Any]]: ...


class FilterFunction(Function):
    @abc.abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function):
    @abc.abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function):
    @abc.abstractmethod
    def create_accumulator(self) -> Any: ...

    @abc.abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any: ...

    @abc.abstractmethod
    def get_result(self, accumulator: Any) -> Any: ...

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError


class KeySelector(Function):
    @abc.abstractmethod
    def get_key(self, value: Any) -> Any: ...


class TimeDomain(enum.Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1


class TimerService(abc.ABC):
    @abc.abstractmethod
    def current_processing_time(self) -> int: ...

    @abc.abstractmethod
    def current_watermark(self) -> int: ...

    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class ProcessFunction(Function):
    class Context(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Any: ...


class KeyedProcessFunction(Function):
    class Context(ProcessFunction.Context):
        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> TimeDomain: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Any: ...

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Any:
        pass


class CoMapFunction(Function):
    @abc.abstractmethod
    def map1(self, value: Any) -> Any: ...

    @abc.abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function):
    @abc.abstractmethod
    def flat_map1(self, value: Any) -> Any: ...

    @abc.abstractmethod
    def flat_map2(self, value: Any) -> Any: ...


class CoProcessFunction(Function):
    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: ProcessFunction.Context) -> Any: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: ProcessFunction.Context) -> Any: ...


class KeyedCoProcessFunction(Function):
    """Two keyed inputs (``connect(...).key_by(k1, k2).process``) with keyed state and
    timers shared by both; ``on_timer`` fires with the timer's key current."""

    class Context(KeyedProcessFunction.Context):
        pass

    class OnTimerContext(KeyedProcessFunction.OnTimerContext):
        pass

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Any: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Any: ...

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Any:
        pass


class SinkFunction(Function):
    """``add_sink`` target: ``invoke(value, context)`` per record."""

    @abc.abstractmethod
    def invoke(self, value: Any, context: Any) -> None: ...


class RuntimeContext:
    """What a function learns about where it runs, and its way to keyed state."""

    def __init__(self, task_name: str, subtask_index: int, parallelism: int,
                 max_parallelism: int, attempt_number: int = 0,
                 keyed_backend: Optional[KeyedStateBackend] = None,
                 operator_name: str = "", job_parameters: Optional[dict] = None,
                 metric_group: Optional[Any] = None) -> None:
        self._task_name = task_name
        self._index = subtask_index
        self._parallelism = parallelism
        self._max_parallelism = max_parallelism
        self._attempt = attempt_number
        self._backend = keyed_backend
        self._operator_name = operator_name or task_name
        self._job_parameters = dict(job_parameters or {})
        self._metric_group = metric_group

    def get_task_name(self) -> str:
        return self._task_name

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._task_name} ({self._index + 1}/{self._parallelism})"

    def get_number_of_parallel_subtasks(self) -> int:
        return self._parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._index

    def get_attempt_number(self) -> int:
        return self._attempt

    def get_job_parameter(self, key: str, default_value: Any = None) -> Any:
        return self._job_parameters.get(key, default_value)

    def get_metrics_group(self) -> "MetricGroup":
        """The operator's :class:`flowray.metrics.MetricGroup` (PyFlink's): register
        counters, gauges, meters and distributions in ``open``; they are exported labelled
        with the job, task, subtask and operator."""
        if self._metric_group is None:  # not in a task (a test harness): nothing exports it
            from flowray.metrics.groups import MetricRegistry
            self._metric_group = MetricRegistry().task_group(
                "", "", self._task_name, self._index).operator_group(self._operator_name)
        return self._metric_group

    def _state(self, descriptor: StateDescriptor, expected: type) -> Any:
        if self._backend is None:
            raise StateAccessError(
                f"operator {self._operator_name!r} asked for keyed state "
                f"{descriptor.name!r} but its input is not keyed; apply it to a "
                "KeyedStream (after key_by)")
        if not isinstance(descriptor, expected):
            raise StateAccessError(
                f"state {descriptor.name!r}: expected a {expected.__name__}, got "
                f"{type(descriptor).__name__}")
        state = self._backend.get_partitioned_state(descriptor)
        queryable = getattr(self._backend, "queryable", None)
        if queryable is not None and descriptor.is_queryable():
            return queryable.register(descriptor, state)
        return state

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState:
        return self._state(state_descriptor, ValueStateDescriptor)

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._state(state_descriptor, ListStateDescriptor)

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState:
        return self._state(state_descriptor, MapStateDescriptor)

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState:
        return self._state(state_descriptor, ReducingStateDescriptor)

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState:
        return self._state(state_descriptor, AggregatingStateDescriptor)


KEYED_STATE_METHODS = frozenset({
    "get_state", "get_list_state", "get_map_state", "get_reducing_state",
    "get_aggregating_state",
})
