"""The broadcast state pattern: ``ds.connect(rules.broadcast(descriptor)).process(func)``.

A two-input operator: input 1 is the non-broadcast stream (plain or keyed), input 2 the
broadcast stream (every subtask gets every element). ``process_broadcast_element`` may
change the broadcast states (one map per ``MapStateDescriptor`` given to ``broadcast``);
``process_element`` (and ``on_timer``) only read them. The states are operator state of
mode ``BROADCAST`` (:mod:`flowray.state.operator_state`): every subtask snapshots its copy
and gets one copy back on restore, at any parallelism.

>>> from flowray.state.descriptors import MapStateDescriptor
>>> rules = MapStateDescriptor("rules")
>>> class Tagger(BroadcastProcessFunction):
...     def process_element(self, value, ctx):
...         yield value, ctx.get_broadcast_state(rules).get("tag")
...     def process_broadcast_element(self, value, ctx):
...         ctx.get_broadcast_state(rules).put("tag", value)
>>> op = BroadcastProcessOperator(Tagger(), [rules]); op.name
'Co-Process-Broadcast'
"""

from __future__ import annotations

import abc
import types
from typing import Any, Callable, Dict, List, Optional, Sequence

from flowray.state.broadcast_state import (
    BroadcastState,
    HeapBroadcastState,
    ReadOnlyBroadcastState,
)
from flowray.state.descriptors import MapStateDescriptor, StateDescriptor
from flowray.state.keyed_backend import StateAccessError
from flowray.state.operator_state import OperatorStateStore
from flowray.state.ttl import ttl_config_of, ttl_table_name

from flowray.operators.base import (
    StateInitializationContext,
    TwoInputOperator,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.functions import Function, TimeDomain, TimerService
from flowray.operators.keyed import _KeyedContext, _KeyedTimersOperator
from flowray.operators.output_tag import OutputTag, ResultCollector

__all__ = [
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "BroadcastProcessOperator",
    "KeyedBroadcastProcessOperator",
    "check_broadcast_descriptors",
]


# -- user-function interfaces (as pyflink.datastream.functions) ---------------------------

class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their contexts."""

    class BaseContext(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> Optional[int]:
            """The timestamp of the element (or firing timer), or ``None``."""

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

    class Context(BaseContext):
        """The broadcast side's context: read/write broadcast state."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState:
            ...

    class ReadOnlyContext(BaseContext):
        """The non-broadcast side's context: read-only broadcast state."""

        @abc.abstractmethod
        def get_broadcast_state(
                self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState: ...


class BroadcastProcessFunction(BaseBroadcastProcessFunction):
    """Applied to a non-keyed stream connected to a broadcast stream. Both methods may yield
    outputs (``(output_tag, value)`` for a side output)."""

    class Context(BaseBroadcastProcessFunction.Context, abc.ABC):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, abc.ABC):
        pass

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext"
                        ) -> Any: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: "BroadcastProcessFunction.Context"
                                  ) -> Any: ...


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction):
    """Applied to a keyed stream connected to a broadcast stream: ``process_element`` also
    has keyed state (through the runtime context) and timers; ``on_timer`` fires with the
    timer's key current; ``process_broadcast_element`` may reach every key's state with
    ``ctx.apply_to_keyed_state``."""

    class Context(BaseBroadcastProcessFunction.Context, abc.ABC):
        @abc.abstractmethod
        def apply_to_keyed_state(self, state_descriptor: StateDescriptor,
                                 function: Callable[[Any, Any], Any]) -> None:
            """Call ``function(key, state)`` for every key of this subtask that has
            ``state_descriptor``'s state, with that key current. A generator function's
            yielded values are outputs of the current call."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(ReadOnlyContext, abc.ABC):
        @abc.abstractmethod
        def time_domain(self) -> TimeDomain: ...

    @abc.abstractmethod
    def process_element(self, value: Any,
                        ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext") -> Any: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any,
                                  ctx: "KeyedBroadcastProcessFunction.Context") -> Any: ...

    def on_timer(self, timestamp: int,
                 ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Any:
        pass


def check_broadcast_descriptors(descriptors: Sequence[Any]) -> List[MapStateDescriptor]:
    """The descriptors as a list; raises ``TypeError``/``ValueError`` unless they are one or
    more ``MapStateDescriptor`` with distinct names."""
    out = list(descriptors)
    if not out:
        raise ValueError("broadcast state needs at least one MapStateDescriptor")
    names = set()
    for d in out:
        if not isinstance(d, MapStateDescriptor):
            raise TypeError(f"broadcast state descriptors must be MapStateDescriptor, got "
                            f"{d!r}")
        if d.name in names:
            raise ValueError(f"broadcast state {d.name!r} is declared twice")
        names.add(d.name)
    return out


# -- contexts -----------------------------------------------------------------------------

def _lookup(op: "_BroadcastStateOperator", descriptor: Any, read_only: bool) -> Any:
    if not isinstance(descriptor, MapStateDescriptor):
        raise TypeError(f"get_broadcast_state expects a MapStateDescriptor, got {descriptor!r}")
    table = op._views if read_only else op._states
    state = table.get(descriptor.name)
    if state is None:
        raise StateAccessError(
            f"broadcast state {descriptor.name!r} was not declared: pass its "
            "MapStateDescriptor to broadcast(...) (declared: "
            f"{sorted(op._states) or 'none'})")
    return state


class _Times:
    """Timestamp and clocks shared by every context here."""

    _op: "_BroadcastStateOperator"
    _timestamp: Optional[int]

    def timestamp(self) -> Optional[int]:
        return self._timestamp

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Send ``value`` to the side output ``output_tag`` (same as yielding the pair)."""
        self._op._collector.collect_side(output_tag, value, self._timestamp)


