"""The asynchronous part of RocksDB snapshots: :class:`RocksDBFullSnapshotWriter` streams a
RocksDB checkpoint into the portable ``flowray-keyed-v2`` format key group by key group
(values as their pickles; :mod:`flowray.state.full_snapshot`); the incremental writer uploads
new SST files as shared files and the rest as private ones.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from flowray.state.full_snapshot import (
    DEFAULT_PART_BYTES,
    DEFAULT_RECORD_BYTES,
    StreamedSnapshotWriter,
    WriterStats,
)
from flowray.state.key_groups import KeyGroupRange
from flowray.state.keyed_backend import (
    KeyedSnapshotWriter,
)
from flowray.state.full_snapshot import dumps_state
from flowray.state.rocksdb.layout import (
    _CF_PREFIX,
    _loads,
    _raw_options,
    decode_key,
)
from flowray.state.snapshot import IncrementalKeyedStateHandle, KeyedStateHandle
from rocksdict import AccessType, Rdict

__all__ = ["RocksDBFullSnapshotWriter", "RocksDBIncrementalSnapshotWriter"]

#: one database entry in snapshot order: (key group, state, key, value pickle, size)
_Entry = Tuple[int, str, Any, bytes, int]


def _column_entries(name: str, items: Iterator[Tuple[bytes, bytes]]) -> Iterator[_Entry]:
    """The raw entries of one column family as snapshot entries (keys decoded)."""
    for k, v in items:
        yield int.from_bytes(k[:2], "big"), name, decode_key(k, 2), v, len(k) + len(v)


def _purged_entries(entries: Iterator[_Entry], purge: Callable[[Any, int, int], Any],
                    ttl: int, now: int) -> Iterator[_Entry]:
    """``entries`` of a TTL state without expired values (state TTL's
    ``cleanup_full_snapshot``)."""
    for kg, name, key, value, size in entries:
        obj = _loads(value)
        kept = purge(obj, ttl, now)
        if kept is None:
            continue
        if kept is not obj:
            value = dumps_state(kept)
        yield kg, name, key, value, size


def key_group_ordered(columns: List[Iterator[_Entry]]) -> Iterator[_Entry]:
    """Entries of several column families (each in key order, so key groups ascend),
    interleaved key group by key group: every column's entries of key group ``g`` (in
    column order) before any entry of ``g + 1``. Holds one entry per column.

    >>> a = iter([(0, "a", "x", b"1", 2), (2, "a", "y", b"2", 2)])
    >>> b = iter([(1, "b", "z", b"3", 2), (2, "b", "w", b"4", 2)])
    >>> [(e[0], e[1]) for e in key_group_ordered([a, b])]
    [(0, 'a'), (1, 'b'), (2, 'a'), (2, 'b')]
    """
    heads: List[Optional[_Entry]] = [next(it, None) for it in columns]
    while True:
        live = [h[0] for h in heads if h is not None]
        if not live:
            return
        group = min(live)
        for i, it in enumerate(columns):
            head = heads[i]
            while head is not None and head[0] == group:
                yield head
                head = next(it, None)
            heads[i] = head


class RocksDBFullSnapshotWriter(KeyedSnapshotWriter):
    """Streams a RocksDB checkpoint directory into the portable full-snapshot format
    (``flowray-keyed-v2``: key group by key group, in parts of about ``part_bytes``; never
    the whole database in memory) and deletes the directory. Runs in any thread; uses
    nothing of the live database. After :meth:`write`, :attr:`stats` tells what it held
    at most."""

    def __init__(
        self, checkpoint_path: Optional[str], kinds: Dict[str, str],
        key_group_range: KeyGroupRange, part_bytes: int = DEFAULT_PART_BYTES,
        record_bytes: int = DEFAULT_RECORD_BYTES,
        ttl_purges: Optional[Dict[str, Tuple[Callable[[Any, int, int], Any], int]]] = None,
        now_ms: int = 0,
    ) -> None:
        self.ttl_purges = ttl_purges or {}
        self.now_ms = now_ms
        self.checkpoint_path = checkpoint_path
        self.kinds = kinds
        self.key_group_range = key_group_range
        self.part_bytes = part_bytes
        self.record_bytes = record_bytes
        self.stats: Optional[WriterStats] = None

    def write(
        self, write_file: Callable[[str, bytes], int], path: str
    ) -> Optional[KeyedStateHandle]:
        if self.checkpoint_path is None:
            return None
        try:
            out = StreamedSnapshotWriter(write_file, path, self.kinds, pickled_values=True,
                                         part_bytes=self.part_bytes,
                                         record_bytes=self.record_bytes)
            self.stats = out.stats
            self._stream(out)
            size = out.finish()
        finally:
            self.discard()
        if size is None:
            return None
        return KeyedStateHandle(path, self.key_group_range, size)

    def _stream(self, out: StreamedSnapshotWriter) -> None:
        """Feed every entry of the checkpoint to ``out``, key group by key group."""
        cfs = {_CF_PREFIX + name: _raw_options() for name in self.kinds}
        db = Rdict(
            self.checkpoint_path,
            _raw_options(),
            column_families=cfs,
            access_type=AccessType.read_only(),
        )
        handles: List[Rdict] = []
        columns: List[Iterator[_Entry]] = []
        try:
            for name in self.kinds:
                cf = db.get_column_family(_CF_PREFIX + name)
                handles.append(cf)
                column = _column_entries(name, cf.items())
                purge = self.ttl_purges.get(name)
                if purge is not None:
                    column = _purged_entries(column, purge[0], purge[1], self.now_ms)
                columns.append(column)
            add = out.add
            for kg, name, key, value, size in key_group_ordered(columns):
                add(kg, name, key, value, size)
        finally:
            for column in columns:  # drop the database iterators before closing it
                column.close()  # type: ignore[attr-defined]
            for cf in handles:
                cf.close()
            db.close()

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
