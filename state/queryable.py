"""Queryable keyed state of one subtask: the states registered under a queryable name, read
live (on the task thread, as Flink's queryable state server does) or as of the latest
completed checkpoint (a committed view that a failover never rolls back).

The committed view follows the checkpoints without copying the state at each one: writes
to a queryable state mark their key dirty; a checkpoint's synchronous part captures the
dirty keys' values (``on_checkpoint``); its completion applies them, and those of every
earlier checkpoint not applied yet (an aborted checkpoint's values are applied with the
next completed one, which saw them too). After a restore the view starts from the restored
state itself, which is the latest completed checkpoint's.

>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.heap_backend import HeapKeyedStateBackend
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> states = QueryableStates(backend)
>>> total = states.register(ValueStateDescriptor("total").set_queryable("totals"),
...                         backend.get_partitioned_state(ValueStateDescriptor("total")))
>>> backend.set_current_key("a"); total.update(1)
>>> states.on_checkpoint(1); total.update(2)
>>> states.live_value("totals", "a"), states.committed_value("totals", "a")
(2, (0, None))
>>> states.on_complete(1); states.committed_value("totals", "a")
(1, 1)
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Set, Tuple, TypeVar

from flowray.state.descriptors import StateDescriptor, StateKind
from flowray.state.keyed_backend import KeyedStateBackend, State

__all__ = ["QueryableStates", "UnknownQueryableStateError", "UnknownKvStateLocation",
           "QueriedState", "with_retries", "read_state"]

T = TypeVar("T")

#: the methods that change a state (their key becomes dirty)
_WRITES = frozenset({"update", "clear", "add", "add_all", "put", "put_all", "remove",
                     "__setitem__", "__delitem__"})


class UnknownQueryableStateError(KeyError):
    """No state of this subtask is queryable under that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown queryable state"


class UnknownKvStateLocation(RuntimeError):
    """The subtask that holds the key is not running now (the job is deploying or
    restarting): retry (Flink's ``UnknownKvStateLocation``)."""


def read_state(state: State, kind: StateKind) -> Any:
    """The current key's value of ``state`` as plain data: a value, a list, a dict, or a
    reduced/aggregated result; ``None`` when the key has none."""
    if kind is StateKind.VALUE:
        return state.value()  # type: ignore[attr-defined]
    if kind is StateKind.LIST:
        got = state.get()  # type: ignore[attr-defined]
        items = list(got) if got is not None else []
        return items or None
    if kind is StateKind.MAP:
        items = dict(state.items())  # type: ignore[attr-defined]
        return items or None
    return state.get()  # type: ignore[attr-defined]


