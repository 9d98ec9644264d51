"""Incremental checkpoints seen from the job master: which shared files a checkpoint's task
states reference, registering them in the :class:`~flowray.runtime.checkpoint.shared_registry.
SharedStateRegistry`, the files of a dropped checkpoint that nothing references, and
orphans left in ``<job root>/shared`` by a crash.

A shared file's key is ``shared_state_key(operator uid, subtask index, "<sst>@<db uid>")``:
the database uid keeps apart SST files of two databases that number their files alike (a
fresh or rescaled database starts again at ``000001.sst``).

>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.snapshot import (IncrementalKeyedStateHandle, OperatorSubtaskState,
...                                     TaskStateSnapshot)
>>> from flowray.runtime.checkpoint.shared_registry import SharedStateRegistry
>>> def states(path):
...     h = IncrementalKeyedStateHandle(path="chk/v1-0.keyed.private",
...         key_group_range=KeyGroupRange(0, 127), size=10, checkpoint_id=1,
...         shared={"000007.sst": path}, file_sizes={path: 10}, db_uid="d1")
...     return {"v1:0": TaskStateSnapshot({"sum": OperatorSubtaskState(keyed=h)})}
>>> deleted = []
>>> registry = SharedStateRegistry(discard=lambda h: deleted.append(h.path))
>>> register_shared_state(registry, 1, states("shared/a"))
>>> registry.registered_keys()
['sum/0/000007.sst@d1']
>>> again = states("shared/b")   # uploaded again before checkpoint 1 was confirmed
>>> register_shared_state(registry, 2, again)
>>> again["v1:0"].operators["sum"].keyed.shared, deleted
({'000007.sst': 'shared/a'}, ['shared/b'])
>>> unreferenced_files(registry, states("shared/c")), unreferenced_files(registry, states("shared/a"))
(['shared/c'], [])
"""

from __future__ import annotations

import logging
from typing import Dict, Iterable, Iterator, List, Mapping, Tuple

from flowray.state.snapshot import IncrementalKeyedStateHandle, TaskStateSnapshot

from flowray.runtime.checkpoint.storage import CheckpointStorage
from flowray.runtime.checkpoint.shared_registry import (
    FileHandle,
    SharedStateKey,
    SharedStateRegistry,
    shared_state_key,
)

__all__ = [
    "incremental_handles",
    "shared_files",
    "register_shared_state",
    "unreferenced_files",
    "rebuild_registry",
    "orphan_shared_files",
]

log = logging.getLogger(__name__)


def _subtask_index(subtask_key: str) -> int:
    return int(subtask_key.rsplit(":", 1)[1])


def incremental_handles(task_states: Mapping[str, TaskStateSnapshot]
                        ) -> Iterator[Tuple[str, int, IncrementalKeyedStateHandle]]:
    """``(operator uid, subtask index, handle)`` of every incremental keyed handle in
    ``task_states`` (subtask key -> task state, as in a checkpoint)."""
    for key, task_state in task_states.items():
        if task_state is None:
            continue
        for uid, op_state in task_state.operators.items():
            if isinstance(op_state.keyed, IncrementalKeyedStateHandle):
                yield uid, _subtask_index(key), op_state.keyed


def _file_key(uid: str, index: int, handle: IncrementalKeyedStateHandle,
              sst: str) -> SharedStateKey:
    return shared_state_key(uid, index, f"{sst}@{handle.db_uid}" if handle.db_uid else sst)


def shared_files(task_states: Mapping[str, TaskStateSnapshot]
                 ) -> Dict[SharedStateKey, FileHandle]:
    """Key -> handle of every shared file the task states reference."""
    files: Dict[SharedStateKey, FileHandle] = {}
    for uid, index, handle in incremental_handles(task_states):
        for sst, path in handle.shared.items():
            files[_file_key(uid, index, handle, sst)] = FileHandle(
                path, handle.file_sizes.get(path, 0))
    return files


def register_shared_state(registry: SharedStateRegistry, checkpoint_id: int,
                          task_states: Mapping[str, TaskStateSnapshot]) -> None:
    """Register a completing checkpoint's shared files, then point its handles at the
    files the registry keeps (a duplicate upload is replaced by the registered copy, which
    the registry has just deleted)."""
    keep = registry.register_checkpoint(checkpoint_id, shared_files(task_states))
    for key, task_state in task_states.items():
        for uid, index, handle in incremental_handles({key: task_state}):
            for sst, path in list(handle.shared.items()):
                kept = keep[_file_key(uid, index, handle, sst)]
                if kept.path != path:
                    handle.shared[sst] = kept.path
                    handle.file_sizes.pop(path, None)
                    handle.file_sizes[kept.path] = kept.size
                    # the same immutable SST file: its checksum goes with it, so the
                    # registered copy is verified on restore as the upload would have been
                    checksum = task_state.file_checksums.pop(path, None)
                    if checksum is not None:
                        task_state.file_checksums[kept.path] = checksum


def unreferenced_files(registry: SharedStateRegistry,
                       task_states: Mapping[str, TaskStateSnapshot]) -> List[str]:
    """Shared files of task states that are not going to be registered (an aborted
    checkpoint, a late acknowledgement) and that no registered checkpoint references:
    the uploads of that checkpoint only, safe to delete."""
    out = []
    for key, handle in shared_files(task_states).items():
        registered = registry.handle(key)
        if registered is None or registered.path != handle.path:
            out.append(handle.path)
    return sorted(set(out))


def rebuild_registry(registry: SharedStateRegistry,
                     checkpoints: Iterable[Tuple[int, Mapping[str, TaskStateSnapshot]]]) -> None:
    """Re-register retained checkpoints ``(id, task states)`` read back from storage after
    a job master restart (nothing is deleted)."""
    registry.restore([(cid, shared_files(states)) for cid, states in checkpoints])


def orphan_shared_files(storage: CheckpointStorage, registry: SharedStateRegistry) -> List[str]:
    """Files in the job's shared folder that no registered checkpoint references (uploads
    of checkpoints that never completed). Only meaningful while no task is uploading."""
    live = {h.path for h in registry.handles()}
    return [p for p in storage.list_shared_files() if p not in live]
