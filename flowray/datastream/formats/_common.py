"""What the record formats (:mod:`~flowray.datastream.formats.json`, ``.csv``, ``.avro``)
share: Java's text for numbers and times (so the bytes equal what Flink's Jackson-based
formats write), Java's number parsing rules, the error for a message that cannot be read, and
the batch loops.

Numbers are written as Java writes them: ``Double.toString`` (``1.5``, ``1.0``, ``1.0E10``,
``1.0E-5``), ``Float.toString`` of the 32-bit value (``0.1`` for ``0.1f``), and a
``BigDecimal`` as Jackson's node factory stores it (trailing zeros stripped, so ``1.50`` is
``1.5`` and ``100`` is ``1E+2``):

>>> java_double(1.5), java_double(1e10), java_double(0.00001), java_double(float("nan"))
('1.5', '1.0E10', '1.0E-5', 'NaN')
>>> java_float(to_f32(0.1)), java_float(to_f32(16777216.0))
('0.1', '1.6777216E7')
>>> from decimal import Decimal
>>> [jackson_decimal(Decimal(d)) for d in ("1.50", "100", "0.000")]
['1.5', '1E+2', '0']

Java's integer and floating point parsing (after Java's ``trim``):

>>> parse_java_int(" 42 ", 32), parse_java_double("1e3"), parse_java_double("NaN")
(42, 1000.0, nan)
>>> parse_java_int("1.0", 32)
Traceback (most recent call last):
...
ValueError: '1.0' is not an integer

A message that cannot be read raises :class:`DeserializationError`, which names the schema,
shows the start of the message and says what was wrong; it is deterministic, so it fails the
job at once instead of restarting it (``recoverable = False``):

>>> str(DeserializationError("JsonRowDeserializationSchema", "not JSON", b"{oops"))
"JsonRowDeserializationSchema: cannot read message b'{oops': not JSON"
"""

from __future__ import annotations

import re
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from flowray.common.type_conversion import RecordTypeError
from flowray.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    DateTypeInfo,
    ListTypeInfo,
    LocalTimeTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TimestampTypeInfo,
    TimeTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from flowray.common.types import Row, _named_class

__all__ = ["DeserializationError", "ReadError", "RecordTypeError", "java_double", "java_float",
           "to_f32", "jackson_decimal", "java_trim", "parse_java_int", "parse_java_double",
           "parse_java_decimal", "parse_java_biginteger", "row_factory", "row_values",
           "deserialize_all", "serialize_all", "shown", "INT_BITS", "kind_of", "VoidTypeInfo",
           "field_label", "cut_ms", "fraction", "hms", "naive"]

#: the bits of Flink's integer types (``BIG_INT`` is 64-bit in PyFlink, as in flowray)
INT_BITS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64, "BIG_INT": 64}

_PREVIEW = 200


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class DeserializationError(ValueError):
    """A message that is not a record of the schema's type (Flink's ``IOException`` "Failed
    to deserialize ..."). ``schema_name`` is the schema's class name, ``reason`` what was
    wrong (naming the field when a field was), ``message`` the first 200 bytes of the
    message. ``index`` is the message's position when it came from a ``deserialize_batch``
    (else ``None``); the connector adds where the message came from. Deterministic, so not
    recoverable: the job fails once instead of restarting."""

    recoverable = False

    def __init__(self, schema_name: str, reason: str, message: Optional[bytes] = None,
                 index: Optional[int] = None) -> None:
        self.schema_name, self.reason, self.index = schema_name, reason, index
        self.message = None if message is None else bytes(message[:_PREVIEW])
        super().__init__(schema_name, reason)

    def __str__(self) -> str:
        if self.message is None:
            what = "None"
        else:
            what = repr(self.message) + ("..." if len(self.message) >= _PREVIEW else "")
        at = f" (message {self.index} of the batch)" if self.index is not None else ""
        return f"{self.schema_name}: cannot read message {what}{at}: {self.reason}"

    def __reduce__(self) -> Any:
        return (DeserializationError, (self.schema_name, self.reason, self.message, self.index))


class ReadError(Exception):
    """A field of a message that does not read as its type; ``segments`` build the path
    (``record.user.age``) from the innermost field outwards."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        self.segments: List[str] = []

    def at(self, segment: str) -> "ReadError":
        self.segments.append(segment)
        return self

    def __str__(self) -> str:
        if not self.segments:
            return self.text
        return "record" + "".join(reversed(self.segments)) + ": " + self.text


# -- Java's number text ----------------------------------------------------------------------

_INF = float("inf")
_F32 = struct.Struct("<f")


def to_f32(x: float) -> float:
    """``x`` rounded to 32 bits (``inf`` beyond the float range, as Java's cast)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return _INF if x > 0 else -_INF


def _java_text(negative: bool, digits: str, exp: int) -> str:
    """Java's ``Double.toString`` layout of ``digits * 10**exp`` (``digits`` significant, no
    trailing zeros): plain in [1e-3, 1e7), else ``d.dddE±n``."""
    sci = len(digits) - 1 + exp
    sign = "-" if negative else ""
    if -3 <= sci < 7:
        point = len(digits) + exp
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci}"


