"""What a key is: the types ``key_by`` may return and when two keys are the same key.

**Key equality.** Two keys are the same key when Python's ``==`` says so, with every NaN
equal to every NaN. So ``1``, ``1.0``, ``True``, ``Decimal("1")`` and ``numpy.int64(1)`` are
one key; ``Decimal("1.10")`` and ``Decimal("1.1")`` are one key; ``Row("a", 1)`` and
``("a", 1)`` are one key; ``date(2024, 1, 1)`` and ``datetime(2024, 1, 1)`` are two keys (as
in Python); aware datetimes are one key when they are the same instant, and an aware and
a naive datetime are never one key. Both state backends, the key-group hash and every
process agree on it.

**Supported types**: ``str``, ``bytes``, ``int``, ``bool``, ``float``, ``None``,
``decimal.Decimal``, ``datetime.date``, ``datetime.datetime``, ``datetime.time``,
``datetime.timedelta``, numpy scalars (numbers, ``bool_``, ``str_``, ``bytes_``), subclasses of
``str``/``int``/``float``/``bytes`` (e.g. ``IntEnum``), and tuples of these (``Row`` and named
tuples included). Anything else raises :class:`UnsupportedKeyError`: a type without a
stable identity would put one key in two places.

* :func:`canonical_key` is what an operator keeps as the current key: the key itself,
  except that any NaN becomes :data:`CANONICAL_NAN` (so a dict finds it again) and numpy
  scalars become Python scalars.
* :func:`identity_form` is one representative of the key's equality class, of a closed set
  of plain types (``True`` -> ``1``, ``2.0`` -> ``2``, ``Decimal("0.5")`` -> ``0.5``, a
  ``Row`` -> a tuple, an aware datetime -> UTC): the key-group hash and RocksDB's key
  encoding are functions of it, so equal keys hash and encode alike by construction.

>>> identity_form((True, 2.0, Decimal("0.50"), Decimal("1.25000001")))
(1, 2, 0.5, Decimal('1.25000001'))
>>> canonical_key(float("-nan")) is canonical_key(float("nan")) is CANONICAL_NAN
True
>>> try:
...     canonical_key({1, 2})
... except UnsupportedKeyError as e:
...     print(str(e)[:52])
a key of type 'set' ({1, 2}) has no stable identity;
"""

from __future__ import annotations

import datetime as _dt
import math
from decimal import Decimal
from typing import Any, Optional

__all__ = [
    "CANONICAL_NAN",
    "PLAIN_KEY_TYPES",
    "UnsupportedKeyError",
    "canonical_key",
    "identity_form",
    "temporal_bytes",
    "decode_temporal",
    "DATE_TAG",
    "DATETIME_TAG",
    "DATETIME_UTC_TAG",
    "TIME_TAG",
    "TIME_UTC_TAG",
    "TIMEDELTA_TAG",
    "DECIMAL_TAG",
]

#: the one NaN every NaN key becomes
CANONICAL_NAN = float("nan")

_SUPPORTED = ("str, bytes, int, bool, float, None, Decimal, date, datetime, time, timedelta, "
              "a numpy scalar, or a tuple of these")


class UnsupportedKeyError(TypeError):
    """A key of a type that has no stable identity across processes. Deterministic: the
    same record fails the same way after any restart, so the job fails once instead of
    restarting (``recoverable`` is read by the task when it reports the failure)."""

    recoverable = False

    def __init__(self, key: Any, hint: str = "") -> None:
        shown = repr(key)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        self.key_type = type(key).__name__
        super().__init__(f"a key of type {self.key_type!r} ({shown}) has no stable identity; "
                         f"key_by must return {_SUPPORTED}{hint}")


#: types a key of which is its own canonical form (callers may skip :func:`canonical_key`)
PLAIN_KEY_TYPES = frozenset({str, int, bytes, bool, type(None)})


