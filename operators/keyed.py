"""Keyed operators: ``KeyedStream.process`` with timers, and ``reduce``/``sum``/``min``/``max``.

Each record's key is set on the keyed state backend before user code runs; timers are
per key and fire through the same function (``on_timer``) with that key current.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from flowray.state.descriptors import StateKind, ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupAssigner

from flowray.operators.base import (
    OneInputOperator,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.basic import UserFunctionOperator
from flowray.operators.functions import KeyedProcessFunction, TimeDomain, TimerService

__all__ = [
    "InternalTimerService",
    "KeyedProcessOperator",
    "KeyedReduceOperator",
    "field_aggregator",
]


class InternalTimerService:
    """Timers per (timestamp, key) in two time domains; a key has at most one timer per
    timestamp and domain, as in Flink. Pure: the operator feeds it time."""

    def __init__(self) -> None:
        self._heaps: Dict[TimeDomain, List[Tuple[int, int, Any]]] = {
            TimeDomain.EVENT_TIME: [], TimeDomain.PROCESSING_TIME: []}
        self._live: Dict[TimeDomain, Set[Tuple[int, Any]]] = {
            TimeDomain.EVENT_TIME: set(), TimeDomain.PROCESSING_TIME: set()}
        self._seq = 0

    def register(self, domain: TimeDomain, timestamp: int, key: Any, key_group: int) -> bool:
        """Returns True when the timer is new."""
        entry = (timestamp, key)
        if entry in self._live[domain]:
            return False
        self._live[domain].add(entry)
        self._seq += 1
        heapq.heappush(self._heaps[domain], (timestamp, self._seq, (key, key_group)))
        return True

    def delete(self, domain: TimeDomain, timestamp: int, key: Any) -> None:
        self._live[domain].discard((timestamp, key))

    def next_timestamp(self, domain: TimeDomain) -> Optional[int]:
        heap, live = self._heaps[domain], self._live[domain]
        while heap and (heap[0][0], heap[0][2][0]) not in live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, domain: TimeDomain, time: int) -> List[Tuple[int, Any, int]]:
        """Timers with timestamp <= ``time``, in timestamp order: (timestamp, key, kg)."""
        heap, live, due = self._heaps[domain], self._live[domain], []
        while heap and heap[0][0] <= time:
            ts, _, (key, kg) = heapq.heappop(heap)
            if (ts, key) in live:
                live.discard((ts, key))
                due.append((ts, key, kg))
        return due

    def __len__(self) -> int:
        return sum(len(v) for v in self._live.values())


class _KeyedTimerService(TimerService):
    def __init__(self, op: "KeyedProcessOperator") -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op._register(TimeDomain.PROCESSING_TIME, int(timestamp))

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op._register(TimeDomain.EVENT_TIME, int(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op._timers.delete(TimeDomain.PROCESSING_TIME, int(timestamp),
                                self._op.ctx.keyed_backend.get_current_key())

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op._timers.delete(TimeDomain.EVENT_TIME, int(timestamp),
                                self._op.ctx.keyed_backend.get_current_key())


class _KeyedContext(KeyedProcessFunction.OnTimerContext):
    def __init__(self, op: "KeyedProcessOperator") -> None:
        self._op = op
        self._timer_service = _KeyedTimerService(op)
        self._domain: Optional[TimeDomain] = None
        self._timestamp: Optional[int] = None

    def timestamp(self) -> Optional[int]:
        return self._timestamp

    def timer_service(self) -> TimerService:
        return self._timer_service

    def get_current_key(self) -> Any:
        return self._op.ctx.keyed_backend.get_current_key()

    def time_domain(self) -> TimeDomain:
        if self._domain is None:
            raise RuntimeError("time_domain() is only defined inside on_timer")
        return self._domain


class KeyedProcessOperator(UserFunctionOperator):
    """``KeyedStream.process(KeyedProcessFunction)``."""

    default_name = "KeyedProcess"
    method = "process_element"

    def __init__(self, fn: Any, key_selector: Callable[[Any], Any],
                 name: Optional[str] = None) -> None:
        super().__init__(fn, name, key_selector)

    def open(self) -> None:
        super().open()
        self._timers = InternalTimerService()
        self._pctx = _KeyedContext(self)
        self._on_timer = getattr(self.fn, "on_timer", None)
        self._scheduled: Set[int] = set()

    def _apply(self, records):
        f, ctx = self._call, self._pctx
        out: List[Any] = []
        for r in records:
            res = f(r, ctx)
            if res is not None:
                out.extend(res)
        return out

    # -- timers ------------------------------------------------------------------------
    def _register(self, domain: TimeDomain, timestamp: int) -> None:
        backend = self.ctx.keyed_backend
        self._timers.register(domain, timestamp, backend.get_current_key(),
                              backend.get_current_key_group())
        if domain is TimeDomain.PROCESSING_TIME and timestamp not in self._scheduled:
            self._scheduled.add(timestamp)
            self.ctx.processing_time_service.register_timer(timestamp, self._on_processing_time)

    def _fire(self, domain: TimeDomain, due: List[Tuple[int, Any, int]]) -> None:
        if not due or self._on_timer is None:
            return
        backend, ctx, out = self.ctx.keyed_backend, self._pctx, []
        ctx._domain = domain
        try:
            for ts, key, kg in due:
                backend.set_current_key(key, kg)
                ctx._timestamp = ts
                res = self._on_timer(ts, ctx)
                if res is not None:
                    out.extend(res)
        except Exception as e:
            raise self.user_error(e) from e
        finally:
            ctx._domain = None
            ctx._timestamp = None
        if out:
            self.output.emit(out)

    def _on_processing_time(self, timestamp: int) -> None:
        self._scheduled.discard(timestamp)
        self._fire(TimeDomain.PROCESSING_TIME,
                   self._timers.pop_due(TimeDomain.PROCESSING_TIME, timestamp))

    def on_watermark(self, timestamp: int) -> None:
        self._fire(TimeDomain.EVENT_TIME, self._timers.pop_due(TimeDomain.EVENT_TIME, timestamp))


def _get_field(value: Any, field: Any) -> Any:
    if isinstance(field, str) and not isinstance(value, dict):
        return getattr(value, field) if hasattr(value, field) else value[field]
    return value[field]


def _with_field(value: Any, field: Any, new: Any) -> Any:
    if isinstance(value, tuple):
        if isinstance(field, str):
            if hasattr(value, "_replace"):  # namedtuple
                return value._replace(**{field: new})
            names = getattr(value, "_fields", None) or getattr(value, "_names", None)
            if names is None or field not in names:
                raise KeyError(f"record has no field {field!r}: {value!r}")
            field = list(names).index(field)
        items = list(value)
        items[field] = new
        if type(value) is tuple:
            return tuple(items)
        return type(value)(*items)
    if isinstance(value, list):
        out = list(value)
        out[field] = new
        return out
    if isinstance(value, dict):
        out = dict(value)
        out[field] = new
        return out
    raise TypeError(f"cannot aggregate field {field!r} of {type(value).__name__} {value!r}")


def field_aggregator(kind: str, field: Any) -> Callable[[Any, Any], Any]:
    """The reduce function behind ``sum``/``min``/``max``/``min_by``/``max_by``.

    ``sum``/``min``/``max`` change only the field (other fields keep the first record's
    values, as in Flink); ``min_by``/``max_by`` keep the whole winning record.

    >>> field_aggregator("sum", 1)(("a", 1), ("a", 2))
    ('a', 3)
    >>> field_aggregator("sum", 0)(3, 4)
    7
    """
    scalar = field == 0

    def value_of(v: Any) -> Any:
        if scalar and isinstance(v, (int, float)):
            return v
        return _get_field(v, field)

    if kind == "sum":
        def agg(a: Any, b: Any) -> Any:
            if type(a) is tuple and type(field) is int:
                i = field if field >= 0 else field + len(a)
                return a[:i] + (a[i] + b[i],) + a[i + 1:]
            if scalar and isinstance(a, (int, float)):
                return a + b
            return _with_field(a, field, _get_field(a, field) + _get_field(b, field))
    elif kind in ("min", "max"):
        pick = min if kind == "min" else max

        def agg(a: Any, b: Any) -> Any:
            if scalar and isinstance(a, (int, float)):
                return pick(a, b)
            return _with_field(a, field, pick(_get_field(a, field), _get_field(b, field)))
    elif kind == "min_by":
        def agg(a: Any, b: Any) -> Any:
            return b if value_of(b) < value_of(a) else a
    elif kind == "max_by":
        def agg(a: Any, b: Any) -> Any:
            return b if value_of(b) > value_of(a) else a
    else:
        raise ValueError(f"unknown aggregation {kind!r}")
    agg.__name__ = f"{kind}({field!r})"
    return agg


class KeyedReduceOperator(OneInputOperator):
    """``KeyedStream.reduce``: emits the running reduction for the record's key."""

    default_name = "Keyed Reduce"
    is_keyed = True
    STATE_NAME = "_reduce_value"

    def __init__(self, reduce_fn: Any, key_selector: Callable[[Any], Any],
                 name: Optional[str] = None) -> None:
        super().__init__(name)
        adapt_function(reduce_fn, "reduce", self.name)
        self.reduce_fn = reduce_fn
        self.key_selector = key_selector

    def user_functions(self) -> List[Any]:
        return [self.reduce_fn, self.key_selector]

    def open(self) -> None:
        self._reduce = adapt_function(self.reduce_fn, "reduce", self.name)
        self._key_of = adapt_function(self.key_selector, "get_key", self.name)
        backend = self.ctx.keyed_backend
        self._backend = backend
        self._start = backend.key_group_range.start
        self._assign = KeyGroupAssigner(backend.max_parallelism)
        # the heap backend's dicts directly (the hot path); any backend through state
        self._table = (backend.get_state_table(self.STATE_NAME, StateKind.VALUE)
                       if isinstance(backend, HeapKeyedStateBackend) else None)
        self._state = (backend.get_partitioned_state(ValueStateDescriptor(self.STATE_NAME))
                       if self._table is None else None)
        try:
            open_function(self.reduce_fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        close_function(self.reduce_fn)

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]]) -> None:
        if self._table is None:
            return self._process_with_state(records, key_groups)
        key_of, reduce, maps, start = self._key_of, self._reduce, self._table.maps, self._start
        out: List[Any] = []
        append = out.append
        missing = _MISSING
        if key_groups is None:
            assign = self._assign
            key_groups = [assign(key_of(r)) for r in records]
        try:
            for r, kg in zip(records, key_groups):
                k = key_of(r)
                m = maps[kg - start]
                cur = m.get(k, missing)
                if cur is not missing:
                    r = reduce(cur, r)
                m[k] = r
                append(r)
        except Exception as e:
            raise self.user_error(e) from e
        self.output.emit(out)

    def _process_with_state(self, records: List[Any], key_groups: Optional[List[int]]) -> None:
        key_of, reduce, state, set_key = (self._key_of, self._reduce, self._state,
                                          self._backend.set_current_key)
        out: List[Any] = []
        try:
            for i, r in enumerate(records):
                k = key_of(r)
                set_key(k, key_groups[i] if key_groups is not None else None)
                cur = state.value()
                if cur is not None:
                    r = reduce(cur, r)
                state.update(r)
                out.append(r)
        except Exception as e:
            raise self.user_error(e) from e
        self.output.emit(out)


_MISSING = object()
