"""Keyed state scoped to a namespace as well as a key (what Flink calls namespaced state):
per window state of triggers and of ``ProcessWindowFunction.Context.window_state()``.

Each descriptor's values live in one map state of the backend, per key ``namespace ->
value``, so they are checkpointed, restored and redistributed like any keyed state, on
either backend. A view reads and writes the namespace it is currently bound to.

>>> from flowray.state.descriptors import ReducingStateDescriptor
>>> from flowray.state.heap_backend import HeapKeyedStateBackend
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> states = NamespacedStates(backend, "trigger/")
>>> count = ReducingStateDescriptor("count", lambda a, b: a + b)
>>> backend.set_current_key("k")
>>> states.get(count, "w1").add(2); states.get(count, "w2").add(5)
>>> states.merge(count, "w1", ["w2"]); states.get(count, "w1").get(), states.get(count, "w2").get()
(7, None)
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from flowray.common.sentinels import MISSING
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from flowray.state.keyed_backend import (
    AggregatingState,
    KeyedStateBackend,
    ListState,
    MapState,
    ReducingState,
    State,
    StateAccessError,
    ValueState,
)

__all__ = ["NamespacedStates", "NamespacedKeyedStateStore"]

_MISSING = MISSING


class _NsState(State):
    __slots__ = ("_store", "namespace", "_name")

    def __init__(self, store: MapState, namespace: Any, name: str) -> None:
        self._store = store
        self.namespace = namespace
        self._name = name

    def _get(self) -> Any:
        v = self._store.get(self.namespace)
        return _MISSING if v is None else v

    def _set(self, value: Any) -> None:
        self._store.put(self.namespace, value)

    def clear(self) -> None:
        self._store.remove(self.namespace)


class _NsValueState(_NsState, ValueState):
    def value(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._set(value)


class _NsListState(_NsState, ListState):
    def get(self) -> List[Any]:
        v = self._get()
        return [] if v is _MISSING else list(v)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self._name!r}: cannot add None")
        self.add_all([value])

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        if any(v is None for v in values):
            raise ValueError(f"list state {self._name!r}: cannot add None")
        if values:
            cur = self._get()
            self._set(values if cur is _MISSING else list(cur) + values)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._set(values)
        else:
            self.clear()


class _NsMapState(_NsState, MapState):
    def _entries(self) -> Dict[Any, Any]:
        v = self._get()
        return {} if v is _MISSING else v

    def get(self, key: Any) -> Any:
        return self._entries().get(key)

    def put(self, key: Any, value: Any) -> None:
        d = dict(self._entries())
        d[key] = value
        self._set(d)

    def put_all(self, dict_value: dict) -> None:
        if dict_value:
            d = dict(self._entries())
            d.update(dict_value)
            self._set(d)

    def remove(self, key: Any) -> None:
        d = dict(self._entries())
        if key in d:
            del d[key]
            if d:
                self._set(d)
            else:
                self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def items(self) -> List[Tuple[Any, Any]]:
        return list(self._entries().items())

    def keys(self) -> List[Any]:
        return list(self._entries())

    def values(self) -> List[Any]:
        return list(self._entries().values())

    def is_empty(self) -> bool:
        return not self._entries()


class _NsReducingState(_NsState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, store: MapState, namespace: Any, name: str, reduce_fn: Any) -> None:
        super().__init__(store, namespace, name)
        self._reduce = reduce_fn

    def get(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def add(self, value: Any) -> None:
        cur = self._get()
        self._set(value if cur is _MISSING else self._reduce(cur, value))


class _NsAggregatingState(_NsState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, store: MapState, namespace: Any, name: str, agg: Any) -> None:
        super().__init__(store, namespace, name)
        self._agg = agg

    def get(self) -> Any:
        acc = self._get()
        return None if acc is _MISSING else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self._get()
        if acc is _MISSING:
            acc = self._agg.create_accumulator()
        self._set(self._agg.add(value, acc))


class NamespacedStates:
    """Namespaced views over ``backend``; ``prefix`` keeps one user's state names apart
    from another's (e.g. a trigger's from a window function's)."""

    def __init__(self, backend: KeyedStateBackend, prefix: str) -> None:
        self._backend = backend
        self._prefix = prefix
        self._stores: Dict[str, Tuple[StateDescriptor, MapState]] = {}

    def _store(self, descriptor: StateDescriptor) -> MapState:
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a StateDescriptor, got {descriptor!r}")
        known = self._stores.get(descriptor.name)
        if known is not None:
            if known[0].kind is not descriptor.kind:
                raise StateAccessError(
                    f"state {descriptor.name!r} is registered as {known[0].kind.value} "
                    f"state, cannot access it as {descriptor.kind.value} state")
            return known[1]
        store = self._backend.get_partitioned_state(
            MapStateDescriptor(f"{self._prefix}{descriptor.name}"))
        self._stores[descriptor.name] = (descriptor, store)
        return store  # type: ignore[return-value]

    def get(self, descriptor: StateDescriptor, namespace: Any) -> State:
        """The state of ``descriptor`` for the current key and ``namespace``."""
        store = self._store(descriptor)
        name = descriptor.name
        if isinstance(descriptor, ReducingStateDescriptor):
            return _NsReducingState(store, namespace, name, descriptor.reduce_function)
        if isinstance(descriptor, AggregatingStateDescriptor):
            return _NsAggregatingState(store, namespace, name, descriptor.agg_function)
        cls = {StateKind.VALUE: _NsValueState, StateKind.LIST: _NsListState,
               StateKind.MAP: _NsMapState}[descriptor.kind]
        return cls(store, namespace, name)

    def merge(self, descriptor: StateDescriptor, target: Any, sources: Iterable[Any]) -> None:
        """Fold the values of ``sources`` into ``target`` (reduce, aggregate-merge, list
        concatenation) and clear the sources; value and map state cannot be merged (a
        ``StateAccessError``, nothing changed)."""
        if descriptor.kind in (StateKind.VALUE, StateKind.MAP):
            raise StateAccessError(f"state {descriptor.name!r}: {descriptor.kind.value} "
                                   "state cannot be merged")
        store = self._store(descriptor)
        acc = store.get(target)
        merged = []
        for ns in sources:
            if ns == target:
                continue
            v = store.get(ns)
            if v is None:
                continue
            merged.append(ns)
            if acc is None:
                acc = v
            elif isinstance(descriptor, ReducingStateDescriptor):
                acc = descriptor.reduce_function(acc, v)
            elif isinstance(descriptor, AggregatingStateDescriptor):
                acc = descriptor.agg_function.merge(acc, v)
            else:
                acc = list(acc) + list(v)
        for ns in merged:
            store.remove(ns)
        if acc is not None:
            store.put(target, acc)


class NamespacedKeyedStateStore:
    """A ``KeyedStateStore`` (``get_state``, ``get_list_state``...) bound to one namespace:
    what ``ProcessWindowFunction.Context.window_state()`` returns."""

    def __init__(self, states: NamespacedStates, namespace: Optional[Any] = None) -> None:
        self._states = states
        self.namespace = namespace

    def get_state(self, state_descriptor: StateDescriptor) -> Any:
        return self._states.get(state_descriptor, self.namespace)

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state
