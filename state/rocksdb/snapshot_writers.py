"""The asynchronous part of RocksDB snapshots: :class:`RocksDBFullSnapshotWriter` writes the
portable ``flowray-heap-v1`` format from a RocksDB checkpoint (values as their pickles); the incremental writer uploads
new SST files as shared files and the rest as private ones.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from flowray.state.heap_backend import dumps_state
from flowray.state.key_groups import KeyGroupRange
from flowray.state.keyed_backend import (
    KeyedSnapshotWriter,
)
from flowray.state.rocksdb.layout import (
    _CF_PREFIX,
    PICKLED_VALUES,
    SNAPSHOT_FORMAT,
    _raw_options,
    decode_key,
)
from flowray.state.snapshot import IncrementalKeyedStateHandle, KeyedStateHandle
from rocksdict import AccessType, Rdict

__all__ = ["RocksDBIncrementalSnapshotWriter"]


class RocksDBFullSnapshotWriter(KeyedSnapshotWriter):
    """Serializes a RocksDB checkpoint directory to the portable full-snapshot format and
    deletes the directory. Runs in any thread; uses nothing of the live database."""

    def __init__(
        self, checkpoint_path: Optional[str], kinds: Dict[str, str], key_group_range: KeyGroupRange
    ) -> None:
        self.checkpoint_path = checkpoint_path
        self.kinds = kinds
        self.key_group_range = key_group_range

    def _read_groups(self) -> Dict[int, Dict[str, Dict[Any, Any]]]:
        groups: Dict[int, Dict[str, Dict[Any, Any]]] = {}
        cfs = {_CF_PREFIX + name: _raw_options() for name in self.kinds}
        db = Rdict(
            self.checkpoint_path,
            _raw_options(),
            column_families=cfs,
            access_type=AccessType.read_only(),
        )
        try:
            for name in self.kinds:
                cf = db.get_column_family(_CF_PREFIX + name)
                try:
                    current_kg, entries = -1, None
                    for k, v in cf.items():
                        kg = int.from_bytes(k[:2], "big")
                        if kg != current_kg:
                            current_kg = kg
                            entries = groups.setdefault(kg, {}).setdefault(name, {})
                        entries[decode_key(k, 2)] = v  # type: ignore[index]
                finally:
                    cf.close()
        finally:
            db.close()
        return groups

    def write(
        self, write_file: Callable[[str, bytes], int], path: str
    ) -> Optional[KeyedStateHandle]:
        if self.checkpoint_path is None:
            return None
        try:
            groups = self._read_groups()
        finally:
            self.discard()
        if not groups:
            return None
        # values stay the pickles RocksDB holds (a reader unpickles them, or a RocksDB
        # backend stores them as they are)
        data = dumps_state({"format": SNAPSHOT_FORMAT, "kinds": self.kinds, "groups": groups,
                            "values": PICKLED_VALUES})
        size = write_file(path, data)
        return KeyedStateHandle(path, self.key_group_range, size)

    def discard(self) -> None:
        """Delete the checkpoint directory (``write`` does it; call it to abandon)."""
        if self.checkpoint_path is not None:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)


class RocksDBIncrementalSnapshotWriter(KeyedSnapshotWriter):
    """The asynchronous part of an incremental checkpoint: uploads the files of a RocksDB
    checkpoint directory (see the module doc), reports the SST uploads to the backend
    (``on_uploaded(checkpoint_id, {sst: (remote path, size)})``) and deletes the directory.
    ``base``: SST name -> (remote path, size) of the last confirmed checkpoint, captured in
    the synchronous part. Runs in any thread; uses nothing of the live database."""

    def __init__(
        self,
        checkpoint_id: int,
        checkpoint_path: Optional[str],
        files: List[str],
        kinds: Dict[str, str],
        key_group_range: KeyGroupRange,
        base: Dict[str, Tuple[str, int]],
        on_uploaded: Optional[Callable[[int, Dict[str, Tuple[str, int]]], None]],
        db_uid: str = "",
    ) -> None:
        self.db_uid = db_uid
        self.checkpoint_id = checkpoint_id
        self.checkpoint_path = checkpoint_path
        self.files = files
        self.kinds = kinds
        self.key_group_range = key_group_range
        self.base = base
        self.on_uploaded = on_uploaded

    @staticmethod
    def shared_path(path: str, sst_name: str) -> str:
        """A fresh unique path for ``sst_name`` in ``<job root>/shared`` (``path`` is the
        task's ``<job root>/chk-<n>/<vertex>-<i>.keyed``)."""
        root = posixpath.dirname(posixpath.dirname(path))
        stem = posixpath.basename(path)
        stem = stem.rsplit(".", 1)[0] if "." in stem else stem
        return posixpath.join(root, "shared", f"{stem}-{sst_name}-{uuid.uuid4().hex[:8]}")

    def write(
        self, write_file: Callable[[str, bytes], int], path: str
    ) -> Optional[IncrementalKeyedStateHandle]:
        if self.checkpoint_path is None:
            return None
        try:
            shared: Dict[str, str] = {}
            private: Dict[str, str] = {}
            sizes: Dict[str, int] = {}
            ssts: Dict[str, Tuple[str, int]] = {}
            uploaded = 0
            for name in self.files:
                if name.endswith(".sst"):
                    known = self.base.get(name)
                    if known is not None:
                        shared[name] = known[0]
                        sizes[known[0]] = known[1]
                        ssts[name] = known
                        continue
                    remote = self.shared_path(path, name)
                else:
                    remote = f"{path}.private/{name}"
                with open(os.path.join(self.checkpoint_path, name), "rb") as f:
                    data = f.read()
                n = write_file(remote, data)
                n = len(data) if n is None else n
                uploaded += n
                sizes[remote] = n
                if name.endswith(".sst"):
                    shared[name] = remote
                    ssts[name] = (remote, n)
                else:
                    private[name] = remote
        finally:
            self.discard()
        if self.on_uploaded is not None:
            self.on_uploaded(self.checkpoint_id, ssts)
        return IncrementalKeyedStateHandle(
            path=f"{path}.private",
            key_group_range=self.key_group_range,
            size=uploaded,
            checkpoint_id=self.checkpoint_id,
            shared=shared,
            private=private,
            state_kinds=dict(self.kinds),
            full_size=sum(sizes.values()),
            file_sizes=sizes,
            db_uid=self.db_uid,
        )

    def discard(self) -> None:
        """Delete the checkpoint directory (``write`` does it; call it to abandon)."""
        if self.checkpoint_path is not None:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)