class _Tracked:
    """A registered state as its user sees it: every write marks the current key dirty."""

    def __init__(self, state: State, mark: Callable[[], None]) -> None:
        self._state = state
        self._mark = mark

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._state, name)
        if name in _WRITES:
            mark = self._mark

            def write(*args: Any, **kwargs: Any) -> Any:
                result = attr(*args, **kwargs)
                mark()
                return result
            return write
        return attr

    def __iter__(self) -> Any:
        return iter(self._state)

    def __contains__(self, key: Any) -> bool:
        return key in self._state

    def __getitem__(self, key: Any) -> Any:
        return self._state[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._state[key] = value
        self._mark()

    def __delitem__(self, key: Any) -> None:
        del self._state[key]
        self._mark()


class QueryableStates:
    """The queryable states of one subtask's keyed ``backend``.

    Contract: ``register``, ``live_value``, ``on_checkpoint`` and ``on_complete`` run on the
    task thread (they move the backend's current key and put it back);
    ``committed_value`` and ``names`` may run on any thread.
    """

    def __init__(self, backend: KeyedStateBackend, restored_checkpoint_id: int = 0) -> None:
        """``restored_checkpoint_id``: the checkpoint the backend was restored from (0:
        none); the committed view starts as of it."""
        self.backend = backend
        self._states: Dict[str, Tuple[StateDescriptor, State]] = {}
        self._tracked: Dict[str, _Tracked] = {}
        self._dirty: Dict[str, Set[Any]] = {}
        #: name -> the type names of the keys written (a query's key is checked)
        self._key_types: Dict[str, Set[str]] = {}
        #: (checkpoint id, name -> key -> value) captured but not applied yet, oldest first
        self._pending: List[Tuple[int, Dict[str, Dict[Any, Any]]]] = []
        self._committed: Dict[str, Dict[Any, Any]] = {}
        self._committed_id = restored_checkpoint_id
        self._lock = threading.Lock()
        #: the task's operators have opened: every state they ask for in ``open`` is here
        self._opened = False

    def mark_opened(self) -> None:
        """The task's operators have opened: from now on a name not registered is
        unknown, not still to come."""
        self._opened = True

    # -- registration (the task thread, when an operator asks for its state) --------------
    def register(self, descriptor: StateDescriptor, state: State) -> Any:
        """``state`` (of ``descriptor``, which has a queryable name) wrapped so that its
        writes are tracked. Registering the same name again gives the same object; the
        committed view starts from what the backend holds (a restore's state)."""
        name = descriptor.get_queryable_state_name()
        if name is None:
            return state
        known = self._states.get(name)
        if known is not None:
            if known[0].name != descriptor.name:
                raise ValueError(f"queryable state name {name!r} is taken by state "
                                 f"{known[0].name!r}; state {descriptor.name!r} needs "
                                 "another one")
            return self._tracked[name]
        self._states[name] = (descriptor, state)
        dirty = self._dirty[name] = set()
        key_types = self._key_types[name] = set()

        def written() -> None:
            key = self.backend.get_current_key()
            dirty.add(key)
            key_types.add(type(key).__name__)
        tracked = self._tracked[name] = _Tracked(state, written)
        initial = {key: value for key in list(self.backend.get_keys(descriptor.name))
                   for value in [self._read(name, key)] if value is not None}
        key_types.update(type(k).__name__ for k in initial)
        with self._lock:
            self._committed[name] = initial
        return tracked

    def names(self) -> List[str]:
        return sorted(self._states)

    def info(self) -> Dict[str, Tuple[str, List[str]]]:
        """Name -> (state kind, the type names of the keys seen so far)."""
        return {name: (d.kind.value, sorted(set(self._key_types.get(name, ()))))
                for name, (d, _) in list(self._states.items())}

    def kind(self, name: str) -> StateKind:
        return self._entry(name)[0].kind

    def _entry(self, name: str) -> Tuple[StateDescriptor, State]:
        found = self._states.get(name)
        if found is None and not self._opened:
            raise UnknownKvStateLocation(f"the subtask is opening its operators; queryable "
                                         f"state {name!r} may come: retry")
        if found is None:
            raise UnknownQueryableStateError(
                f"no state is queryable as {name!r} here (queryable: "
                f"{', '.join(self.names()) or 'none'})")
        return found

    def _read(self, name: str, key: Any) -> Any:
        descriptor, state = self._entry(name)
        backend = self.backend
        try:
            previous = backend.get_current_key()
        except Exception:  # noqa: BLE001 - no current key yet
            previous = None
        backend.set_current_key(key)
        try:
            return read_state(state, descriptor.kind)
        finally:
            if previous is not None:   # (None: no record processed yet)
                backend.set_current_key(previous)

    # -- reads -------------------------------------------------------------------------
    def live_value(self, name: str, key: Any) -> Any:
        """``key``'s value now (task thread)."""
        return self._read(name, key)

    def committed_value(self, name: str, key: Any) -> Tuple[int, Any]:
        """``(checkpoint id, value)``: ``key``'s value as of the latest completed checkpoint
        (id 0: none yet)."""
        self._entry(name)
        with self._lock:
            return self._committed_id, self._committed.get(name, {}).get(key)

    # -- checkpoints (task thread) -----------------------------------------------------
    def on_checkpoint(self, checkpoint_id: int) -> None:
        """The checkpoint's synchronous part: capture the dirty keys' values."""
        if not self._states:
            return
        captured: Dict[str, Dict[Any, Any]] = {}
        for name, dirty in self._dirty.items():
            if dirty:
                captured[name] = {key: self._read(name, key) for key in dirty}
                dirty.clear()
        self._pending.append((checkpoint_id, captured))

    def on_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: apply what it and earlier ones saw."""
        applied = [p for p in self._pending if p[0] <= checkpoint_id]
        if not applied:
            return
        self._pending = [p for p in self._pending if p[0] > checkpoint_id]
        with self._lock:
            for _, captured in applied:
                for name, values in captured.items():
                    view = self._committed.setdefault(name, {})
                    for key, value in values.items():
                        if value is None:
                            view.pop(key, None)
                        else:
                            view[key] = value
            self._committed_id = max(self._committed_id, checkpoint_id)



class QueriedState:
    """A read-only copy of one key's state as a query found it (Flink's client returns
    the state's interface, read-only). ``checkpoint_id``: the completed checkpoint a
    committed read is as of (-1 for a live read)."""

    def __init__(self, kind: StateKind, value: Any, checkpoint_id: int) -> None:
        self.kind = kind
        self._value = value
        self.checkpoint_id = checkpoint_id

    # ValueState
    def value(self) -> Any:
        self._expect(StateKind.VALUE)
        return self._value

    # ListState, ReducingState, AggregatingState
    def get(self, key: Any = None) -> Any:
        if self.kind is StateKind.MAP:
            return (self._value or {}).get(key)
        if self.kind is StateKind.LIST:
            return list(self._value or [])
        self._expect(StateKind.REDUCING, StateKind.AGGREGATING)
        return self._value

    # MapState
    def items(self) -> Iterable[Tuple[Any, Any]]:
        self._expect(StateKind.MAP)
        return list((self._value or {}).items())

    def keys(self) -> Iterable[Any]:
        self._expect(StateKind.MAP)
        return list((self._value or {}).keys())

    def values(self) -> Iterable[Any]:
        self._expect(StateKind.MAP)
        return list((self._value or {}).values())

    def contains(self, key: Any) -> bool:
        self._expect(StateKind.MAP)
        return key in (self._value or {})

    def is_empty(self) -> bool:
        return not self._value

    def __iter__(self) -> Iterator[Any]:
        if self.kind is StateKind.MAP:
            return iter(list((self._value or {}).keys()))
        return iter(self.get())

    def __getattr__(self, name: str) -> Any:
        if name in ("update", "add", "add_all", "put", "put_all", "remove", "clear"):
            raise TypeError(f"a queried state is read-only: {name}() changes state only "
                            "inside the job")
        raise AttributeError(name)

    def _expect(self, *kinds: StateKind) -> None:
        if self.kind not in kinds:
            raise TypeError(f"this is {self.kind.value} state; "
                            f"{'/'.join(k.value for k in kinds)} state has that method")

    def __repr__(self) -> str:
        at = "live" if self.checkpoint_id < 0 else f"checkpoint {self.checkpoint_id}"
        return f"QueriedState({self.kind.value}, {self._value!r}, {at})"


def with_retries(query: Callable[[], T], attempts: int = 20, delay_s: float = 0.5) -> T:
    """``query()`` again while it raises :class:`UnknownKvStateLocation` (a job deploying
    or restarting), up to ``attempts`` times ``delay_s`` apart; then the last error."""
    for attempt in range(attempts):
        try:
            return query()
        except UnknownKvStateLocation:
            if attempt == attempts - 1:
                raise
            time.sleep(delay_s)
    raise AssertionError("unreachable")
