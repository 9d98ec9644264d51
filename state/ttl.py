"""State time-to-live: TTL decorators over the raw storage of a keyed-state backend.

Only a descriptor with an enabled :class:`~flowray.state.ttl_config.StateTtlConfig` gets
these classes; other states keep the backends' own classes (no per-record cost).

Storage (both backends, so snapshots, restore and rescaling need nothing new): a TTL state
``name`` lives in the backend table ``__ttl__/name`` of the same kind; each user value
carries its last-access timestamp (ms of the backend's clock): value/reducing/aggregating
state store ``(value, ts)``, list state a list of ``(element, ts)``, map state a dict
``key -> (value, ts)``. Expired means ``ts + ttl <= now``. A state restored with TTL but
registered without it (or the reverse) is refused: :class:`IncompatibleStateError`.

Cleanup: an expired value is removed when read; :class:`TtlCleanupCursor` walks all keys of
one state a few entries at a time (heap: ``cleanup_incrementally``; RocksDB: the sweep that
stands in for the compaction filter); full snapshots (heap checkpoints, savepoints) leave
expired values out (``cleanup_full_snapshot``, :func:`purge_function`). Design notes: docs/state.md.

>>> from flowray.common.clock import ManualClock
>>> from flowray.common.time import Time
>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.heap_backend import HeapKeyedStateBackend
>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.ttl_config import StateTtlConfig
>>> clock = ManualClock(0)
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=clock)
>>> d = ValueStateDescriptor("seen")
>>> d.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
>>> seen = backend.get_partitioned_state(d)
>>> backend.set_current_key("a"); seen.update(1); clock.advance(999); seen.value()
1
>>> clock.advance(1); seen.value() is None
True
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from flowray.common.clock import Clock
from flowray.common.sentinels import MISSING
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from flowray.state.keyed_backend import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    StateAccessError,
    ValueState,
)
from flowray.state.ttl_config import StateTtlConfig

__all__ = [
    "TTL_TABLE_PREFIX",
    "IncompatibleStateError",
    "incompatible",
    "ttl_table_name",
    "ttl_config_of",
    "purge_function",
    "create_ttl_state",
    "TtlCleanupCursor",
    "TtlState",
]

#: backend tables of TTL states are named ``TTL_TABLE_PREFIX + state name``
TTL_TABLE_PREFIX = "__ttl__/"

_ON_READ = StateTtlConfig.UpdateType.OnReadAndWrite
_RETURN_EXPIRED = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


class IncompatibleStateError(StateAccessError):
    """A state restored from a snapshot is registered with an incompatible descriptor
    (TTL enabled now but not when it was checkpointed, or the reverse)."""


def ttl_table_name(name: str) -> str:
    """The backend table holding TTL state ``name``."""
    return TTL_TABLE_PREFIX + name


def ttl_config_of(descriptor: StateDescriptor) -> Optional[StateTtlConfig]:
    """The descriptor's TTL config if TTL is enabled, else ``None``."""
    config = getattr(descriptor, "_ttl_config", None)
    return config if config is not None and config.is_enabled() else None


def incompatible(name: str, ttl_now: bool) -> IncompatibleStateError:
    """The error for state ``name`` registered with (``ttl_now``) or without TTL while its
    stored table is of the other sort."""
    if ttl_now:
        return IncompatibleStateError(
            f"state {name!r} was checkpointed without TTL but its descriptor now enables TTL "
            "(enable_time_to_live): the restored state is incompatible; keep the descriptor "
            "as it was or start without that state")
    return IncompatibleStateError(
        f"state {name!r} was checkpointed with TTL (enable_time_to_live) but its descriptor "
        "now has no TTL: the restored state is incompatible; keep the descriptor as it was "
        "or start without that state")


# ---------------------------------------------------------------------------------------
# purging expired values out of stored objects
# ---------------------------------------------------------------------------------------

def _purge_single(stored: Any, ttl: int, now: int) -> Any:
    return None if stored[1] + ttl <= now else stored


