"""Keyed operators: ``KeyedStream.process`` with timers, and ``reduce``/``sum``/``min``/``max``.

Each record's key is set on the keyed state backend before user code runs; timers are
per key and fire through the same function (``on_timer``) with that key current.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from flowray.common.native import native
from flowray.common.sentinels import MISSING
from flowray.common.types import Row, RowKind, make_row
from flowray.operators.base import (
    OneInputOperator,
    TwoInputOperator,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.basic import UserFunctionOperator
from flowray.operators.functions import KeyedProcessFunction, TimeDomain, TimerService
from flowray.operators.output_tag import OutputTag, ResultCollector
from flowray.operators.timers import InternalTimerService
from flowray.state.descriptors import StateDescriptor, StateKind, ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupAssigner
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
from flowray.state.keyed_backend import StateAccessError

__all__ = [
    "KeyedProcessOperator",
    "KeyedCoProcessOperator",
    "KeyedReduceOperator",
    "field_aggregator",
]

# the C half of keyed operators (operators/_keyed.c): sum(field) and the heap fold, or
# None: the Python below
_keyed: Any = native("flowray.operators._keyed")


class _KeyedTimerService(TimerService):
    """What ``ctx.timer_service()`` gives a keyed function: timers of the current key."""

    def __init__(self, op: "_KeyedTimersOperator") -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.register_processing_time_timer(None, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.register_event_time_timer(None, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.delete_processing_time_timer(None, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.timer_service.delete_event_time_timer(None, timestamp)


class _KeyedContext(KeyedProcessFunction.OnTimerContext):
    """The context of one call: the record's (or timer's) timestamp, the current key,
    the timer service, and inside ``on_timer`` the time domain."""

    def __init__(self, op: "_KeyedTimersOperator") -> None:
        self._op = op
        self._timer_service = _KeyedTimerService(op)
        self._domain: Optional[TimeDomain] = None
        self._timestamp: Optional[int] = None
        self._stamp: Optional[int] = None  # what outputs of this call carry

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

    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Send ``value`` to the side output ``output_tag`` (same as yielding the pair)."""
        self._op._collector.collect_side(output_tag, value, self._stamp)


class _KeyedTimersOperator:
    """Mix-in for keyed operators whose user function has timers (``on_timer``): the
    timer service lives in keyed state and fires through ``on_timer`` with the key set."""

    fn: Any

    def _open_timers(self) -> None:
        self.timer_service = InternalTimerService(
            self.uid or self.name, self.ctx.keyed_backend, self.ctx.processing_time_service,
            self._on_event_time, self._on_processing_time)
        self.timer_service.restore()
        self._pctx = _KeyedContext(self)
        self._collector = ResultCollector(self.output, self.side_outputs)
        self._on_timer = getattr(self.fn, "on_timer", None)

    def _fire(self, domain: TimeDomain, timestamp: int) -> None:
        if self._on_timer is None:
            return
        ctx = self._pctx
        # event-time timer output carries the timer's timestamp, processing-time none
        stamp = timestamp if domain is TimeDomain.EVENT_TIME else None
        ctx._domain, ctx._timestamp, ctx._stamp = domain, timestamp, stamp
        try:
            self._collector.collect(self._on_timer(timestamp, ctx), stamp)
        except Exception as e:
            raise self.user_error(e) from e
        finally:
            ctx._domain = ctx._timestamp = ctx._stamp = None

    def _on_event_time(self, timestamp: int, namespace: Any) -> None:
        self._fire(TimeDomain.EVENT_TIME, timestamp)

    def _on_processing_time(self, timestamp: int, namespace: Any) -> None:
        self._fire(TimeDomain.PROCESSING_TIME, timestamp)
        self._collector.flush()

    def on_watermark(self, timestamp: int) -> None:
        self.timer_service.advance_watermark(timestamp)
        self._collector.flush()

    def finish(self) -> None:
        if self.ctx.batch_execution:
            self.timer_service.fire_all_processing_time()
            self._collector.flush()

    def _process(self, call: Callable[..., Any], key_of: Callable[[Any], Any],
                 records: List[Any], key_groups: Optional[List[int]],
                 timestamps: Optional[List[Any]]) -> None:
        set_key = self.ctx.keyed_backend.set_current_key
        ctx, collect = self._pctx, self._collector.collect
        try:
            for i, r in enumerate(records):
                set_key(key_of(r), None if key_groups is None else key_groups[i])
                t = None if timestamps is None else timestamps[i]
                ctx._timestamp = ctx._stamp = t
                collect(call(r, ctx), t)
        except Exception as e:
            raise self.user_error(e) from e
        finally:
            ctx._timestamp = ctx._stamp = None
        self._collector.flush()