class _ReadOnlyContext(_Times, BroadcastProcessFunction.ReadOnlyContext):
    def __init__(self, op: "_BroadcastStateOperator") -> None:
        self._op, self._timestamp = op, None

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor
                            ) -> ReadOnlyBroadcastState:
        return _lookup(self._op, state_descriptor, read_only=True)


class _Context(_Times, KeyedBroadcastProcessFunction.Context, BroadcastProcessFunction.Context):
    """The broadcast side (keyed or not): writable broadcast state."""

    def __init__(self, op: "_BroadcastStateOperator") -> None:
        self._op, self._timestamp = op, None

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState:
        return _lookup(self._op, state_descriptor, read_only=False)

    def apply_to_keyed_state(self, state_descriptor: StateDescriptor,
                             function: Callable[[Any, Any], Any]) -> None:
        op = self._op
        backend = op.ctx.keyed_backend if op.ctx is not None else None
        if backend is None:
            raise StateAccessError("apply_to_keyed_state needs keyed state: connect a "
                                   "KeyedStream (after key_by) to the broadcast stream")
        if not isinstance(state_descriptor, StateDescriptor):
            raise TypeError(f"apply_to_keyed_state expects a state descriptor, got "
                            f"{state_descriptor!r}")
        if not callable(function):
            raise TypeError(f"apply_to_keyed_state expects a function(key, state), got "
                            f"{function!r}")
        state = backend.get_partitioned_state(state_descriptor)
        table = (ttl_table_name(state_descriptor.name)
                 if ttl_config_of(state_descriptor) is not None else state_descriptor.name)
        for key in list(backend.get_keys(table)):
            backend.set_current_key(key)
            result = function(key, state)
            if isinstance(result, types.GeneratorType):
                op._collector.collect(result, self._timestamp)


class _KeyedReadOnlyContext(_KeyedContext, KeyedBroadcastProcessFunction.OnTimerContext):
    """The keyed side and ``on_timer``: read-only broadcast state, key, timers."""

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor
                            ) -> ReadOnlyBroadcastState:
        return _lookup(self._op, state_descriptor, read_only=True)  # type: ignore[arg-type]


# -- operators ----------------------------------------------------------------------------

