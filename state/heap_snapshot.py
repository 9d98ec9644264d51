"""The asynchronous part of a heap snapshot: serialize the frozen key-group dicts a
:class:`~flowray.state.heap_table.FrozenSnapshot` holds and write them as one
``flowray-heap-v1`` file (:mod:`flowray.state.full_snapshot`; the format is unchanged).

TTL's ``cleanup_full_snapshot`` drops expired values here, at the time the synchronous part
read from the clock. The pickle is produced in 64 KB frames through a Python-level sink,
so the task thread gets the GIL between frames instead of waiting for the whole pickle.
"""

from __future__ import annotations

import pickle
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import cloudpickle

from flowray.state.full_snapshot import FORMAT_V1
from flowray.state.heap_table import FrozenSnapshot, NamespaceFirstTable
from flowray.state.key_groups import KeyGroupRange
from flowray.state.keyed_backend import KeyedSnapshotWriter
from flowray.state.snapshot import KeyedStateHandle

__all__ = ["HeapSnapshotWriter", "dumps_in_frames"]

#: TTL purge of one table: (purge(stored, ttl ms, now ms) -> kept or None, ttl ms)
Purge = Tuple[Callable[[Any, int, int], Any], int]


class _Sink:
    """A file for :class:`pickle.Pickler`: collects its frames; ``check`` runs per frame."""

    __slots__ = ("parts", "check")

    def __init__(self, check: Callable[[], None]) -> None:
        self.parts: List[bytes] = []
        self.check = check

    def write(self, data: Any) -> int:
        self.check()
        self.parts.append(data if type(data) is bytes else bytes(data))
        return len(data)


def dumps_in_frames(obj: Any, check: Callable[[], None] = lambda: None) -> bytes:
    """What :func:`flowray.state.full_snapshot.dumps_state` returns, byte for byte, made
    frame by frame (``check()`` between frames may raise to stop)."""
    sink = _Sink(check)
    try:
        pickle.Pickler(sink, protocol=5).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError):
        sink.parts.clear()
        cloudpickle.CloudPickler(sink, protocol=5).dump(obj)
    return b"".join(sink.parts)


class HeapSnapshotWriter(KeyedSnapshotWriter):
    """Writes what ``frozen`` holds (``None`` when it holds nothing); releases it when the
    write ends, fails, or the writer is dropped unwritten."""

    def __init__(self, frozen: Optional[FrozenSnapshot], key_group_range: KeyGroupRange,
                 kinds: Dict[str, str], purges: Dict[str, Purge], now_ms: int) -> None:
        self.frozen = frozen
        self.key_group_range = key_group_range
        self.kinds = kinds
        self.purges = purges
        self.now_ms = now_ms
        if frozen is not None:
            weakref.finalize(self, frozen.release)

    def write(self, write_file: Callable[[str, bytes], int], path: str) -> Optional[KeyedStateHandle]:
        frozen = self.frozen
        if frozen is None:
            return None
        try:
            frozen.start()
            data = self.serialize(frozen)
        finally:
            frozen.release()
        if data is None:
            return None
        size = write_file(path, data)
        return KeyedStateHandle(path, self.key_group_range, size)

    def serialize(self, frozen: FrozenSnapshot) -> Optional[bytes]:
        """The file's bytes (``None`` if every value expired)."""
        groups: Dict[int, Dict[str, Dict[Any, Any]]] = {}
        purges, now = self.purges, self.now_ms
        for table, offset, m in frozen.refs:
            if isinstance(table, NamespaceFirstTable):  # written key first, as any map
                frozen.check()
                m = table.key_first(m)
            purge = purges.get(table.name)
            if purge is not None:  # TTL cleanup_full_snapshot
                frozen.check()
                m = _purged(m, purge[0], purge[1], now)
                if not m:
                    continue
            groups.setdefault(table.key_group_range.start + offset, {})[table.name] = m
        if not groups:
            return None
        return dumps_in_frames({"format": FORMAT_V1, "kinds": self.kinds, "groups": groups},
                               frozen.check)


def _purged(m: Dict[Any, Any], purge: Callable[[Any, int, int], Any], ttl: int,
            now: int) -> Dict[Any, Any]:
    """The entries of ``m`` without expired values (a new dict)."""
    out = {}
    for k, v in m.items():
        kept = purge(v, ttl, now)
        if kept is not None:
            out[k] = kept
    return out
