"""The heap backend's state tables, copy-on-write (Flink's ``CopyOnWriteStateMap`` idea).

A :class:`StateTable` holds one state's values: ``maps[offset][key] -> value`` with one dict
per key group (``offset = key group - range.start``). A snapshot's synchronous part
(:class:`SnapshotRegistry.freeze`) only records a reference to every non-empty dict; the
dicts are serialized later, in the asynchronous part, while processing goes on. Two rules
keep what a pending snapshot references frozen:

* **dict level**: a write into a key group goes through :meth:`StateTable.writable`, which
  first replaces the live dict by a copy (``dict.copy``, C-fast) if a pending snapshot
  holds it. Reads may use ``maps[offset]`` directly.
* **entry level**: a value our code hands out or changes in place (a list state's list, a
  map state's dict, a reducing or aggregating accumulator, a value state's object) is made
  private first with :meth:`StateTable.private`: if a pending snapshot holds that very
  object, it is copied (:func:`private_copy`) and the copy stored in the live dict.

``shared[offset]`` is ``None`` when no pending snapshot holds anything of that key group,
so the cost outside the window of a pending snapshot is one list lookup. A snapshot
releases its references when its asynchronous part ends (or it is aborted before it ran,
or its writer is dropped unwritten).

>>> from flowray.state.descriptors import StateKind
>>> from flowray.state.key_groups import KeyGroupRange
>>> registry = SnapshotRegistry()
>>> table = StateTable("s", StateKind.LIST, KeyGroupRange(0, 3))
>>> table.writable(1)["k"] = [1]
>>> frozen = registry.freeze([table], checkpoint_id=1)
>>> table.private(1, "k", table.maps[1]["k"]).append(2)
>>> frozen.refs[0][2]["k"], table.maps[1]["k"]
([1], [1, 2])
>>> frozen.release(); table.shared[1] is None
True
"""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

from flowray.common.sentinels import MISSING
from flowray.state.descriptors import StateKind
from flowray.state.key_groups import KeyGroupRange

__all__ = ["StateTable", "NamespaceFirstTable", "SnapshotRegistry", "FrozenSnapshot",
           "SnapshotAbortedError", "private_copy"]

_MISSING = MISSING

#: types whose objects never change: shared with a snapshot they need no copy
_ATOMIC = frozenset({int, float, complex, str, bytes, bool, type(None), range})


def _immutable(x: Any) -> bool:
    t = type(x)
    if t in _ATOMIC:
        return True
    if t is tuple or t is frozenset:
        for e in x:
            if type(e) not in _ATOMIC:
                return False
        return True
    return False


def private_copy(value: Any) -> Any:
    """A copy of ``value`` that shares no mutable object with it (as Flink's serializer
    ``copy``): immutable values as they are, lists, dicts and sets of immutable values
    by a C-fast shallow copy, anything else by ``copy.deepcopy`` (else a pickle round trip;
    an object neither can copy is returned as it is: its snapshot fails anyway)."""
    t = type(value)
    if t in _ATOMIC:
        return value
    if t is tuple or t is frozenset:
        for e in value:
            if not _immutable(e):
                return _deep(value)
        return value
    if t is list:
        for e in value:
            if not _immutable(e):
                return [private_copy(e) for e in value]
        return value.copy()
    if t is dict:
        for e in value.values():
            if not _immutable(e):
                return {k: private_copy(e) for k, e in value.items()}
        return value.copy()
    if t is set:
        return value.copy()  # set elements are hashable, never changed in place
    return _deep(value)