def _digits_of(text: str) -> Tuple[bool, str, int]:
    sign, digits, exp = Decimal(text).as_tuple()
    d = "".join(map(str, digits)).rstrip("0")
    exp = int(exp) + (len(digits) - len(d))
    return bool(sign), d or "0", exp


def java_double(x: float) -> str:
    """Java's ``Double.toString(x)`` (shortest digits that read back as ``x``)."""
    if x != x:
        return "NaN"
    if x == _INF:
        return "Infinity"
    if x == -_INF:
        return "-Infinity"
    if x == 0.0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # Python's shortest repr is plain here, with ".0" when integral
    return _java_text(*_digits_of(repr(x)))


def java_float(x: float) -> str:
    """Java's ``Float.toString`` of the 32-bit value nearest ``x`` (shortest digits that
    read back as that 32-bit value)."""
    x = to_f32(x)
    if x != x or x in (_INF, -_INF) or x == 0.0:
        return java_double(x)
    for p in range(1, 10):
        text = "%.*e" % (p - 1, x)
        if to_f32(float(text)) == x:
            return _java_text(*_digits_of(text))
    return java_double(x)  # not reached: 9 digits always suffice


def jackson_decimal(d: Decimal) -> str:
    """A ``BigDecimal`` as Jackson's default node factory writes it: trailing zeros stripped
    (``stripTrailingZeros``), zero as ``0``, then ``BigDecimal.toString``."""
    if not d.is_finite():
        raise ValueError(f"{d} is not a finite decimal")
    if not d:
        return "0"
    sign, digits, exp = d.as_tuple()
    n = len(digits)
    while n > 1 and digits[n - 1] == 0:
        n -= 1
    return str(Decimal((sign, digits[:n], int(exp) + (len(digits) - n))))


# -- Java's number parsing -------------------------------------------------------------------

_JAVA_WS = "".join(chr(i) for i in range(33))
_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
                        r"[fFdD]?")
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def java_trim(text: str) -> str:
    """Java's ``String.trim``: strips the characters up to the space."""
    return text.strip(_JAVA_WS)


def parse_java_int(text: str, bits: int) -> int:
    """``Integer.parseInt``/``Long.parseLong``... of ``java_trim(text)`` in ``bits``."""
    t = java_trim(text)
    if not _INT_RE.fullmatch(t):
        raise ValueError(f"{text!r} is not an integer")
    value = int(t)
    if bits and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{text!r} is out of the {bits}-bit range")
    return value


def parse_java_double(text: str) -> float:
    """``Double.parseDouble`` of ``java_trim(text)`` (decimal forms, ``NaN``,
    ``Infinity``, an ``f``/``d`` suffix)."""
    t = java_trim(text)
    if not _DOUBLE_RE.fullmatch(t):
        raise ValueError(f"{text!r} is not a number")
    if t[-1] in "fFdD" and not t.endswith("Infinity"):
        t = t[:-1]
    return float(t)


def parse_java_decimal(text: str) -> Decimal:
    """``new BigDecimal(java_trim(text))`` (keeps the scale: ``1.50`` stays ``1.50``)."""
    t = java_trim(text)
    if not _DECIMAL_RE.fullmatch(t):
        raise ValueError(f"{text!r} is not a decimal number")
    try:
        return Decimal(t)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid forms
        raise ValueError(f"{text!r} is not a decimal number") from None


def parse_java_biginteger(text: str) -> int:
    """``new BigInteger(java_trim(text))``."""
    return parse_java_int(text, 0)


# -- rows ------------------------------------------------------------------------------------

def row_factory(names: Sequence[str]) -> Callable[[Iterable[Any]], Row]:
    """A function making a :class:`~flowray.common.types.Row` named ``names`` from its
    values (in order), without building a dict.

    >>> row_factory(["id", "name"])([1, "hi"])
    Row(id=1, name='hi')
    """
    names = tuple(names)
    cls = _named_class(names)
    if cls is None:
        return lambda values: Row.with_fields(names, values)
    new = tuple.__new__
    return lambda values: new(cls, values)