class KeyedProcessOperator(_KeyedTimersOperator, UserFunctionOperator):
    """``KeyedStream.process(KeyedProcessFunction)``."""

    default_name = "KeyedProcess"
    method = "process_element"

    def __init__(self, fn: Any, key_selector: Callable[[Any], Any],
                 name: Optional[str] = None) -> None:
        super().__init__(fn, name, key_selector)

    def open(self) -> None:
        super().open()
        self._open_timers()

    def process_batch(self, records, key_groups, timestamps=None):
        self._process(self._call, self._key_of, records, key_groups, timestamps)


class KeyedCoProcessOperator(_KeyedTimersOperator, TwoInputOperator):
    """``ConnectedStreams.key_by(k1, k2).process(KeyedCoProcessFunction)``: both inputs
    keyed, one keyed state and one timer service shared by the two."""

    default_name = "KeyedCoProcess"
    is_keyed = True

    def __init__(self, fn: Any, key_selector1: Callable[[Any], Any],
                 key_selector2: Callable[[Any], Any], name: Optional[str] = None) -> None:
        super().__init__(name)
        for m in ("process_element1", "process_element2"):
            adapt_function(fn, m, self.name)
        self.fn = fn
        self.key_selectors = (key_selector1, key_selector2)

    def user_functions(self) -> List[Any]:
        return [self.fn, *self.key_selectors]

    def open(self) -> None:
        self._f1 = adapt_function(self.fn, "process_element1", self.name)
        self._f2 = adapt_function(self.fn, "process_element2", self.name)
        self._k1 = adapt_function(self.key_selectors[0], "get_key", self.name)
        self._k2 = adapt_function(self.key_selectors[1], "get_key", self.name)
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e
        self._open_timers()

    def close(self) -> None:
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e

    def process_batch(self, records, key_groups, timestamps=None):
        self._process(self._f1, self._k1, records, key_groups, timestamps)

    def process_batch2(self, records, key_groups, timestamps=None):
        self._process(self._f2, self._k2, records, key_groups, timestamps)


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


def _tuple_field_sum(length: int, field: int) -> Callable[[Any, Any], Any]:
    """``(a, b) -> a`` with field ``field`` replaced by ``a[field] + b[field]``, for
    tuples of ``length`` fields, as one tuple display (a third of the slicing cost).

    >>> _tuple_field_sum(3, -2)(("a", 1, "x"), ("a", 2, "y"))
    ('a', 3, 'x')
    """
    if not -length <= field < length:
        return lambda a, b: a[:field] + (a[field] + b[field],) + a[field + 1:]  # IndexError
    i = field % length
    items = ", ".join(f"a[{j}] + b[{j}]" if j == i else f"a[{j}]" for j in range(length))
    return eval(f"lambda a, b: ({items},)")  # built from integer indices only


def _row_field_sum(cls: type, length: int, field: int) -> Callable[[Any, Any], Any]:
    """``_tuple_field_sum`` for rows of the Row class ``cls`` (kind INSERT, the class's
    names): the fields unpacked, not indexed (a Row's ``[]`` is Python code).

    >>> from flowray.common.types import Row, RowKind
    >>> r = Row(k="a", n=1)
    >>> _row_field_sum(type(r), 2, 1)(r, Row(k="a", n=2))
    Row(k='a', n=3)
    """
    if not -length <= field < length:
        return lambda a, b: a[field]  # IndexError, as for tuples
    i = field % length
    xs = ", ".join(f"x{j}" for j in range(length))
    items = ", ".join(f"x{j} + b[{j}]" if j == i else f"x{j}" for j in range(length))
    src = f"def add(a, b):\n    {xs}, = a\n    return new(cls, ({items},))\n"
    namespace: Dict[str, Any] = {"new": make_row, "cls": cls}
    exec(compile(src, "<row field sum>", "exec"), namespace)  # noqa: S102 - integer indices only
    return namespace["add"]


#: tuple lengths whose field sums ``field_aggregator`` computes in its own call
_INLINE_TUPLE_LENGTHS = range(2, 9)


