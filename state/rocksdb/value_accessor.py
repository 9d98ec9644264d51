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

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Set, Tuple

from flowray.state.keyed_backend import StateAccessError
from flowray.state.rocksdb.layout import _CF_PREFIX, encode_key
from flowray.state.value_codec import _MSGPACK_TYPES, decode_value, encode_value
from rocksdict import Rdict, WriteBatch

if TYPE_CHECKING:
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["RocksDBValueAccessor", "DEFAULT_CACHE_ENTRIES", "DEFAULT_KEY_MEMO_ENTRIES"]

#: entries (database keys) an accessor keeps in its cache by default
DEFAULT_CACHE_ENTRIES = 1 << 16
#: user keys whose database key an accessor remembers (:meth:`RocksDBValueAccessor.db_keys`)
DEFAULT_KEY_MEMO_ENTRIES = 1 << 16

_SCALARS = _MSGPACK_TYPES
_is_scalars = _SCALARS.issuperset
_STR_ONLY = {str}
_T_STR = 0x12  # layout's tag of a str key
_LENGTH_BYTE = [bytes((n,)) for n in range(0x80)]


class _Absent:
    """The cache's mark of a key known to have no value."""

    __slots__ = ()


_ABSENT = _Absent()


class _Stored:
    """A cached mutable value: its stored bytes (every read decodes a fresh copy)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _cached(value: Any) -> Any:
    """The cache entry of ``value``: itself when immutable (plain scalars and tuples of
    them: value_codec.is_plain_value), else its stored bytes."""
    return value if _is_immutable(value) else _Stored(encode_value(value))


def _stored(entry: Any) -> Optional[bytes]:
    """The bytes RocksDB stores for a cache entry (``None``: delete)."""
    if entry is _ABSENT:
        return None
    if type(entry) is _Stored:
        return entry.data
    return encode_value(entry)


class RocksDBValueAccessor:
    """Value state ``name`` by explicit ``(key, key_group)``: the backend-neutral form of
    the heap fast path ``table.maps[kg - start][key]``.

    Per record: :meth:`get`/:meth:`put`/:meth:`remove` read and write RocksDB at once
    (``put(key, kg, None)`` stores ``None``; it does not clear).

    Per batch: :meth:`db_keys` gives the database keys of a batch's keys (remembering
    those of up to ``key_memo_entries`` keys); :meth:`get_many` reads many (one multi-get
    for those not cached); :meth:`write_many` stores and deletes many. A cache of up to
    ``cache_entries`` database keys holds their values -- immutable ones (plain scalars and
    flat tuples of them) as they are, others as their stored bytes (reads of those return
    fresh copies, as every RocksDB read) -- or that they have none; writes of
    :meth:`write_many` to cached keys stay in the cache and reach RocksDB, encoded, in one
    write batch on :meth:`flush`. A full cache takes no new keys: they are read and
    written at once (so a cycle over more keys than fit still hits the cached ones). The
    backend flushes every accessor before a snapshot (and then empties a full cache, so
    the cached keys follow the keys in use) and before ``get_keys``/``iter_key_group``; a value
    state of the same name read per record (``get_partitioned_state``) sees these writes
    only after a flush, and writes to it must be followed by :meth:`invalidate`.
    ``cache_entries=0``: no cache, :meth:`write_many` writes through."""

    __slots__ = ("_backend", "_cf", "_name", "_start", "_end", "_prefixes", "_str_heads",
                 "_handle", "_handle_db", "cache_entries", "_cache", "_dirty",
                 "key_memo_entries", "_memo")

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str,
                 cache_entries: int = DEFAULT_CACHE_ENTRIES,
                 key_memo_entries: int = DEFAULT_KEY_MEMO_ENTRIES) -> None:
        if cache_entries < 0:
            raise ValueError(f"cache_entries must be >= 0, got {cache_entries}")
        if key_memo_entries < 0:
            raise ValueError(f"key_memo_entries must be >= 0, got {key_memo_entries}")
        self._backend = backend
        self._cf = cf
        self._name = name
        self._start = backend.key_group_range.start
        self._end = backend.key_group_range.end
        self._prefixes = backend._prefixes
        #: per key group of the range: its prefix and the tag of a str key
        self._str_heads = [p + bytes((_T_STR,)) for p in self._prefixes]
        self._handle: Any = None
        self._handle_db: Any = None
        self.cache_entries = cache_entries
        #: database key -> value (immutable), _Stored (mutable) or _ABSENT (known to have none)
        self._cache: Dict[bytes, Any] = {}
        #: cached keys written (or deleted) since the last flush
        self._dirty: Set[bytes] = set()
        self.key_memo_entries = key_memo_entries
        #: user key -> database key, for the keys seen lately
        self._memo: Dict[Any, bytes] = {}

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
        if k in self._cache:
            entry = self._cache[k]
            if entry is _ABSENT:
                return default
            return decode_value(entry.data) if type(entry) is _Stored else entry
        raw = self._cf.get(k)
        return default if raw is None else decode_value(raw)

    def put(self, key: Any, key_group: int, value: Any) -> None:
        k = self.db_key(key, key_group)
        data = encode_value(value)
        self._cf.put(k, data)
        if k in self._cache:
            self._cache[k] = _cached(value)
            self._dirty.discard(k)

    def remove(self, key: Any, key_group: int) -> None:
        k = self.db_key(key, key_group)
        self._cf.delete(k)
        if k in self._cache:
            self._cache[k] = _ABSENT
            self._dirty.discard(k)

    # -- per batch ---------------------------------------------------------------------
    def db_keys(self, keys: List[Any], key_groups: List[int]) -> List[bytes]:
        """The database keys of ``keys`` in their ``key_groups`` (as :meth:`db_key`, every
        key group checked against the range before any key is encoded)."""
        if not keys:
            return []
        if min(key_groups) < self._start or max(key_groups) > self._end:
            for k, kg in zip(keys, key_groups):
                self.db_key(k, kg)  # raises for the first outside the range
        memo = self._memo
        try:
            got = [memo.get(k) for k in keys]
        except TypeError:  # an unhashable key: db_key says what is wrong with it
            return [self.db_key(k, kg) for k, kg in zip(keys, key_groups)]
        if None not in got:
            return got
        out: Optional[List[bytes]] = None
        if set(map(type, keys)) == _STR_ONLY:
            data = [k.encode("utf-8", "surrogatepass") for k in keys]
            if max(map(len, data)) < 0x80:  # the one-byte length of layout.encode_key
                heads, start, length = self._str_heads, self._start, _LENGTH_BYTE
                out = [heads[kg - start] + length[len(d)] + d for kg, d in zip(key_groups, data)]
        if out is None:
            out = [g if g is not None else self.db_key(k, kg)
                   for g, k, kg in zip(got, keys, key_groups)]
        if self.key_memo_entries:
            if len(memo) + len(keys) > self.key_memo_entries:
                memo.clear()
            if len(keys) <= self.key_memo_entries:
                memo.update(zip(keys, out))
        return out

    def get_many(self, db_keys: List[bytes], default: Any = None) -> List[Any]:
        """The values of ``db_keys`` (from :meth:`db_key`; no duplicates) in order,
        ``default`` for a key with none; one multi-get for the keys not cached. Keys read
        while the cache is full are not cached."""
        if not db_keys:
            return []
        decode, absent, stored = decode_value, _ABSENT, _Stored
        if not self.cache_entries:
            return [default if raw is None else decode(raw) for raw in self._cf.get(db_keys)]
        cache = self._cache
        missing = [k for k in db_keys if k not in cache]
        if not missing:
            return [default if e is absent else decode(e.data) if type(e) is stored else e
                    for e in map(cache.__getitem__, db_keys)]
        fetched = self._cf.get(missing)
        values = [default if raw is None else decode(raw) for raw in fetched]
        room = self.cache_entries - len(cache)
        if room > 0:
            for k, raw, v in zip(missing[:room], fetched[:room], values[:room]):
                cache[k] = absent if raw is None else v if _is_immutable(v) else stored(raw)
        if len(missing) == len(db_keys):
            return values
        read = dict(zip(missing, values))
        out = []
        append = out.append
        for k in db_keys:
            if k in read:
                append(read[k])
            else:
                e = cache[k]
                append(default if e is absent else decode(e.data) if type(e) is stored else e)
        return out

    def write_many(self, puts: Iterable[Tuple[bytes, Any]],
                   deletes: Iterable[bytes] = ()) -> None:
        """Store each ``(db_key, value)`` of ``puts`` and delete ``deletes``: into the
        cache for cached keys (RocksDB on :meth:`flush`), the others in one write batch
        now."""
        puts = puts if isinstance(puts, list) else list(puts)
        deletes = deletes if isinstance(deletes, list) else list(deletes)
        if not self.cache_entries:
            self._write(puts, deletes)
            return
        cache, dirty = self._cache, self._dirty
        room = self.cache_entries - len(cache)
        if room >= len(puts) + len(deletes):  # all fit: cached or new
            into, through = puts, []
        else:
            new = [p for p in puts if p[0] not in cache]
            if not new:
                into, through = puts, []
            elif room <= 0 and len(new) == len(puts):  # a full cache, no key of it
                into, through = [], puts
            else:
                take = max(room, 0)
                into = [p for p in puts if p[0] in cache] + new[:take]
                through = new[take:]
                room -= len(new[:take])
        if into:
            scalars, is_scalars, stored, encode = _SCALARS, _is_scalars, _Stored, encode_value
            cache.update([(k, v if (t := type(v)) in scalars  # _is_immutable(v), inlined
                           or (t is tuple and is_scalars(map(type, v))) else stored(encode(v)))
                          for k, v in into])
            dirty.update([k for k, _ in into])
        gone: List[bytes] = []
        for k in deletes:
            if k in cache or room > 0:
                room -= k not in cache
                cache[k] = _ABSENT
                dirty.add(k)
            else:
                gone.append(k)
        self._write(through, gone)

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
            self._write_stored([(k, _stored(cache[k])) for k in self._dirty])
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

    def _batch(self) -> Tuple[Any, WriteBatch]:
        backend = self._backend
        db = backend._db
        if db is None:
            raise StateAccessError(f"state {self._name!r}: the backend is disposed")
        if self._handle_db is not db:  # an in-place restore reopens the database
            self._handle = db.get_column_family_handle(_CF_PREFIX + self._name)
            self._handle_db = db
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._handle)
        return db, batch

    def _write(self, puts: List[Tuple[bytes, Any]], deletes: List[bytes]) -> None:
        """One write batch: put each ``(key, value)`` (encoded), delete each of ``deletes``."""
        if not puts and not deletes:
            return
        db, batch = self._batch()
        put, encode = batch.put, encode_value
        for k, v in puts:
            put(k, encode(v))
        for k in deletes:
            batch.delete(k)
        db.write(batch, self._backend._write_opts)

    def _write_stored(self, entries: List[Tuple[bytes, Optional[bytes]]]) -> None:
        """One write batch: put each ``(key, bytes)``, delete each ``(key, None)``."""
        if not entries:
            return
        db, batch = self._batch()
        put, delete = batch.put, batch.delete
        for k, data in entries:
            if data is None:
                delete(k)
            else:
                put(k, data)
        db.write(batch, self._backend._write_opts)


def _is_immutable(value: Any) -> bool:
    """value_codec.is_plain_value, inlined: plain scalars and flat tuples of them."""
    t = type(value)
    return t in _SCALARS or (t is tuple and _is_scalars(map(type, value)))
