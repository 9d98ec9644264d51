"""The heap keyed-state backend: one dict per key group per state, Python objects as values.

>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> total = backend.get_partitioned_state(ValueStateDescriptor("total"))
>>> backend.set_current_key("a"); total.update(3)
>>> backend.set_current_key("b"); total.value() is None
True
>>> backend.set_current_key("a"); total.value()
3
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from flowray.common.clock import Clock, SystemClock
from flowray.common.sentinels import MISSING
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from flowray.state.full_snapshot import (  # the state pickles, defined there
    dumps_state,
    loads_state,
    open_full_snapshot,
)
from flowray.state.heap_snapshot import HeapSnapshotWriter
from flowray.state.heap_table import NamespaceFirstTable, SnapshotRegistry, StateTable
from flowray.state.key_groups import KeyGroupAssigner, KeyGroupRange
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
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
from flowray.state.snapshot import IncrementalKeyedStateHandle
from flowray.state.ttl import (
    TtlCleanupCursor,
    TtlState,
    create_ttl_state,
    incompatible,
    purge_function,
    ttl_table_name,
)
from flowray.state.value_codec import decode_value

__all__ = ["HeapKeyedStateBackend", "StateTable", "dumps_state", "loads_state"]

_MISSING = MISSING


class _HeapState(State):
    """Base of the heap states. Writes go into :meth:`StateTable.writable` dicts and
    values handed out or changed in place are :meth:`StateTable.private` (copy-on-write
    while a snapshot is pending, :mod:`flowray.state.heap_table`)."""

    __slots__ = ("_backend", "_table")

    def __init__(self, backend: "HeapKeyedStateBackend", table: StateTable) -> None:
        self._backend = backend
        self._table = table

    def _get(self) -> Any:
        """The current key's value, private to the live state, or ``_MISSING``."""
        b, t = self._backend, self._table
        off = b._current_offset
        v = t.maps[off].get(b._current_key, _MISSING)
        if v is not _MISSING and t.shared[off] is not None:
            v = t.private(off, b._current_key, v)
        return v

    def _peek(self) -> Any:
        """The current key's value for reading only (may be shared with a snapshot)."""
        b = self._backend
        return self._table.maps[b._current_offset].get(b._current_key, _MISSING)

    def _set(self, value: Any) -> None:
        b, t = self._backend, self._table
        off = b._current_offset
        m = t.maps[off]
        s = t.shared[off]
        if s is not None and s[-1] is m:  # held by a pending snapshot (it is the last)
            m = t.writable(off)
        m[b._current_key] = value

    def clear(self) -> None:
        b, t = self._backend, self._table
        off = b._current_offset
        m = t.maps[off]
        if b._current_key in m:
            if t.shared[off] is not None:
                m = t.writable(off)
            del m[b._current_key]


class HeapValueState(_HeapState, ValueState):
    def value(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._set(value)


class HeapListState(_HeapState, ListState):
    def get(self) -> List[Any]:
        v = self._get()
        return [] if v is _MISSING else list(v)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self._table.name!r}: cannot add None")
        lst = self._get()
        if lst is _MISSING:
            self._set([value])
        else:
            lst.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._set(values)
        else:
            self.clear()


class HeapMapState(_HeapState, MapState):
    def _entries(self, create: bool = False) -> Optional[Dict[Any, Any]]:
        d = self._get()
        if d is _MISSING:
            if not create:
                return None
            d = {}
            self._set(d)
        return d

    def _peek_entries(self) -> Optional[Dict[Any, Any]]:
        d = self._peek()
        return None if d is _MISSING else d

    # get, put and remove are _entries / _peek_entries inlined (timers and windows call
    # them per timer and per pane)
    def get(self, key: Any) -> Any:
        b, t = self._backend, self._table
        off, current = b._current_offset, b._current_key
        d = t.maps[off].get(current)
        if d is None:
            return None
        if t.shared[off] is not None:
            d = t.private(off, current, d)
        return d.get(key)

    def put(self, key: Any, value: Any) -> None:
        b, t = self._backend, self._table
        off, current = b._current_offset, b._current_key
        m = t.maps[off]
        d = m.get(current)
        if d is None:
            if t.shared[off] is not None:
                m = t.writable(off)
            m[current] = {key: value}
        else:
            if t.shared[off] is not None:
                d = t.private(off, current, d)
            d[key] = value

    def put_all(self, dict_value: dict) -> None:
        if dict_value:
            self._entries(create=True).update(dict_value)  # type: ignore[union-attr]

    def remove(self, key: Any) -> None:
        b, t = self._backend, self._table
        off, current = b._current_offset, b._current_key
        m = t.maps[off]
        d = m.get(current)
        if d is None or key not in d:
            return
        if t.shared[off] is not None:
            m, d = t.for_change(off, current, d)
        del d[key]
        if not d:
            del m[current]

    def contains(self, key: Any) -> bool:
        d = self._peek_entries()
        return d is not None and key in d

    def items(self) -> List[Tuple[Any, Any]]:
        d = self._entries()
        return [] if d is None else list(d.items())

    def keys(self) -> List[Any]:
        d = self._peek_entries()
        return [] if d is None else list(d)

    def values(self) -> List[Any]:
        d = self._entries()
        return [] if d is None else list(d.values())

    def is_empty(self) -> bool:
        return not self._peek_entries()