def _deep(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - some objects copy only through their pickle
        pass
    from flowray.state.full_snapshot import dumps_state
    try:
        return pickle.loads(dumps_state(value))
    except Exception:  # noqa: BLE001 - cannot be snapshotted either: its checkpoint fails
        return value


class StateTable:
    """The values of one state: ``maps[key_group - range.start][key] -> value``. Write
    only into :meth:`writable` dicts; hand out or change in place only :meth:`private`
    values (the module docstring has the rules)."""

    __slots__ = ("name", "kind", "key_group_range", "maps", "shared", "holds")

    def __init__(self, name: str, kind: StateKind, key_group_range: KeyGroupRange) -> None:
        self.name = name
        self.kind = kind
        self.key_group_range = key_group_range
        self.maps: List[Dict[Any, Any]] = [{} for _ in range(len(key_group_range))]
        #: per offset: the dicts of pending snapshots holding this key group, or None
        self.shared: List[Optional[Tuple[Dict[Any, Any], ...]]] = [None] * len(key_group_range)
        #: how many pending snapshots hold some of this table (0: no copy-on-write now)
        self.holds = 0

    def map_for(self, key_group: int) -> Dict[Any, Any]:
        """The live dict of ``key_group``, for reading."""
        return self.maps[key_group - self.key_group_range.start]

    def writable(self, offset: int) -> Dict[Any, Any]:
        """The live dict at ``offset``, copied first if a pending snapshot holds it."""
        m = self.maps[offset]
        s = self.shared[offset]
        # the live dict, if held, is the last one held: freeze() appends the live dict,
        # and once copied a dict is never live again
        if s is not None and s[-1] is m:
            m = self.maps[offset] = m.copy()
        return m

    def private(self, offset: int, key: Any, value: Any) -> Any:
        """``value`` (the live value of ``key`` at ``offset``) safe to change in place: a
        copy, stored in the live dict, if a pending snapshot holds that object."""
        s = self.shared[offset]
        if s is None or type(value) in _ATOMIC:
            return value
        for f in s:
            if f.get(key, _MISSING) is value:
                copied = private_copy(value)
                if copied is not value:  # (an immutable value is returned as it is)
                    self.writable(offset)[key] = copied
                return copied
        return value

    def for_change(self, offset: int, key: Any, value: Any) -> Tuple[Dict[Any, Any], Any]:
        """:meth:`writable` and :meth:`private` at once: the live dict at ``offset`` and
        ``value`` (the live value of ``key`` there, or None for none), both safe to change
        in place. Hot loops call it only when ``shared[offset] is not None``."""
        m = self.writable(offset)
        return m, (None if value is None else self.private(offset, key, value))

    def __len__(self) -> int:
        return sum(len(m) for m in self.maps)


class NamespaceFirstTable(StateTable):
    """A map state of ``key -> {namespace: value}`` laid out namespace first, as Flink's
    ``NestedMapsStateTable``: ``maps[offset][namespace][key] -> value``. The window
    operator keeps its panes so (a namespace is a window): a record looks its window up
    among the key group's few live ones, then its key, and a window that fires leaves
    with its dict. Everything outside the table sees the key-first form: snapshots
    (:meth:`key_first`, in their asynchronous part), restore (:meth:`load`), key listings.

    Copy-on-write as :class:`StateTable`, one level down: a change of which namespaces a
    key group has goes through :meth:`writable`; a namespace's dict of keys is changed
    only once :meth:`private` (``private(offset, namespace, keys)``) made it the live
    table's own, with a copy of every value that is not immutable.

    >>> table = NamespaceFirstTable("panes", StateKind.MAP, KeyGroupRange(0, 0))
    >>> table.load(0, [("k", {"w1": 1, "w2": 2}), ("j", {"w1": 3})])
    >>> table.maps[0], table.key_first(table.maps[0])
    ({'w1': {'k': 1, 'j': 3}, 'w2': {'k': 2}}, {'k': {'w1': 1, 'w2': 2}, 'j': {'w1': 3}})
    """

    __slots__ = ()

    def __init__(self, name: str, kind: StateKind, key_group_range: KeyGroupRange) -> None:
        if kind is not StateKind.MAP:
            raise ValueError(f"state {name!r}: a namespace-first table holds map state, "
                             f"not {kind.value} state")
        super().__init__(name, kind, key_group_range)

    def load(self, offset: int, entries: Iterable[Tuple[Any, Dict[Any, Any]]]) -> None:
        """Put key-first ``(key, {namespace: value})`` entries into key group ``offset``."""
        m = self.writable(offset)
        for key, values in entries:
            for ns, v in values.items():
                keyed = m.get(ns)
                if keyed is None:
                    keyed = m[ns] = {}
                elif self.shared[offset] is not None:
                    keyed = self.private(offset, ns, keyed)
                keyed[key] = v

    @staticmethod
    def key_first(m: Dict[Any, Dict[Any, Any]]) -> Dict[Any, Dict[Any, Any]]:
        """A key group's dict ``namespace -> {key: value}`` as ``key -> {namespace:
        value}`` (a new dict: what a snapshot writes)."""
        out: Dict[Any, Dict[Any, Any]] = {}
        for ns, keyed in m.items():
            for key, v in keyed.items():
                d = out.get(key)
                if d is None:
                    out[key] = {ns: v}
                else:
                    d[ns] = v
        return out

    def keys_of(self, offset: int) -> List[Any]:
        """The keys with a value in key group ``offset``, each once."""
        return list(dict.fromkeys(k for keyed in self.maps[offset].values() for k in keyed))

    def __len__(self) -> int:
        return sum(len(self.keys_of(off)) for off in range(len(self.maps)))


class SnapshotAbortedError(RuntimeError):
    """The checkpoint of a heap snapshot was aborted before or while it was written."""


class FrozenSnapshot:
    """What one pending snapshot holds: ``refs``, ``(table, offset, dict)`` per non-empty
    key group. :meth:`release` (idempotent, any thread) drops the hold."""

    __slots__ = ("checkpoint_id", "refs", "_registry", "_running", "_released", "aborted",
                 "__weakref__")

    def __init__(self, registry: "SnapshotRegistry", checkpoint_id: int,
                 refs: List[Tuple[StateTable, int, Dict[Any, Any]]]) -> None:
        self.checkpoint_id = checkpoint_id
        self.refs = refs
        self._registry = registry
        self._running = False
        self._released = False
        self.aborted = False

    def start(self) -> None:
        """The asynchronous part begins; :class:`SnapshotAbortedError` if it was aborted."""
        with self._registry._lock:
            if self.aborted or self._released:
                raise SnapshotAbortedError(
                    f"checkpoint {self.checkpoint_id} was aborted (or its heap snapshot "
                    "released) before its asynchronous part ran")
            self._running = True

    def check(self) -> None:
        """Raise :class:`SnapshotAbortedError` if the checkpoint was aborted meanwhile."""
        if self.aborted:
            raise SnapshotAbortedError(
                f"checkpoint {self.checkpoint_id} was aborted during its asynchronous part")

    def release(self) -> None:
        self._registry._release(self)

    @property
    def released(self) -> bool:
        return self._released


class SnapshotRegistry:
    """The pending snapshots of one backend: takes (:meth:`freeze`) and drops (on release)
    their holds on the tables, under one lock (the task thread freezes, the asynchronous
    writer releases)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: List[FrozenSnapshot] = []

    def freeze(self, tables: Iterable[StateTable], checkpoint_id: int) -> FrozenSnapshot:
        """The synchronous part: hold every non-empty key-group dict of ``tables``."""
        refs: List[Tuple[StateTable, int, Dict[Any, Any]]] = []
        with self._lock:
            for table in tables:
                shared, held = table.shared, len(refs)
                for offset, m in enumerate(table.maps):
                    if m:
                        s = shared[offset]
                        shared[offset] = (m,) if s is None else s + (m,)
                        refs.append((table, offset, m))
                if len(refs) > held:
                    table.holds += 1
            frozen = FrozenSnapshot(self, checkpoint_id, refs)
            self._pending.append(frozen)
        return frozen

    def _release(self, frozen: FrozenSnapshot) -> None:
        with self._lock:
            if frozen._released:
                return
            frozen._released = True
            frozen._running = False
            for table in {id(t): t for t, _, _ in frozen.refs}.values():
                table.holds -= 1
            for table, offset, m in frozen.refs:
                s = table.shared[offset]
                if s is None:
                    continue
                for i, f in enumerate(s):
                    if f is m:
                        s = s[:i] + s[i + 1:]
                        break
                table.shared[offset] = s or None
            frozen.refs = []
            self._pending = [p for p in self._pending if p is not frozen]

    def abort(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: its snapshot is released now if its
        asynchronous part has not started, else that part stops at its next check."""
        with self._lock:
            targets = [p for p in self._pending if p.checkpoint_id == checkpoint_id]
            for p in targets:
                p.aborted = True
        for p in targets:
            if not p._running:
                p.release()

    def pending(self) -> List[FrozenSnapshot]:
        """The snapshots not released yet (tests, diagnostics)."""
        with self._lock:
            return list(self._pending)
