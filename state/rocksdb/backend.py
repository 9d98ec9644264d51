""":class:`RocksDBKeyedStateBackend`: keyed state in a RocksDB database on local disk, with
full and incremental snapshots and restore (see :mod:`flowray.state.rocksdb`).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from flowray.state.full_snapshot import DEFAULT_PART_BYTES, open_full_snapshot
from flowray.state.value_codec import decode_value, encode_value
from flowray.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupAssigner,
    KeyGroupRange,
)
from flowray.state.keyed_backend import (
    KeyedSnapshotWriter,
    KeyedStateBackend,
    State,
    StateAccessError,
)
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
from flowray.state.rocksdb.layout import (
    _CF_PREFIX,
    _kg_prefix,
    _raw_options,
    decode_key,
    encode_key,
)
from flowray.state.rocksdb.snapshot_writers import (
    RocksDBFullSnapshotWriter,
    RocksDBNativeSnapshotWriter,
)
from flowray.state.rocksdb.states import (
    _STATE_CLASSES,
    RocksDBAggregatingState,
    RocksDBReducingState,
    RocksDBValueAccessor,
)
from flowray.state.snapshot import IncrementalKeyedStateHandle
from flowray.state.rocksdb.local_recovery import TaskLocalStateStore, materialize
from flowray.state.rocksdb.native_snapshot import (
    download_native,
    open_native_snapshot,
    scan_key_groups,
)
from flowray.state.rocksdb.states import RocksDBValueState
from flowray.state.rocksdb.value_accessor import DEFAULT_CACHE_ENTRIES
from flowray.state.ttl import (
    TtlCleanupCursor,
    TtlState,
    create_ttl_state,
    incompatible,
    purge_function,
    ttl_table_name,
)
from flowray.common.clock import Clock, SystemClock
from rocksdict import Checkpoint, Rdict, WriteBatch, WriteOptions

__all__ = ["RocksDBKeyedStateBackend"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------
# the backend
# ---------------------------------------------------------------------------------------


class _BoundedWriteBatch:
    """Puts into ``db`` collected in write batches of at most about ``max_bytes`` or
    ``max_entries`` (a restore never holds the whole state in one batch)."""

    def __init__(self, db: Rdict, write_opts: WriteOptions, max_bytes: int = 4 << 20,
                 max_entries: int = 10_000) -> None:
        self._db = db
        self._write_opts = write_opts
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._batch = WriteBatch(raw_mode=True)
        self._bytes = 0
        self._entries = 0

    def put(self, key: bytes, value: bytes, cf_handle: Any) -> None:
        self._batch.put(key, value, cf_handle)
        self._bytes += len(key) + len(value)
        self._entries += 1
        if self._bytes >= self.max_bytes or self._entries >= self.max_entries:
            self.flush()

    def put_run(self, keys: List[bytes], values: List[bytes], cf_handle: Any) -> None:
        """``put`` of each of ``zip(keys, values)``; the batch may exceed its bounds by
        this run."""
        put = self._batch.put
        for key, value in zip(keys, values):
            put(key, value, cf_handle)
        self._bytes += sum(map(len, keys)) + sum(map(len, values))
        self._entries += len(keys)
        if self._bytes >= self.max_bytes or self._entries >= self.max_entries:
            self.flush()

    def flush(self) -> None:
        if self._entries:
            self._db.write(self._batch, self._write_opts)
            self._batch = WriteBatch(raw_mode=True)
            self._bytes = self._entries = 0


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state in a RocksDB instance under ``working_dir`` (owned by the backend: any
    earlier content of ``working_dir/db`` is discarded, :meth:`dispose` deletes the whole
    directory). The write-ahead log is off: durability comes from checkpoints.

    ``incremental``: take incremental checkpoints, else full ones, both in RocksDB's native
    format (see the module doc); the task must call :meth:`notify_checkpoint_complete` for
    each completed checkpoint, or every incremental checkpoint uploads all SST files again.
    ``snapshot_part_bytes``: savepoints are written and read back in parts of about this
    size (the memory they need; :mod:`flowray.state.full_snapshot`). ``clock``: the
    processing-time clock of state TTL (default: the system clock). ``value_cache_entries``:
    the write-behind cache of each :meth:`value_accessor`
    (:mod:`flowray.state.rocksdb.value_accessor`; 0: none).
    ``local_store``: task-local recovery (:mod:`flowray.state.rocksdb.local_recovery`):
    checkpoints (never savepoints) keep their RocksDB directory there, and a restore of one
    of them opens that copy instead of reading checkpoint storage."""

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        working_dir: str,
        incremental: bool = False,
        snapshot_part_bytes: int = DEFAULT_PART_BYTES,
        clock: Optional[Clock] = None,
        value_cache_entries: int = DEFAULT_CACHE_ENTRIES,
        local_store: Optional[TaskLocalStateStore] = None,
    ) -> None:
        self.local_store = local_store
        #: how the last restore got its files: "local", "storage", or None (no restore)
        self.restored_from: Optional[str] = None
        self.ttl_clock: Clock = clock if clock is not None else SystemClock()
        if value_cache_entries < 0:
            raise ValueError(f"value_cache_entries must be >= 0, got {value_cache_entries}")
        self.value_cache_entries = value_cache_entries
        #: the value accessors handed out, by state name (flushed before reads of a state)
        self._accessors: Dict[str, RocksDBValueAccessor] = {}
        #: TTL states cleaned up in full snapshots: table name -> (purge, ttl ms)
        self._ttl_purges: Dict[str, Tuple[Callable[[Any, int, int], Any], int]] = {}
        if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(
                f"max parallelism must be in [1, {UPPER_BOUND_MAX_PARALLELISM}], "
                f"got {max_parallelism}"
            )
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
        if snapshot_part_bytes <= 0:
            raise ValueError(f"snapshot_part_bytes must be positive, got {snapshot_part_bytes}")
        self.snapshot_part_bytes = snapshot_part_bytes
        # incremental checkpoints: SST name -> (remote path, size) of the last confirmed
        # checkpoint (Flink's materializedSstFiles), and the uploads of unconfirmed ones
        self._upload_lock = threading.Lock()
        self._confirmed_id = -1
        self._confirmed: Dict[str, Tuple[str, int]] = {}
        # names SST files apart from those of another database with the same SST names
        # (a fresh or rescaled database numbers its files from 1 again)
        self.db_uid = uuid.uuid4().hex[:12]
        self._pending: Dict[int, Dict[str, Tuple[str, int]]] = {}
        #: checkpoints aborted while their files may still be uploading: they stop
        self._aborted: Set[int] = set()

    # -- key context -------------------------------------------------------------------
    def set_current_key(self, key: Any, key_group: Optional[int] = None) -> None:
        if type(key) not in PLAIN_KEY_TYPES:
            key = canonical_key(key)
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
        ttl = descriptor._ttl_config
        if ttl is not None and ttl.is_enabled():
            return self._ttl_state(descriptor, ttl)
        name = descriptor.name
        cf = self._column_family(name, descriptor.kind)
        state = self._states.get(name)
        if state is not None:
            return state
        if ttl_table_name(name) in self._kinds:
            raise incompatible(name, ttl_now=False)
        if isinstance(descriptor, ReducingStateDescriptor):
            state = RocksDBReducingState(self, cf, name, descriptor.reduce_function)
        elif isinstance(descriptor, AggregatingStateDescriptor):
            state = RocksDBAggregatingState(self, cf, name, descriptor.agg_function)
        else:
            state = _STATE_CLASSES[descriptor.kind](self, cf, name)
        self._states[name] = state
        return state

    def _ttl_state(self, descriptor: StateDescriptor, config: Any) -> TtlState:
        """The TTL decorator of ``descriptor`` (:mod:`flowray.state.ttl`), created once.
        Background cleanup: the sweep standing in for the compaction filter."""
        table_name = ttl_table_name(descriptor.name)
        cf = self._column_family(table_name, descriptor.kind)
        state = self._states.get(table_name)
        if state is not None:
            return state  # type: ignore[return-value]
        if descriptor.name in self._kinds:
            raise incompatible(descriptor.name, ttl_now=True)
        state = create_ttl_state(descriptor, config, RocksDBValueState(self, cf, table_name),
                                 self.ttl_clock)
        strategies = config.get_cleanup_strategies()
        compaction = strategies.get_rocksdb_compact_filter_cleanup_strategy()
        if compaction is not None:
            plain = type(self).set_current_key

            def keys_of_group(kg: int) -> List[Any]:
                cf = self._cfs[table_name]
                return [decode_key(k, 2) for k in scan_key_groups(cf, kg, kg, False)]

            state.sweep = TtlCleanupCursor(
                self, state, compaction.get_query_time_after_num_entries(),
                list(self.key_group_range), keys_of_group, lambda k, kg: plain(self, k, kg),
                ("_current_key", "_current_key_group", "_current_db_key"))
        if strategies.in_full_snapshot():
            self._ttl_purges[table_name] = (purge_function(descriptor.kind), config.get_ttl_ms())
        self._states[table_name] = state
        return state

    def value_accessor(self, name: str) -> RocksDBValueAccessor:
        """Value state ``name`` read and written by explicit ``(key, key_group)``, per
        record or per batch through a write-behind cache; one accessor per name."""
        cf = self._column_family(name, StateKind.VALUE)
        acc = self._accessors.get(name)
        if acc is None:
            acc = self._accessors[name] = RocksDBValueAccessor(
                self, cf, name, cache_entries=self.value_cache_entries)
        return acc

    def _flush_accessors(self, name: Optional[str] = None) -> None:
        """Write the cached writes of the value accessors (of state ``name``) to RocksDB;
        all of them: a snapshot, which also empties full caches."""
        if name is None:
            for acc in self._accessors.values():
                acc.flush(release_if_full=True)
        else:
            acc = self._accessors.get(name)
            if acc is not None:
                acc.flush()

    def state_names(self) -> List[str]:
        return list(self._kinds)

    def state_kind(self, name: str) -> Optional[StateKind]:
        return self._kinds.get(name)

    def get_keys(self, state_name: str) -> Iterator[Any]:
        self._flush_accessors(state_name)
        cf = self._cfs.get(state_name)
        if cf is None or not len(self.key_group_range):
            return iter(())
        scan = scan_key_groups(cf, self.key_group_range.start, self.key_group_range.end, False)
        return (decode_key(k, 2) for k in scan)

    def iter_key_group(self, state_name: str, key_group: int) -> Iterator[Tuple[Any, Any]]:
        self._flush_accessors(state_name)
        cf = self._cfs.get(state_name)
        if cf is None or key_group not in self.key_group_range:
            return iter(())
        return iter(
            [(decode_key(k, 2), decode_value(v))
             for k, v in scan_key_groups(cf, key_group, key_group, True)]
        )

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int, savepoint: bool = False) -> KeyedSnapshotWriter:
        """Create a RocksDB checkpoint (hard links) now; the writer uploads its files later
        (a checkpoint: RocksDB's native format, incremental or full) or streams it into the
        portable format (a savepoint, always full and canonical)."""
        if self._db is None:
            raise StateAccessError("cannot snapshot a disposed backend")
        self._flush_accessors()  # the checkpoint holds every write before the barrier
        kinds = {name: kind.value for name, kind in self._kinds.items()}
        if not savepoint:
            return self._snapshot_native(checkpoint_id, kinds)
        if not kinds:
            return RocksDBFullSnapshotWriter(None, {}, self.key_group_range)
        os.makedirs(self._snapshot_dir, exist_ok=True)
        path = os.path.join(self._snapshot_dir, f"sp-{checkpoint_id}-{next(self._snapshot_seq)}")
        Checkpoint(self._db).create_checkpoint(path)
        purges = {n: p for n, p in self._ttl_purges.items() if n in kinds}
        return RocksDBFullSnapshotWriter(path, kinds, self.key_group_range,
                                         part_bytes=self.snapshot_part_bytes,
                                         ttl_purges=purges,
                                         now_ms=self.ttl_clock.now_ms() if purges else 0)

    def _keeper(self, checkpoint_id: int,
                kinds: Dict[str, str]) -> Optional[Callable[[str], str]]:
        """What a checkpoint's writer calls to keep its directory for local recovery."""
        store = self.local_store
        if store is None:
            return None
        rng = (self.key_group_range.start, self.key_group_range.end)
        return lambda path: store.store(checkpoint_id, path, rng, dict(kinds))

    def _snapshot_native(
        self, checkpoint_id: int, kinds: Dict[str, str]
    ) -> "RocksDBNativeSnapshotWriter":
        """A checkpoint in RocksDB's native format: incremental (SST files shared with the
        confirmed base) or, without ``incremental``, full (every file private)."""
        incremental = self.incremental
        if not any(next(iter(cf.keys()), None) is not None for cf in self._cfs.values()):
            # no state, or states registered that hold no key: nothing to restore
            return RocksDBNativeSnapshotWriter(
                checkpoint_id, None, [], {}, self.key_group_range, {}, None, self.db_uid,
                shared_ssts=incremental,
            )
        for cf in self._cfs.values():
            cf.flush()
        os.makedirs(self._snapshot_dir, exist_ok=True)
        path = os.path.join(self._snapshot_dir, f"chk-{int(checkpoint_id)}")
        shutil.rmtree(path, ignore_errors=True)
        Checkpoint(self._db).create_checkpoint(path)
        files = sorted(os.listdir(path))
        with self._upload_lock:
            base = dict(self._confirmed) if incremental else {}
        return RocksDBNativeSnapshotWriter(
            checkpoint_id,
            path,
            files,
            kinds,
            self.key_group_range,
            base,
            self._record_uploads if incremental else None,
            self.db_uid,
            keep_local=self._keeper(checkpoint_id, kinds),
            shared_ssts=incremental,
            aborted=lambda: checkpoint_id in self._aborted,
        )

    def _record_uploads(self, checkpoint_id: int, sst_files: Dict[str, Tuple[str, int]]) -> None:
        with self._upload_lock:
            if checkpoint_id > self._confirmed_id:
                self._pending[checkpoint_id] = dict(sst_files)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: its SST uploads (recorded by its writer)
        become the base that later incremental checkpoints reference instead of uploading.
        Older unconfirmed uploads are forgotten. No-op for unknown or older ids. Local
        copies of earlier checkpoints are deleted."""
        if self.local_store is not None:
            self.local_store.confirm(checkpoint_id)
        with self._upload_lock:
            uploads = self._pending.pop(checkpoint_id, None)
            if uploads is None or checkpoint_id <= self._confirmed_id:
                return
            # a file uploaded again while an earlier upload was unconfirmed: the job master
            # keeps the first confirmed copy (SharedStateRegistry), so do we
            self._confirmed = {name: self._confirmed.get(name, up) for name, up in uploads.items()}
            self._confirmed_id = checkpoint_id
            for cid in [c for c in self._pending if c < checkpoint_id]:
                del self._pending[cid]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Forget the uploads (and the local copy) of an aborted checkpoint."""
        if self.local_store is not None:
            self.local_store.abort(checkpoint_id)
        with self._upload_lock:
            self._pending.pop(checkpoint_id, None)
            # its upload, if still running, stops at its next file (as a heap write does)
            self._aborted = {c for c in self._aborted if c > self._confirmed_id}
            self._aborted.add(checkpoint_id)

    def confirmed_sst_files(self) -> Dict[str, str]:
        """SST name -> remote path of the confirmed base (for tests and diagnostics)."""
        with self._upload_lock:
            return {name: p for name, (p, _) in self._confirmed.items()}

    def _replace_database(self, fill: Callable[[str], None], kinds: Dict[str, str]) -> None:
        """Replace the (empty) database by the files ``fill(folder)`` puts in its folder
        (nothing: a new empty database) holding the states ``kinds``, and open it."""
        for cf in self._cfs.values():  # column families before their database
            cf.close()
        self._cfs.clear()
        self._kinds.clear()
        db, self._db = self._db, None
        if db is not None:
            db.close()
        shutil.rmtree(self._db_path, ignore_errors=True)
        os.makedirs(self._db_path, exist_ok=True)
        fill(self._db_path)
        cfs = {name: _raw_options() for name in Rdict.list_cf(self._db_path) if name != "default"
               } if os.path.exists(os.path.join(self._db_path, "CURRENT")) else {}
        self._db = Rdict(self._db_path, _raw_options(), column_families=cfs)
        self._db.set_write_options(self._write_opts)
        for name, kind in kinds.items():
            cf = self._db.get_column_family(_CF_PREFIX + name)
            cf.set_write_options(self._write_opts)
            self._kinds[name] = StateKind(kind)
            self._cfs[name] = cf

    def _restore_locally(self, handle: Any, claimed: bool) -> bool:
        """Open the local copy of ``handle``'s checkpoint (task-local recovery); False if
        there is none that matches, or it cannot be opened (the database is then empty)."""
        store = self.local_store
        copy = store.find(handle.local_copy_id) if store is not None else None
        if copy is None or copy.key_group_range != (self.key_group_range.start,
                                                    self.key_group_range.end):
            return False
        try:
            self._replace_database(lambda folder: materialize(copy, folder), copy.kinds)
        except Exception as e:  # noqa: BLE001 - a damaged local copy: use checkpoint storage
            log.warning("flowray: local copy %s of checkpoint %d cannot be opened (%s: %s); "
                        "restoring from checkpoint storage", copy.directory,
                        copy.checkpoint_id, type(e).__name__, e)
            self._replace_database(lambda folder: None, {})
            return False
        if isinstance(handle, IncrementalKeyedStateHandle):
            self._adopt_base(handle, claimed)
        return True

    def _restore_incremental_in_place(
        self, handle: IncrementalKeyedStateHandle, read: Callable[[str], bytes],
        claimed: bool = True,
    ) -> None:
        """Replace the (empty) database by the checkpoint's files and reopen it."""
        self._replace_database(lambda folder: download_native(handle, read, folder),
                               handle.state_kinds)
        self._adopt_base(handle, claimed)

    def _adopt_base(self, handle: IncrementalKeyedStateHandle, claimed: bool) -> None:
        """The restored checkpoint's SST files become the confirmed base of the next
        incremental checkpoint (not claimed: it uploads every file again, into this job)."""
        sizes = handle.file_sizes
        with self._upload_lock:
            # not claimed: the next checkpoint uploads every file again, into this job
            self._confirmed = ({name: (p, sizes.get(p, 0)) for name, p in handle.shared.items()}
                               if claimed else {})
            self._confirmed_id = handle.checkpoint_id
            self._pending.clear()
            if handle.db_uid:
                self.db_uid = handle.db_uid

    def _restore_native_by_copy(
        self, handle: IncrementalKeyedStateHandle, read: Callable[[str], bytes]
    ) -> None:
        """Copy this backend's key groups out of a native checkpoint (rescaling)."""
        rng = handle.key_group_range.intersection(self.key_group_range)
        if not len(rng) or not handle.state_kinds:
            return
        with open_native_snapshot(handle, read, self.working_dir) as snapshot:
            batch = _BoundedWriteBatch(self._db, self._write_opts)
            for name, kind in snapshot.kinds.items():
                self._column_family(name, StateKind(kind))
                dst = self._db.get_column_family_handle(_CF_PREFIX + name)
                for k, v in snapshot.raw_items(name, rng):
                    batch.put(k, v, dst)
            batch.flush()

    def restore(self, handles: Sequence[Any], read: Callable[[str], bytes],
                claimed: bool = True) -> None:
        """Load this backend's key groups from full snapshots (any format version, heap or
        RocksDB written; read part by part, only the parts holding this backend's key
        groups) and native RocksDB checkpoints (full or incremental). One native checkpoint
        of exactly this backend's range, restored before any state is registered, replaces
        the database by the checkpoint's files (and its shared SST files become the
        confirmed base, so the next incremental checkpoint references them); otherwise
        (rescaling) the key groups of this backend are copied out of each checkpoint. With a
        ``local_store``, one handle of exactly this range whose local copy is on this node
        is opened from that copy and ``read`` is not called; :attr:`restored_from` tells
        which way it went."""
        if self._db is None:
            raise StateAccessError("cannot restore into a disposed backend")
        for acc in self._accessors.values():  # what they cached may be overwritten
            acc.invalidate()
        handles = [h for h in handles if h is not None]
        single = (len(handles) == 1 and handles[0].key_group_range == self.key_group_range
                  and not self._kinds)
        local_id = handles[0].local_copy_id if single else ""
        if self.local_store is not None:  # copies of other checkpoints are never restored
            self.local_store.retain_only(local_id)
        self.restored_from = "storage" if handles else None
        if single and local_id and self._restore_locally(handles[0], claimed):
            self.restored_from = "local"
            return
        if single and isinstance(handles[0], IncrementalKeyedStateHandle):
            self._restore_incremental_in_place(handles[0], read, claimed)
            return
        for handle in handles:
            if isinstance(handle, IncrementalKeyedStateHandle):
                self._restore_native_by_copy(handle, read)
            else:
                self._restore_full(handle.path, read)

    def _restore_full(self, path: str, read: Callable[[str], bytes]) -> None:
        """Copy this backend's key groups out of a full snapshot (any version, heap or
        RocksDB written), record by record; the database is written in bounded batches.
        v3 (RocksDB's) holds keys and values as RocksDB stores them: copied as they are."""
        snapshot = open_full_snapshot(path, read)
        kinds = snapshot.kinds
        pickled = snapshot.pickled  # RocksDB's value bytes are stored as they are
        batch = _BoundedWriteBatch(self._db, self._write_opts)
        cf_handles: Dict[str, Any] = {}

        def cf_handle_of(name: str) -> Any:
            cf_handle = cf_handles.get(name)
            if cf_handle is None:
                self._column_family(name, StateKind(kinds[name]))
                cf_handle = cf_handles[name] = self._db.get_column_family_handle(
                    _CF_PREFIX + name)
            return cf_handle

        if snapshot.encoded_keys:
            for _, name, keys, values in snapshot.raw_records(self.key_group_range):
                batch.put_run(keys, values, cf_handle_of(name))
            batch.flush()
            return
        for kg, name, entries in snapshot.records(self.key_group_range):
            cf_handle = cf_handle_of(name)
            prefix = self._prefixes[kg - self.key_group_range.start]
            for key, value in entries:
                batch.put(prefix + encode_key(key), value if pickled else encode_value(value),
                          cf_handle)
        batch.flush()

    def dispose(self, discard_local_state: bool = False) -> None:
        """Close the database and delete ``working_dir``; with ``discard_local_state``
        (the task finished: no attempt will restore it) also the local copies. Idempotent."""
        if discard_local_state and self.local_store is not None:
            self.local_store.discard_all()
        self._states.clear()
        for acc in self._accessors.values():
            acc.discard()
        self._accessors.clear()
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
