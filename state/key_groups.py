"""Key groups, exactly as Flink's ``KeyGroupRangeAssignment``.

A key maps to a key group with a *stable* hash (never Python's salted ``hash()``), and
subtask ``i`` of ``p`` owns the contiguous range
``[ceil(i * maxp / p), ceil((i + 1) * maxp / p) - 1]``. Rescaling moves whole key groups.

>>> r = compute_key_group_range_for_operator_index(128, 3, 1)
>>> (r.start, r.end)
(43, 85)
>>> compute_operator_index_for_key_group(128, 3, 43)
1
>>> assign_to_key_group("user-7", 128) == assign_to_key_group("user-7", 128)
True
"""

from __future__ import annotations

import datetime as _dt
import struct
import zlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Optional

from flowray.common.native import native
from flowray.state.key_types import CANONICAL_NAN, identity_form, temporal_bytes

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "stable_hash",
    "assign_to_key_group",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "check_parallelism_preconditions",
    "KeyGroupAssigner",
]

DEFAULT_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_MASK32 = 0xFFFFFFFF
_pack_double = struct.Struct("<d").pack
_crc32 = zlib.crc32


def _fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finalizer: spreads every input bit over the output."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def stable_hash(key: Any) -> int:
    """A 32-bit hash of ``key`` that is the same in every process, run and machine, and
    the same for keys that are one key (:mod:`flowray.state.key_types`: ``1``, ``1.0``,
    ``True`` and ``Decimal("1")`` hash alike; every NaN hashes alike).

    Every key type of :mod:`flowray.state.key_types` is supported; any other raises
    :class:`~flowray.state.key_types.UnsupportedKeyError` naming the type, because a hash
    that differs between processes would route one key to two subtasks. The values for
    ``str``, ``bytes``, ``int``, ``bool``, ``float``, ``None`` and tuples of them never change
    (they place the key groups of existing checkpoints).
    """
    t = type(key)
    if t is str:
        return _crc32(key.encode("utf-8", "surrogatepass"))
    if t is int or t is bool:
        k = int(key)
        if -0x8000000000000000 <= k < 0x8000000000000000:
            return (k ^ (k >> 32)) & _MASK32
        return _crc32(k.to_bytes((k.bit_length() + 8) // 8, "little", signed=True))
    if t is bytes or t is bytearray or t is memoryview:
        return _crc32(key)
    if t is tuple or isinstance(key, tuple):
        h = 17
        for item in key:
            h = (h * 31 + stable_hash(item)) & _MASK32
        return _fmix32(h)
    if t is float:
        if key.is_integer():
            return stable_hash(int(key))
        if key != key:
            return _NAN_HASH
        return _crc32(_pack_double(key))
    if key is None:
        return 0
    form = identity_form(key)  # raises UnsupportedKeyError for what is not a key
    if type(form) in _PLAIN_FORMS:
        return stable_hash(form)
    return _crc32(temporal_bytes(form))


_NAN_HASH = _crc32(_pack_double(CANONICAL_NAN))
_PLAIN_FORMS = frozenset({str, int, bytes, float, tuple, type(None)})


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """Key group of a key whose :func:`stable_hash` is ``key_hash``."""
    return _fmix32(key_hash & _MASK32) % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group ``key`` belongs to, in ``[0, max_parallelism)``."""
    return _fmix32(stable_hash(key)) % max_parallelism


@dataclass(frozen=True)
class KeyGroupRange:
    """An inclusive range of key groups ``[start, end]``; empty when ``end < start``."""

    start: int
    end: int

    @classmethod
    def empty(cls) -> "KeyGroupRange":
        return cls(0, -1)

    @classmethod
    def of(cls, start: int, end: int) -> "KeyGroupRange":
        return cls(start, end)

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: "KeyGroupRange") -> "KeyGroupRange":
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


def check_parallelism_preconditions(max_parallelism: int, parallelism: int) -> None:
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"max parallelism must be in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {max_parallelism}"
        )
    if not 0 < parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism must be in [1, max parallelism {max_parallelism}], got {parallelism}"
        )


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The key groups owned by subtask ``operator_index`` of ``parallelism``."""
    check_parallelism_preconditions(max_parallelism, parallelism)
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator index {operator_index} outside [0, {parallelism})")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def compute_operator_index_for_key_group(
    max_parallelism: int, parallelism: int, key_group: int
) -> int:
    """The subtask of ``parallelism`` that owns ``key_group``."""
    return key_group * parallelism // max_parallelism


_CACHEABLE = frozenset({str, int, bool, float, bytes, tuple, Decimal, _dt.date, _dt.datetime,
                        _dt.time, _dt.timedelta})

#: below this many keys a batch is assigned key by key (numpy's per-call cost dominates)
_VECTOR_MIN = 16
_INT64_MIN, _INT64_MAX = -0x8000000000000000, 0x7FFFFFFFFFFFFFFF
_np: Any = None  # numpy, imported on first use: `import flowray` does not import it


def _numpy() -> Any:
    global _np
    if _np is None:
        import numpy

        _np = numpy
    return _np


def _fmix32_array(h: Any) -> Any:
    """:func:`_fmix32` of every element of a ``uint32`` array (wrapping multiplication)."""
    h = h ^ (h >> 16)
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16
    return h


def _str_key_groups(keys: List[str], max_parallelism: int) -> Optional[List[int]]:
    """Key groups of ``str`` keys: CRC-32 of the UTF-8 bytes in C, then the finalizer
    vectorized; ``None`` when a key has a lone surrogate (the caller goes key by key)."""
    np = _numpy()
    try:
        crcs = [_crc32(k.encode()) for k in keys]
    except UnicodeEncodeError:
        return None
    h = np.array(crcs, dtype=np.uint32)
    return (_fmix32_array(h) % max_parallelism).tolist()


def _int_key_groups(keys: List[int], max_parallelism: int) -> Optional[List[int]]:
    """Key groups of ``int`` keys (not bools), folded and mixed exactly as
    :func:`stable_hash` does, in numpy; ``None`` when a key is outside 64 bits."""
    np = _numpy()
    try:
        a = np.array(keys, dtype=np.int64)
    except OverflowError:
        return None
    folded = ((a ^ (a >> 32)) & _MASK32).astype(np.uint32)
    return (_fmix32_array(folded) % max_parallelism).tolist()


_VECTORIZED = {str: _str_key_groups, int: _int_key_groups}

# the C half of the above (state/_key_groups.c): the same groups, without numpy's per-call
# cost or a Python call per key; None: the numpy twins
_key_groups_c: Any = native("flowray.state._key_groups")
_NATIVE: Dict[type, Any] = ({str: _key_groups_c.str_key_groups, int: _key_groups_c.int_key_groups}
                            if _key_groups_c is not None else {})


class KeyGroupAssigner:
    """``assign_to_key_group`` for the hot paths: :meth:`assign_batch` for a batch of keys,
    calling the assigner for one key.

    Both compute exactly :func:`assign_to_key_group` (the function that placed the key
    groups of every checkpoint ever written). A batch of only ``str`` or only ``int`` keys
    is hashed in C (CRC-32) and numpy (the finalizer), at tens of nanoseconds a key and
    with no cache to outgrow; other batches and single keys use a bounded memo (cleared
    when it reaches ``cache_size`` entries, so memory stays bounded for streams of unique
    keys).

    >>> a = KeyGroupAssigner(128)
    >>> a("user-7") == assign_to_key_group("user-7", 128)
    True
    >>> a.assign_batch(["a", "b"]) == [a("a"), a("b")]
    True
    """

    __slots__ = ("max_parallelism", "_cache", "_cache_size")

    def __init__(self, max_parallelism: int, cache_size: int = 65536) -> None:
        self.max_parallelism = max_parallelism
        self._cache: dict = {}
        self._cache_size = cache_size

    def assign_batch(self, keys: List[Any]) -> List[int]:
        """The key group of every key of ``keys``, in order."""
        if _NATIVE and keys:
            native_groups = _NATIVE.get(type(keys[0]))
            if native_groups is not None:
                groups = native_groups(keys, self.max_parallelism)
                if groups is not None:   # None: another type, or a key out of its reach
                    return groups
        if len(keys) >= _VECTOR_MIN:
            types = set(map(type, keys))
            if len(types) == 1:
                vectorized = _VECTORIZED.get(types.pop())
                if vectorized is not None:
                    groups = vectorized(keys, self.max_parallelism)
                    if groups is not None:
                        return groups
        return [self(k) for k in keys]

    def __call__(self, key: Any) -> int:
        if type(key) in _CACHEABLE:
            try:
                return self._cache[key]
            except KeyError:
                pass
            except TypeError:  # unhashable content: stable_hash names the problem
                return assign_to_key_group(key, self.max_parallelism)
        else:  # an unsupported type equal to a cached key must still be rejected
            return assign_to_key_group(key, self.max_parallelism)
        kg = _fmix32(stable_hash(key)) % self.max_parallelism
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[key] = kg
        return kg
