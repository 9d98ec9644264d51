"""Reference counts for files shared between incremental checkpoints (Flink's
``SharedStateRegistry``).

An incremental RocksDB checkpoint uploads only the SST files that no confirmed earlier
checkpoint holds and references the rest, so one file can belong to many checkpoints. The
JobMaster keeps one :class:`SharedStateRegistry`: each completed checkpoint registers the
shared files it references, each subsumed (or otherwise dropped) checkpoint releases them,
and a file is deleted from checkpoint storage, through the injected ``discard(handle)``
callable, when no registered checkpoint references it any more.

A file is identified by its *shared-state key*, built from the operator uid, the subtask
index and the original SST name (:func:`shared_state_key`), not by where it was uploaded:
a file that a task uploaded again (because the checkpoint that first uploaded it was not yet
confirmed when the task snapshotted) lands under a new unique path but has the same key. The
registry keeps the handle registered first, returns it to the caller in place of the copy,
and discards the copy at once. Handles are compared with ``==`` (so :class:`FileHandle`, a
frozen dataclass, compares by path and size); re-referencing the registered handle itself is
not a duplicate and discards nothing. ``None`` in place of a handle is a placeholder
("the file registered under this key"), as Flink's ``PlaceholderStreamStateHandle``.

The class is pure: no threads, no clock, no I/O except ``discard``. Discards run after the
counts are updated; a ``discard`` that raises is logged and the file is forgotten anyway
(as Flink's ``AsyncDisposalRunnable`` does: the count already reached zero, no checkpoint
can use the file, and retrying is an orphan-cleanup job); the handle is kept in
:attr:`SharedStateRegistry.failed_discards` so a sweeper can retry.

After a JobMaster restart, :meth:`SharedStateRegistry.rebuild` re-registers the retained
checkpoints' files from their metadata without discarding anything.

>>> deleted = []
>>> reg = SharedStateRegistry(discard=deleted.append)
>>> a = shared_state_key("sum", 0, "000009.sst")
>>> a
'sum/0/000009.sst'
>>> keep = reg.register_checkpoint(1, {a: FileHandle("chk-1/shared/u1", 100)})
>>> keep[a]
FileHandle(path='chk-1/shared/u1', size=100)
>>> # checkpoint 2 was triggered before 1 was confirmed: the file was uploaded again
>>> keep = reg.register_checkpoint(2, {a: FileHandle("chk-2/shared/u2", 100)})
>>> keep[a].path, [h.path for h in deleted], reg.count(a)
('chk-1/shared/u1', ['chk-2/shared/u2'], 2)
>>> reg.release_checkpoint(1)
[]
>>> [h.path for h in reg.release_checkpoint(2)], reg.count(a), reg.registered_keys()
(['chk-1/shared/u1'], 0, [])
>>> reg.release_checkpoint(2)   # idempotent
[]
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

__all__ = [
    "SharedStateKey",
    "FileHandle",
    "SharedStateRegistry",
    "shared_state_key",
    "parse_shared_state_key",
]

log = logging.getLogger(__name__)

#: A shared-state key: ``"<operator_uid>/<subtask_index>/<sst_name>"`` (see
#: :func:`shared_state_key`). Plain strings, so they go into metadata as they are.
SharedStateKey = str


def shared_state_key(operator_uid: str, subtask_index: int, sst_name: str) -> SharedStateKey:
    """The registry key of one shared file: operator uid, subtask index, original SST name.

    The uid may contain ``/``; the SST name may not (it is a file name), so the key parses
    back unambiguously from the right.

    >>> shared_state_key("window/agg", 3, "000012.sst")
    'window/agg/3/000012.sst'
    >>> parse_shared_state_key('window/agg/3/000012.sst')
    ('window/agg', 3, '000012.sst')
    >>> shared_state_key("op", -1, "x.sst")
    Traceback (most recent call last):
    ...
    ValueError: subtask_index must be a non-negative int, got -1
    """
    if not isinstance(operator_uid, str) or not operator_uid:
        raise ValueError(f"operator_uid must be a non-empty string, got {operator_uid!r}")
    if isinstance(subtask_index, bool) or not isinstance(subtask_index, int) or subtask_index < 0:
        raise ValueError(f"subtask_index must be a non-negative int, got {subtask_index!r}")
    if not isinstance(sst_name, str) or not sst_name or "/" in sst_name:
        raise ValueError(f"sst_name must be a non-empty file name without '/', got {sst_name!r}")
    return f"{operator_uid}/{subtask_index}/{sst_name}"


def parse_shared_state_key(key: SharedStateKey) -> Tuple[str, int, str]:
    """``(operator_uid, subtask_index, sst_name)`` of a key made by :func:`shared_state_key`."""
    parts = key.rsplit("/", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2]:
        raise ValueError(f"not a shared-state key: {key!r}")
    return parts[0], int(parts[1]), parts[2]


@dataclasses.dataclass(frozen=True)
class FileHandle:
    """One uploaded file in checkpoint storage. Equal (and hashable) by path and size.

    >>> FileHandle("a", 1) == FileHandle("a", 1), FileHandle("a", 1) == FileHandle("b", 1)
    (True, False)
    """

    path: str
    size: int = 0


class _Entry:
    __slots__ = ("handle", "count", "last_checkpoint_id")

    def __init__(self, handle: Any, checkpoint_id: int) -> None:
        self.handle = handle
        self.count = 0
        self.last_checkpoint_id = checkpoint_id


class SharedStateRegistry:
    """Reference counts of shared checkpoint files by :data:`SharedStateKey`.

    ``discard(handle)`` deletes one file from checkpoint storage. Counts are per registered
    checkpoint: a checkpoint referencing a key adds one to that key's count.
    """

    def __init__(self, discard: Callable[[Any], Any]) -> None:
        if not callable(discard):
            raise TypeError(f"discard must be callable, got {discard!r}")
        self._discard = discard
        self._entries: Dict[SharedStateKey, _Entry] = {}
        # checkpoint id -> the keys it references (in registration order)
        self._checkpoints: Dict[int, Tuple[SharedStateKey, ...]] = {}
        self._failed_discards: List[Any] = []

    # ------------------------------------------------------------------ registration

    def register_checkpoint(self, checkpoint_id: int,
                            files: Mapping[SharedStateKey, Any]) -> Dict[SharedStateKey, Any]:
        """Register completed checkpoint ``checkpoint_id`` referencing ``files`` (key -> handle).

        Adds one to each key's count and returns the handles to keep, key -> handle: the
        given handle for a new key, the registered handle for a known key. A given handle that
        differs from the registered one is a duplicate upload and is discarded before this
        returns. A ``None`` handle references the registered file; an unknown key with
        ``None`` is an error. Registering an id twice is an error naming it. Nothing changes
        when an error is raised.
        """
        return self._register(checkpoint_id, files, restoring=False)

    def _register(self, checkpoint_id: int, files: Mapping[SharedStateKey, Any],
                  restoring: bool) -> Dict[SharedStateKey, Any]:
        if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int):
            raise TypeError(f"checkpoint id must be an int, got {checkpoint_id!r}")
        if checkpoint_id in self._checkpoints:
            raise ValueError(f"checkpoint {checkpoint_id} is already registered "
                             "in the shared state registry")
        files = dict(files)
        for key, handle in files.items():
            if handle is None and key not in self._entries:
                raise KeyError(f"checkpoint {checkpoint_id} references shared state {key!r} "
                               "by placeholder, but no file is registered under that key")

        keep: Dict[SharedStateKey, Any] = {}
        duplicates: List[Any] = []
        for key, handle in files.items():
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(handle, checkpoint_id)
            elif handle is not None and handle != entry.handle:
                if restoring:
                    log.warning("Shared state %r: checkpoint %d holds %r but %r is already "
                                "registered; keeping the registered one, discarding nothing",
                                key, checkpoint_id, handle, entry.handle)
                else:
                    log.debug("Duplicate upload of shared state %r in checkpoint %d: keeping "
                              "%r, discarding %r", key, checkpoint_id, entry.handle, handle)
                    duplicates.append(handle)
            entry.count += 1
            entry.last_checkpoint_id = max(entry.last_checkpoint_id, checkpoint_id)
            keep[key] = entry.handle
        self._checkpoints[checkpoint_id] = tuple(files)
        for handle in duplicates:
            self._try_discard(handle)
        return keep

    def release_checkpoint(self, checkpoint_id: int) -> List[Any]:
        """Drop checkpoint ``checkpoint_id``'s references (subsumed, discarded or aborted).

        Takes one off each referenced key's count; files whose count reaches zero are removed
        and discarded (failures logged, see module doc). Returns those handles in the order
        the checkpoint listed its files. An unknown (or already released) id is a no-op
        returning ``[]``.
        """
        keys = self._checkpoints.pop(checkpoint_id, None)
        if keys is None:
            return []
        unused: List[Any] = []
        for key in keys:
            entry = self._entries[key]
            entry.count -= 1
            if entry.count <= 0:
                del self._entries[key]
                unused.append(entry.handle)
        for handle in unused:
            self._try_discard(handle)
        return unused

    def retain(self, num_retained: int) -> List[int]:
        """Release the oldest registered checkpoints until at most ``num_retained`` remain
        (``execution.checkpointing.num-retained``); returns the released ids, oldest first."""
        if num_retained < 1:
            raise ValueError(f"num_retained must be at least 1, got {num_retained}")
        ids = sorted(self._checkpoints)
        subsumed = ids[:max(0, len(ids) - num_retained)]
        for checkpoint_id in subsumed:
            self.release_checkpoint(checkpoint_id)
        return subsumed

    # ------------------------------------------------------------------ recovery

    def restore(self, checkpoints: Iterable[Tuple[int, Mapping[SharedStateKey, Any]]]) -> None:
        """Re-register retained checkpoints (id, key -> handle), read back from their metadata
        after a JobMaster restart. Lowest id first; discards nothing: a conflicting handle for
        a known key is logged and the first one kept. Re-registering an id is an error."""
        for checkpoint_id, files in sorted(checkpoints, key=lambda c: c[0]):
            self._register(checkpoint_id, files, restoring=True)

    @classmethod
    def rebuild(cls, checkpoints: Iterable[Tuple[int, Mapping[SharedStateKey, Any]]], *,
                discard: Callable[[Any], Any]) -> "SharedStateRegistry":
        """A new registry holding the retained ``checkpoints`` (see :meth:`restore`)."""
        registry = cls(discard=discard)
        registry.restore(checkpoints)
        return registry

    # ------------------------------------------------------------------ queries

    def count(self, key: SharedStateKey) -> int:
        """How many registered checkpoints reference ``key`` (0 if none)."""
        entry = self._entries.get(key)
        return entry.count if entry is not None else 0

    def handle(self, key: SharedStateKey) -> Optional[Any]:
        """The registered handle under ``key``, or ``None``."""
        entry = self._entries.get(key)
        return entry.handle if entry is not None else None

    def last_checkpoint_id(self, key: SharedStateKey) -> Optional[int]:
        """The newest registered checkpoint that referenced ``key`` (Flink's
        ``lastUsedCheckpointID``), or ``None``."""
        entry = self._entries.get(key)
        return entry.last_checkpoint_id if entry is not None else None

    def registered_keys(self) -> List[SharedStateKey]:
        """All keys with a non-zero count, sorted."""
        return sorted(self._entries)

    def handles(self) -> List[Any]:
        """All registered (live) handles, in key order: anything else under the shared
        folders is an orphan."""
        return [self._entries[key].handle for key in sorted(self._entries)]

    def checkpoint_ids(self) -> List[int]:
        """Registered (not yet released) checkpoint ids, ascending."""
        return sorted(self._checkpoints)

    def checkpoint_files(self, checkpoint_id: int) -> Dict[SharedStateKey, Any]:
        """The registered handles a registered checkpoint references (KeyError if unknown)."""
        if checkpoint_id not in self._checkpoints:
            raise KeyError(f"checkpoint {checkpoint_id} is not registered")
        return {key: self._entries[key].handle for key in self._checkpoints[checkpoint_id]}

    @property
    def failed_discards(self) -> List[Any]:
        """Handles whose ``discard`` raised (already forgotten by the registry), oldest first."""
        return list(self._failed_discards)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"SharedStateRegistry({len(self._entries)} files, "
                f"checkpoints={self.checkpoint_ids()})")

    # ------------------------------------------------------------------ internals

    def _try_discard(self, handle: Any) -> None:
        try:
            self._discard(handle)
        except Exception:  # a failed delete must not corrupt the counts
            log.warning("Could not discard shared state %r; it is no longer referenced and "
                        "is left for orphan cleanup", handle, exc_info=True)
            self._failed_discards.append(handle)
