"""The asynchronous part of RocksDB snapshots: :class:`RocksDBFullSnapshotWriter` (savepoints)
streams a RocksDB checkpoint into the portable ``flowray-keyed-v3`` format key group by key group
(keys and values as RocksDB stores them; :mod:`flowray.state.full_snapshot`), reading each
column family in chunks of raw entries and cutting them at key-group boundaries by bisection,
so no key or value is decoded or handled one by one in Python (TTL states cleaned up in
snapshots excepted: their values are read to drop the expired ones). The native writer
(:class:`RocksDBNativeSnapshotWriter`) uploads a RocksDB checkpoint's files as they are:
for an incremental checkpoint the SST files the confirmed base lacks as shared files and the
rest as private ones; for a native full checkpoint every file as a private one.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
from bisect import bisect_left
from itertools import islice
from operator import itemgetter
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from flowray.state.full_snapshot import (
    DEFAULT_PART_BYTES,
    DEFAULT_RECORD_BYTES,
    RawSnapshotWriter,
    StreamedSnapshotWriter,
    WriterStats,
)
from flowray.state.heap_table import SnapshotAbortedError
from flowray.state.key_groups import KeyGroupRange
from flowray.state.keyed_backend import (
    KeyedSnapshotWriter,
)
from flowray.state.rocksdb.layout import (
    _CF_PREFIX,
    _raw_options,
    decode_key,
)
from flowray.state.value_codec import decode_value, encode_value
from flowray.state.snapshot import (
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    shared_file_name,
)
from rocksdict import AccessType, Rdict

__all__ = ["RocksDBFullSnapshotWriter", "RocksDBNativeSnapshotWriter"]

#: one database entry in snapshot order: (key group, state, key, value pickle, size)
_Entry = Tuple[int, str, Any, bytes, int]

log = logging.getLogger(__name__)


def _column_entries(name: str, items: Iterator[Tuple[bytes, bytes]]) -> Iterator[_Entry]:
    """The raw entries of one column family as snapshot entries (keys decoded)."""
    for k, v in items:
        yield int.from_bytes(k[:2], "big"), name, decode_key(k, 2), v, len(k) + len(v)


def _purged_entries(entries: Iterator[_Entry], purge: Callable[[Any, int, int], Any],
                    ttl: int, now: int) -> Iterator[_Entry]:
    """``entries`` of a TTL state without expired values (state TTL's
    ``cleanup_full_snapshot``)."""
    for kg, name, key, value, size in entries:
        obj = decode_value(value)
        kept = purge(obj, ttl, now)
        if kept is None:
            continue
        if kept is not obj:
            value = encode_value(kept)
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


#: the first chunk read from a column family holds this many entries; later ones about
#: ``chunk_bytes`` (:class:`_RawColumn`): one, so even the first chunk of huge values is small
_FIRST_CHUNK = 1


class _RawColumn:
    """The raw entries of one column family (keys ascending), read in chunks of about
    ``chunk_bytes`` (sized from the mean entry of the chunk before, growing at most 2x a
    chunk: about ``chunk_bytes`` while entry sizes change slowly; an entry larger than it is
    a chunk of its own); :meth:`run` hands out the next run of one key group. ``purge``: (purge, ttl ms)
    of a TTL state cleaned up in snapshots: expired values are dropped from each chunk."""

    def __init__(self, name: str, items: Iterator[Tuple[bytes, bytes]], chunk_bytes: int,
                 purge: Optional[Tuple[Callable[[Any, int, int], Any], int]] = None,
                 now_ms: int = 0) -> None:
        self.name = name
        self._items: Optional[Iterator[Tuple[bytes, bytes]]] = items
        self._chunk_bytes = max(1, chunk_bytes)
        self._size = _FIRST_CHUNK
        self._purge = purge
        self._now_ms = now_ms
        self._keys: List[bytes] = []
        self._values: List[bytes] = []
        self._pos = 0
        #: the most entries a chunk held
        self.peak_entries = 0

    def head(self) -> Optional[int]:
        """The key group of the next entry; ``None`` when the column is done."""
        while self._pos >= len(self._keys):
            if not self._refill():
                return None
        key = self._keys[self._pos]
        return (key[0] << 8) | key[1]

    def run(self, stop: bytes) -> Tuple[List[bytes], List[bytes], int]:
        """Keys, values and their bytes from the next entry up to the first key at or
        after ``stop`` (the next key group's prefix) or the end of the chunk held."""
        keys, pos = self._keys, self._pos
        end = bisect_left(keys, stop, pos)
        run_keys, run_values = keys[pos:end], self._values[pos:end]
        self._pos = end
        return run_keys, run_values, sum(map(len, run_keys)) + sum(map(len, run_values))

    def _refill(self) -> bool:
        self._keys, self._values, self._pos = [], [], 0
        if self._items is None:
            return False
        chunk = list(islice(self._items, self._size))
        if not chunk:
            self.close()
            return False
        n = len(chunk)
        keys = list(map(itemgetter(0), chunk))
        values = list(map(itemgetter(1), chunk))
        del chunk
        self.peak_entries = max(self.peak_entries, n)
        size = sum(map(len, keys)) + sum(map(len, values))
        self._size = max(1, min(2 * n, n * self._chunk_bytes // max(1, size)))
        if self._purge is not None:
            keys, values = self._purged(keys, values)
        self._keys, self._values = keys, values
        return True

    def _purged(self, keys: List[bytes], values: List[bytes]) -> Tuple[List[bytes], List[bytes]]:
        """``keys`` and ``values`` without the expired values (state TTL's
        ``cleanup_full_snapshot``)."""
        assert self._purge is not None
        purge, ttl = self._purge
        kept_keys: List[bytes] = []
        kept_values: List[bytes] = []
        for key, value in zip(keys, values):
            obj = decode_value(value)
            kept = purge(obj, ttl, self._now_ms)
            if kept is not None:
                kept_keys.append(key)
                kept_values.append(value if kept is obj else encode_value(kept))
        return kept_keys, kept_values

    def close(self) -> None:
        """Drop the database iterator (before the database is closed)."""
        self._items = None


def _stream_raw_columns(columns: List[_RawColumn], out: RawSnapshotWriter) -> None:
    """Feed ``columns`` to ``out`` key group by key group: every column's runs of key
    group ``g`` (in column order) before any entry of ``g + 1``."""
    add_run = out.add_run
    while True:
        heads = [column.head() for column in columns]
        live = [h for h in heads if h is not None]
        if not live:
            return
        group = min(live)
        stop = (group + 1).to_bytes(2, "big")
        for column, head in zip(columns, heads):
            if head == group:
                while column.head() == group:
                    keys, values, size = column.run(stop)
                    add_run(group, column.name, keys, values, size)


def keep_local_copy(keep_local: Optional[Callable[[str], str]],
                    checkpoint_path: Optional[str]) -> str:
    """Hand a written checkpoint directory to task-local recovery (``keep_local`` moves it
    and returns its copy id); "" without local recovery or when keeping it failed (the
    checkpoint itself is written: a missing local copy only means a slower restore)."""
    if keep_local is None or checkpoint_path is None:
        return ""
    try:
        return keep_local(checkpoint_path)
    except OSError as e:
        log.warning("flowray: cannot keep a local copy of %s for local recovery: %s",
                    checkpoint_path, e)
        return ""


class RocksDBFullSnapshotWriter(KeyedSnapshotWriter):
    """Streams a RocksDB checkpoint directory into the portable full-snapshot format
    (``flowray-keyed-v3``: key group by key group, in parts of about ``part_bytes`` and
    records of about ``record_bytes``; never the whole database in memory) and deletes the
    directory. Runs in any thread; uses nothing of the live database. After :meth:`write`,
    :attr:`stats` tells what it held at most. ``format_version`` 2 writes
    ``flowray-keyed-v2`` entry by entry, keys decoded (the writer before v3: for tests of
    old snapshots and benchmarks)."""

    def __init__(
        self, checkpoint_path: Optional[str], kinds: Dict[str, str],
        key_group_range: KeyGroupRange, part_bytes: int = DEFAULT_PART_BYTES,
        record_bytes: int = DEFAULT_RECORD_BYTES,
        ttl_purges: Optional[Dict[str, Tuple[Callable[[Any, int, int], Any], int]]] = None,
        now_ms: int = 0,
        format_version: int = 3,
        keep_local: Optional[Callable[[str], str]] = None,
    ) -> None:
        self.keep_local = keep_local
        if format_version not in (2, 3):
            raise ValueError(f"format_version must be 2 or 3, got {format_version}")
        self.format_version = format_version
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
            out: Any
            if self.format_version == 2:
                out = StreamedSnapshotWriter(write_file, path, self.kinds, pickled_values=True,
                                             part_bytes=self.part_bytes,
                                             record_bytes=self.record_bytes)
            else:
                out = RawSnapshotWriter(write_file, path, self.kinds, part_bytes=self.part_bytes,
                                        record_bytes=self.record_bytes)
            self.stats = out.stats
            self._stream(out)
            size = out.finish()
        except BaseException:
            self.discard()
            raise
        copy_id = keep_local_copy(self.keep_local, self.checkpoint_path)
        self.discard()
        if size is None:
            return None
        return KeyedStateHandle(path, self.key_group_range, size, local_copy_id=copy_id)

    def _stream(self, out: Any) -> None:
        """Feed every entry of the checkpoint to ``out``, key group by key group."""
        cfs = {_CF_PREFIX + name: _raw_options() for name in self.kinds}
        db = Rdict(
            self.checkpoint_path,
            _raw_options(),
            column_families=cfs,
            access_type=AccessType.read_only(),
        )
        try:
            if self.format_version == 2:
                self._stream_v2(db, out)
            else:
                self._stream_v3(db, out)
        finally:
            db.close()

    def _stream_v3(self, db: Rdict, out: RawSnapshotWriter) -> None:
        handles: List[Rdict] = []
        columns: List[_RawColumn] = []
        chunk_bytes = min(self.record_bytes, self.part_bytes)
        try:
            for name in self.kinds:
                cf = db.get_column_family(_CF_PREFIX + name)
                handles.append(cf)
                columns.append(_RawColumn(name, cf.items(), chunk_bytes,
                                          self.ttl_purges.get(name), self.now_ms))
            _stream_raw_columns(columns, out)
        finally:
            for column in columns:  # drop the database iterators before closing it
                column.close()
            for cf in handles:
                cf.close()

    def _stream_v2(self, db: Rdict, out: StreamedSnapshotWriter) -> None:
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

    def discard(self) -> None:
        """Delete the checkpoint directory (``write`` does it; call it to abandon)."""
        if self.checkpoint_path is not None:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)


class RocksDBNativeSnapshotWriter(KeyedSnapshotWriter):
    """The asynchronous part of a checkpoint in RocksDB's native format: uploads the files
    of a RocksDB checkpoint directory (see the module doc), reports the SST uploads to the
    backend (``on_uploaded(checkpoint_id, {sst: (remote path, size)})``) and deletes the
    directory. ``base``: SST name -> (remote path, size) of the last confirmed checkpoint,
    captured in the synchronous part. ``shared_ssts=False`` (a native full checkpoint, Flink's
    native-format snapshot): every SST file is a private file of this checkpoint, uploaded
    again and referenced by no other (``base`` must be empty; nothing is reported). Runs in
    any thread; uses nothing of the live database."""

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
        keep_local: Optional[Callable[[str], str]] = None,
        shared_ssts: bool = True,
        aborted: Callable[[], bool] = lambda: False,
    ) -> None:
        if not shared_ssts and (base or on_uploaded is not None):
            raise ValueError("a native full checkpoint neither references nor reports SST files")
        self.shared_ssts = shared_ssts
        self.keep_local = keep_local
        self.db_uid = db_uid
        self.checkpoint_id = checkpoint_id
        self.checkpoint_path = checkpoint_path
        self.files = files
        self.kinds = kinds
        self.key_group_range = key_group_range
        self.base = base
        self.on_uploaded = on_uploaded
        #: whether the checkpoint was aborted: the upload stops before its next file
        self.aborted = aborted

    @staticmethod
    def shared_path(path: str, sst_name: str, checkpoint_id: int) -> str:
        """A fresh unique path for ``sst_name`` in ``<job root>/shared`` (``path`` is the
        task's ``<job root>/chk-<n>/<vertex>-<i>.keyed``), naming ``checkpoint_id``."""
        root = posixpath.dirname(posixpath.dirname(path))
        stem = posixpath.basename(path)
        stem = stem.rsplit(".", 1)[0] if "." in stem else stem
        return posixpath.join(root, "shared", shared_file_name(stem, sst_name, checkpoint_id))

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
                if self.aborted():
                    raise SnapshotAbortedError(
                        f"checkpoint {self.checkpoint_id} was aborted during its upload "
                        f"({uploaded} bytes written; {name} and the files after it not)")
                shared_sst = self.shared_ssts and name.endswith(".sst")
                if shared_sst:
                    known = self.base.get(name)
                    if known is not None:
                        shared[name] = known[0]
                        sizes[known[0]] = known[1]
                        ssts[name] = known
                        continue
                    remote = self.shared_path(path, name, self.checkpoint_id)
                else:
                    remote = f"{path}.private/{name}"
                with open(os.path.join(self.checkpoint_path, name), "rb") as f:
                    data = f.read()
                n = write_file(remote, data)
                n = len(data) if n is None else n
                uploaded += n
                sizes[remote] = n
                if shared_sst:
                    shared[name] = remote
                    ssts[name] = (remote, n)
                else:
                    private[name] = remote
        except BaseException:
            self.discard()
            raise
        copy_id = keep_local_copy(self.keep_local, self.checkpoint_path)
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
            local_copy_id=copy_id,
        )

    def discard(self) -> None:
        """Delete the checkpoint directory (``write`` does it; call it to abandon)."""
        if self.checkpoint_path is not None:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)
