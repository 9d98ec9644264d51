"""Task-local recovery for RocksDB keyed state (Flink's ``TaskLocalStateStore``).

With local recovery on, each checkpoint's RocksDB checkpoint directory (hard links to the
live database's immutable SST files, made in the synchronous part) is kept on the task's
node after its asynchronous part has written it to checkpoint storage, instead of being
deleted. A later attempt of the same subtask that restores that checkpoint on the same
node opens a copy of it (SST files hard-linked again) instead of reading every file back
from checkpoint storage; anywhere else, or when the copy is missing or damaged, it reads
checkpoint storage as before.

A copy is matched to a checkpoint by the random ``copy id`` the checkpoint's keyed state
handle carries (:attr:`flowray.state.snapshot.KeyedStateHandle.local_copy_id`), never by
its checkpoint id alone: a copy from an attempt whose checkpoint never completed, or from
another job, can never be taken for the one restored. The manifest written with each copy
(file names and sizes) is checked before the copy is used.

Contract of :class:`TaskLocalStateStore` (one per subtask, under a folder of its own):

* :meth:`store` moves a finished checkpoint directory in (a rename on the same file
  system) and writes its manifest last, so a half-stored copy has no manifest and is never
  found;
* :meth:`confirm` (checkpoint ``n`` completed) deletes every copy of a checkpoint before
  ``n``; :meth:`abort` deletes the copies of an aborted checkpoint;
* :meth:`find` returns a verified copy or None, never raises for a bad copy;
* :meth:`retain_only` keeps one copy (after a restore); :meth:`discard_all` removes the
  folder. Every method is idempotent and safe from several threads.

>>> import os, tempfile
>>> base = tempfile.mkdtemp()
>>> native = os.path.join(base, "chk"); os.makedirs(native)
>>> with open(os.path.join(native, "000009.sst"), "wb") as f: _ = f.write(b"sst")
>>> store = TaskLocalStateStore(os.path.join(base, "local"))
>>> copy_id = store.store(7, native, key_group_range=(0, 63))
>>> store.find(copy_id).files
{'000009.sst': 3}
>>> store.confirm(8); store.find(copy_id) is None
True
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

__all__ = ["LocalCopy", "TaskLocalStateStore", "materialize"]

MANIFEST = "_flowray_local_copy.json"


@dataclass(frozen=True)
class LocalCopy:
    """A verified local copy of one checkpoint's RocksDB directory."""

    copy_id: str
    checkpoint_id: int
    directory: str
    key_group_range: Tuple[int, int]
    files: Dict[str, int]
    kinds: Dict[str, str]


class TaskLocalStateStore:
    """The local copies of one subtask's RocksDB checkpoints, under ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self._lock = threading.Lock()

    def _copy_dir(self, checkpoint_id: int, copy_id: str) -> str:
        return os.path.join(self.directory, f"chk-{int(checkpoint_id)}-{copy_id}")

    def _listing(self) -> List[Tuple[int, str, str]]:
        """(checkpoint id, copy id, folder) of every copy folder, complete or not."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            parts = name.split("-")
            if len(parts) == 3 and parts[0] == "chk" and parts[1].isdigit():
                out.append((int(parts[1]), parts[2], os.path.join(self.directory, name)))
        return out

    def store(self, checkpoint_id: int, native_dir: str, key_group_range: Tuple[int, int],
              kinds: Optional[Dict[str, str]] = None, copy_id: Optional[str] = None) -> str:
        """Move ``native_dir`` (a finished RocksDB checkpoint directory holding the states
        ``kinds``: name -> ``StateKind`` value) in as the local copy of ``checkpoint_id``;
        returns its copy id. ``native_dir`` must be on the same file system as the store
        (it is renamed, not copied)."""
        copy_id = copy_id or uuid.uuid4().hex[:16]
        files = {name: os.path.getsize(os.path.join(native_dir, name))
                 for name in sorted(os.listdir(native_dir))}
        target = self._copy_dir(checkpoint_id, copy_id)
        with self._lock:
            os.makedirs(self.directory, exist_ok=True)
            os.replace(native_dir, target)
            manifest = {"copy_id": copy_id, "checkpoint_id": int(checkpoint_id),
                        "key_group_range": list(key_group_range), "files": files,
                        "kinds": dict(kinds or {})}
            tmp = os.path.join(target, MANIFEST + ".tmp")
            with open(tmp, "w") as f:
                json.dump(manifest, f)
            os.replace(tmp, os.path.join(target, MANIFEST))
        return copy_id

    def find(self, copy_id: str) -> Optional[LocalCopy]:
        """The complete copy with ``copy_id`` whose files match its manifest, or None."""
        if not copy_id:
            return None
        for cid, cp_id, folder in self._listing():
            if cp_id != copy_id:
                continue
            try:
                with open(os.path.join(folder, MANIFEST)) as f:
                    manifest = json.load(f)
                files = {str(k): int(v) for k, v in manifest["files"].items()}
                if manifest["copy_id"] != copy_id or int(manifest["checkpoint_id"]) != cid:
                    return None
                for name, size in files.items():
                    if os.path.getsize(os.path.join(folder, name)) != size:
                        return None
                start, end = manifest["key_group_range"]
                kinds = {str(k): str(v) for k, v in manifest["kinds"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                return None
            return LocalCopy(copy_id, cid, folder, (int(start), int(end)), files, kinds)
        return None

    def _delete(self, predicate) -> None:
        with self._lock:
            for cid, cp_id, folder in self._listing():
                if predicate(cid, cp_id):
                    shutil.rmtree(folder, ignore_errors=True)

    def confirm(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: copies of earlier ones are not needed."""
        self._delete(lambda cid, _: cid < checkpoint_id)

    def abort(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: its copies are never restored."""
        self._delete(lambda cid, _: cid == checkpoint_id)

    def retain_only(self, copy_id: str) -> None:
        """Delete every copy but ``copy_id`` (after restoring it, or restoring without)."""
        self._delete(lambda _, cp_id: cp_id != copy_id)

    def checkpoint_ids(self) -> List[int]:
        """Checkpoint ids of the copy folders present (for tests and diagnostics)."""
        return sorted(cid for cid, _, _ in self._listing())

    def discard_all(self) -> None:
        """Remove the store's folder and every copy in it."""
        with self._lock:
            shutil.rmtree(self.directory, ignore_errors=True)


def materialize(copy: LocalCopy, target: str) -> None:
    """Make ``target`` a database directory with ``copy``'s files: SST files (immutable)
    are hard-linked, falling back to a copy across file systems; the rest (manifest,
    options, CURRENT, which opening the database may rewrite) are copied."""
    os.makedirs(target, exist_ok=True)
    for name in copy.files:
        src, dst = os.path.join(copy.directory, name), os.path.join(target, name)
        if name.endswith(".sst"):
            try:
                os.link(src, dst)
                continue
            except OSError:
                pass
        shutil.copyfile(src, dst)
