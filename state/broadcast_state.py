"""Broadcast state (Flink's ``BroadcastState``): a map of one operator in one subtask, written
only by the broadcast side of a broadcast-connected stream and read by the other side.

Every subtask keeps its own copy (they see the same broadcast elements, so the copies are
the same if the user code is deterministic). The copy is operator state of mode
``BROADCAST`` in :class:`~flowray.state.operator_state.OperatorStateStore`: each subtask
snapshots it; on restore every new subtask gets one old subtask's copy
(:func:`~flowray.state.operator_state.redistribute_operator_state`).

>>> state = HeapBroadcastState("rules")
>>> state.put("r1", 10); state["r2"] = 20
>>> view = state.read_only()
>>> view.get("r1"), sorted(view.keys()), "r2" in view
(10, ['r1', 'r2'], True)
>>> view.put("r3", 30)
Traceback (most recent call last):
...
flowray.state.keyed_backend.StateAccessError: broadcast state 'rules' is read-only here (put): ...
"""

from __future__ import annotations

import abc
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from flowray.state.keyed_backend import State, StateAccessError

__all__ = [
    "ReadOnlyBroadcastState",
    "BroadcastState",
    "HeapBroadcastState",
    "ReadOnlyBroadcastStateView",
]


class ReadOnlyBroadcastState(State):
    """Read access to a broadcast state (PyFlink's ``ReadOnlyBroadcastState``). Do not
    modify returned values: they are not copies."""

    @abc.abstractmethod
    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""

    @abc.abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abc.abstractmethod
    def items(self) -> Iterable[Tuple[Any, Any]]: ...

    @abc.abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abc.abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abc.abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class BroadcastState(ReadOnlyBroadcastState):
    """Read and write access to a broadcast state (PyFlink's ``BroadcastState``)."""

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abc.abstractmethod
    def put_all(self, dict_value: Dict[Any, Any]) -> None: ...

    @abc.abstractmethod
    def remove(self, key: Any) -> None: ...

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class HeapBroadcastState(BroadcastState):
    """A broadcast state held in a dict. ``items``/``keys``/``values`` return lists (safe
    to change the state while going through them)."""

    __slots__ = ("name", "_map")

    def __init__(self, name: str, entries: Optional[Dict[Any, Any]] = None) -> None:
        self.name = name
        self._map: Dict[Any, Any] = dict(entries or {})

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._map

    def items(self) -> List[Tuple[Any, Any]]:
        return list(self._map.items())

    def keys(self) -> List[Any]:
        return list(self._map)

    def values(self) -> List[Any]:
        return list(self._map.values())

    def is_empty(self) -> bool:
        return not self._map

    def put(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        if not hasattr(dict_value, "items"):
            raise TypeError(f"broadcast state {self.name!r}: put_all expects a dict, got "
                            f"{type(dict_value).__name__}")
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        self._map.pop(key, None)

    def clear(self) -> None:
        self._map.clear()

    def read_only(self) -> "ReadOnlyBroadcastStateView":
        """A view of this state that raises :class:`StateAccessError` on writes."""
        return ReadOnlyBroadcastStateView(self)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"HeapBroadcastState({self.name!r}, {len(self._map)} entries)"


class ReadOnlyBroadcastStateView(ReadOnlyBroadcastState):
    """What the non-broadcast side sees: reads pass through, writes raise
    :class:`StateAccessError` naming the state."""

    __slots__ = ("_state",)

    def __init__(self, state: HeapBroadcastState) -> None:
        self._state = state

    @property
    def name(self) -> str:
        return self._state.name

    def get(self, key: Any) -> Any:
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        return self._state.contains(key)

    def items(self) -> List[Tuple[Any, Any]]:
        return self._state.items()

    def keys(self) -> List[Any]:
        return self._state.keys()

    def values(self) -> List[Any]:
        return self._state.values()

    def is_empty(self) -> bool:
        return self._state.is_empty()

    def _refuse(self, method: str) -> None:
        raise StateAccessError(
            f"broadcast state {self._state.name!r} is read-only here ({method}): only "
            "process_broadcast_element may change it, so that every subtask keeps the same "
            "copy")

    def put(self, key: Any, value: Any) -> None:
        self._refuse("put")

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        self._refuse("put_all")

    def remove(self, key: Any) -> None:
        self._refuse("remove")

    def clear(self) -> None:
        self._refuse("clear")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._refuse("put")

    def __delitem__(self, key: Any) -> None:
        self._refuse("remove")

    def __len__(self) -> int:
        return len(self._state)

    def __repr__(self) -> str:
        return f"ReadOnlyBroadcastStateView({self._state.name!r})"
