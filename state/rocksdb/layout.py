"""How keyed state is laid out in RocksDB: column family ``"state/<name>"`` per state, and a
key = 2-byte big-endian key group + the key's stable byte encoding (:func:`encode_key`), so
a key-group range is a contiguous key range. Keys that are one key
(:mod:`flowray.state.key_types`) have one encoding: a key is encoded by its identity form.

>>> decode_key(encode_key(("user", 7, None, b"x", 2.5)))
('user', 7, None, b'x', 2.5)
>>> _kg_prefix(3) + encode_key("a") < _kg_prefix(4)
True
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Tuple

from rocksdict import BlockBasedOptions, Options

from flowray.common.sentinels import MISSING
from flowray.state.key_types import (
    CANONICAL_NAN,
    DATE_TAG,
    DECIMAL_TAG,
    decode_temporal,
    identity_form,
    temporal_bytes,
)

__all__ = ["encode_key", "decode_key"]

_MISSING = MISSING


_CF_PREFIX = "state/"

_loads = pickle.loads


# ---------------------------------------------------------------------------------------
# stable key encoding
# ---------------------------------------------------------------------------------------

# _T_FALSE, _T_TRUE and _T_PICKLE are no longer written (booleans encode as integers, and a
# type without a stable identity is refused) but still read: keys written before
_T_NONE, _T_FALSE, _T_TRUE = 0x00, 0x01, 0x02
_T_INT, _T_FLOAT, _T_STR, _T_BYTES, _T_TUPLE, _T_PICKLE = 0x10, 0x11, 0x12, 0x13, 0x14, 0x7F

_pack_f64 = struct.Struct(">d").pack

# date, datetime, time, timedelta, Decimal: flowray.state.key_types' tags, then a varint
# length and the payload
_TEMPORAL_TAGS_FIRST, _TEMPORAL_TAGS_LAST = DATE_TAG, DECIMAL_TAG


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
    """Encode ``key``'s identity form (:func:`~flowray.state.key_types.identity_form`), so
    keys that are one key (``1``, ``1.0``, ``True``; any NaN) have one encoding."""
    t = type(key)
    if t is str:
        data = key.encode("utf-8", "surrogatepass")
        out.append(_T_STR)
        _varint(len(data), out)
        out += data
    elif t is int or t is bool:
        data = int(key).to_bytes((key.bit_length() + 8) // 8, "big", signed=True)
        out.append(_T_INT)
        _varint(len(data), out)
        out += data
    elif key is None:
        out.append(_T_NONE)
    elif t is bytes:
        out.append(_T_BYTES)
        _varint(len(key), out)
        out += key
    elif t is float:
        if key.is_integer():
            _encode_into(int(key), out)
        else:
            out.append(_T_FLOAT)
            out += _pack_f64(CANONICAL_NAN if key != key else key)
    elif t is tuple:
        out.append(_T_TUPLE)
        _varint(len(key), out)
        for item in key:
            _encode_into(item, out)
    else:
        form = identity_form(key)  # raises UnsupportedKeyError for what is not a key
        if type(form) in _PLAIN_FORMS:
            _encode_into(form, out)
        else:
            data = temporal_bytes(form)
            out.append(data[0])
            _varint(len(data) - 1, out)
            out += data[1:]


_PLAIN_FORMS = frozenset({str, int, bytes, float, tuple, type(None)})


def encode_key(key: Any) -> bytes:
    """A deterministic, self-delimiting byte encoding of ``key`` (see the module doc).

    >>> encode_key("ab")
    b'\\x12\\x02ab'
    >>> encode_key(1) == encode_key(1.0) == encode_key(True)
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
        data = buf[pos : pos + n]
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
    if _TEMPORAL_TAGS_FIRST <= tag <= _TEMPORAL_TAGS_LAST:
        n, pos = _read_varint(buf, pos)
        return decode_temporal(tag, bytes(buf[pos:pos + n])), pos + n
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


def _raw_options() -> Options:
    """The options of the database and of every column family: raw bytes, and a bloom
    filter of 10 bits per key in every SST file (a point read skips the files without the
    key: +25% keyed-sum throughput at 1,000,000 keys with a checkpoint every 200,000
    records; compression off, a 64 MB block cache, a memtable bloom filter: no gain
    beyond noise; docs/state.md, "RocksDB batching")."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    return opts
