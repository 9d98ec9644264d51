"""Checkpoints in RocksDB's native format, read back: the files of an
:class:`~flowray.state.snapshot.IncrementalKeyedStateHandle` (an incremental checkpoint, or a
native full one whose files are all private) downloaded into a scratch folder and opened
read-only, so their entries can be copied key-group range by key-group range -- into
another RocksDB database (rescaling) or into the heap backend (a checkpoint of a job that
ran on RocksDB, restored by a job on the heap backend).

>>> import tempfile
>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
>>> from flowray.state.value_codec import decode_value
>>> backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 7), 8, tempfile.mkdtemp())
>>> total = backend.get_partitioned_state(ValueStateDescriptor("total"))
>>> for key in ("a", "b"):
...     backend.set_current_key(key); total.update(len(key) + 2)
>>> files = {}
>>> def write_file(path, data):
...     files[path] = data
...     return len(data)
>>> handle = backend.snapshot(1).write(write_file, "job/chk-1/v1-0.keyed")
>>> backend.dispose()
>>> with open_native_snapshot(handle, files.__getitem__) as snapshot:
...     sorted((name, k, decode_value(v))
...            for _, name, entries in snapshot.records(KeyGroupRange(0, 7)) for k, v in entries)
...     snapshot.kinds
[('total', 'a', 3), ('total', 'b', 3)]
{'total': 'value'}
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from contextlib import contextmanager
from itertools import groupby
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.layout import _CF_PREFIX, _kg_prefix, _raw_options, decode_key
from flowray.state.snapshot import IncrementalKeyedStateHandle
from rocksdict import AccessType, Rdict

__all__ = ["NativeSnapshotReader", "download_native", "open_native_snapshot",
           "scan_key_groups"]


def scan_key_groups(cf: Rdict, first: int, last: int, values: bool) -> Iterator[Any]:
    """Raw entries (``values``) or raw keys of key groups ``first..last`` of a column
    family: seek to the first group's prefix and stop at the next group's. (No
    ``ReadOptions`` iterate bounds: rocksdict 0.3.29 keeps pointers to the bound bytes
    without owning them.)"""
    stop = _kg_prefix(last + 1)
    it = cf.items(from_key=_kg_prefix(first)) if values else cf.keys(from_key=_kg_prefix(first))
    for entry in it:
        if (entry[0] if values else entry)[:2] >= stop:
            return
        yield entry


def download_native(handle: IncrementalKeyedStateHandle, read: Callable[[str], bytes],
                    target: str) -> None:
    """Write every file of ``handle`` (shared and private) into the folder ``target``."""
    os.makedirs(target, exist_ok=True)
    for name, remote in itertools.chain(handle.shared.items(), handle.private.items()):
        with open(os.path.join(target, name), "wb") as f:
            f.write(read(remote))


class NativeSnapshotReader:
    """A native checkpoint's database, open read-only: ``kinds`` (state name ->
    ``StateKind`` value) and its entries by key-group range. Use it inside
    :func:`open_native_snapshot` only."""

    def __init__(self, db: Optional[Rdict], kinds: Dict[str, str]) -> None:
        self._db = db
        self.kinds = dict(kinds)

    def raw_items(self, name: str, key_group_range: KeyGroupRange
                  ) -> Iterator[Tuple[bytes, bytes]]:
        """State ``name``'s entries in ``key_group_range`` as RocksDB stores them."""
        if not len(key_group_range) or self._db is None:
            return
        cf = self._db.get_column_family(_CF_PREFIX + name)
        try:
            yield from scan_key_groups(cf, key_group_range.start, key_group_range.end, True)
        finally:
            cf.close()

    def records(self, key_group_range: KeyGroupRange
                ) -> Iterator[Tuple[int, str, List[Tuple[Any, bytes]]]]:
        """``(key group, state name, [(key, value bytes)])`` of every key group in
        ``key_group_range`` that holds entries, state by state; values are
        :mod:`flowray.state.value_codec` bytes."""
        for name in self.kinds:
            for prefix, entries in groupby(self.raw_items(name, key_group_range),
                                           key=lambda kv: kv[0][:2]):
                yield (int.from_bytes(prefix, "big"), name,
                       [(decode_key(k, 2), v) for k, v in entries])


@contextmanager
def open_native_snapshot(handle: IncrementalKeyedStateHandle, read: Callable[[str], bytes],
                         scratch_dir: Optional[str] = None) -> Iterator[NativeSnapshotReader]:
    """Download ``handle``'s files (``read(path) -> bytes``) into a fresh folder under
    ``scratch_dir`` (default: the system's temporary folder), open them read-only, and
    delete the folder on exit."""
    if not handle.state_kinds:  # no state was registered: no files either
        yield NativeSnapshotReader(None, {})
        return
    folder = tempfile.mkdtemp(prefix="native-restore-", dir=scratch_dir)
    try:
        download_native(handle, read, folder)
        cfs = {name: _raw_options() for name in Rdict.list_cf(folder) if name != "default"}
        db = Rdict(folder, _raw_options(), column_families=cfs,
                   access_type=AccessType.read_only())
        try:
            yield NativeSnapshotReader(db, handle.state_kinds)
        finally:
            db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
