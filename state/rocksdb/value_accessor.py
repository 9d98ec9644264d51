""":class:`RocksDBValueAccessor`: one value state read and written by explicit
``(key, key_group)`` without setting a current key, one input batch at a time, with a
bounded write-behind cache in front of RocksDB (what ``KeyedReduceOperator`` and the keyed
aggregations use; docs/state.md, "RocksDB batching").

>>> import tempfile
>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
>>> backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, tempfile.mkdtemp())
>>> acc = backend.value_accessor("sums")
>>> keys = [acc.db_key(k, backend.assign_key_group(k)) for k in ("a", "b")]
>>> acc.get_many(keys)
[None, None]
>>> acc.write_many([(keys[0], ("a", 3))]); acc.get_many(keys)
[('a', 3), None]
>>> acc.pending_writes, backend.get_keys("sums") and acc.pending_writes
(1, 0)
>>> backend.dispose()
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Set, Tuple

from flowray.state.keyed_backend import StateAccessError
from flowray.state.rocksdb.layout import _CF_PREFIX, encode_key
from flowray.state.value_codec import PICKLE_TAG, decode_value, encode_value
from rocksdict import Rdict, WriteBatch

if TYPE_CHECKING:
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["RocksDBValueAccessor", "DEFAULT_CACHE_ENTRIES"]

_pickle_loads = pickle.loads  # value_codec's PICKLE_TAG encoding, inlined on the hot path

#: entries (database keys) an accessor keeps in its cache by default
DEFAULT_CACHE_ENTRIES = 1 << 16


class RocksDBValueAccessor:
    """Value state ``name`` by explicit ``(key, key_group)``: the backend-neutral form of
    the heap fast path ``table.maps[kg - start][key]``.

    Per record: :meth:`get`/:meth:`put`/:meth:`remove` read and write RocksDB at once
    (``put(key, kg, None)`` stores ``None``; it does not clear).

    Per batch: :meth:`db_key` gives a key's database key; :meth:`get_many` reads many
    (one multi-get for those not cached); :meth:`write_many` stores and deletes many. A
    cache of up to ``cache_entries`` database keys holds their stored bytes (never the
    value objects: reads return copies, as every RocksDB read) or that they have none;
    writes of :meth:`write_many` to cached keys stay in the cache and reach RocksDB in one
    write batch on :meth:`flush`. A full cache takes no new keys: they are read and
    written at once (so a cycle over more keys than fit still hits the cached ones). The
    backend flushes every accessor before a snapshot (and then empties a full cache, so
    the cached keys follow the keys in use) and before ``get_keys``/``iter_key_group``; a value
    state of the same name read per record (``get_partitioned_state``) sees these writes
    only after a flush, and writes to it must be followed by :meth:`invalidate`.
    ``cache_entries=0``: no cache, :meth:`write_many` writes through."""

    __slots__ = ("_backend", "_cf", "_name", "_start", "_end", "_prefixes", "_handle",
                 "_handle_db", "cache_entries", "_cache", "_dirty")

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str,
                 cache_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        if cache_entries < 0:
            raise ValueError(f"cache_entries must be >= 0, got {cache_entries}")
        self._backend = backend
        self._cf = cf
        self._name = name
        self._start = backend.key_group_range.start
        self._end = backend.key_group_range.end
        self._prefixes = backend._prefixes
        self._handle: Any = None
        self._handle_db: Any = None
        self.cache_entries = cache_entries
        #: database key -> stored bytes, or None: known to have no value
        self._cache: Dict[bytes, Optional[bytes]] = {}
        #: cached keys written (or deleted) since the last flush
        self._dirty: Set[bytes] = set()

    # -- per record --------------------------------------------------------------------
    def db_key(self, key: Any, key_group: int) -> bytes:
        """The database key of ``key`` in ``key_group`` (checked against the range)."""
        if not self._start <= key_group <= self._end:
            raise StateAccessError(
                f"state {self._name!r}: key {key!r} belongs to key group {key_group}, outside "
                f"this subtask's range [{self._start}, {self._end}]; is the key selector "
                "deterministic?"
            )
        return self._prefixes[key_group - self._start] + encode_key(key)

    def get(self, key: Any, key_group: int, default: Any = None) -> Any:
        k = self.db_key(key, key_group)
        raw = self._cache[k] if k in self._cache else self._cf.get(k)
        return default if raw is None else decode_value(raw)

    def put(self, key: Any, key_group: int, value: Any) -> None:
        k = self.db_key(key, key_group)
        data = encode_value(value)
        self._cf.put(k, data)
        if k in self._cache:
            self._cache[k] = data
            self._dirty.discard(k)

    def remove(self, key: Any, key_group: int) -> None:
        k = self.db_key(key, key_group)
        self._cf.delete(k)
        if k in self._cache:
            self._cache[k] = None
            self._dirty.discard(k)

    # -- per batch ---------------------------------------------------------------------
    def get_many(self, db_keys: List[bytes], default: Any = None) -> List[Any]:
        """The values of ``db_keys`` (from :meth:`db_key`; no duplicates) in order,
        ``default`` for a key with none; one multi-get for the keys not cached. Keys read
        while the cache is full are not cached."""
        if not db_keys:
            return []
        decode, cache, loads = decode_value, self._cache, _pickle_loads
        if not self.cache_entries:
            return [default if raw is None else loads(raw) if raw[0] == PICKLE_TAG else decode(raw)
                    for raw in self._cf.get(db_keys)]
        missing = [k for k in db_keys if k not in cache]
        extra: Dict[bytes, Optional[bytes]] = {}
        if missing:
            fetched = self._cf.get(missing)
            room = self.cache_entries - len(cache)
            if room >= len(missing):
                cache.update(zip(missing, fetched))
            else:
                room = max(room, 0)
                cache.update(zip(missing[:room], fetched[:room]))
                extra = dict(zip(missing[room:], fetched[room:]))
        out = []
        append = out.append
        for k in db_keys:
            raw = cache[k] if k in cache else extra[k]
            append(default if raw is None else loads(raw) if raw[0] == PICKLE_TAG else decode(raw))
        return out

    def write_many(self, puts: Iterable[Tuple[bytes, Any]],
                   deletes: Iterable[bytes] = ()) -> None:
        """Store each ``(db_key, value)`` of ``puts`` and delete ``deletes``: into the
        cache for cached keys (RocksDB on :meth:`flush`), the others in one write batch
        now."""
        encode = encode_value
        if not self.cache_entries:
            self._write([(k, encode(v)) for k, v in puts] + [(k, None) for k in deletes])
            return
        cache, dirty = self._cache, self._dirty
        through: List[Tuple[bytes, Optional[bytes]]] = []
        room = self.cache_entries - len(cache)
        for k, v in puts:
            if k in cache or room > 0:
                room -= k not in cache
                cache[k] = encode(v)
                dirty.add(k)
            else:
                through.append((k, encode(v)))
        for k in deletes:
            if k in cache:
                cache[k] = None
                dirty.add(k)
            else:
                through.append((k, None))
        self._write(through)

    @property
    def pending_writes(self) -> int:
        """Keys written to the cache and not yet to RocksDB."""
        return len(self._dirty)

    def flush(self, release_if_full: bool = False) -> None:
        """Write the cached writes to RocksDB (one write batch). The cache stays, unless
        it is full and ``release_if_full`` (the backend's snapshot: the keys cached next
        follow the keys in use)."""
        if self._dirty:
            cache = self._cache
            self._write([(k, cache[k]) for k in self._dirty])
            self._dirty.clear()
        if release_if_full and len(self._cache) >= self.cache_entries:
            self._cache.clear()

    def invalidate(self) -> None:
        """Flush, then forget the cache (after the state was written by other means)."""
        self.flush()
        self._cache.clear()

    def discard(self) -> None:
        """Forget the cache and its unwritten writes (the database was replaced)."""
        self._cache.clear()
        self._dirty.clear()

    def _write(self, entries: List[Tuple[bytes, Optional[bytes]]]) -> None:
        """One write batch: put each ``(key, bytes)``, delete each ``(key, None)``."""
        if not entries:
            return
        backend = self._backend
        db = backend._db
        if db is None:
            raise StateAccessError(f"state {self._name!r}: the backend is disposed")
        if self._handle_db is not db:  # an in-place restore reopens the database
            self._handle = db.get_column_family_handle(_CF_PREFIX + self._name)
            self._handle_db = db
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._handle)
        put, delete = batch.put, batch.delete
        for k, data in entries:
            if data is None:
                delete(k)
            else:
                put(k, data)
        db.write(batch, backend._write_opts)