def _purge_list(stored: Any, ttl: int, now: int) -> Any:
    kept = [e for e in stored if e[1] + ttl > now]
    if len(kept) == len(stored):
        return stored
    return kept or None


def _purge_map(stored: Any, ttl: int, now: int) -> Any:
    kept = {k: e for k, e in stored.items() if e[1] + ttl > now}
    if len(kept) == len(stored):
        return stored
    return kept or None


def purge_function(kind: StateKind) -> Callable[[Any, int, int], Any]:
    """``purge(stored, ttl_ms, now_ms)``: the stored object of one key without its expired
    values (the same object if none expired), ``None`` if nothing is left."""
    if kind is StateKind.LIST:
        return _purge_list
    if kind is StateKind.MAP:
        return _purge_map
    return _purge_single


# ---------------------------------------------------------------------------------------
# walking all keys of a state, a few at a time
# ---------------------------------------------------------------------------------------

class TtlCleanupCursor:
    """A lazy walk through every key of one TTL state, restarted when it ends; each
    :meth:`step` visits up to ``size`` keys and removes their expired values. Keys come
    key group by key group (``keys_of_group(kg)`` lists a group's keys when the walk
    reaches it); the backend's current key is restored afterwards."""

    def __init__(self, backend: Any, state: "TtlState", size: int,
                 key_groups: Sequence[int], keys_of_group: Callable[[int], List[Any]],
                 set_key: Callable[[Any, int], None], key_attrs: Tuple[str, ...]) -> None:
        self._backend = backend
        self._state = state
        self.size = size
        self._key_groups = key_groups
        self._keys_of_group = keys_of_group
        self._set_key = set_key
        self._key_attrs = key_attrs
        self._walk: Iterator[Tuple[Any, int]] = iter(())
        self._running = False
        self.visited = 0  # keys visited so far (diagnostics and tests)

    def _new_walk(self) -> Iterator[Tuple[Any, int]]:
        for kg in self._key_groups:
            for key in self._keys_of_group(kg):
                yield key, kg

    def step(self, size: Optional[int] = None) -> None:
        """Visit the next ``size`` (default: the configured number) keys."""
        if self._running:
            return
        self._running = True
        backend = self._backend
        saved = [getattr(backend, a) for a in self._key_attrs]
        try:
            n = self.size if size is None else size
            now = self._state._clock.now_ms()
            fresh = False
            while n > 0:
                nxt = next(self._walk, None)
                if nxt is None:
                    if fresh:
                        break  # the state is empty
                    self._walk, fresh = self._new_walk(), True
                    continue
                fresh = False
                self._set_key(nxt[0], nxt[1])
                self._state._cleanup_current(now)
                self.visited += 1
                n -= 1
        finally:
            for a, v in zip(self._key_attrs, saved):
                setattr(backend, a, v)
            self._running = False


# ---------------------------------------------------------------------------------------
# the TTL states
# ---------------------------------------------------------------------------------------