def canonical_key(key: Any) -> Any:
    """``key`` as operators keep it: unchanged, except NaNs (anywhere in it) become
    :data:`CANONICAL_NAN` and numpy scalars become Python scalars. Raises
    :class:`UnsupportedKeyError` for a type that is not a key type."""
    t = type(key)
    if t in PLAIN_KEY_TYPES:
        return key
    if t is float:
        return CANONICAL_NAN if key != key else key
    if isinstance(key, tuple):
        items = [canonical_key(item) for item in key]
        if all(a is b for a, b in zip(items, key)):
            return key
        return _rebuild_tuple(key, items)
    if t is Decimal:
        if key.is_nan():
            return CANONICAL_NAN
        return key
    if t in _TEMPORAL:
        return key
    if _is_numpy(key):
        return canonical_key(_numpy_item(key))
    if isinstance(key, float):
        return CANONICAL_NAN if key != key else key
    if isinstance(key, (str, int, bytes, _dt.date, _dt.time, _dt.timedelta, Decimal)):
        return key
    raise UnsupportedKeyError(key)


def identity_form(key: Any) -> Any:
    """One representative of ``key``'s equality class (see the module doc), built only of
    ``str``, ``bytes``, ``int``, ``float`` (never integral), ``None``, ``Decimal`` (never equal
    to an int or a float, trailing zeros stripped), ``date``, naive ``datetime``, UTC
    ``datetime``, ``time`` (naive or at a fixed offset), ``timedelta`` and tuples of these."""
    t = type(key)
    if t is str or t is int or t is bytes or key is None:
        return key
    if t is bool:
        return int(key)
    if t is float:
        return _float_identity(key)
    if isinstance(key, tuple):
        return tuple(identity_form(item) for item in key)
    if t is Decimal:
        return _decimal_identity(key)
    if _is_numpy(key):
        return identity_form(_numpy_item(key))
    if isinstance(key, bool):
        return int(key)
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int):
        return int.__int__(key)
    if isinstance(key, float):
        return _float_identity(float.__float__(key))
    if isinstance(key, bytes):
        return bytes(key)
    if isinstance(key, Decimal):
        return _decimal_identity(Decimal(key))
    if isinstance(key, _dt.datetime):
        return _datetime_identity(key)
    if isinstance(key, _dt.date):
        return _dt.date(key.year, key.month, key.day)
    if isinstance(key, _dt.time):
        return _time_identity(key)
    if isinstance(key, _dt.timedelta):
        return _dt.timedelta(key.days, key.seconds, key.microseconds)
    raise UnsupportedKeyError(key)


# -- numbers --------------------------------------------------------------------------------

def _float_identity(x: float) -> Any:
    if x != x:
        return CANONICAL_NAN
    if x.is_integer():
        return int(x)
    return x


def _decimal_identity(d: Decimal) -> Any:
    if d.is_nan():
        return CANONICAL_NAN
    if d.is_infinite():
        return float(d)
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    if exponent >= 0 or not any(digits[max(0, len(digits) + exponent):]):
        return int(d)
    as_float = float(d)
    if Decimal(as_float) == d:  # exactly a float: Python's == says they are equal
        return as_float
    ds = list(digits)
    while ds and ds[-1] == 0:
        ds.pop()
        exponent += 1
    return Decimal((sign, tuple(ds), exponent))


# -- numpy (never imported here: recognised by module) ---------------------------------------

def _is_numpy(key: Any) -> bool:
    return type(key).__module__ == "numpy" and hasattr(key, "item") and hasattr(key, "dtype")


def _numpy_item(key: Any) -> Any:
    kind = getattr(key.dtype, "kind", "")
    if kind in "biufcUS" and kind != "c":
        return key.item()
    if kind == "c":
        raise UnsupportedKeyError(key, " (complex numbers are not keys)")
    raise UnsupportedKeyError(
        key, f" (numpy {key.dtype} is not a key type: convert it, e.g. with .item() or "
             "to a datetime)")


def _rebuild_tuple(original: tuple, items: list) -> tuple:
    fields = getattr(original, "_fields", None)
    make = getattr(type(original), "_make", None)
    if make is not None:  # a named tuple
        return make(items)
    if fields is not None and hasattr(type(original), "with_fields"):  # a named Row
        return type(original).with_fields(fields, items)
    if type(original) is not tuple:
        try:
            return type(original)(*items)
        except Exception:  # noqa: BLE001 - equal as a plain tuple anyway
            return tuple(items)
    return tuple(items)


# -- dates and times ------------------------------------------------------------------------