class _BroadcastStateOperator(TwoInputOperator):
    """Input 1: the non-broadcast stream; input 2: the broadcast stream (in BATCH mode read
    to its end first, as Flink does)."""

    batch_first_input = 1

    def __init__(self, fn: Any, descriptors: Sequence[MapStateDescriptor],
                 name: Optional[str] = None) -> None:
        super().__init__(name)
        missing = [m for m in ("process_element", "process_broadcast_element")
                   if not callable(getattr(fn, m, None))]
        if missing:
            raise TypeError(f"{self.name}: expected a (Keyed)BroadcastProcessFunction, "
                            f"{type(fn).__name__} lacks {' and '.join(missing)}()")
        self.fn = fn
        self.descriptors = check_broadcast_descriptors(descriptors)
        self._store: Optional[OperatorStateStore] = None
        self._states: Dict[str, HeapBroadcastState] = {}
        self._views: Dict[str, ReadOnlyBroadcastState] = {}

    def initialize_state(self, context: StateInitializationContext) -> None:
        """Bind (and, after a restore, load) the broadcast states, then the user hooks."""
        self._bind(context.get_operator_state_store())
        super().initialize_state(context)

    def _bind(self, store: OperatorStateStore) -> None:
        self._store = store
        self._states = {d.name: store.get_broadcast_state(d) for d in self.descriptors}
        self._views = {n: s.read_only() for n, s in self._states.items()}

    def broadcast_state(self, name: str) -> HeapBroadcastState:
        """This subtask's copy of broadcast state ``name`` (for tests and diagnostics)."""
        return self._states[name]

    def _open_function(self) -> None:
        if self._store is None:  # run without a task (a harness): state of its own
            self._bind(OperatorStateStore())
        self._f1 = adapt_function(self.fn, "process_element", self.name)
        self._f2 = adapt_function(self.fn, "process_broadcast_element", self.name)
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e
        self._bctx = _Context(self)

    def close(self) -> None:
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e

    def user_functions(self) -> List[Any]:
        return [self.fn]

    def _run(self, f: Callable[..., Any], ctx: Any, records: List[Any],
             timestamps: Optional[List[Any]]) -> None:
        collect = self._collector.collect
        try:
            for i, r in enumerate(records):
                t = None if timestamps is None else timestamps[i]
                ctx._timestamp = t
                collect(f(r, ctx), t)
        except Exception as e:
            raise self.user_error(e) from e
        finally:
            ctx._timestamp = None
        self._collector.flush()

    def process_batch2(self, records, key_groups, timestamps=None):
        self._run(self._f2, self._bctx, records, timestamps)


class BroadcastProcessOperator(_BroadcastStateOperator):
    """``DataStream.connect(broadcast_stream).process(BroadcastProcessFunction)``."""

    default_name = "Co-Process-Broadcast"

    def open(self) -> None:
        self._open_function()
        self._rctx = _ReadOnlyContext(self)
        self._collector = ResultCollector(self.output, self.side_outputs)

    def process_batch(self, records, key_groups, timestamps=None):
        self._run(self._f1, self._rctx, records, timestamps)


class KeyedBroadcastProcessOperator(_KeyedTimersOperator, _BroadcastStateOperator):
    """``KeyedStream.connect(broadcast_stream).process(KeyedBroadcastProcessFunction)``:
    keyed state and timers for input 1, broadcast state for both."""

    default_name = "Co-Process-Broadcast-Keyed"
    is_keyed = True

    def __init__(self, fn: Any, key_selector: Callable[[Any], Any],
                 descriptors: Sequence[MapStateDescriptor], name: Optional[str] = None) -> None:
        super().__init__(fn, descriptors, name)
        self.key_selector = key_selector

    def user_functions(self) -> List[Any]:
        return [self.fn, self.key_selector]

    def open(self) -> None:
        self._open_function()
        self._key_of = adapt_function(self.key_selector, "get_key", self.name)
        self._open_timers()  # also makes the collector
        self._pctx = _KeyedReadOnlyContext(self)

    def process_batch(self, records, key_groups, timestamps=None):
        self._process(self._f1, self._key_of, records, key_groups, timestamps)