class TtlState(State):
    """Base of the TTL decorators. ``raw``: value-style access (``value``/``update``/
    ``clear``) to the current key's stored object in the backend table."""

    __slots__ = ("_raw", "name", "config", "_ttl", "_clock", "_return_expired",
                 "_update_on_read", "_purge", "incremental", "sweep", "_writes")

    kind: StateKind

    def __init__(self, raw: ValueState, name: str, config: StateTtlConfig,
                 clock: Clock) -> None:
        self._raw = raw
        self.name = name
        self.config = config
        self._ttl = config.get_ttl_ms()
        self._clock = clock
        self._return_expired = config.get_state_visibility() is _RETURN_EXPIRED
        self._update_on_read = config.get_update_type() is _ON_READ
        self._purge = purge_function(self.kind)
        #: cleanup on every access (heap's incremental cleanup), or None
        self.incremental: Optional[TtlCleanupCursor] = None
        #: cleanup after every ``sweep.size`` writes (RocksDB's compaction filter), or None
        self.sweep: Optional[TtlCleanupCursor] = None
        self._writes = 0

    def _touch(self) -> None:
        c = self.incremental
        if c is not None:
            c.step()

    def _wrote(self) -> None:
        s = self.sweep
        if s is not None:
            self._writes += 1
            if self._writes >= s.size:
                self._writes = 0
                s.step()

    def _cleanup_current(self, now: int) -> None:
        """Remove the current key's expired values."""
        raw = self._raw
        stored = raw.value()
        if stored is None:
            return
        kept = self._purge(stored, self._ttl, now)
        if kept is None:
            raw.clear()
        elif kept is not stored:
            raw.update(kept)

    def clear(self) -> None:
        self._touch()
        self._raw.clear()

    def _read_single(self) -> Tuple[bool, Any]:
        """``(found, value)`` of a single-value state, with the TTL rules applied."""
        stored = self._raw.value()
        if stored is None:
            return False, None
        value, ts = stored
        now = self._clock.now_ms()
        if ts + self._ttl <= now:
            self._raw.clear()
            return self._return_expired, value
        if self._update_on_read:
            self._raw.update((value, now))
        return True, value

    def _unexpired_single(self) -> Any:
        """The stored object of a single-value state if not expired, else ``None``."""
        stored = self._raw.value()
        if stored is None or stored[1] + self._ttl <= self._clock.now_ms():
            return None
        return stored


class TtlValueState(TtlState, ValueState):
    __slots__ = ()
    kind = StateKind.VALUE

    def value(self) -> Any:
        self._touch()
        found, value = self._read_single()
        return value if found else None

    def update(self, value: Any) -> None:
        self._touch()
        if value is None:
            self._raw.clear()
            return
        self._raw.update((value, self._clock.now_ms()))
        self._wrote()


class TtlReducingState(TtlState, ReducingState):
    __slots__ = ("_reduce",)
    kind = StateKind.REDUCING

    def __init__(self, raw: ValueState, name: str, config: StateTtlConfig, clock: Clock,
                 reduce_fn: Callable[[Any, Any], Any]) -> None:
        super().__init__(raw, name, config, clock)
        self._reduce = reduce_fn

    def get(self) -> Any:
        self._touch()
        found, value = self._read_single()
        return value if found else None

    def add(self, value: Any) -> None:
        self._touch()
        cur = self._unexpired_single()
        new = value if cur is None else self._reduce(cur[0], value)
        self._raw.update((new, self._clock.now_ms()))
        self._wrote()


class TtlAggregatingState(TtlState, AggregatingState):
    __slots__ = ("_agg",)
    kind = StateKind.AGGREGATING

    def __init__(self, raw: ValueState, name: str, config: StateTtlConfig, clock: Clock,
                 agg: Any) -> None:
        super().__init__(raw, name, config, clock)
        self._agg = agg

    def get(self) -> Any:
        self._touch()
        found, acc = self._read_single()
        return self._agg.get_result(acc) if found else None

    def add(self, value: Any) -> None:
        self._touch()
        cur = self._unexpired_single()
        acc = self._agg.create_accumulator() if cur is None else cur[0]
        self._raw.update((self._agg.add(value, acc), self._clock.now_ms()))
        self._wrote()


class TtlListState(TtlState, ListState):
    __slots__ = ()
    kind = StateKind.LIST

    def get(self) -> List[Any]:
        self._touch()
        stored = self._raw.value()
        if not stored:
            return []
        now = self._clock.now_ms()
        ttl = self._ttl
        kept = [e for e in stored if e[1] + ttl > now]
        if self._update_on_read and kept:
            kept = [(e[0], now) for e in kept]
            self._raw.update(kept)
        elif len(kept) != len(stored):
            if kept:
                self._raw.update(kept)
            else:
                self._raw.clear()
        return [e[0] for e in (stored if self._return_expired else kept)]

    def _append(self, values: List[Any]) -> None:
        for v in values:
            if v is None:
                raise ValueError(f"list state {self.name!r}: cannot add None")
        if not values:
            return
        now = self._clock.now_ms()
        stored = self._raw.value()
        lst = [] if stored is None else stored
        lst.extend((v, now) for v in values)
        self._raw.update(lst)
        self._wrote()

    def add(self, value: Any) -> None:
        self._touch()
        self._append([value])

    def add_all(self, values: Iterable[Any]) -> None:
        self._touch()
        self._append(list(values))

    def update(self, values: Iterable[Any]) -> None:
        self._touch()
        values = list(values)
        if any(v is None for v in values):
            raise ValueError(f"list state {self.name!r}: cannot add None")
        if values:
            now = self._clock.now_ms()
            self._raw.update([(v, now) for v in values])
            self._wrote()
        else:
            self._raw.clear()


