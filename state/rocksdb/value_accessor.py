""":class:`RocksDBValueAccessor`: one value state read and written by explicit
``(key, key_group)`` without setting a current key, one input batch at a time, with a
bounded write-behind cache in front of RocksDB keyed by the user's keys, as the heap
backend's maps are (what ``KeyedReduceOperator`` and the keyed aggregations use;
docs/state.md, "RocksDB batching").

>>> import tempfile
>>> from flowray.state.key_groups import KeyGroupRange
>>> from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
>>> backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, tempfile.mkdtemp())
>>> acc = backend.value_accessor("sums")
>>> keys = ["a", "b", "a"]
>>> kgs = [backend.assign_key_group(k) for k in keys]
>>> acc.load(keys, kgs)
(['a', 'b', 'a'], {'a': None, 'b': None})
>>> acc.store({"a": ("a", 3), "b": None}); acc.load(keys, kgs)[1]
{'a': ('a', 3), 'b': None}
>>> acc.pending_writes  # "b" was absent and stays absent: nothing to write for it
1
>>> backend.get_keys("sums") and acc.pending_writes
0
>>> backend.dispose()
"""

from __future__ import annotations

from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from rocksdict import Rdict, WriteBatch

from flowray.common.native import native
from flowray.common.sentinels import MISSING
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
from flowray.state.keyed_backend import StateAccessError
from flowray.state.rocksdb.layout import _CF_PREFIX, encode_key
from flowray.state.value_codec import (
    _MSGPACK_TYPES,
    _SCALARS_NOT_NONE,
    _TUPLE_ONLY,
    decode_value,
    decode_values,
    encode_value,
    encode_values,
)

if TYPE_CHECKING:
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["RocksDBValueAccessor", "DEFAULT_CACHE_ENTRIES"]

#: keys an accessor keeps in its cache by default
DEFAULT_CACHE_ENTRIES = 1 << 16

_SCALARS = _MSGPACK_TYPES
_is_scalars = _SCALARS.issuperset
#: value types :meth:`RocksDBValueAccessor.store` caches as they are (``None`` clears)
_KEPT_SCALARS = _SCALARS_NOT_NONE
_KEPT_OR_TUPLE = _KEPT_SCALARS | {tuple}
_NONE_TYPE = type(None)
_STR_ONLY = {str}
_T_STR = 0x12  # layout's tag of a str key
_LENGTH_BYTE = [bytes((n,)) for n in range(0x80)]


class _Absent:
    """The cache's mark of a key known to have no value."""

    __slots__ = ()


_ABSENT = _Absent()


_MISSING = MISSING   # load()'s mark of a key not in the cache
_Missing = type(MISSING)   # its type: a batch's entries are told apart by type


