"""The RocksDB keyed-state backend (rocksdict): state on local disk, not on the Python heap.

Layout (DESIGN.md section 6): one column family per state name (``"state/<name>"``); a
RocksDB key is the key group as 2 big-endian bytes followed by the key's stable byte
encoding (:func:`encode_key`), so the keys of one key group -- and of any key-group range --
are a contiguous key range (iteration by key group and rescaling are range scans). Values
are pickled (cloudpickle fallback, as in the heap backend): a value state holds its value,
a list state one pickled list, a map state one pickled dict per key (each ``put`` rewrites
the key's whole map), a reducing state the reduced value, an aggregating state the
accumulator. Reads return copies: mutating an object obtained from a state does not
change the state (unlike the heap backend; write it back with ``update``/``put``).

Keys are compared by their encoding: ``1``, ``1.0`` and ``True`` are three different keys
here although they are one key in the heap backend (``-0.0`` is stored as ``0.0``). Keys of
types other than ``None``/``bool``/``int``/``float``/``str``/``bytes``/plain tuples of these
are pickled and must pickle deterministically (equal keys, equal bytes).

Checkpoints are full snapshots: the synchronous part creates a RocksDB checkpoint (hard
links to the SST files, after a memtable flush) under ``working_dir``; the asynchronous part
opens it read-only, writes the portable keyed-state format that the heap backend writes too
(``flowray-heap-v1``), and deletes it. :meth:`RocksDBKeyedStateBackend.restore` reads that
format, so state moves freely between the heap and the RocksDB backend.

With ``incremental=True`` checkpoints are incremental (Flink's incremental RocksDB
checkpoints, DESIGN.md section 6): the synchronous part flushes and creates the RocksDB
checkpoint ``working_dir/snapshots/chk-<id>`` (hard links); the asynchronous part
(:class:`RocksDBIncrementalSnapshotWriter`) uploads each ``.sst`` file that the last
*confirmed* checkpoint did not upload to a unique path ``<job root>/shared/<vertex>-<i>-<sst>-
<uuid8>`` and only references the others; every other file (``MANIFEST-*``, ``CURRENT``,
``OPTIONS-*``, ...) is private and uploaded each time under ``<path>.private/<name>``. It
returns an :class:`~flowray.state.snapshot.IncrementalKeyedStateHandle` and deletes the
local checkpoint directory. A checkpoint becomes the confirmed base only through
:meth:`RocksDBKeyedStateBackend.notify_checkpoint_complete`, which the task must call when
the JobMaster reports the checkpoint complete; files of unconfirmed checkpoints are uploaded
again under new unique names. Incremental handles can only be restored by this backend.

>>> import tempfile
>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, tempfile.mkdtemp())
>>> total = backend.get_partitioned_state(ValueStateDescriptor("total"))
>>> backend.set_current_key("a"); total.update(3)
>>> backend.set_current_key("b"); total.value() is None
True
>>> backend.set_current_key("a"); total.value()
3
>>> sorted(backend.get_keys("total"))
['a']
>>> backend.dispose()
>>> decode_key(encode_key(("user", 7, None, b"x", 2.5)))
('user', 7, None, b'x', 2.5)
"""

from __future__ import annotations

import itertools
import os
import pickle
import posixpath
import shutil
import struct
import tempfile
import threading
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from rocksdict import AccessType, Checkpoint, Options, Rdict, WriteBatch, WriteOptions

from flowray.state.backend import (
    AggregatingState,
    KeyedSnapshotWriter,
    KeyedStateBackend,
    ListState,
    MapState,
    ReducingState,
    State,
    StateAccessError,
    ValueState,
)
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from flowray.state.heap import dumps_state, loads_state
from flowray.state.key_groups import UPPER_BOUND_MAX_PARALLELISM, KeyGroupAssigner, KeyGroupRange
from flowray.state.snapshot import IncrementalKeyedStateHandle, KeyedStateHandle

__all__ = [
    "RocksDBKeyedStateBackend",
    "RocksDBIncrementalSnapshotWriter",
    "RocksDBValueAccessor",
    "SNAPSHOT_FORMAT",
    "encode_key",
    "decode_key",
]

#: The portable full-snapshot format, shared with :mod:`flowray.state.heap`.
SNAPSHOT_FORMAT = "flowray-heap-v1"