def _with_short_tuples_inline(general: Callable[[Any, Any], Any],
                              field: int) -> Callable[[Any, Any], Any]:
    """``general`` with the sum of ``field`` over tuples of 2 to 8 fields (and, for
    field 0, of plain numbers) done in the same call: one Python call per record instead
    of two (the keyed running sum's fold).

    >>> add = _with_short_tuples_inline(lambda a, b: "general", 1)
    >>> add(("a", 1), ("a", 2)), add(("a", 1, "x"), ("a", 2, "y")), add(("a",), ("b",))
    (('a', 3), ('a', 3, 'x'), 'general')
    """
    lines = ["def agg(a, b):", "    if type(a) is tuple:", "        n = len(a)"]
    for n in _INLINE_TUPLE_LENGTHS:
        if not -n <= field < n:
            continue   # out of range: the general path raises IndexError
        i = field % n
        items = ", ".join(f"a[{j}] + b[{j}]" if j == i else f"a[{j}]" for j in range(n))
        lines.append(f"        if n == {n}:\n            return ({items},)")
    if field == 0:   # a stream of numbers summed as they are
        lines.append("    if isinstance(a, (int, float)):\n        return a + b")
    lines.append("    return general(a, b)")
    namespace: Dict[str, Any] = {"general": general}
    exec(compile("\n".join(lines) + "\n", "<field sum>", "exec"), namespace)  # noqa: S102 - integer indices only
    return namespace["agg"]


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
        tuple_sums: Dict[int, Callable[[Any, Any], Any]] = {}
        row_sums: Dict[Tuple[type, int], Callable[[Any, Any], Any]] = {}

        def agg(a: Any, b: Any) -> Any:
            if type(a) is tuple and type(field) is int:
                add = tuple_sums.get(len(a))
                if add is None:
                    add = tuple_sums[len(a)] = _tuple_field_sum(len(a), field)
                return add(a, b)
            if type(field) is int and isinstance(a, Row):  # keeps names and row kind
                cls = type(a)
                if a._row_kind is _INSERT and a._fields is cls._fields:  # a plain row
                    add = row_sums.get((cls, len(a)))
                    if add is None:
                        add = row_sums[(cls, len(a))] = _row_field_sum(cls, len(a), field)
                    return add(a, b)
                items = list(a)
                items[field] += b[field]
                return a._with_values(items)
            if scalar and isinstance(a, (int, float)):
                return a + b
            return _with_field(a, field, _get_field(a, field) + _get_field(b, field))
        if type(field) is int:
            name = f"{kind}({field!r})"
            agg.__name__ = name
            if _keyed is not None:  # the same results, without a Python call per record
                return _keyed.FieldSum(field, agg, name, (field_aggregator, (kind, field)))
            agg = _with_short_tuples_inline(agg, field)
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


def _fold_reduce_py(records: List[Any], key_groups: Sequence[int], maps: List[Dict[Any, Any]],
                    start: int, key_of: Callable[[Any], Any],
                    reduce: Callable[[Any, Any], Any],
                    canonical: Callable[[Any], Any]) -> List[Any]:
    """Fold each record into its key's value in the heap backend's dicts (``maps[key group
    - start]``), in order; the new values. The pure-Python twin of
    ``_keyed.fold_reduce`` (whose docstring is the contract)."""
    out: List[Any] = []
    append = out.append
    missing, plain = _MISSING, PLAIN_KEY_TYPES
    for r, kg in zip(records, key_groups):
        k = key_of(r)
        m = maps[kg - start]
        cur = m.get(k, missing)
        if cur is missing and type(k) not in plain:  # a new key, or another NaN
            k = canonical(k)
            cur = m.get(k, missing)
        if cur is not missing:
            r = reduce(cur, r)
        m[k] = r
        append(r)
    return out