class _Stored:
    """A cached mutable value: its stored bytes (every read decodes a fresh copy)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _fold_cached_py(records: List[Any], key_groups: List[int], start: int, end: int,
                    key_of: Callable[[Any], Any], reduce: Callable[[Any, Any], Any],
                    cache: Dict[Any, Any], dirty: Optional[Set[Any]], absent: Any,
                    stored_type: type
                    ) -> Tuple[List[Any], Optional[List[Any]], bool]:
    """The pure-Python twin of ``_value_cache.fold_cached`` (whose docstring is the
    contract): ``(keys, values, plain)``, ``values`` None when the batch does not fold in
    the cache (a key not cached, or cached as stored bytes; a key not of a plain type; a
    key group outside ``[start, end]``), and then nothing changed."""
    keys = [key_of(r) for r, _ in zip(records, key_groups)]
    plain_keys, missing = PLAIN_KEY_TYPES, _MISSING
    for k, kg in zip(keys, key_groups):
        if (type(kg) is not int or not start <= kg <= end or type(k) not in plain_keys
                or type(cache.get(k, missing)) in (_Missing, stored_type)):
            return keys, None, True
    out: List[Any] = []
    append = out.append
    plain = True
    for r, k in zip(records, keys):
        cur = cache[k]
        value = r if cur is absent else reduce(cur, r)
        if plain and not _is_immutable(value):
            plain = False
        cache[k] = absent if value is None else value
        if dirty is not None:
            dirty.add(k)
        append(value)
    return keys, out, plain


#: the C half of fold_cached (state/_value_cache.c), or None: its twin above
_value_cache: Any = native("flowray.state._value_cache")
_fold_cached = _value_cache.fold_cached if _value_cache is not None else _fold_cached_py


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


def _read(entry: Any, default: Any) -> Any:
    """What a read of a cache entry returns (a fresh copy of a mutable value)."""
    if entry is _ABSENT:
        return default
    return decode_value(entry.data) if type(entry) is _Stored else entry


class RocksDBValueAccessor:
    """Value state ``name`` by explicit ``(key, key_group)``: the backend-neutral form of
    the heap fast path ``table.maps[kg - start][key]``.

    Per record: :meth:`get`/:meth:`put`/:meth:`remove` read and write RocksDB at once
    (``put(key, kg, None)`` stores ``None``; it does not clear).

    Per batch: :meth:`load` reads the values of a batch's distinct keys (one multi-get
    for those not cached) into a dict; the caller folds the batch into that dict and hands
    it to :meth:`store` (``None``: clear the key, as ``ValueState.update(None)``). A cache
    of up to ``cache_entries`` keys, keyed by the user's keys (:func:`canonical_key` of
    each, as the heap backend keeps them), holds their values -- immutable ones (plain
    scalars and flat tuples of them) as they are, others as their stored bytes (reads of
    those return fresh copies, as every RocksDB read) -- or that they have none, with
    their database keys (encoded once, when first read). :meth:`store` leaves its writes
    in the cache; they reach RocksDB, encoded, in one write batch on :meth:`flush`. A
    full cache takes no new keys: they are read at once and :meth:`store` writes them at
    once (so a cycle over more keys than fit still hits the cached ones). The backend
    flushes every accessor before a snapshot (and then empties a full cache, so the cached
    keys follow the keys in use) and before ``get_keys``/``iter_key_group``; a value state
    of the same name read per record (``get_partitioned_state``) sees these writes only
    after a flush, and writes to it must be followed by :meth:`invalidate`.
    ``cache_entries=0``: no cache, every batch read and written at once."""

    __slots__ = ("_backend", "_cf", "_name", "_start", "_end", "_prefixes", "_str_heads",
                 "_handle", "_handle_db", "cache_entries", "_cache", "_db_keys", "_flushed",
                 "_uncached", "_loaded")

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
        #: per key group of the range: its prefix and the tag of a str key
        self._str_heads = [p + bytes((_T_STR,)) for p in self._prefixes]
        self._handle: Any = None
        self._handle_db: Any = None
        self.cache_entries = cache_entries
        #: key -> value (immutable), _Stored (mutable) or _ABSENT (known to have none)
        self._cache: Dict[Any, Any] = {}
        #: key -> database key, for every key of the cache
        self._db_keys: Dict[Any, bytes] = {}
        #: key -> the cache entry RocksDB holds (as of the last flush, read or write
        #: through), for every key of the cache: a key whose entry is not this very object
        #: was written since, and its write is not in RocksDB yet. Entries are immutable
        #: (values kept as they are are plain; others are _Stored), so the same object is
        #: the same value, and a batch's fold marks nothing per record
        self._flushed: Dict[Any, Any] = {}
        #: keys of the last load that did not fit in the cache -> their database keys
        self._uncached: Dict[Any, bytes] = {}
        #: the dict the last load returned
        self._loaded: Optional[Dict[Any, Any]] = None

    # -- per record --------------------------------------------------------------------
    def db_key(self, key: Any, key_group: int) -> bytes:
        """The database key of ``key`` in ``key_group`` (checked against the range)."""
        self._check_range(key, key_group)
        return self._prefixes[key_group - self._start] + encode_key(key)

    def _check_range(self, key: Any, key_group: int) -> None:
        if not self._start <= key_group <= self._end:
            raise StateAccessError(
                f"state {self._name!r}: key {key!r} belongs to key group {key_group}, outside "
                f"this subtask's range [{self._start}, {self._end}]; is the key selector "
                "deterministic?"
            )

    def get(self, key: Any, key_group: int, default: Any = None) -> Any:
        dk = self.db_key(key, key_group)
        entry = self._cache.get(canonical_key(key), _MISSING)
        if entry is not _MISSING:
            return _read(entry, default)
        raw = self._cf.get(dk)
        return default if raw is None else decode_value(raw)

    def put(self, key: Any, key_group: int, value: Any) -> None:
        self._cf.put(self.db_key(key, key_group), encode_value(value))
        self._replace_cached(canonical_key(key), value, _cached)

    def remove(self, key: Any, key_group: int) -> None:
        self._cf.delete(self.db_key(key, key_group))
        self._replace_cached(canonical_key(key), _ABSENT, lambda entry: entry)

    def _replace_cached(self, key: Any, value: Any, entry_of: Any) -> None:
        """After a write through: the cache of ``key`` (if cached) holds what RocksDB does."""
        if key in self._cache:
            self._cache[key] = self._flushed[key] = entry_of(value)

    # -- per batch ---------------------------------------------------------------------
    def fold_cached(self, records: List[Any], key_groups: List[int],
                    key_of: Callable[[Any], Any], reduce: Callable[[Any, Any], Any]
                    ) -> Tuple[List[Any], Optional[List[Any]]]:
        """``(keys, values)``: fold a batch straight into the cache when every key of it is
        cached (as a value or as known to have none) and of a plain key type, and every
        key group in the range; ``keys`` are ``key_of`` of each record, ``values`` the new
        value of each (``None`` clears the key), or ``None`` when the batch did not fold
        and nothing changed (then :meth:`load` the keys, fold and :meth:`store`). The same
        effects as :meth:`load`, the fold and :meth:`store`: the writes are left in the
        cache, a mutable value kept as its stored bytes. An error raised by ``reduce`` ends
        the fold with it, the records before it folded."""
        self._uncached = {}
        self._loaded = None
        cache = self._cache
        keys, out, plain = _fold_cached(records, key_groups, self._start, self._end, key_of,
                                        reduce, cache, None, _ABSENT, _Stored)
        if not plain:
            for k in dict.fromkeys(keys):
                entry = cache[k]
                if entry is not _ABSENT and not _is_immutable(entry):
                    cache[k] = _Stored(encode_value(entry))
        return keys, out

    def load(self, keys: List[Any], key_groups: List[int]
             ) -> Tuple[List[Any], Dict[Any, Any]]:
        """``(keys as kept, values)``: ``keys`` each as :func:`canonical_key` gives it (the
        list itself when every key is of a plain type) and a dict of each distinct key to
        its value, ``None`` when it has none. Every key group is checked against the range
        before anything is read; a key of a type that is not a key type raises
        :class:`~flowray.state.key_types.UnsupportedKeyError`. Hand the dict, its values
        replaced or updated, to :meth:`store`."""
        self._uncached = {}
        self._loaded = None
        if not keys:
            self._loaded = {}
            return keys, self._loaded
        if min(key_groups) < self._start or max(key_groups) > self._end:
            for k, kg in zip(keys, key_groups):
                self._check_range(k, kg)  # raises for the first outside the range
        if not PLAIN_KEY_TYPES.issuperset(map(type, keys)):
            keys = [canonical_key(k) for k in keys]
        values = dict.fromkeys(keys)
        entries = list(map(self._cache.get, values, repeat(_MISSING)))
        kinds = set(map(type, entries))
        if _Missing in kinds:
            entries = self._fetch(list(values), entries, keys, key_groups, len(kinds) == 1)
            kinds = set(map(type, entries))
        if _Stored in kinds or _Absent in kinds:
            entries = [_read(e, None) for e in entries]
        values = self._loaded = dict(zip(values, entries))
        return keys, values

    def _fetch(self, distinct: List[Any], entries: List[Any], keys: List[Any],
               key_groups: List[int], none_cached: bool) -> List[Any]:
        """``entries`` with those of the keys not cached read from RocksDB (one multi-get;
        as many as fit cached, the rest remembered as not cached). ``none_cached``: no
        key of ``distinct`` is cached (the common case with many keys)."""
        missing = distinct if none_cached else [k for k, e in zip(distinct, entries)
                                                if e is _MISSING]
        if len(missing) == len(keys):  # every key once, in order
            groups = key_groups
        else:
            group_of = dict(zip(keys, key_groups))
            groups = [group_of[k] for k in missing]
        db_keys = self._encode(missing, groups)
        fetched = self._cf.get(db_keys)
        if None in fetched:
            read = [_ABSENT if raw is None else decode_value(raw) for raw in fetched]
        else:
            read = decode_values(fetched)
        room = max(0, self.cache_entries - len(self._cache))
        if room:
            cache, known, flushed = self._cache, self._db_keys, self._flushed
            for k, dk, raw, value in zip(missing[:room], db_keys[:room], fetched[:room],
                                         read[:room]):
                cache[k] = flushed[k] = (_ABSENT if raw is None else
                                         value if _is_immutable(value) else _Stored(raw))
                known[k] = dk
        if len(missing) > room:
            self._uncached.update(zip(missing[room:], db_keys[room:]))
        if none_cached:
            return read
        it = iter(read)
        return [next(it) if e is _MISSING else e for e in entries]

    def _encode(self, keys: List[Any], key_groups: List[int]) -> List[bytes]:
        """The database keys of ``keys`` (canonical, their key groups in the range)."""
        if set(map(type, keys)) == _STR_ONLY:
            data = [k.encode("utf-8", "surrogatepass") for k in keys]
            if max(map(len, data)) < 0x80:  # the one-byte length of layout.encode_key
                heads, start, length = self._str_heads, self._start, _LENGTH_BYTE
                return [heads[kg - start] + length[len(d)] + d for kg, d in zip(key_groups, data)]
        prefixes, start = self._prefixes, self._start
        return [prefixes[kg - start] + encode_key(k) for k, kg in zip(keys, key_groups)]

    def store(self, values: Dict[Any, Any]) -> None:
        """Write ``values`` (the dict the last :meth:`load` returned, values replaced;
        ``None`` clears the key): into the cache, the keys that did not fit at once."""
        if values is not self._loaded and not values.keys() <= (self._loaded or {}).keys():
            raise ValueError(f"state {self._name!r}: store() takes the keys of the last "
                             "load() only")
        if self._uncached and values is self._loaded and len(self._uncached) == len(values):
            # no key fit in the cache (the common case with many keys): all written at once,
            # as they are (_write_entries encodes them; only None needs its mark)
            entries = list(values.values())
            if _NONE_TYPE in set(map(type, entries)):
                entries = [_ABSENT if v is None else v for v in entries]
            self._write_entries(list(self._uncached.values()), entries)
            self._loaded = None
            return
        kinds = set(map(type, values.values()))
        if not _KEPT_SCALARS.issuperset(kinds):  # else every value is kept as it is
            kept = False
            if _KEPT_OR_TUPLE.issuperset(kinds):
                tuples = (values.values() if kinds == _TUPLE_ONLY else
                          [v for v in values.values() if type(v) is tuple])
                kept = _is_scalars(map(type, chain.from_iterable(tuples)))
            if not kept:
                values = {k: _ABSENT if v is None else _cached(v) for k, v in values.items()}
        if self._uncached:
            uncached = self._uncached
            through = [k for k in uncached if k in values]
            self._write_entries([uncached[k] for k in through], [values[k] for k in through])
            values = {k: v for k, v in values.items() if k not in uncached}
        self._cache.update(values)
        self._loaded = None

    @property
    def pending_writes(self) -> int:
        """Keys written to the cache and not yet to RocksDB (a write of the very value
        RocksDB holds is none)."""
        return len(self._unflushed())

    def _unflushed(self) -> List[Any]:
        """The cached keys whose entries are not the ones RocksDB holds."""
        flushed, missing = self._flushed, _MISSING
        return [k for k, entry in self._cache.items() if flushed.get(k, missing) is not entry]

    def flush(self, release_if_full: bool = False) -> None:
        """Write the cached writes to RocksDB (one write batch). The cache stays, unless
        it is full and ``release_if_full`` (the backend's snapshot: the keys cached next
        follow the keys in use)."""
        unflushed = self._unflushed()
        if unflushed:
            cache = self._cache
            self._write_entries(list(map(self._db_keys.__getitem__, unflushed)),
                                list(map(cache.__getitem__, unflushed)))
            self._flushed = cache.copy()
        if release_if_full and len(self._cache) >= self.cache_entries:
            self._forget()

    def invalidate(self) -> None:
        """Flush, then forget the cache (after the state was written by other means)."""
        self.flush()
        self._forget()

    def discard(self) -> None:
        """Forget the cache and its unwritten writes (the database was replaced)."""
        self._forget()

    def _forget(self) -> None:
        self._cache.clear()
        self._flushed.clear()
        self._db_keys.clear()
        self._uncached = {}
        self._loaded = None

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

    def _write_entries(self, db_keys: List[bytes], entries: List[Any]) -> None:
        """One write batch: each of ``db_keys`` gets its cache entry of ``entries`` (a
        value, a _Stored or _ABSENT: a delete); values encoded as one batch."""
        if not db_keys:
            return
        kinds = set(map(type, entries))
        db, batch = self._batch()
        if _Absent in kinds or _Stored in kinds:
            put, delete = batch.put, batch.delete
            for k, entry in zip(db_keys, entries):
                data = _stored(entry)
                if data is None:
                    delete(k)
                else:
                    put(k, data)
        else:
            list(map(batch.put, db_keys, encode_values(entries)))
        db.write(batch, self._backend._write_opts)


def _is_immutable(value: Any) -> bool:
    """value_codec.is_plain_value, inlined: plain scalars and flat tuples of them."""
    t = type(value)
    return t in _SCALARS or (t is tuple and _is_scalars(map(type, value)))
