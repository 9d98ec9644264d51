"""Interfaces of keyed state: the state objects user functions see, and the backend.

Implementations: :mod:`flowray.state.heap_backend` (default). A backend is bound to one subtask's
:class:`KeyGroupRange`; the operator sets the current key before each call into user code.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Dict, Generic, Iterable, Iterator, Optional, Sequence, Tuple, \
    TypeVar

from flowray.state.descriptors import StateDescriptor
from flowray.state.key_groups import KeyGroupRange

__all__ = [
    "State",
    "ValueState",
    "AppendingState",
    "MergingState",
    "ListState",
    "MapState",
    "ReducingState",
    "AggregatingState",
    "KeyedStateBackend",
    "KeyedSnapshotWriter",
    "StateAccessError",
]


class StateAccessError(RuntimeError):
    """Keyed state used wrongly: outside a keyed context, wrong type for a name, bad key."""


class State(abc.ABC):
    @abc.abstractmethod
    def clear(self) -> None:
        """Remove the value for the current key."""


T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


class ValueState(State, Generic[T]):
    @abc.abstractmethod
    def value(self) -> Any:
        """The value for the current key, or ``None``."""

    @abc.abstractmethod
    def update(self, value: Any) -> None: ...


class AppendingState(State, Generic[IN, OUT]):
    """State that values are added to and whose current state can be read (as PyFlink)."""

    @abc.abstractmethod
    def get(self) -> Any: ...

    @abc.abstractmethod
    def add(self, value: Any) -> None: ...


class MergingState(AppendingState[IN, OUT]):
    """Appending state whose values of several namespaces can be merged (as PyFlink)."""


class ListState(MergingState[T, Iterable[T]]):
    @abc.abstractmethod
    def get(self) -> Iterable[Any]: ...

    @abc.abstractmethod
    def add(self, value: Any) -> None: ...

    @abc.abstractmethod
    def add_all(self, values: Iterable[Any]) -> None: ...

    @abc.abstractmethod
    def update(self, values: Iterable[Any]) -> None: ...

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class MapState(State, Generic[K, V]):
    @abc.abstractmethod
    def get(self, key: Any) -> Any: ...

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abc.abstractmethod
    def put_all(self, dict_value: Dict[Any, Any]) -> None: ...

    @abc.abstractmethod
    def remove(self, key: Any) -> None: ...

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

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class ReducingState(MergingState[T, T]):
    @abc.abstractmethod
    def get(self) -> Any: ...

    @abc.abstractmethod
    def add(self, value: Any) -> None: ...


class AggregatingState(MergingState[IN, OUT]):
    @abc.abstractmethod
    def get(self) -> Any: ...

    @abc.abstractmethod
    def add(self, value: Any) -> None: ...


class KeyedSnapshotWriter(abc.ABC):
    """The asynchronous part of a keyed-state snapshot."""

    @abc.abstractmethod
    def write(self, write_file: Callable[[str, bytes], int], path: str) -> Any:
        """Write the captured state to ``path`` through ``write_file(path, data) -> size``
        (a large one also to files under ``<path>.parts/``, which ``path`` indexes);
        returns a :class:`flowray.state.snapshot.KeyedStateHandle` (``None`` if empty)."""


class KeyedStateBackend(abc.ABC):
    """Keyed state of one subtask, organised by key group.

    Contract: ``set_current_key`` is called before any state access; a key whose key group
    lies outside ``key_group_range`` is rejected (it means the key selector is not
    deterministic). ``get_partitioned_state`` returns the same object for the same
    descriptor name and raises :class:`StateAccessError` if the name was registered with
    another state kind.
    """

    key_group_range: KeyGroupRange
    max_parallelism: int
    #: the subtask's queryable states (a ``flowray.state.queryable.QueryableStates``, set
    #: by the task; ``None``: states are not served, as in unit tests)
    queryable: Any = None

    @abc.abstractmethod
    def set_current_key(self, key: Any, key_group: Optional[int] = None) -> None: ...

    @abc.abstractmethod
    def get_current_key(self) -> Any: ...

    @abc.abstractmethod
    def get_current_key_group(self) -> int: ...

    @abc.abstractmethod
    def get_partitioned_state(self, descriptor: StateDescriptor) -> State: ...

    @abc.abstractmethod
    def get_keys(self, state_name: str) -> Iterator[Any]:
        """Every key that has a value in ``state_name``."""

    @abc.abstractmethod
    def iter_key_group(self, state_name: str, key_group: int) -> Iterator[Tuple[Any, Any]]:
        """``(key, value)`` pairs of one state in one key group (for snapshots and rescaling)."""

    @abc.abstractmethod
    def state_names(self) -> Iterable[str]: ...

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int, savepoint: bool = False) -> "KeyedSnapshotWriter":
        """The synchronous part of a checkpoint: capture the state as it is now; the
        returned writer finishes the asynchronous part (writing to storage) in any thread
        while the task goes on changing the live state. ``savepoint``: the snapshot must be
        self-contained (no files shared with other checkpoints)."""
        raise NotImplementedError(f"{type(self).__name__} cannot take snapshots")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: what it uploaded may be referenced by
        later (incremental) snapshots instead of uploaded again. Default: nothing."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: forget what it uploaded. Default:
        nothing."""

    def restore(self, handles: Sequence[Any], read: Callable[[str], bytes],
                claimed: bool = True) -> None:
        """Load the key groups of this backend's range from snapshot files (``read(path)``
        gives a file's bytes); key groups outside the range are skipped. ``claimed``:
        the files belong to this job's checkpoints, so later incremental checkpoints may
        reference them (a restore from a savepoint or another job's checkpoint never
        does: Flink's NO_CLAIM)."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore snapshots")

    def dispose(self, discard_local_state: bool = False) -> None:
        """Release resources (files, handles). Idempotent. ``discard_local_state``: also
        the copies kept for task-local recovery (the task finished)."""
