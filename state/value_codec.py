"""How a keyed-state value is stored as bytes (RocksDB values, and the values of full
snapshots and savepoints written from RocksDB).

Contract: :func:`decode_value` reads every encoding :func:`encode_value` ever wrote,
including plain pickles (first byte ``0x80``) written by earlier releases, so the bytes are
self-describing and old checkpoints stay readable.

The first byte tells the encoding:

* ``0x80``: a pickle (protocol 5; cloudpickle for what pickle cannot name). Every pickle of
  protocol 2 or later starts with this byte.
* any other byte: one msgpack object. It is written for values of the exact types ``int``
  (64-bit range), ``float``, ``str``, ``bytes``, ``bool`` and ``None``, and for a ``tuple``
  (exact type) whose items are all of those types: msgpack reads each back with its exact
  type and value (an array is read back as a tuple: no list is ever written as msgpack). A
  msgpack encoding never starts with ``0x80`` (the empty map, never written). msgpack
  never uses the byte ``0xc1``: it is reserved for a future encoding.

Everything else -- lists, dicts, nested tuples, subclasses (``IntEnum``, ``Row``,
namedtuples), ``bytearray``, big ints, strings with lone surrogates -- is pickled: msgpack
would turn a list inside a tuple into a tuple and a ``bytearray`` into ``bytes``. A flat
tuple of scalars (the running value of a keyed ``sum``/``reduce`` over tuples) packs in
about half the time pickle takes and in fewer bytes (docs/state.md).

>>> decode_value(encode_value({"a": [1, 2.5, None]}))
{'a': [1, 2.5, None]}
>>> encode_value(7), encode_value("ab"), encode_value(("k", 3))
(b'\\x07', b'\\xa2ab', b'\\x92\\xa1k\\x03')
>>> decode_value(encode_value(("k", 3)))
('k', 3)
"""

from __future__ import annotations

import functools
import operator
import pickle
from itertools import chain
from typing import Any, List

import cloudpickle
import msgpack

__all__ = ["encode_value", "decode_value", "encode_values", "decode_values", "is_plain_value"]

#: the first byte of every pickle of protocol >= 2
PICKLE_TAG = 0x80
#: never produced by msgpack: reserved for a future encoding
RESERVED_TAG = 0xC1

_MSGPACK_TYPES = frozenset({int, float, str, bytes, bool, type(None)})
_is_scalars = _MSGPACK_TYPES.issuperset

# No ``default`` hook: the packers never call back into Python, so one packer is safe to
# share between threads (a snapshot writer encodes in its own thread). The loose packer
# packs a tuple as an array; it is given only tuples whose items are of exact plain types.
_pack = msgpack.Packer(use_bin_type=True, strict_types=True, autoreset=True).pack
_pack_tuple = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_unpackb = msgpack.unpackb
_unpack_tuple = functools.partial(msgpack.unpackb, use_list=False)
_pickle_loads = pickle.loads
_FIRST_BYTE = operator.itemgetter(0)
_SCALARS_NOT_NONE = _MSGPACK_TYPES - {type(None)}
_TUPLE_ONLY = {tuple}


def is_plain_value(value: Any) -> bool:
    """Whether ``value`` is a plain scalar (exact type) or a tuple of them: immutable, and
    stored as msgpack when it fits (see the module doc)."""
    t = type(value)
    return t in _MSGPACK_TYPES or (t is tuple and _is_scalars(map(type, value)))


def encode_value(value: Any) -> bytes:
    """The stored bytes of ``value`` (see the module doc for which encoding)."""
    t = type(value)
    if t in _MSGPACK_TYPES:
        try:
            return _pack(value)
        except (OverflowError, TypeError, ValueError):  # a big int, a lone surrogate
            pass
    elif t is tuple and _is_scalars(map(type, value)):
        try:
            return _pack_tuple(value)
        except (OverflowError, TypeError, ValueError):
            pass
    try:  # as full_snapshot.dumps_state (not imported: full_snapshot imports this module)
        return pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return cloudpickle.dumps(value, protocol=5)


def encode_values(values: List[Any]) -> List[bytes]:
    """``[encode_value(v) for v in values]``, a batch of plain scalars or of flat tuples of
    them packed without a Python call per value.

    >>> encode_values([("a", 1), ("b", 2)]) == [encode_value(("a", 1)), encode_value(("b", 2))]
    True
    """
    kinds = set(map(type, values))
    try:
        if kinds == _TUPLE_ONLY and _is_scalars(map(type, chain.from_iterable(values))):
            return list(map(_pack_tuple, values))
        if kinds and _SCALARS_NOT_NONE.issuperset(kinds):
            return list(map(_pack, values))
    except (OverflowError, TypeError, ValueError):  # a big int, a lone surrogate: one by one
        pass
    return list(map(encode_value, values))


def decode_values(data: List[bytes]) -> List[Any]:
    """``[decode_value(d) for d in data]``, a batch of msgpack values unpacked without a
    Python call per value.

    >>> decode_values(encode_values([("a", 1), 2.5]))
    [('a', 1), 2.5]
    """
    if data and all(data) and not _NOT_MSGPACK.intersection(map(_FIRST_BYTE, data)):
        return list(map(_unpack_tuple, data))
    return list(map(decode_value, data))


_NOT_MSGPACK = frozenset({PICKLE_TAG, RESERVED_TAG})


def decode_value(data: bytes) -> Any:
    """The value whose stored bytes are ``data`` (any encoding ever written)."""
    first = data[0] if data else None
    if first == PICKLE_TAG:
        return _pickle_loads(data)
    if first is None or first == RESERVED_TAG:
        raise ValueError(f"not a stored state value: {bytes(data[:16])!r}")
    return _unpackb(data, use_list=False)