_TEMPORAL = frozenset({_dt.date, _dt.datetime, _dt.time, _dt.timedelta})
_UTC = _dt.timezone.utc
_DAY_US = 86_400_000_000
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


def _offset(value: Any) -> Optional[_dt.timedelta]:
    return value.utcoffset() if value.tzinfo is not None else None


def _datetime_identity(value: _dt.datetime) -> _dt.datetime:
    offset = _offset(value)
    plain = _dt.datetime(value.year, value.month, value.day, value.hour, value.minute,
                         value.second, value.microsecond)
    if offset is None:
        return plain
    return (plain - offset).replace(tzinfo=_UTC)


def _micros(delta: _dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(value: _dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
        + value.microsecond


def _time_identity(value: _dt.time) -> _dt.time:
    offset = _offset(value)
    if offset is None:
        return _dt.time(value.hour, value.minute, value.second, value.microsecond)
    return _time_at_utc_micros(_time_micros(value) - _micros(offset))


def _time_at_utc_micros(adjusted: int) -> _dt.time:
    """An aware time whose wall clock minus its offset is ``adjusted`` microseconds (one
    chosen representative: UTC when it falls within a day)."""
    if 0 <= adjusted < _DAY_US:
        wall = adjusted
    elif adjusted < 0:
        wall = 0
    else:
        wall = _DAY_US - 1
    tz = _UTC if wall == adjusted else _dt.timezone(_dt.timedelta(microseconds=wall - adjusted))
    seconds, us = divmod(wall, 1_000_000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return _dt.time(h, m, s, us, tzinfo=tz)


#: tags of the encodings of :func:`temporal_bytes` (shared with RocksDB's key encoding)
DATE_TAG, DATETIME_TAG, DATETIME_UTC_TAG, TIME_TAG, TIME_UTC_TAG, TIMEDELTA_TAG, \
    DECIMAL_TAG = 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B


def _signed(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def temporal_bytes(value: Any) -> bytes:
    """The identity of an :func:`identity_form` of type date, datetime, time, timedelta or
    Decimal as bytes: a tag then a signed big-endian integer (a string for Decimal)."""
    t = type(value)
    if t is _dt.datetime:
        if value.tzinfo is None:
            return bytes((DATETIME_TAG,)) + _signed(_micros(value - _EPOCH_NAIVE))
        return bytes((DATETIME_UTC_TAG,)) + _signed(_micros(value - _EPOCH_UTC))
    if t is _dt.date:
        return bytes((DATE_TAG,)) + _signed(value.toordinal())
    if t is _dt.time:
        offset = _offset(value)
        if offset is None:
            return bytes((TIME_TAG,)) + _signed(_time_micros(value))
        return bytes((TIME_UTC_TAG,)) + _signed(_time_micros(value) - _micros(offset))
    if t is _dt.timedelta:
        return bytes((TIMEDELTA_TAG,)) + _signed(_micros(value))
    if t is Decimal:
        return bytes((DECIMAL_TAG,)) + str(value).encode("ascii")
    raise TypeError(f"not a temporal or decimal identity form: {value!r}")


def decode_temporal(tag: int, payload: bytes) -> Any:
    """The :func:`identity_form` that :func:`temporal_bytes` encoded as ``tag`` +
    ``payload``."""
    if tag == DECIMAL_TAG:
        return Decimal(payload.decode("ascii"))
    n = int.from_bytes(payload, "big", signed=True)
    if tag == DATE_TAG:
        return _dt.date.fromordinal(n)
    if tag == DATETIME_TAG:
        return _EPOCH_NAIVE + _dt.timedelta(microseconds=n)
    if tag == DATETIME_UTC_TAG:
        return _EPOCH_UTC + _dt.timedelta(microseconds=n)
    if tag == TIME_TAG:
        return _time_at_utc_micros(n).replace(tzinfo=None)
    if tag == TIME_UTC_TAG:
        return _time_at_utc_micros(n)
    if tag == TIMEDELTA_TAG:
        return _dt.timedelta(microseconds=n)
    raise ValueError(f"bad key encoding: unknown tag {tag:#x}")


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a float NaN."""
    return isinstance(value, float) and math.isnan(value)