_MISSING = object()
_CF_PREFIX = "state/"
_loads = pickle.loads

# ---------------------------------------------------------------------------------------
# stable key encoding
# ---------------------------------------------------------------------------------------

_T_NONE, _T_FALSE, _T_TRUE = 0x00, 0x01, 0x02
_T_INT, _T_FLOAT, _T_STR, _T_BYTES, _T_TUPLE, _T_PICKLE = 0x10, 0x11, 0x12, 0x13, 0x14, 0x7F
_pack_f64 = struct.Struct(">d").pack
_unpack_f64 = struct.Struct(">d").unpack_from


def _varint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _encode_into(key: Any, out: bytearray) -> None:
    t = type(key)
    if t is str:
        data = key.encode("utf-8", "surrogatepass")
        out.append(_T_STR)
        _varint(len(data), out)
        out += data
    elif t is int:
        data = key.to_bytes((key.bit_length() + 8) // 8, "big", signed=True)
        out.append(_T_INT)
        _varint(len(data), out)
        out += data
    elif key is None:
        out.append(_T_NONE)
    elif t is bool:
        out.append(_T_TRUE if key else _T_FALSE)
    elif t is bytes:
        out.append(_T_BYTES)
        _varint(len(key), out)
        out += key
    elif t is float:
        out.append(_T_FLOAT)
        out += _pack_f64(key + 0.0)  # -0.0 + 0.0 == 0.0: equal floats, equal bytes
    elif t is tuple:
        out.append(_T_TUPLE)
        _varint(len(key), out)
        for item in key:
            _encode_into(item, out)
    else:  # namedtuples, enums, ...: must pickle deterministically
        data = dumps_state(key)
        out.append(_T_PICKLE)
        _varint(len(data), out)
        out += data


def encode_key(key: Any) -> bytes:
    """A deterministic, self-delimiting byte encoding of ``key`` (see the module doc).

    >>> encode_key("ab")
    b'\\x12\\x02ab'
    >>> encode_key(1) != encode_key(1.0) != encode_key(True)
    True
    """
    if type(key) is str:  # the hot path
        data = key.encode("utf-8", "surrogatepass")
        n = len(data)
        if n < 0x80:
            return bytes((_T_STR, n)) + data
    out = bytearray()
    _encode_into(key, out)
    return bytes(out)


def _decode_at(buf: bytes, pos: int) -> Tuple[Any, int]:
    tag = buf[pos]
    pos += 1
    if tag == _T_STR or tag == _T_BYTES or tag == _T_INT or tag == _T_PICKLE:
        n, pos = _read_varint(buf, pos)
        data = buf[pos:pos + n]
        pos += n
        if tag == _T_STR:
            return data.decode("utf-8", "surrogatepass"), pos
        if tag == _T_INT:
            return int.from_bytes(data, "big", signed=True), pos
        if tag == _T_BYTES:
            return bytes(data), pos
        return _loads(data), pos
    if tag == _T_NONE:
        return None, pos
    if tag == _T_FALSE:
        return False, pos
    if tag == _T_TRUE:
        return True, pos
    if tag == _T_FLOAT:
        return _unpack_f64(buf, pos)[0], pos + 8
    if tag == _T_TUPLE:
        n, pos = _read_varint(buf, pos)
        items = []
        for _ in range(n):
            item, pos = _decode_at(buf, pos)
            items.append(item)
        return tuple(items), pos
    raise ValueError(f"bad key encoding: unknown tag {tag:#x} at {pos - 1}")


def decode_key(data: bytes, offset: int = 0) -> Any:
    """The key that :func:`encode_key` encoded as ``data[offset:]``."""
    key, pos = _decode_at(data, offset)
    if pos != len(data):
        raise ValueError(f"bad key encoding: {len(data) - pos} trailing bytes")
    return key


def _kg_prefix(key_group: int) -> bytes:
    return key_group.to_bytes(2, "big")


# ---------------------------------------------------------------------------------------
# state objects
# ---------------------------------------------------------------------------------------

class _RocksState(State):
    __slots__ = ("_backend", "_cf", "_name")

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str) -> None:
        self._backend = backend
        self._cf = cf
        self._name = name

    def _key(self) -> bytes:
        k = self._backend._current_db_key
        if k is None:
            raise StateAccessError(f"state {self._name!r} accessed with no current key")
        return k

    def _get(self) -> Any:
        raw = self._cf.get(self._key())
        return _MISSING if raw is None else _loads(raw)

    def _set(self, value: Any) -> None:
        self._cf.put(self._key(), dumps_state(value))

    def clear(self) -> None:
        self._cf.delete(self._key())


