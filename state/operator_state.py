"""Operator (non-keyed) state: named list states of one operator in one subtask.

Flink's ``OperatorStateStore``. A list state is registered with a *redistribution mode*
that says how its elements are dealt to the subtasks when a job is restored at another
parallelism (:func:`redistribute_operator_state`, Flink's round-robin repartitioner):

* ``get_list_state`` (``SPLIT_DISTRIBUTE``): the elements of all subtasks are concatenated
  and split evenly; each element goes to exactly one subtask;
* ``get_union_list_state`` (``UNION``): every subtask gets every element;
* ``get_broadcast_state`` (``BROADCAST``, a map, not a list): every subtask holds a copy;
  each new subtask gets the copy of one old subtask (``i % old_parallelism``).

Contract: the same name gives the same state object; a name is bound to one mode (asking for
it in the other mode raises :class:`StateAccessError`, also against restored state).
:meth:`OperatorStateStore.snapshot` serializes every element (cloudpickle) when it is
called, so later changes do not reach the snapshot. Restored states are deserialized when
first requested; restored states never requested are carried into later snapshots as they
were.

>>> from flowray.state.descriptors import ListStateDescriptor
>>> store = OperatorStateStore()
>>> offsets = store.get_list_state(ListStateDescriptor("offsets"))
>>> offsets.add_all([10, 20])
>>> snap = store.snapshot()
>>> offsets.add(30)                       # after the snapshot: not in it
>>> restored = OperatorStateStore.restore(snap)
>>> restored.restored_names()
['offsets']
>>> restored.get_list_state(ListStateDescriptor("offsets")).get()
[10, 20]
>>> parts = redistribute_operator_state([snap, snap], 3)   # rescale 2 -> 3
>>> [OperatorStateStore.restore(p).get_list_state(ListStateDescriptor("offsets")).get()
...  for p in parts]
[[10, 20], [10], [20]]
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import cloudpickle

from flowray.state.broadcast_state import HeapBroadcastState
from flowray.state.keyed_backend import ListState, StateAccessError
from flowray.state.descriptors import ListStateDescriptor, MapStateDescriptor
from flowray.state.snapshot import BROADCAST, SPLIT_DISTRIBUTE, UNION, OperatorStateEntry

__all__ = [
    "OperatorStateStore",
    "OperatorListState",
    "redistribute_operator_state",
]

_MODES = (SPLIT_DISTRIBUTE, UNION, BROADCAST)
_GETTER = {SPLIT_DISTRIBUTE: "get_list_state", UNION: "get_union_list_state",
           BROADCAST: "get_broadcast_state"}
_KIND = {SPLIT_DISTRIBUTE: f"{SPLIT_DISTRIBUTE} list", UNION: f"{UNION} list",
         BROADCAST: BROADCAST}


class OperatorListState(ListState):
    """One named operator list state (plain Python objects, in memory)."""

    __slots__ = ("name", "mode", "_items")

    def __init__(self, name: str, mode: str, items: Optional[List[Any]] = None) -> None:
        self.name = name
        self.mode = mode
        self._items: List[Any] = items if items is not None else []

    def get(self) -> List[Any]:
        """A copy of the elements, in insertion order."""
        return list(self._items)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"operator list state {self.name!r}: cannot add None")
        self._items.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        for v in values:
            if v is None:
                raise ValueError(f"operator list state {self.name!r}: cannot add None")
        self._items.extend(values)

    def update(self, values: Optional[Iterable[Any]]) -> None:
        """Replace all elements (``None`` or an empty iterable clears the state)."""
        values = list(values) if values is not None else []
        for v in values:
            if v is None:
                raise ValueError(f"operator list state {self.name!r}: cannot add None")
        self._items = values

    def clear(self) -> None:
        self._items = []

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"OperatorListState({self.name!r}, {self.mode}, {len(self._items)} elements)"


class OperatorStateStore:
    """The operator list states of one operator in one subtask.

    ``OperatorStateStore()`` starts empty; ``OperatorStateStore.restore(entries)`` (or
    ``OperatorStateStore(entries)``) starts from the entries of a snapshot, already
    redistributed for this subtask.
    """

    def __init__(self, restored: Optional[Dict[str, OperatorStateEntry]] = None) -> None:
        self._restored: Dict[str, OperatorStateEntry] = dict(restored or {})
        for name, entry in self._restored.items():
            if entry.mode not in _MODES:
                raise StateAccessError(f"operator state {name!r}: unknown redistribution "
                                       f"mode {entry.mode!r} in the restored snapshot")
        self._restored_names = list(self._restored)
        self._states: Dict[str, OperatorListState] = {}
        self._broadcast: Dict[str, HeapBroadcastState] = {}

    @classmethod
    def restore(cls, entries: Optional[Dict[str, OperatorStateEntry]]) -> "OperatorStateStore":
        """A store holding the restored ``entries`` (deserialized on first request)."""
        return cls(entries)

    # -- access ------------------------------------------------------------------------
    def get_list_state(self, descriptor: Union[ListStateDescriptor, str]) -> OperatorListState:
        """A list state redistributed by even split on rescale (``SPLIT_DISTRIBUTE``)."""
        return self._get(descriptor, SPLIT_DISTRIBUTE)

    def get_union_list_state(self,
                             descriptor: Union[ListStateDescriptor, str]) -> OperatorListState:
        """A list state of which every subtask gets all elements on restore (``UNION``)."""
        return self._get(descriptor, UNION)

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> HeapBroadcastState:
        """The broadcast state (a map) named by ``state_descriptor`` (``BROADCAST``): every
        subtask snapshots its copy, every subtask gets one copy back on restore."""
        if not isinstance(state_descriptor, MapStateDescriptor):
            raise TypeError(f"get_broadcast_state expects a MapStateDescriptor, got "
                            f"{state_descriptor!r}")
        name = state_descriptor.name
        state = self._broadcast.get(name)
        if state is not None:
            return state
        if name in self._states:
            _check_mode(name, self._states[name].mode, BROADCAST, "registered")
        entry = self._restored.get(name)
        if entry is not None:
            _check_mode(name, entry.mode, BROADCAST, "restored")
            try:
                pairs = [cloudpickle.loads(b) for b in entry.items]
            except Exception as e:
                raise StateAccessError(f"broadcast state {name!r}: cannot deserialize the "
                                       f"restored entries: {type(e).__name__}: {e}") from e
            del self._restored[name]
            state = HeapBroadcastState(name, dict(pairs))
        else:
            state = HeapBroadcastState(name)
        self._broadcast[name] = state
        return state

    def _get(self, descriptor: Union[ListStateDescriptor, str], mode: str) -> OperatorListState:
        if isinstance(descriptor, str):
            descriptor = ListStateDescriptor(descriptor)
        if not isinstance(descriptor, ListStateDescriptor):
            raise TypeError(f"{_GETTER[mode]} expects a ListStateDescriptor (operator state is "
                            f"list state only), got {descriptor!r}")
        name = descriptor.name
        state = self._states.get(name)
        if state is not None:
            _check_mode(name, state.mode, mode, "registered")
            return state
        if name in self._broadcast:
            _check_mode(name, BROADCAST, mode, "registered")
        entry = self._restored.get(name)
        if entry is not None:
            _check_mode(name, entry.mode, mode, "restored")
            try:
                items = [cloudpickle.loads(b) for b in entry.items]
            except Exception as e:
                raise StateAccessError(f"operator state {name!r}: cannot deserialize the "
                                       f"restored elements: {type(e).__name__}: {e}") from e
            del self._restored[name]
            state = OperatorListState(name, mode, items)
        else:
            state = OperatorListState(name, mode)
        self._states[name] = state
        return state

    def restored_names(self) -> List[str]:
        """Names of the states this store was restored with (requested or not)."""
        return list(self._restored_names)

    def state_names(self) -> List[str]:
        """Every state name this store would snapshot."""
        live = list(self._states) + list(self._broadcast)
        return live + [n for n in self._restored if n not in live]

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self) -> Dict[str, OperatorStateEntry]:
        """Serialize every state now. Restored states that were never requested are kept
        as they were restored."""
        out: Dict[str, OperatorStateEntry] = {}
        for name, state in self._states.items():
            items = []
            for element in state._items:
                try:
                    items.append(cloudpickle.dumps(element))
                except Exception as e:
                    raise StateAccessError(
                        f"operator state {name!r}: cannot serialize element {element!r}: "
                        f"{type(e).__name__}: {e}") from e
            out[name] = OperatorStateEntry(state.mode, items)
        for name, bstate in self._broadcast.items():
            pairs = []
            for pair in bstate._map.items():
                try:
                    pairs.append(cloudpickle.dumps(pair))
                except Exception as e:
                    raise StateAccessError(
                        f"broadcast state {name!r}: cannot serialize entry {pair!r}: "
                        f"{type(e).__name__}: {e}") from e
            out[name] = OperatorStateEntry(BROADCAST, pairs)
        for name, entry in self._restored.items():
            out[name] = OperatorStateEntry(entry.mode, list(entry.items))
        return out

    def __repr__(self) -> str:
        return f"OperatorStateStore({self.state_names()})"


def _check_mode(name: str, have: str, want: str, how: str) -> None:
    if have != want:
        raise StateAccessError(
            f"operator state {name!r} is {how} as {_KIND[have]} state (via {_GETTER[have]}); "
            f"it cannot be used as {_KIND[want]} state (via {_GETTER[want]})")


def _split_evenly(items: List[bytes], parts: int) -> List[List[bytes]]:
    """``parts`` contiguous slices of ``items``, sizes differing by at most one, the
    first ones getting the remainder."""
    base, remainder = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < remainder else 0)
        out.append(list(items[start:start + size]))
        start += size
    return out


def redistribute_operator_state(
        previous: Sequence[Optional[Dict[str, OperatorStateEntry]]],
        new_parallelism: int) -> List[Dict[str, OperatorStateEntry]]:
    """Deal the operator state of the old subtasks (``previous[i]`` for old subtask ``i``)
    to ``new_parallelism`` new subtasks, as Flink's ``RoundRobinOperatorStateRepartitioner``.

    * parallelism unchanged: every subtask keeps its own ``SPLIT_DISTRIBUTE`` states;
      ``UNION`` states are still unioned (every subtask gets every element);
    * ``SPLIT_DISTRIBUTE`` on rescale: the elements of all old subtasks, in subtask order,
      are cut into ``new_parallelism`` contiguous parts as even as possible (the first
      parts get the remainder); every new subtask gets an entry, possibly empty;
    * ``UNION``: every new subtask gets all elements, in old subtask order;
    * ``BROADCAST``: every subtask keeps its own copy at the same parallelism; on rescale
      new subtask ``i`` gets the copy of old subtask ``i % old_parallelism`` (the copies
      are meant to be equal; an old subtask without one is skipped for the next).

    Elements stay serialized (the job master never unpickles user objects). A name used
    with different modes by different subtasks raises ``ValueError``.

    (Flink also rotates the subtask that starts each named state's split so remainders do
    not always land on subtask 0; here every state starts at subtask 0, which is what makes
    the assignment predictable.)
    """
    if new_parallelism < 1:
        raise ValueError(f"new_parallelism must be at least 1, got {new_parallelism}")
    prev = [dict(p) if p else {} for p in previous]
    modes: Dict[str, str] = {}
    for index, subtask_state in enumerate(prev):
        for name, entry in subtask_state.items():
            if entry.mode not in _MODES:
                raise ValueError(f"operator state {name!r} of old subtask {index}: unknown "
                                 f"redistribution mode {entry.mode!r}")
            seen = modes.setdefault(name, entry.mode)
            if seen != entry.mode:
                raise ValueError(f"operator state {name!r} has mode {seen} in one subtask "
                                 f"and {entry.mode} in old subtask {index}")

    def concatenated(name: str) -> List[bytes]:
        return [item for s in prev if name in s for item in s[name].items]

    unions = {name: concatenated(name) for name, mode in modes.items() if mode == UNION}

    def broadcast_copy(name: str, index: int) -> OperatorStateEntry:
        for j in range(len(prev)):
            s = prev[(index + j) % len(prev)]
            if name in s:
                return OperatorStateEntry(BROADCAST, list(s[name].items))
        raise AssertionError(name)  # unreachable: the name came from some subtask

    if len(prev) == new_parallelism:
        result: List[Dict[str, OperatorStateEntry]] = []
        for subtask_state in prev:
            own = {name: OperatorStateEntry(entry.mode, list(entry.items))
                   for name, entry in subtask_state.items() if entry.mode == SPLIT_DISTRIBUTE}
            for name, items in unions.items():
                own[name] = OperatorStateEntry(UNION, list(items))
            for name, mode in modes.items():
                if mode == BROADCAST:
                    own[name] = broadcast_copy(name, len(result))
            result.append(own)
        return result

    result = [{} for _ in range(new_parallelism)]
    for name, mode in modes.items():
        if mode == UNION:
            for subtask_state in result:
                subtask_state[name] = OperatorStateEntry(UNION, list(unions[name]))
        elif mode == BROADCAST:
            for index, subtask_state in enumerate(result):
                subtask_state[name] = broadcast_copy(name, index % len(prev))
        else:
            for subtask_state, part in zip(result, _split_evenly(concatenated(name),
                                                                 new_parallelism)):
                subtask_state[name] = OperatorStateEntry(SPLIT_DISTRIBUTE, part)
    return result