class NamespaceFirstMapState(MapState):
    """A map state (per key: namespace -> value) over a :class:`NamespaceFirstTable`:
    the same contract as :class:`HeapMapState`, its values kept namespace first."""

    __slots__ = ("_backend", "_table")

    def __init__(self, backend: "HeapKeyedStateBackend", table: NamespaceFirstTable) -> None:
        self._backend = backend
        self._table = table

    def _namespaces(self) -> Dict[Any, Dict[Any, Any]]:
        """The current key group's dict ``namespace -> {key: value}`` (for reading)."""
        return self._table.maps[self._backend._current_offset]

    def _for_change(self, namespace: Any) -> Tuple[Dict[Any, Any], Any]:
        """The current key group's dict and ``namespace``'s dict of keys in it (None if it
        has none), both safe to change in place."""
        t, off = self._table, self._backend._current_offset
        m = t.maps[off]
        keyed = m.get(namespace)
        if t.shared[off] is None:
            return m, keyed
        return t.for_change(off, namespace, keyed)

    def get(self, key: Any) -> Any:
        b, t = self._backend, self._table
        off = b._current_offset
        keyed = t.maps[off].get(key)
        if keyed is None:
            return None
        if t.shared[off] is not None:  # handed out: the caller may change it in place
            keyed = t.private(off, key, keyed)
        return keyed.get(b._current_key)

    def put(self, key: Any, value: Any) -> None:
        m, keyed = self._for_change(key)
        if keyed is None:
            keyed = m[key] = {}
        keyed[self._backend._current_key] = value

    def put_all(self, dict_value: dict) -> None:
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        current = self._backend._current_key
        keyed = self._namespaces().get(key)
        if keyed is None or current not in keyed:
            return
        m, keyed = self._for_change(key)
        del keyed[current]
        if not keyed:
            del m[key]

    def contains(self, key: Any) -> bool:
        keyed = self._namespaces().get(key)
        return keyed is not None and self._backend._current_key in keyed

    def _items(self) -> List[Tuple[Any, Any]]:
        current, missing = self._backend._current_key, _MISSING
        return [(ns, v) for ns, keyed in self._namespaces().items()
                for v in (keyed.get(current, missing),) if v is not missing]

    def items(self) -> List[Tuple[Any, Any]]:
        return [(ns, self.get(ns)) for ns, _ in self._items()]

    def keys(self) -> List[Any]:
        return [ns for ns, _ in self._items()]

    def values(self) -> List[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        current = self._backend._current_key
        return not any(current in keyed for keyed in self._namespaces().values())

    def clear(self) -> None:
        for ns in self.keys():
            self.remove(ns)


class HeapReducingState(_HeapState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend: "HeapKeyedStateBackend", table: StateTable, reduce_fn: Any) -> None:
        super().__init__(backend, table)
        self._reduce = reduce_fn

    def get(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def add(self, value: Any) -> None:
        cur = self._get()
        self._set(value if cur is _MISSING else self._reduce(cur, value))


class HeapAggregatingState(_HeapState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend: "HeapKeyedStateBackend", table: StateTable, agg: Any) -> None:
        super().__init__(backend, table)
        self._agg = agg

    def get(self) -> Any:
        acc = self._get()
        return None if acc is _MISSING else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self._get()
        if acc is _MISSING:
            acc = self._agg.create_accumulator()
        self._set(self._agg.add(value, acc))


_STATE_CLASSES = {
    StateKind.VALUE: HeapValueState,
    StateKind.LIST: HeapListState,
    StateKind.MAP: HeapMapState,
}


class HeapKeyedStateBackend(KeyedStateBackend):
    """Keyed state in Python dicts, one dict per key group per state. ``clock``: the
    processing-time clock of state TTL (default: the system clock).

    Snapshots are copy-on-write (:mod:`flowray.state.heap_table`): the synchronous part
    only holds the current dicts; the writer serializes them while processing goes on."""

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int,
                 clock: Optional[Clock] = None) -> None:
        self.ttl_clock: Clock = clock if clock is not None else SystemClock()
        #: TTL tables cleaned up in full snapshots: table name -> (purge, ttl ms)
        self._ttl_purges: Dict[str, Tuple[Callable[[Any, int, int], Any], int]] = {}
        self._per_record_cleanups: List[TtlCleanupCursor] = []
        self.key_group_range = key_group_range
        self._first_key_group = key_group_range.start
        self._key_groups = len(key_group_range)
        self.max_parallelism = max_parallelism
        self._assign = KeyGroupAssigner(max_parallelism)
        self._tables: Dict[str, StateTable] = {}
        self._states: Dict[str, State] = {}
        self._current_key: Any = None
        self._current_key_group = -1
        self._current_offset = -1
        self._snapshots = SnapshotRegistry()

    # -- key context -------------------------------------------------------------------
    def set_current_key(self, key: Any, key_group: Optional[int] = None) -> None:
        if type(key) not in PLAIN_KEY_TYPES:
            key = canonical_key(key)
        if key_group is None:
            key_group = self._assign(key)
        offset = key_group - self._first_key_group
        if not 0 <= offset < self._key_groups:
            raise StateAccessError(
                f"key {key!r} belongs to key group {key_group}, outside this subtask's range "
                f"[{self.key_group_range.start}, {self.key_group_range.end}]; "
                "is the key selector deterministic?"
            )
        self._current_key = key
        self._current_key_group = key_group
        self._current_offset = offset

    def get_current_key(self) -> Any:
        return self._current_key

    def get_current_key_group(self) -> int:
        return self._current_key_group

    # -- states ------------------------------------------------------------------------
    def get_state_table(self, name: str, kind: StateKind) -> StateTable:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = StateTable(name, kind, self.key_group_range)
        elif table.kind is not kind:
            raise StateAccessError(
                f"state {name!r} is registered as {table.kind.value} state, "
                f"cannot access it as {kind.value} state"
            )
        return table

    def namespace_first_table(self, name: str) -> NamespaceFirstTable:
        """The map state ``name`` laid out namespace first (:class:`NamespaceFirstTable`;
        its :meth:`get_partitioned_state` view is the same map state). What the table
        already holds (restored before the operator opened) is moved into that layout;
        a snapshot reads it back key first, so its format does not change."""
        table = self._tables.get(name)
        if isinstance(table, NamespaceFirstTable):
            return table
        new = NamespaceFirstTable(name, StateKind.MAP, self.key_group_range)
        if table is not None:
            if table.kind is not StateKind.MAP:
                raise StateAccessError(
                    f"state {name!r} is registered as {table.kind.value} state, "
                    "cannot access it as map state")
            if table.holds:
                raise StateAccessError(
                    f"state {name!r}: cannot change its layout while a snapshot holds it")
            for off, m in enumerate(table.maps):
                new.load(off, m.items())
            self._states.pop(name, None)
        self._tables[name] = new
        return new

    def get_partitioned_state(self, descriptor: StateDescriptor) -> State:
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a StateDescriptor, got {descriptor!r}")
        ttl = descriptor._ttl_config
        if ttl is not None and ttl.is_enabled():
            return self._ttl_state(descriptor, ttl)
        table = self.get_state_table(descriptor.name, descriptor.kind)
        state = self._states.get(descriptor.name)
        if state is not None:
            return state
        if ttl_table_name(descriptor.name) in self._tables:
            raise incompatible(descriptor.name, ttl_now=False)
        if isinstance(table, NamespaceFirstTable):
            state = NamespaceFirstMapState(self, table)
        elif isinstance(descriptor, ReducingStateDescriptor):
            state = HeapReducingState(self, table, descriptor.reduce_function)
        elif isinstance(descriptor, AggregatingStateDescriptor):
            state = HeapAggregatingState(self, table, descriptor.agg_function)
        else:
            state = _STATE_CLASSES[descriptor.kind](self, table)
        self._states[descriptor.name] = state
        return state

    def _ttl_state(self, descriptor: StateDescriptor, config: Any) -> TtlState:
        """The TTL decorator of ``descriptor`` (:mod:`flowray.state.ttl`), created once."""
        table_name = ttl_table_name(descriptor.name)
        table = self.get_state_table(table_name, descriptor.kind)
        state = self._states.get(table_name)
        if state is not None:
            return state  # type: ignore[return-value]
        if descriptor.name in self._tables:
            raise incompatible(descriptor.name, ttl_now=True)
        # the TTL states change stored lists and dicts in place: the raw value() is private
        state = create_ttl_state(descriptor, config, HeapValueState(self, table), self.ttl_clock)
        strategies = config.get_cleanup_strategies()
        incremental = strategies.get_incremental_cleanup_strategy()
        if incremental is not None:
            plain = type(self).set_current_key
            cursor = TtlCleanupCursor(
                self, state, incremental.get_cleanup_size(), list(self.key_group_range),
                lambda kg: list(table.map_for(kg)), lambda k, kg: plain(self, k, kg),
                ("_current_key", "_current_key_group", "_current_offset"))
            state.incremental = cursor
            if incremental.run_cleanup_for_every_record():
                self._add_per_record_cleanup(cursor)
        if strategies.in_full_snapshot():
            self._ttl_purges[table_name] = (purge_function(descriptor.kind), config.get_ttl_ms())
        self._states[table_name] = state
        return state

    def _add_per_record_cleanup(self, cursor: TtlCleanupCursor) -> None:
        """Run ``cursor`` on every ``set_current_key`` (once per record): the instance's
        ``set_current_key`` is replaced, so backends without it pay nothing."""
        cleanups = self._per_record_cleanups
        if not cleanups:
            plain = type(self).set_current_key

            def set_current_key(key: Any, key_group: Optional[int] = None) -> None:
                plain(self, key, key_group)
                for c in cleanups:
                    c.step()

            self.set_current_key = set_current_key  # type: ignore[method-assign]
        cleanups.append(cursor)

    def state_names(self) -> List[str]:
        return list(self._tables)

    def get_keys(self, state_name: str) -> Iterator[Any]:
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        if isinstance(table, NamespaceFirstTable):
            return (k for off in range(len(table.maps)) for k in table.keys_of(off))
        return (k for m in table.maps for k in m)

    def iter_key_group(self, state_name: str, key_group: int) -> Iterator[Tuple[Any, Any]]:
        table = self._tables.get(state_name)
        if table is None or key_group not in self.key_group_range:
            return iter(())
        m = table.map_for(key_group)
        if isinstance(table, NamespaceFirstTable):
            m = table.key_first(m)
        return iter(list(m.items()))

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int, savepoint: bool = False) -> HeapSnapshotWriter:
        """Hold every non-empty key-group dict as it is now (no copy, no serialization:
        copy-on-write keeps them unchanged); the writer serializes and stores them."""
        purges = dict(self._ttl_purges)
        now = self.ttl_clock.now_ms() if purges else 0
        kinds = {name: t.kind.value for name, t in self._tables.items()}
        frozen = self._snapshots.freeze(self._tables.values(), checkpoint_id)
        if not frozen.refs:
            frozen.release()
            frozen = None
        return HeapSnapshotWriter(frozen, self.key_group_range, kinds, purges, now)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Release the checkpoint's snapshot now if its write has not started (else the
        write stops early and releases it)."""
        self._snapshots.abort(checkpoint_id)

    def pending_snapshots(self) -> int:
        """How many snapshots still hold state (their asynchronous part has not ended)."""
        return len(self._snapshots.pending())

    def restore(self, handles: Sequence[Any], read: Callable[[str], bytes],
                claimed: bool = True) -> None:
        """Load this backend's key groups from full snapshots of any format version, heap
        or RocksDB written (:mod:`flowray.state.full_snapshot`), and from checkpoints in
        RocksDB's native format (:mod:`flowray.state.rocksdb.native_snapshot`: a job
        that ran on RocksDB, restored on the heap)."""
        for handle in handles:
            if handle is None:
                continue
            if isinstance(handle, IncrementalKeyedStateHandle):
                self._restore_native(handle, read)
                continue
            snapshot = open_full_snapshot(handle.path, read)
            self._load(snapshot.kinds, snapshot.records(self.key_group_range),
                       snapshot.pickled)

    def _restore_native(self, handle: IncrementalKeyedStateHandle,
                        read: Callable[[str], bytes]) -> None:
        rng = handle.key_group_range.intersection(self.key_group_range)
        if not len(rng):
            return
        from flowray.state.rocksdb.native_snapshot import open_native_snapshot

        with open_native_snapshot(handle, read) as snapshot:
            self._load(snapshot.kinds, snapshot.records(rng), True)

    def _load(self, kinds: Dict[str, str], records: Iterable[Tuple[int, str, Any]],
              encoded: bool) -> None:
        """Put ``(key group, state, [(key, value)])`` records into the state tables; values
        are :mod:`flowray.state.value_codec` bytes if ``encoded`` (written by RocksDB)."""
        plain = PLAIN_KEY_TYPES
        for kg, name, entries in records:
            table = self.get_state_table(name, StateKind(kinds[name]))
            off = kg - table.key_group_range.start
            # a NaN read back is a new object: canonical again
            entries = ((k if type(k) in plain else canonical_key(k),
                        decode_value(v) if encoded else v) for k, v in entries)
            if isinstance(table, NamespaceFirstTable):
                table.load(off, entries)
                continue
            target = table.writable(off)
            for k, v in entries:
                target[k] = v

    def dispose(self, discard_local_state: bool = False) -> None:
        self._tables.clear()
        self._states.clear()