class RocksDBValueState(_RocksState, ValueState):
    def value(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._set(value)


class RocksDBListState(_RocksState, ListState):
    def get(self) -> List[Any]:
        v = self._get()
        return [] if v is _MISSING else v

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self._name!r}: cannot add None")
        cur = self._get()
        self._set([value] if cur is _MISSING else cur + [value])

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        for v in values:
            if v is None:
                raise ValueError(f"list state {self._name!r}: cannot add None")
        if values:
            cur = self._get()
            self._set(values if cur is _MISSING else cur + values)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._set(values)
        else:
            self.clear()


class RocksDBMapState(_RocksState, MapState):
    def _entries(self) -> Dict[Any, Any]:
        d = self._get()
        return {} if d is _MISSING else d

    def get(self, key: Any) -> Any:
        return self._entries().get(key)

    def put(self, key: Any, value: Any) -> None:
        d = self._entries()
        d[key] = value
        self._set(d)

    def put_all(self, entries: dict) -> None:
        if entries:
            d = self._entries()
            d.update(entries)
            self._set(d)

    def remove(self, key: Any) -> None:
        d = self._get()
        if d is _MISSING or key not in d:
            return
        del d[key]
        if d:
            self._set(d)
        else:
            self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def items(self) -> List[Tuple[Any, Any]]:
        return list(self._entries().items())

    def keys(self) -> List[Any]:
        return list(self._entries())

    def values(self) -> List[Any]:
        return list(self._entries().values())

    def is_empty(self) -> bool:
        return not self._entries()


class RocksDBReducingState(_RocksState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str,
                 reduce_fn: Any) -> None:
        super().__init__(backend, cf, name)
        self._reduce = reduce_fn

    def get(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def add(self, value: Any) -> None:
        cur = self._get()
        self._set(value if cur is _MISSING else self._reduce(cur, value))


class RocksDBAggregatingState(_RocksState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str,
                 agg: Any) -> None:
        super().__init__(backend, cf, name)
        self._agg = agg

    def get(self) -> Any:
        acc = self._get()
        return None if acc is _MISSING else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self._get()
        if acc is _MISSING:
            acc = self._agg.create_accumulator()
        self._set(self._agg.add(value, acc))


_STATE_CLASSES = {
    StateKind.VALUE: RocksDBValueState,
    StateKind.LIST: RocksDBListState,
    StateKind.MAP: RocksDBMapState,
}


class RocksDBValueAccessor:
    """Value-state access by explicit ``(key, key_group)``, without setting a current key:
    the backend-neutral form of the heap fast path ``table.maps[kg - start][key]`` that
    ``KeyedReduceOperator`` uses. ``put(key, kg, None)`` stores ``None`` (it does not clear)."""

    __slots__ = ("_cf", "_name", "_start", "_end", "_prefixes")

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str) -> None:
        self._cf = cf
        self._name = name
        self._start = backend.key_group_range.start
        self._end = backend.key_group_range.end
        self._prefixes = backend._prefixes

    def _db_key(self, key: Any, key_group: int) -> bytes:
        if not self._start <= key_group <= self._end:
            raise StateAccessError(
                f"state {self._name!r}: key {key!r} in key group {key_group}, outside this "
                f"subtask's range [{self._start}, {self._end}]")
        return self._prefixes[key_group - self._start] + encode_key(key)

    def get(self, key: Any, key_group: int, default: Any = None) -> Any:
        raw = self._cf.get(self._db_key(key, key_group))
        return default if raw is None else _loads(raw)

    def put(self, key: Any, key_group: int, value: Any) -> None:
        self._cf.put(self._db_key(key, key_group), dumps_state(value))

    def remove(self, key: Any, key_group: int) -> None:
        self._cf.delete(self._db_key(key, key_group))


# ---------------------------------------------------------------------------------------
# the backend
# ---------------------------------------------------------------------------------------