def row_values(names: Sequence[str], type_name: str) -> Callable[[Any], Sequence[Any]]:
    """A function giving the field values, in the order of ``names``, of a record that is a
    Row, tuple or list of as many values, taken by position as Flink does (a Row whose field
    names are ``names`` in another order is matched by name, as flowray's declared types do),
    or a dict with exactly these keys; anything else raises :class:`RecordTypeError`.

    >>> values = row_values(["a", "b"], "ROW")
    >>> values((1, 2)), values({"b": 2, "a": 1}), values(Row(b=2, a=1)), values(Row(f0=1, f1=2))
    ((1, 2), [1, 2], [1, 2], Row(f0=1, f1=2))
    """
    names = tuple(names)
    n = len(names)
    name_set = frozenset(names)
    expected = f"a Row, tuple or list of {n} values, or a dict of fields {list(names)}"

    def values(v: Any) -> Sequence[Any]:
        if isinstance(v, (tuple, list)):
            if len(v) != n:
                raise RecordTypeError(v, type_name, expected)
            own = getattr(v, "_fields", None)
            if own is not None and own is not names and own != names and \
                    frozenset(own) == name_set:
                index = {k: i for i, k in enumerate(own)}
                return [tuple.__getitem__(v, index[k]) for k in names]
            return v  # by position, as Flink (a Row of Types.ROW has fields f0, f1...)
        if isinstance(v, dict):
            if v.keys() != name_set:
                raise RecordTypeError(v, type_name, f"a dict of exactly the fields {list(names)}")
            return [v[k] for k in names]
        if v is None:
            raise RecordTypeError(v, type_name, expected + " (not None)")
        raise RecordTypeError(v, type_name, expected)
    return values


# -- batches ---------------------------------------------------------------------------------

def serialize_all(one: Callable[[Any], bytes], elements: Iterable[Any]) -> List[bytes]:
    """``[one(e) for e in elements]``; an error gets ``index``, the failing position."""
    out: List[bytes] = []
    append = out.append
    try:
        for e in elements:
            append(one(e))
    except Exception as err:
        try:
            err.index = len(out)  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - exceptions with slots
            pass
        raise
    return out


def deserialize_all(one: Callable[[bytes], Any], messages: Iterable[bytes]) -> List[Any]:
    """``[one(m) for m in messages]`` (``None`` where a message was skipped); a
    :class:`DeserializationError` gets ``index``, the failing position."""
    out: List[Any] = []
    append = out.append
    try:
        for m in messages:
            append(one(m))
    except DeserializationError as err:
        err.index = len(out)
        raise
    return out


# -- times -----------------------------------------------------------------------------------

def cut_ms(t: Any) -> Any:
    """A ``time``/``datetime`` cut to milliseconds."""
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def fraction(micros: int) -> str:
    """``.ddd`` of Java's ``appendFraction(NANO_OF_SECOND, 0, 9, true)``: the fraction
    without trailing zeros, nothing when zero."""
    if not micros:
        return ""
    return "." + f"{micros:06d}".rstrip("0")


def hms(t: Any) -> str:
    return f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def naive(t: Any) -> Any:
    """An aware ``datetime``/``time`` keeps its wall clock (as flowray's declared types)."""
    return t.replace(tzinfo=None) if t.tzinfo is not None else t


# -- types -----------------------------------------------------------------------------------

def kind_of(t: TypeInformation) -> str:
    """The name a format dispatches on: a basic type's name (``INT``, ``STRING``...),
    ``SQL_DATE``/``SQL_TIME``/``SQL_TIMESTAMP``, ``LOCAL_DATE``/``LOCAL_TIME``/
    ``LOCAL_DATE_TIME``, ``ROW``, ``TUPLE``, ``BYTES`` (``PRIMITIVE_ARRAY(BYTE)``),
    ``PRIMITIVE_ARRAY``, ``ARRAY`` (basic or object array), ``LIST``, ``MAP``, ``VOID`` or
    ``PICKLED``.

    >>> from flowray.common.typeinfo import Types
    >>> [kind_of(t) for t in
    ...  (Types.INT(), Types.SQL_TIMESTAMP(), Types.PRIMITIVE_ARRAY(Types.BYTE()))]
    ['INT', 'SQL_TIMESTAMP', 'BYTES']
    """
    if isinstance(t, VoidTypeInfo):
        return "VOID"
    if isinstance(t, PickledBytesTypeInfo):
        return "PICKLED"
    if isinstance(t, RowTypeInfo):
        return "ROW"
    if isinstance(t, TupleTypeInfo):
        return "TUPLE"
    if isinstance(t, PrimitiveArrayTypeInfo):
        e = t.element_type
        return "BYTES" if isinstance(e, BasicTypeInfo) and e.name == "BYTE" else "PRIMITIVE_ARRAY"
    if isinstance(t, (BasicArrayTypeInfo, ObjectArrayTypeInfo)):
        return "ARRAY"
    if isinstance(t, ListTypeInfo):
        return "LIST"
    if isinstance(t, MapTypeInfo):
        return "MAP"
    if isinstance(t, DateTypeInfo):
        return "SQL_DATE"
    if isinstance(t, TimeTypeInfo):
        return "SQL_TIME"
    if isinstance(t, TimestampTypeInfo):
        return "SQL_TIMESTAMP"
    if isinstance(t, (LocalTimeTypeInfo, BasicTypeInfo)):
        return t.name
    raise TypeError(f"unknown type information {t!r}")


class VoidTypeInfo(PickledBytesTypeInfo):
    """Java's ``Types.VOID`` (a JSON schema's ``"null"`` type): always ``None``."""

    def __init__(self) -> None:
        super().__init__("VOID")


def field_label(name: str) -> str:
    """``.name``, or ``['odd name']`` when not an identifier (for error paths)."""
    return "." + name if name.isidentifier() else f"[{name!r}]"