_fold_reduce = _keyed.fold_reduce if _keyed is not None else _fold_reduce_py


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
        # RocksDB: one multi-get and one write batch per input batch (_process_batched)
        value_accessor = getattr(backend, "value_accessor", None)
        self._accessor = (value_accessor(self.STATE_NAME)
                          if self._table is None and value_accessor is not None else None)
        try:
            open_function(self.reduce_fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        close_function(self.reduce_fn)

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        """Fold each record into its key's value; in STREAMING emit every new value (with
        the record's timestamp), in BATCH only the final ones at the end of input."""
        if self._table is None:
            if self._accessor is not None:
                return self._process_batched(records, key_groups, timestamps)
            return self._process_with_state(records, key_groups, timestamps)
        key_of, reduce, maps, start = self._key_of, self._reduce, self._table.maps, self._start
        if key_groups is None:
            assign, kg_range = self._assign, self._backend.key_group_range
            key_groups = [assign(key_of(r)) for r in records]
            for r, kg in zip(records, key_groups):
                if kg not in kg_range:
                    raise StateAccessError(
                        f"{self.name}: key {key_of(r)!r} belongs to key group {kg}, outside "
                        f"this subtask's range [{kg_range.start}, {kg_range.end}]; is the "
                        "key selector deterministic?")
        if self._table.holds:  # a pending snapshot holds some of the state
            return self._process_copy_on_write(records, key_groups, timestamps)
        try:
            out = _fold_reduce(records, key_groups, maps, start, key_of, reduce, canonical_key)
        except Exception as e:
            raise self.user_error(e) from e
        if not self.ctx.batch_execution:
            self.output.emit(out, timestamps)

    def _process_batched(self, records: List[Any], key_groups: Optional[List[int]],
                         timestamps: Optional[List[Any]]) -> None:
        """The RocksDB path: the batch's keys read in one multi-get, the records folded in
        memory (several records of one key fold in turn), the new values written in one
        write batch. A ``None`` result clears the key, as ``ValueState.update(None)``."""
        acc, key_of, reduce = self._accessor, self._key_of, self._reduce
        try:
            if key_groups is not None:  # every key cached: folded in the cache at once
                keys, out = acc.fold_cached(records, key_groups, key_of, reduce)
                if out is not None:
                    if not self.ctx.batch_execution:
                        self.output.emit(out, timestamps)
                    return
            else:
                keys = [key_of(r) for r in records]
        except Exception as e:
            raise self.user_error(e) from e
        if key_groups is None:
            assign = self._assign
            key_groups = [assign(k) for k in keys]
        keys, current = acc.load(keys, key_groups)  # checks the key groups against the range
        out = []
        append = out.append
        try:
            for r, k in zip(records, keys):
                cur = current[k]
                if cur is not None:
                    r = reduce(cur, r)
                current[k] = r
                append(r)
        except Exception as e:
            raise self.user_error(e) from e
        acc.store(current)
        if not self.ctx.batch_execution:
            self.output.emit(out, timestamps)

    def _process_copy_on_write(self, records: List[Any], key_groups: List[int],
                               timestamps: Optional[List[Any]]) -> None:
        """The heap path while a snapshot is pending (flowray.state.heap_table): writes go
        into writable dicts; a value the snapshot holds is copied before ``reduce`` (which
        may change its first argument)."""
        key_of, reduce, table, start = self._key_of, self._reduce, self._table, self._start
        maps, shared, writable, private = table.maps, table.shared, table.writable, table.private
        out: List[Any] = []
        append = out.append
        missing, plain = _MISSING, PLAIN_KEY_TYPES
        try:
            for r, kg in zip(records, key_groups):
                k = key_of(r)
                off = kg - start
                m = maps[off]
                cur = m.get(k, missing)
                if cur is missing and type(k) not in plain:
                    k = canonical_key(k)
                    cur = m.get(k, missing)
                s = shared[off]
                if s is not None:  # held: the live dict last, values by identity
                    if s[-1] is m:
                        m = writable(off)
                    if cur is not missing:
                        for f in s:
                            if f.get(k, missing) is cur:
                                cur = private(off, k, cur)
                                break
                if cur is not missing:
                    r = reduce(cur, r)
                m[k] = r
                append(r)
        except Exception as e:
            raise self.user_error(e) from e
        if not self.ctx.batch_execution:
            self.output.emit(out, timestamps)

    def _process_with_state(self, records: List[Any], key_groups: Optional[List[int]],
                            timestamps: Optional[List[Any]]) -> None:
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
        if not self.ctx.batch_execution:
            self.output.emit(out, timestamps)

    def finish(self) -> None:
        """BATCH: the input is complete, emit each key's final value (Flink's behaviour)."""
        if not self.ctx.batch_execution:
            return
        if self._table is not None:
            final = [v for m in self._table.maps for v in m.values()]
        else:
            backend, final = self._backend, []
            for k in list(backend.get_keys(self.STATE_NAME)):
                backend.set_current_key(k)
                final.append(self._state.value())
        if final:
            self.output.emit(final)


_MISSING = MISSING
_INSERT = RowKind.INSERT


class QueryableStateSinkOperator(OneInputOperator):
    """``KeyedStream.as_queryable_state``: keeps each key's latest record (value state) or
    folds it in (reducing, aggregating or list state) in a state queryable under
    ``queryable_name``; emits nothing."""

    is_keyed = True

    def __init__(self, queryable_name: str, descriptor: StateDescriptor,
                 key_selector: Callable[[Any], Any]) -> None:
        super().__init__(f"Queryable state: {queryable_name}")
        if descriptor.kind is StateKind.MAP:
            raise TypeError(f"as_queryable_state({queryable_name!r}): a MapStateDescriptor "
                            "cannot hold a stream's records; use a value, reducing, "
                            "aggregating or list state descriptor")
        descriptor.set_queryable(queryable_name)
        self.descriptor = descriptor
        self.key_selector = key_selector

    def user_functions(self) -> List[Any]:
        return [self.key_selector]

    def open(self) -> None:
        backend = self.ctx.keyed_backend
        self._set_key = backend.set_current_key
        self._key_of = adapt_function(self.key_selector, "get_key", self.name)
        state = backend.get_partitioned_state(self.descriptor)
        queryable = getattr(backend, "queryable", None)
        if queryable is not None:
            state = queryable.register(self.descriptor, state)
        self._write = state.update if self.descriptor.kind is StateKind.VALUE else state.add

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        set_key, key_of, write = self._set_key, self._key_of, self._write
        try:
            for i, r in enumerate(records):
                set_key(key_of(r), key_groups[i] if key_groups is not None else None)
                write(r)
        except Exception as e:
            raise self.user_error(e) from e