def _raw_options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    return opts


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state in a RocksDB instance under ``working_dir`` (owned by the backend: any
    earlier content of ``working_dir/db`` is discarded, :meth:`dispose` deletes the whole
    directory). The write-ahead log is off: durability comes from checkpoints.

    ``incremental``: take incremental checkpoints (see the module doc); the task must then
    call :meth:`notify_checkpoint_complete` for each completed checkpoint, or every
    checkpoint uploads all SST files again."""

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int,
                 working_dir: str, incremental: bool = False) -> None:
        if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(f"max parallelism must be in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                             f"got {max_parallelism}")
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.working_dir = os.path.abspath(os.fspath(working_dir))
        self._assign = KeyGroupAssigner(max_parallelism)
        self._prefixes = [_kg_prefix(kg) for kg in key_group_range]
        self._db_path = os.path.join(self.working_dir, "db")
        self._snapshot_dir = os.path.join(self.working_dir, "snapshots")
        shutil.rmtree(self._db_path, ignore_errors=True)
        shutil.rmtree(self._snapshot_dir, ignore_errors=True)
        os.makedirs(self._db_path, exist_ok=True)
        self._write_opts = WriteOptions()
        self._write_opts.disable_wal = True
        self._db: Optional[Rdict] = Rdict(self._db_path, _raw_options())
        self._db.set_write_options(self._write_opts)
        self._kinds: Dict[str, StateKind] = {}
        self._cfs: Dict[str, Rdict] = {}
        self._states: Dict[str, State] = {}
        self._snapshot_seq = itertools.count()
        self._current_key: Any = None
        self._current_key_group = -1
        self._current_db_key: Optional[bytes] = None
        self.incremental = bool(incremental)
        # incremental checkpoints: SST name -> (remote path, size) of the last confirmed
        # checkpoint (Flink's materializedSstFiles), and the uploads of unconfirmed ones
        self._upload_lock = threading.Lock()
        self._confirmed_id = -1
        self._confirmed: Dict[str, Tuple[str, int]] = {}
        # names SST files apart from those of another database with the same SST names
        # (a fresh or rescaled database numbers its files from 1 again)
        self.db_uid = uuid.uuid4().hex[:12]
        self._pending: Dict[int, Dict[str, Tuple[str, int]]] = {}

    # -- key context -------------------------------------------------------------------
    def set_current_key(self, key: Any, key_group: Optional[int] = None) -> None:
        if key_group is None:
            key_group = self._assign(key)
        offset = key_group - self.key_group_range.start
        if not 0 <= offset < len(self._prefixes):
            raise StateAccessError(
                f"key {key!r} belongs to key group {key_group}, outside this subtask's range "
                f"[{self.key_group_range.start}, {self.key_group_range.end}]; "
                "is the key selector deterministic?"
            )
        self._current_db_key = self._prefixes[offset] + encode_key(key)
        self._current_key = key
        self._current_key_group = key_group

    def get_current_key(self) -> Any:
        return self._current_key

    def get_current_key_group(self) -> int:
        return self._current_key_group

    def assign_key_group(self, key: Any) -> int:
        """The key group of ``key`` (memoized :func:`assign_to_key_group`)."""
        return self._assign(key)

    # -- states ------------------------------------------------------------------------
    def _column_family(self, name: str, kind: StateKind) -> Rdict:
        """The column family of state ``name``, created on first use; the kind is checked."""
        known = self._kinds.get(name)
        if known is None:
            if self._db is None:
                raise StateAccessError(f"state {name!r}: the backend is disposed")
            cf = self._db.create_column_family(_CF_PREFIX + name, _raw_options())
            cf.set_write_options(self._write_opts)
            self._kinds[name] = kind
            self._cfs[name] = cf
            return cf
        if known is not kind:
            raise StateAccessError(
                f"state {name!r} is registered as {known.value} state, "
                f"cannot access it as {kind.value} state"
            )
        return self._cfs[name]

    def get_partitioned_state(self, descriptor: StateDescriptor) -> State:
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a StateDescriptor, got {descriptor!r}")
        name = descriptor.name
        cf = self._column_family(name, descriptor.kind)
        state = self._states.get(name)
        if state is not None:
            return state
        if isinstance(descriptor, ReducingStateDescriptor):
            state = RocksDBReducingState(self, cf, name, descriptor.reduce_function)
        elif isinstance(descriptor, AggregatingStateDescriptor):
            state = RocksDBAggregatingState(self, cf, name, descriptor.agg_function)
        else:
            state = _STATE_CLASSES[descriptor.kind](self, cf, name)
        self._states[name] = state
        return state

    def value_accessor(self, name: str) -> RocksDBValueAccessor:
        """Value state ``name`` read and written by explicit ``(key, key_group)``."""
        return RocksDBValueAccessor(self, self._column_family(name, StateKind.VALUE), name)

    def state_names(self) -> List[str]:
        return list(self._kinds)

    def state_kind(self, name: str) -> Optional[StateKind]:
        return self._kinds.get(name)

    def _scan(self, cf: Rdict, first: int, last: int, values: bool) -> Iterator[Any]:
        """Raw entries of key groups ``first..last``: seek to the first group's prefix and
        stop at the next group's. (No ``ReadOptions`` iterate bounds: rocksdict 0.3.29 keeps
        pointers to the bound bytes without owning them.)"""
        stop = _kg_prefix(last + 1)
        it = cf.items(from_key=_kg_prefix(first)) if values else cf.keys(from_key=_kg_prefix(first))
        for entry in it:
            if (entry[0] if values else entry)[:2] >= stop:
                return
            yield entry

    def get_keys(self, state_name: str) -> Iterator[Any]:
        cf = self._cfs.get(state_name)
        if cf is None or not len(self.key_group_range):
            return iter(())
        scan = self._scan(cf, self.key_group_range.start, self.key_group_range.end, False)
        return (decode_key(k, 2) for k in scan)

    def iter_key_group(self, state_name: str, key_group: int) -> Iterator[Tuple[Any, Any]]:
        cf = self._cfs.get(state_name)
        if cf is None or key_group not in self.key_group_range:
            return iter(())
        return iter([(decode_key(k, 2), _loads(v))
                     for k, v in self._scan(cf, key_group, key_group, True)])

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int, savepoint: bool = False) -> KeyedSnapshotWriter:
        """Create a RocksDB checkpoint (hard links) now; the writer serializes (full) or
        uploads (incremental) it later. A savepoint is always a full snapshot."""
        if self._db is None:
            raise StateAccessError("cannot snapshot a disposed backend")
        kinds = {name: kind.value for name, kind in self._kinds.items()}
        if self.incremental and not savepoint:
            return self._snapshot_incremental(checkpoint_id, kinds)
        if not kinds:
            return RocksDBFullSnapshotWriter(None, {}, self.key_group_range)
        os.makedirs(self._snapshot_dir, exist_ok=True)
        path = os.path.join(self._snapshot_dir,
                            f"chk-{checkpoint_id}-{next(self._snapshot_seq)}")
        Checkpoint(self._db).create_checkpoint(path)
        return RocksDBFullSnapshotWriter(path, kinds, self.key_group_range)

    def _snapshot_incremental(self, checkpoint_id: int,
                              kinds: Dict[str, str]) -> "RocksDBIncrementalSnapshotWriter":
        if not kinds:
            return RocksDBIncrementalSnapshotWriter(checkpoint_id, None, [], {},
                                                    self.key_group_range, {}, None,
                                                    self.db_uid)
        for cf in self._cfs.values():
            cf.flush()
        os.makedirs(self._snapshot_dir, exist_ok=True)
        path = os.path.join(self._snapshot_dir, f"chk-{int(checkpoint_id)}")
        shutil.rmtree(path, ignore_errors=True)
        Checkpoint(self._db).create_checkpoint(path)
        files = sorted(os.listdir(path))
        with self._upload_lock:
            base = dict(self._confirmed)
        return RocksDBIncrementalSnapshotWriter(checkpoint_id, path, files, kinds,
                                                self.key_group_range, base,
                                                self._record_uploads, self.db_uid)

    def _record_uploads(self, checkpoint_id: int, sst_files: Dict[str, Tuple[str, int]]) -> None:
        with self._upload_lock:
            if checkpoint_id > self._confirmed_id:
                self._pending[checkpoint_id] = dict(sst_files)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: its SST uploads (recorded by its writer)
        become the base that later incremental checkpoints reference instead of uploading.
        Older unconfirmed uploads are forgotten. No-op for unknown or older ids."""
        with self._upload_lock:
            uploads = self._pending.pop(checkpoint_id, None)
            if uploads is None or checkpoint_id <= self._confirmed_id:
                return
            # a file uploaded again while an earlier upload was unconfirmed: the job master
            # keeps the first confirmed copy (SharedStateRegistry), so do we
            self._confirmed = {name: self._confirmed.get(name, up)
                               for name, up in uploads.items()}
            self._confirmed_id = checkpoint_id
            for cid in [c for c in self._pending if c < checkpoint_id]:
                del self._pending[cid]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Forget the uploads of an aborted checkpoint."""
        with self._upload_lock:
            self._pending.pop(checkpoint_id, None)

    def confirmed_sst_files(self) -> Dict[str, str]:
        """SST name -> remote path of the confirmed base (for tests and diagnostics)."""
        with self._upload_lock:
            return {name: p for name, (p, _) in self._confirmed.items()}

    @staticmethod
    def _download(handle: IncrementalKeyedStateHandle, read: Callable[[str], bytes],
                  target: str) -> None:
        os.makedirs(target, exist_ok=True)
        for name, remote in itertools.chain(handle.shared.items(), handle.private.items()):
            with open(os.path.join(target, name), "wb") as f:
                f.write(read(remote))

    def _restore_incremental_in_place(self, handle: IncrementalKeyedStateHandle,
                                      read: Callable[[str], bytes]) -> None:
        """Replace the (empty) database by the checkpoint's files and reopen it."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
        shutil.rmtree(self._db_path, ignore_errors=True)
        self._download(handle, read, self._db_path)
        cfs = {name: _raw_options() for name in Rdict.list_cf(self._db_path)
               if name != "default"}
        self._db = Rdict(self._db_path, _raw_options(), column_families=cfs)
        self._db.set_write_options(self._write_opts)
        for name, kind in handle.state_kinds.items():
            cf = self._db.get_column_family(_CF_PREFIX + name)
            cf.set_write_options(self._write_opts)
            self._kinds[name] = StateKind(kind)
            self._cfs[name] = cf
        sizes = handle.file_sizes
        with self._upload_lock:
            self._confirmed = {name: (p, sizes.get(p, 0)) for name, p in handle.shared.items()}
            self._confirmed_id = handle.checkpoint_id
            self._pending.clear()
            if handle.db_uid:
                self.db_uid = handle.db_uid

    def _restore_incremental_by_copy(self, handle: IncrementalKeyedStateHandle,
                                     read: Callable[[str], bytes]) -> None:
        """Copy this backend's key groups out of the checkpoint (rescaling)."""
        rng = handle.key_group_range.intersection(self.key_group_range)
        if not len(rng) or not handle.state_kinds:
            return
        tmp = tempfile.mkdtemp(prefix="restore-", dir=self.working_dir)
        try:
            self._download(handle, read, tmp)
            cfs = {name: _raw_options() for name in Rdict.list_cf(tmp) if name != "default"}
            src = Rdict(tmp, _raw_options(), column_families=cfs,
                        access_type=AccessType.read_only())
            try:
                for name, kind in handle.state_kinds.items():
                    self._column_family(name, StateKind(kind))
                    dst = self._db.get_column_family_handle(_CF_PREFIX + name)
                    src_cf = src.get_column_family(_CF_PREFIX + name)
                    try:
                        batch, count = WriteBatch(raw_mode=True), 0
                        for k, v in self._scan(src_cf, rng.start, rng.end, True):
                            batch.put(k, v, dst)
                            count += 1
                            if count % 10000 == 0:
                                self._db.write(batch, self._write_opts)
                                batch = WriteBatch(raw_mode=True)
                        if count % 10000:
                            self._db.write(batch, self._write_opts)
                    finally:
                        src_cf.close()
            finally:
                src.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def restore(self, handles: Sequence[Any], read: Callable[[str], bytes]) -> None:
        """Load this backend's key groups from full snapshots (heap or RocksDB written) and
        incremental RocksDB checkpoints. One incremental handle of exactly this backend's
        range, restored before any state is registered, replaces the database by the
        checkpoint's files (and its SST files become the confirmed base, so the next
        incremental checkpoint references them); otherwise (rescaling) the key groups of
        this backend are copied out of each checkpoint."""
        if self._db is None:
            raise StateAccessError("cannot restore into a disposed backend")
        handles = [h for h in handles if h is not None]
        if (len(handles) == 1 and isinstance(handles[0], IncrementalKeyedStateHandle)
                and handles[0].key_group_range == self.key_group_range and not self._kinds):
            self._restore_incremental_in_place(handles[0], read)
            return
        for handle in handles:
            if isinstance(handle, IncrementalKeyedStateHandle):
                self._restore_incremental_by_copy(handle, read)
                continue
            data = loads_state(read(handle.path), handle.path)
            if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
                raise ValueError(f"{handle.path}: not a full keyed-state snapshot "
                                 f"(format {SNAPSHOT_FORMAT!r})")
            kinds = data["kinds"]
            batch = WriteBatch(raw_mode=True)
            count = 0
            for kg, states in data["groups"].items():
                if kg not in self.key_group_range:
                    continue
                prefix = self._prefixes[kg - self.key_group_range.start]
                for name, entries in states.items():
                    self._column_family(name, StateKind(kinds[name]))
                    cf_handle = self._db.get_column_family_handle(_CF_PREFIX + name)
                    for key, value in entries.items():
                        batch.put(prefix + encode_key(key), dumps_state(value), cf_handle)
                        count += 1
            if count:
                self._db.write(batch, self._write_opts)

    def dispose(self) -> None:
        """Close the database and delete ``working_dir``. Idempotent."""
        self._states.clear()
        cfs, self._cfs = list(self._cfs.values()), {}
        self._kinds.clear()
        for cf in cfs:
            try:
                cf.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001
                pass
        self._current_db_key = None
        shutil.rmtree(self.working_dir, ignore_errors=True)


