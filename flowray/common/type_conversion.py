"""Declared types applied to records, as PyFlink's serializers apply them: a record of a
declared ``output_type`` becomes what PyFlink would read back after encoding it with that
type's coder, or fails with :class:`RecordTypeError`.

:func:`record_converter` compiles a ``TypeInformation`` once into a function of one record
(``None`` for ``Types.PICKLED_BYTE_ARRAY()``/no type: records pass unchanged, at no cost).

Rules (PyFlink 2.x coders): ``BYTE``/``SHORT``/``INT``/``LONG``/``BIG_INT`` take integers in
8/16/32/64/64-bit range (``BIG_INT`` is 64-bit in PyFlink too; a ``bool`` becomes ``0``/``1``;
a float is refused); ``FLOAT`` rounds to 32-bit, ``DOUBLE`` gives a ``float`` (both take
ints); ``BOOLEAN`` takes a ``bool`` (or an int 0..255: its truth); ``STRING``/``CHAR`` take
a ``str``; ``BIG_DEC`` gives a ``Decimal`` (from a Decimal, int, float via ``str``, or a
numeric string); ``SQL_DATE`` gives a ``date``; ``SQL_TIME`` a naive ``time`` and
``SQL_TIMESTAMP`` a naive ``datetime``, both cut to milliseconds (an aware value keeps its
wall clock); ``LOCAL_DATE``/``LOCAL_TIME``/``LOCAL_DATE_TIME`` give naive values at
microseconds; ``INSTANT`` takes an :class:`~flowray.common.time.Instant`;
``PRIMITIVE_ARRAY`` gives a ``list`` of non-null elements (``bytes`` for ``BYTE``);
``BASIC_ARRAY``/``OBJECT_ARRAY``/``LIST`` give a ``list`` (``None`` elements allowed);
``MAP`` gives a ``dict`` (``None`` values allowed, keys not); ``TUPLE`` takes a tuple, list
or Row of its arity and gives a ``tuple`` (``None`` fields refused); ``ROW``/``ROW_NAMED``
take a Row (a named one is matched by field name), a tuple or list of the row's arity, or a
dict with exactly its field names, and give a :class:`~flowray.common.types.Row` named by
the type (``f0``, ``f1``... for ``Types.ROW``) that keeps the input row's kind (fields may be
``None``). ``None`` is refused as a record, except for ``INSTANT`` and ``LOCAL_*`` types.

>>> from flowray.common.typeinfo import Types
>>> conv = record_converter(Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.FLOAT()]))
>>> conv(("ann", 0.1))
Row(name='ann', score=0.10000000149011612)
>>> try:
...     conv(("ann", "high"))
... except RecordTypeError as e:
...     print(e)
record.score: 'high' (str) does not fit FLOAT: expected a number
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import operator
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Dict, List, Optional

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
from flowray.common.native import native
from flowray.common.types import Row, RowKind, _named_class, make_row

__all__ = ["RecordTypeError", "record_converter", "batch_converter", "type_kind", "INT_BITS",
           "to_f32", "is_sequence", "field_label"]

Converter = Callable[[Any], Any]
#: a converter of a list of records
BatchConverter = Callable[[List[Any]], List[Any]]

# FieldChecks, the C half of the batch converters of TUPLE and ROW types, or None
_records: Any = native("flowray.common._records")


class RecordTypeError(TypeError):
    """A record does not fit its declared type. Deterministic, so not recoverable: the
    job fails once instead of restarting. ``path`` names the field (``record.age``,
    ``record[2]``), ``value`` is the offending value (its ``repr`` when shown)."""

    recoverable = False

    def __init__(self, value: Any, type_name: str, expected: str,
                 path: Optional[List[str]] = None) -> None:
        self.value, self.type_name, self.expected = value, type_name, expected
        self.segments: List[str] = list(path or [])
        super().__init__()

    #: what the path starts from (``record``, or ``key`` for a ``key_by`` key)
    root = "record"

    @property
    def path(self) -> str:
        return self.root + "".join(reversed(self.segments))

    _text: Optional[str] = None

    def __str__(self) -> str:
        if self._text is not None:
            return self._text
        shown = repr(self.value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        return (f"{self.path}: {shown} ({type(self.value).__name__}) does not fit "
                f"{self.type_name}: expected {self.expected}")

    def __reduce__(self) -> Any:  # the value may not unpickle elsewhere: keep the text
        return (_rebuild, (str(self), self.type_name, self.expected, self.segments, self.root))


def _rebuild(text: str, type_name: str, expected: str, segments: List[str],
             root: str = "record") -> RecordTypeError:
    err = RecordTypeError(None, type_name, expected, segments)
    err._text, err.root = text, root
    return err


def record_converter(type_info: Optional[TypeInformation]) -> Optional[Converter]:
    """A function applying ``type_info`` to one record (raising :class:`RecordTypeError`
    when it does not fit), or ``None`` when records pass unchanged (no type,
    ``Types.PICKLED_BYTE_ARRAY()``).

    >>> from flowray.common.typeinfo import Types
    >>> record_converter(Types.TUPLE([Types.INT(), Types.STRING()]))([True, "a"])
    (1, 'a')
    >>> record_converter(Types.PICKLED_BYTE_ARRAY()) is None
    True
    """
    if type_info is None:
        return None
    if not isinstance(type_info, TypeInformation):
        raise TypeError(f"a declared type must be a TypeInformation (e.g. Types.INT()), "
                        f"got {type_info!r}")
    return _compile(type_info, nullable=False)


#: the kinds of the type classes that are not named by their instances' names
_KINDS = ((PickledBytesTypeInfo, "PICKLED"), (RowTypeInfo, "ROW"), (TupleTypeInfo, "TUPLE"),
          ((BasicArrayTypeInfo, ObjectArrayTypeInfo), "ARRAY"), (ListTypeInfo, "LIST"),
          (MapTypeInfo, "MAP"), (DateTypeInfo, "SQL_DATE"), (TimeTypeInfo, "SQL_TIME"),
          (TimestampTypeInfo, "SQL_TIMESTAMP"))


def type_kind(t: TypeInformation) -> Optional[str]:
    """The name conversions dispatch on: a basic or local time type's name (``INT``,
    ``STRING``, ``LOCAL_DATE``...), ``SQL_DATE``/``SQL_TIME``/``SQL_TIMESTAMP``, ``ROW``,
    ``TUPLE``, ``BYTES`` (``PRIMITIVE_ARRAY(BYTE)``), ``PRIMITIVE_ARRAY``, ``ARRAY`` (basic
    or object array), ``LIST``, ``MAP``, or ``PICKLED`` (``PICKLED_BYTE_ARRAY`` and its
    subclasses); ``None`` for a type it does not know.

    >>> from flowray.common.typeinfo import Types
    >>> [type_kind(t) for t in (Types.INT(), Types.SQL_TIMESTAMP(),
    ...                         Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.LIST(Types.INT()))]
    ['INT', 'SQL_TIMESTAMP', 'BYTES', 'LIST']
    """
    if isinstance(t, (BasicTypeInfo, LocalTimeTypeInfo)):
        return t.name
    if isinstance(t, PrimitiveArrayTypeInfo):
        e = t.element_type
        return "BYTES" if isinstance(e, BasicTypeInfo) and e.name == "BYTE" else "PRIMITIVE_ARRAY"
    for cls, kind in _KINDS:
        if isinstance(t, cls):
            return kind
    return None


def _compile(t: TypeInformation, nullable: bool) -> Optional[Converter]:
    """``None``: identity (never fails)."""
    kind = type_kind(t)
    if kind == "PICKLED":
        return None
    if kind in _SCALAR:
        return _SCALAR[kind](nullable)
    if kind in _LOCAL:
        return _LOCAL[kind]()
    if kind not in _COMPOSITE:
        raise TypeError(f"no conversion for type {t!r}")
    return _COMPOSITE[kind](t, nullable)


def _none_or_fail(v: Any, nullable: bool, type_name: str, expected: str) -> None:
    if v is None and nullable:
        return None
    if v is None:
        raise RecordTypeError(v, type_name, expected + " (not None)")
    raise RecordTypeError(v, type_name, expected)


# -- numbers ----------------------------------------------------------------------------------

#: the bits of the integer types (``BIG_INT`` is 64-bit in PyFlink's coders, as here)
INT_BITS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64, "BIG_INT": 64}


def _integer(name: str, bits: int) -> Callable[[bool], Converter]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    expected = f"an int in [{lo}, {hi}]"

    def make(nullable: bool) -> Converter:
        def conv(v: Any) -> Any:
            if type(v) is int:
                if lo <= v <= hi:
                    return v
                raise RecordTypeError(v, name, expected)
            if v is None or isinstance(v, (float, str, bytes, Decimal)):
                return _none_or_fail(v, nullable, name, expected)
            try:
                i = operator.index(v)  # bool, IntEnum, numpy integers
            except TypeError:
                raise RecordTypeError(v, name, expected) from None
            if lo <= i <= hi:
                return int(i)
            raise RecordTypeError(v, name, expected)
        return conv
    return make


_F32 = struct.Struct("<f")
_F32_MAX = 3.4028234663852886e38


def to_f32(x: float) -> float:
    """``x`` rounded to 32 bits (``inf`` beyond the float range, as C's and Java's casts)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:  # C's double -> float cast, as PyFlink's coder
        return math.copysign(math.inf, x)


