"""File paths inside snapshots, made relative to a directory and back (what keeps a
savepoint movable).

>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.snapshot import KeyedStateHandle, OperatorSubtaskState, TaskStateSnapshot
>>> snap = TaskStateSnapshot({"op": OperatorSubtaskState(keyed=KeyedStateHandle(
...     "/sp/savepoint-1/v1-0.keyed", KeyGroupRange(0, 127), 10))},
...     file_checksums={"/sp/savepoint-1/v1-0.keyed": (10, 7)})
>>> states = relativize_paths({"v1:0": snap}, "/sp/savepoint-1")
>>> states["v1:0"].operators["op"].keyed.path, states["v1:0"].file_checksums
('v1-0.keyed', {'v1-0.keyed': (10, 7)})
>>> moved = resolve_relative_paths(states, "/elsewhere/sp")
>>> moved["v1:0"].operators["op"].keyed.path
'/elsewhere/sp/v1-0.keyed'
"""

from __future__ import annotations

import copy
import posixpath
from typing import Callable, Dict, Mapping

from flowray.state.snapshot import IncrementalKeyedStateHandle, TaskStateSnapshot

__all__ = ["relativize_paths", "resolve_relative_paths"]


def _map_paths(task_states: Mapping[str, TaskStateSnapshot], fn: Callable[[str], str]
               ) -> Dict[str, TaskStateSnapshot]:
    """Copies of ``task_states`` with every file path passed through ``fn``."""
    out: Dict[str, TaskStateSnapshot] = {}
    for key, snap in task_states.items():
        snap = copy.deepcopy(snap)
        for state in snap.operators.values():
            handle = state.keyed
            if isinstance(handle, IncrementalKeyedStateHandle):
                raise ValueError("a savepoint cannot hold an incremental state handle")
            if handle is not None:
                handle.path = fn(handle.path)
            if state.operator_state_file is not None:
                state.operator_state_file.path = fn(state.operator_state_file.path)
        snap.file_checksums = {fn(p): v for p, v in snap.file_checksums.items()}
        out[key] = snap
    return out


def relativize_paths(task_states: Mapping[str, TaskStateSnapshot], directory: str
                     ) -> Dict[str, TaskStateSnapshot]:
    """Paths under ``directory`` made relative to it (others raise: a savepoint holds
    all its files)."""
    base = directory.rstrip("/") + "/"

    def relative(path: str) -> str:
        if not path.startswith(base):
            raise ValueError(f"savepoint file {path} is outside the savepoint directory "
                             f"{directory}")
        return path[len(base):]
    return _map_paths(task_states, relative)


def resolve_relative_paths(task_states: Mapping[str, TaskStateSnapshot], directory: str
                           ) -> Dict[str, TaskStateSnapshot]:
    """Relative paths joined to ``directory`` (a path in its file system)."""
    def resolve(path: str) -> str:
        return path if path.startswith("/") else posixpath.join(directory, path)
    return _map_paths(task_states, resolve)