class _Pickled:
    """A value kept as its pickle: pickling it embeds the bytes so that unpickling the
    outer file yields the value itself (no unpickle/re-pickle of values in the async part)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> Tuple[Any, Tuple[bytes]]:
        return (_loads, (self.data,))


class RocksDBFullSnapshotWriter(KeyedSnapshotWriter):
    """Serializes a RocksDB checkpoint directory to the portable full-snapshot format and
    deletes the directory. Runs in any thread; uses nothing of the live database."""

    def __init__(self, checkpoint_path: Optional[str], kinds: Dict[str, str],
                 key_group_range: KeyGroupRange) -> None:
        self.checkpoint_path = checkpoint_path
        self.kinds = kinds
        self.key_group_range = key_group_range

    def _read_groups(self) -> Dict[int, Dict[str, Dict[Any, Any]]]:
        groups: Dict[int, Dict[str, Dict[Any, Any]]] = {}
        cfs = {_CF_PREFIX + name: _raw_options() for name in self.kinds}
        db = Rdict(self.checkpoint_path, _raw_options(), column_families=cfs,
                   access_type=AccessType.read_only())
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
                        entries[decode_key(k, 2)] = _Pickled(v)  # type: ignore[index]
                finally:
                    cf.close()
        finally:
            db.close()
        return groups

    def write(self, write_file: Callable[[str, bytes], int], path: str) -> Optional[KeyedStateHandle]:
        if self.checkpoint_path is None:
            return None
        try:
            groups = self._read_groups()
        finally:
            self.discard()
        if not groups:
            return None
        data = dumps_state({"format": SNAPSHOT_FORMAT, "kinds": self.kinds, "groups": groups})
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

    def __init__(self, checkpoint_id: int, checkpoint_path: Optional[str], files: List[str],
                 kinds: Dict[str, str], key_group_range: KeyGroupRange,
                 base: Dict[str, Tuple[str, int]],
                 on_uploaded: Optional[Callable[[int, Dict[str, Tuple[str, int]]], None]],
                 db_uid: str = "") -> None:
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

    def write(self, write_file: Callable[[str, bytes], int],
              path: str) -> Optional[IncrementalKeyedStateHandle]:
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
            path=f"{path}.private", key_group_range=self.key_group_range, size=uploaded,
            checkpoint_id=self.checkpoint_id, shared=shared, private=private,
            state_kinds=dict(self.kinds), full_size=sum(sizes.values()), file_sizes=sizes,
            db_uid=self.db_uid)

    def discard(self) -> None:
        """Delete the checkpoint directory (``write`` does it; call it to abandon)."""
        if self.checkpoint_path is not None:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)