def _real(v: Any) -> Optional[float]:
    if isinstance(v, numbers.Real) and not isinstance(v, Decimal):
        return float(v)
    return None


def _float(nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        if type(v) is float:
            return to_f32(v)
        x = _real(v)
        if x is None:
            return _none_or_fail(v, nullable, "FLOAT", "a number")
        return to_f32(x)
    return conv


def _double(nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        if type(v) is float:
            return v
        x = _real(v)
        if x is None:
            return _none_or_fail(v, nullable, "DOUBLE", "a number")
        return x
    return conv


def _boolean(nullable: bool) -> Converter:
    expected = "a bool (or an int in [0, 255])"

    def conv(v: Any) -> Any:
        if type(v) is bool:
            return v
        if isinstance(v, int) and 0 <= v <= 255:
            return v != 0
        return _none_or_fail(v, nullable, "BOOLEAN", expected)
    return conv


def _string(name: str) -> Callable[[bool], Converter]:
    def make(nullable: bool) -> Converter:
        def conv(v: Any) -> Any:
            if type(v) is str:
                return v
            if isinstance(v, str):
                return str.__str__(v)
            return _none_or_fail(v, nullable, name, "a str")
        return conv
    return make


def _big_dec(nullable: bool) -> Converter:
    expected = "a Decimal, an int, a float or a numeric str"

    def conv(v: Any) -> Any:
        t = type(v)
        if t is Decimal:
            return v
        if v is None or t is bool:
            return _none_or_fail(v, nullable, "BIG_DEC", expected)
        if isinstance(v, (Decimal, int, float, str)):
            try:
                return Decimal(str(v))
            except InvalidOperation:
                pass
        raise RecordTypeError(v, "BIG_DEC", expected)
    return conv


def _instant(nullable: bool) -> Converter:
    from flowray.common.time import Instant

    def conv(v: Any) -> Any:
        if v is None or isinstance(v, Instant):  # PyFlink's coder has a null Instant
            return v
        raise RecordTypeError(v, "INSTANT", "a flowray.common.Instant")
    return conv


_BASIC: Dict[str, Callable[[bool], Converter]] = {
    **{name: _integer(name, bits) for name, bits in INT_BITS.items()},
    "FLOAT": _float, "DOUBLE": _double, "BOOLEAN": _boolean,
    "STRING": _string("STRING"), "CHAR": _string("CHAR"), "BIG_DEC": _big_dec,
    "INSTANT": _instant,
}


# -- dates and times ------------------------------------------------------------------------

def _sql_date(nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        t = type(v)
        if t is _dt.date:
            return v
        if isinstance(v, _dt.datetime):
            return v.date()
        if isinstance(v, _dt.date):
            return _dt.date(v.year, v.month, v.day)
        return _none_or_fail(v, nullable, "SQL_DATE", "a datetime.date")
    return conv


def _sql_time(nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        if isinstance(v, _dt.time):
            return _dt.time(v.hour, v.minute, v.second, v.microsecond // 1000 * 1000)
        return _none_or_fail(v, nullable, "SQL_TIME", "a datetime.time")
    return conv


def _sql_timestamp(nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        if isinstance(v, _dt.datetime):
            return _dt.datetime(v.year, v.month, v.day, v.hour, v.minute, v.second,
                                v.microsecond // 1000 * 1000)
        return _none_or_fail(v, nullable, "SQL_TIMESTAMP", "a datetime.datetime")
    return conv


def _local_date() -> Converter:
    def conv(v: Any) -> Any:
        if v is None or type(v) is _dt.date:
            return v
        if isinstance(v, _dt.date):
            return _dt.date(v.year, v.month, v.day)
        raise RecordTypeError(v, "LOCAL_DATE", "a datetime.date")
    return conv


def _local_time() -> Converter:
    def conv(v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, _dt.time):
            return _dt.time(v.hour, v.minute, v.second, v.microsecond)
        raise RecordTypeError(v, "LOCAL_TIME", "a datetime.time")
    return conv


def _local_date_time() -> Converter:
    def conv(v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, _dt.datetime):
            return _dt.datetime(v.year, v.month, v.day, v.hour, v.minute, v.second,
                                v.microsecond)
        raise RecordTypeError(v, "LOCAL_DATE_TIME", "a datetime.datetime")
    return conv


_LOCAL = {"LOCAL_DATE": _local_date, "LOCAL_TIME": _local_time,
          "LOCAL_DATE_TIME": _local_date_time}

#: the converters of the kinds made from ``nullable`` alone
_SCALAR: Dict[str, Callable[[bool], Converter]] = {
    **_BASIC, "SQL_DATE": _sql_date, "SQL_TIME": _sql_time, "SQL_TIMESTAMP": _sql_timestamp}


# -- composites -------------------------------------------------------------------------------

def field_label(name: str) -> str:
    """A field's segment of an error path: ``.name``, or ``['odd name']`` when the name is
    not an identifier.

    >>> field_label("age"), field_label("first name")
    ('.age', "['first name']")
    """
    return "." + name if name.isidentifier() else f"[{name!r}]"


def _at(e: RecordTypeError, segment: str) -> RecordTypeError:
    e.segments.append(segment)
    return e


def _fields(values: List[Any], convs: List[Any], labels: List[str]) -> None:
    """Convert ``values`` in place: ``convs`` is ``[(index, converter)]``."""
    i = -1
    try:
        for i, c in convs:
            values[i] = c(values[i])
    except RecordTypeError as e:
        raise _at(e, labels[i]) from None


def _row_general(t: RowTypeInfo, nullable: bool) -> Converter:
    names = tuple(t.field_names)
    n = len(names)
    name_set = frozenset(names)
    convs = [(i, c) for i, c in
             enumerate(_compile(f, nullable=True) for f in t.field_types) if c is not None]
    labels = [field_label(name) for name in names]
    type_name = f"ROW_NAMED({list(names)})" if names != tuple(f"f{i}" for i in range(n)) \
        else f"ROW of {n} fields"
    expected = f"a Row, tuple or list of {n} values, or a dict of fields {list(names)}"
    cls = _named_class(names)
    new = make_row
    insert = RowKind.INSERT

    def make(values: Any, kind: RowKind) -> Row:
        if cls is None:
            return Row.with_fields(names, values, kind)
        row = new(cls, values)
        if kind is not insert:
            row._row_kind = kind
        return row

    def conv(v: Any) -> Any:
        kind = insert
        if isinstance(v, tuple):
            if len(v) != n:
                raise RecordTypeError(v, type_name, expected)
            if isinstance(v, Row):
                kind = v._row_kind
                own = v._fields
                if own is not None and own != names:
                    if frozenset(own) != name_set:
                        raise RecordTypeError(v, type_name, f"a Row with fields {list(names)}")
                    v = v.get_fields_by_names(names)
        elif isinstance(v, list):
            if len(v) != n:
                raise RecordTypeError(v, type_name, expected)
        elif isinstance(v, dict):
            if v.keys() != name_set:
                raise RecordTypeError(v, type_name, f"a dict of exactly the fields {list(names)}")
            v = [v[k] for k in names]
        else:
            return _none_or_fail(v, nullable, type_name, expected)
        if convs:
            values = list(v)
            _fields(values, convs, labels)
            return make(values, kind)
        return make(v, kind)
    return conv


def _tuple_general(t: TupleTypeInfo, nullable: bool) -> Converter:
    n = len(t.field_types)
    convs = [(i, c) for i, c in
             enumerate(_compile(f, nullable=False) for f in t.field_types) if c is not None]
    labels = [f"[{i}]" for i in range(n)]
    type_name = f"TUPLE of {n} fields"
    expected = f"a tuple, list or Row of {n} values"

    def conv(v: Any) -> Any:
        if not isinstance(v, (tuple, list)):
            return _none_or_fail(v, nullable, type_name, expected)
        if len(v) != n:
            raise RecordTypeError(v, type_name, expected)
        if convs:
            values = list(v)
            _fields(values, convs, labels)
            return tuple(values)
        return v if type(v) is tuple else tuple(v)
    return conv


# -- fast paths: records that already fit pass without a copy ------------------------------

_EXACT = {"STRING": "str", "CHAR": "str", "DOUBLE": "float", "BOOLEAN": "bool",
          "BIG_DEC": "Decimal"}


def _fits(t: TypeInformation, x: str, nullable: bool) -> Optional[str]:
    """A Python expression over variable ``x``, true when the value converts to itself
    (``None``: no such cheap test, e.g. ``FLOAT`` rounds)."""
    if isinstance(t, PickledBytesTypeInfo):
        return "True"
    expr = None
    if isinstance(t, BasicTypeInfo) and t.name in INT_BITS:
        bits = INT_BITS[t.name]
        expr = f"(type({x}) is int and {-(1 << (bits - 1))} <= {x} <= {(1 << (bits - 1)) - 1})"
    elif isinstance(t, BasicTypeInfo) and t.name in _EXACT:
        expr = f"type({x}) is {_EXACT[t.name]}"
    elif isinstance(t, DateTypeInfo) or (isinstance(t, LocalTimeTypeInfo)
                                         and t.name == "LOCAL_DATE"):
        expr = f"type({x}) is date"
        nullable = nullable or isinstance(t, LocalTimeTypeInfo)
    if expr is None:
        return None
    return f"({x} is None or {expr})" if nullable else expr


def _field_spec(t: TypeInformation, nullable: bool) -> Optional[tuple]:
    """``_fits`` as data, for ``FieldChecks``: ``(exact type or None for any, lo, hi,
    nullable)``; ``None`` where ``_fits`` has no cheap test."""
    if isinstance(t, PickledBytesTypeInfo):
        return (None, None, None, True)
    if isinstance(t, BasicTypeInfo) and t.name in INT_BITS:
        bits = INT_BITS[t.name]
        return (int, -(1 << (bits - 1)), (1 << (bits - 1)) - 1, nullable)
    if isinstance(t, BasicTypeInfo) and t.name in _EXACT:
        return ({"str": str, "float": float, "bool": bool, "Decimal": Decimal}[_EXACT[t.name]],
                None, None, nullable)
    if isinstance(t, DateTypeInfo) or (isinstance(t, LocalTimeTypeInfo)
                                       and t.name == "LOCAL_DATE"):
        return (_dt.date, None, None, nullable or isinstance(t, LocalTimeTypeInfo))
    return None


def batch_converter(type_info: Optional[TypeInformation]) -> Optional[BatchConverter]:
    """``record_converter(type_info)`` applied to a list of records: the list of their
    conversions (the same values, and the same :class:`RecordTypeError` for the first
    record that does not fit), or ``None`` when records pass unchanged. For ``TUPLE`` and
    ``ROW`` types whose fields have a cheap test, the records that already fit are found
    in C (``FieldChecks``), without a Python call per record.

    >>> from flowray.common.typeinfo import Types
    >>> batch_converter(Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()]))(
    ...     [("a", 1), ["b", 2]])
    [Row(k='a', v=1), Row(k='b', v=2)]
    """
    conv = record_converter(type_info)
    if conv is None:
        return None
    checks = _field_checks(type_info, conv) if _records is not None else None
    if checks is not None:
        return checks
    return lambda records: [conv(r) for r in records]


def _field_checks(t: TypeInformation, conv: Converter) -> Optional[BatchConverter]:
    if isinstance(t, RowTypeInfo):
        cls = _named_class(tuple(t.field_names))
        nullable = True
        if cls is None:
            return None
    elif isinstance(t, TupleTypeInfo):
        cls, nullable = None, False
    else:
        return None
    specs = tuple(_field_spec(f, nullable) for f in t.field_types)
    if not specs or any(s is None for s in specs):
        return None
    return _records.FieldChecks(specs, conv, cls)


def _fast(t: Any, n: int, nullable_fields: bool, general: Converter,
          when_fits: str, extra: str = "", env: Optional[Dict[str, Any]] = None) -> Converter:
    """``general`` behind a generated test that passes fitting tuples straight through."""
    types = t.field_types
    exprs = [_fits(f, f"a{i}", nullable_fields) for i, f in enumerate(types)]
    if n == 0 or any(e is None for e in exprs):
        return general
    unpack = ", ".join(f"a{i}" for i in range(n)) + ","
    test = " and ".join(e for e in exprs if e != "True") or "True"
    src = (f"def conv(v):\n"
           f"    if type(v) is tuple and len(v) == {n}:\n"
           f"        {unpack} = v\n"
           f"        if {test}:\n"
           f"            return {when_fits}\n"
           f"{extra}"
           f"    return general(v)\n")
    namespace: Dict[str, Any] = {"general": general, "date": _dt.date, "Decimal": Decimal}
    namespace.update(env or {})
    exec(compile(src, f"<converter for {t!r}>", "exec"), namespace)  # noqa: S102
    return namespace["conv"]


def _tuple(t: TupleTypeInfo, nullable: bool) -> Converter:
    return _fast(t, len(t.field_types), False, _tuple_general(t, nullable), "v")


def _row(t: RowTypeInfo, nullable: bool) -> Converter:
    names = tuple(t.field_names)
    cls = _named_class(names)
    general = _row_general(t, nullable)
    if cls is None:
        return general
    n = len(names)
    unpack = ", ".join(f"a{i}" for i in range(n)) + ","
    exprs = [_fits(f, f"a{i}", True) for i, f in enumerate(t.field_types)]
    same_row = ""
    if n and all(e is not None for e in exprs):
        test = " and ".join(e for e in exprs if e != "True") or "True"
        same_row = (f"    if type(v) is cls and v._fields is FIELDS:\n"
                    f"        {unpack} = v\n"
                    f"        if {test}:\n"
                    f"            return v\n")
    return _fast(t, n, True, general, "new(cls, v)", same_row,
                 {"cls": cls, "new": make_row, "FIELDS": cls._fields})


def is_sequence(v: Any) -> bool:
    """A list, a tuple, or another sized iterable that is not text, bytes, a dict or a set
    (what takes an array type's place)."""
    return isinstance(v, (list, tuple)) or (
        hasattr(v, "__len__") and hasattr(v, "__iter__")
        and not isinstance(v, (str, bytes, bytearray, dict, set, frozenset)))


def _array(t: Any, nullable: bool, elements_nullable: bool) -> Converter:
    elem = _compile(t.element_type, nullable=elements_nullable)
    type_name = repr(t)
    expected = "a list or tuple"

    def conv(v: Any) -> Any:
        if not is_sequence(v):
            return _none_or_fail(v, nullable, type_name, expected)
        if elem is None:
            if not elements_nullable and any(x is None for x in v):
                bad = [x is None for x in v].index(True)
                raise _at(RecordTypeError(None, repr(t.element_type), "an element (not None)"),
                          f"[{bad}]")
            return list(v)
        out = list(v)
        i = -1
        try:
            for i, x in enumerate(out):
                out[i] = elem(x)
        except RecordTypeError as e:
            raise _at(e, f"[{i}]") from None
        return out
    return conv


def _bytes(t: Any, nullable: bool) -> Converter:
    def conv(v: Any) -> Any:
        if type(v) is bytes:
            return v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return bytes(v)
        return _none_or_fail(v, nullable, repr(t), "bytes")
    return conv


def _map(t: MapTypeInfo, nullable: bool) -> Converter:
    kc = _compile(t.key_type, nullable=False)
    vc = _compile(t.value_type, nullable=True)
    type_name = repr(t)

    def conv(v: Any) -> Any:
        if not isinstance(v, dict):
            return _none_or_fail(v, nullable, type_name, "a dict")
        out = {}
        for k, x in v.items():
            if k is None:
                raise RecordTypeError(k, type_name, "keys that are not None")
            try:
                ck = k if kc is None else kc(k)
            except RecordTypeError as e:
                raise _at(e, f"[key {k!r}]") from None
            try:
                out[ck] = x if vc is None else vc(x)
            except RecordTypeError as e:
                raise _at(e, f"[{k!r}]") from None
        return out
    return conv


#: the converters of the kinds made from the type and ``nullable``
_COMPOSITE: Dict[str, Callable[[Any, bool], Converter]] = {
    "ROW": _row, "TUPLE": _tuple, "MAP": _map, "BYTES": _bytes,
    "PRIMITIVE_ARRAY": lambda t, nullable: _array(t, nullable, elements_nullable=False),
    "ARRAY": lambda t, nullable: _array(t, nullable, elements_nullable=True),
    "LIST": lambda t, nullable: _array(t, nullable, elements_nullable=True)}