_MISSING = MISSING


class TtlMapState(TtlState, MapState):
    __slots__ = ()
    kind = StateKind.MAP

    def _write_back(self, d: Dict[Any, Any]) -> None:
        if d:
            self._raw.update(d)
        else:
            self._raw.clear()

    def _get(self, key: Any) -> Any:
        d = self._raw.value()
        if not d:
            return _MISSING
        e = d.get(key, _MISSING)
        if e is _MISSING:
            return _MISSING
        value, ts = e
        now = self._clock.now_ms()
        if ts + self._ttl <= now:
            del d[key]
            self._write_back(d)
            return value if self._return_expired else _MISSING
        if self._update_on_read:
            d[key] = (value, now)
            self._raw.update(d)
        return value

    def get(self, key: Any) -> Any:
        self._touch()
        v = self._get(key)
        return None if v is _MISSING else v

    def contains(self, key: Any) -> bool:
        self._touch()
        return self._get(key) is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        self._touch()
        d = self._raw.value()
        if d is None:
            d = {}
        d[key] = (value, self._clock.now_ms())
        self._raw.update(d)
        self._wrote()

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        self._touch()
        if not dict_value:
            return
        now = self._clock.now_ms()
        d = self._raw.value()
        if d is None:
            d = {}
        for k, v in dict(dict_value).items():
            d[k] = (v, now)
        self._raw.update(d)
        self._wrote()

    def remove(self, key: Any) -> None:
        self._touch()
        d = self._raw.value()
        if d and key in d:
            del d[key]
            self._write_back(d)

    def items(self) -> List[Tuple[Any, Any]]:
        self._touch()
        d = self._raw.value()
        if not d:
            return []
        now = self._clock.now_ms()
        ttl, on_read, ret = self._ttl, self._update_on_read, self._return_expired
        out: List[Tuple[Any, Any]] = []
        kept: Dict[Any, Any] = {}
        for k, (v, ts) in d.items():
            if ts + ttl <= now:
                if ret:
                    out.append((k, v))
            else:
                out.append((k, v))
                kept[k] = (v, now) if on_read else (v, ts)
        if on_read or len(kept) != len(d):
            self._write_back(kept)
        return out

    def keys(self) -> List[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> List[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()


_TTL_CLASSES = {
    StateKind.VALUE: TtlValueState,
    StateKind.LIST: TtlListState,
    StateKind.MAP: TtlMapState,
}


def create_ttl_state(descriptor: StateDescriptor, config: StateTtlConfig, raw: ValueState,
                     clock: Clock) -> TtlState:
    """The TTL state of ``descriptor`` over ``raw`` (value-style access to the table
    :func:`ttl_table_name` of the descriptor's kind). The backend attaches cleanup
    cursors (:attr:`TtlState.incremental`, :attr:`TtlState.sweep`)."""
    name = descriptor.name
    if isinstance(descriptor, ReducingStateDescriptor):
        return TtlReducingState(raw, name, config, clock, descriptor.reduce_function)
    if isinstance(descriptor, AggregatingStateDescriptor):
        return TtlAggregatingState(raw, name, config, clock, descriptor.agg_function)
    return _TTL_CLASSES[descriptor.kind](raw, name, config, clock)
