"""JSON rows, as ``pyflink.datastream.formats.json``: :class:`JsonRowSerializationSchema`
and :class:`JsonRowDeserializationSchema` read and write the bytes Flink's
``org.apache.flink.formats.json.JsonRow*`` formats (Jackson) read and write, in Python.

A record of a ``Types.ROW_NAMED``/``Types.ROW`` type is a JSON object whose keys are the
field names (``f0``, ``f1``... for ``Types.ROW``), in the type's order, written compactly
as Jackson does: ints as ``1``, doubles as Java's ``Double.toString`` (``1.5``, ``1.0E10``),
``null`` for ``None``, timestamps as RFC 3339 in UTC (``2024-01-05T12:30:00.5Z``), bytes as
base64. Reading gives :class:`~flowray.common.types.Row` records named by the type's fields.

>>> from flowray.common.typeinfo import Types
>>> row_type = Types.ROW_NAMED(["id", "name", "score"],
...                            [Types.INT(), Types.STRING(), Types.DOUBLE()])
>>> ser = JsonRowSerializationSchema.builder().with_type_info(row_type).build()
>>> ser.serialize((1, "hi", 2.0))
b'{"id":1,"name":"hi","score":2.0}'
>>> de = JsonRowDeserializationSchema.builder().type_info(row_type).build()
>>> de.deserialize(b'{"name": "hi", "id": 1, "extra": true}')
Row(id=1, name='hi', score=None)

Reading follows Flink's rules: a missing field or a JSON ``null`` is ``None`` (a missing
field fails with ``fail_on_missing_field()``); a number may come as a JSON string
(``"42"``) and a string field takes any JSON value as text; a message that is not a record of
the type raises :class:`~flowray.datastream.formats._common.DeserializationError` naming the
field and the value, unless ``ignore_parse_errors()``, which gives ``None`` for a field that
does not read and for a message that is not JSON at all.

>>> de.deserialize(b'{"id": "42", "name": 7}')
Row(id=42, name='7', score=None)
>>> de.deserialize(b'{"id": "x"}')
Traceback (most recent call last):
...
flowray.datastream.formats._common.DeserializationError: JsonRowDeserializationSchema: cannot read message b'{"id": "x"}': record.id: 'x' (JSON string) does not read as INT: 'x' is not an integer
>>> lenient = (JsonRowDeserializationSchema.builder().type_info(row_type)
...            .ignore_parse_errors().build())
>>> lenient.deserialize(b'{"id": "x", "name": "a"}'), lenient.deserialize(b'not json')
(Row(id=None, name='a', score=None), None)

Writing checks each value against its field's type with the rules flowray applies to a
declared ``output_type`` (an ``INT`` takes an ``int`` in 32-bit range, ``FLOAT`` rounds to
32 bits, ...) and raises :class:`~flowray.common.type_conversion.RecordTypeError` naming the
field and the value:

>>> ser.serialize((1, "hi", "high"))
Traceback (most recent call last):
...
flowray.common.type_conversion.RecordTypeError: record.score: 'high' (str) does not fit DOUBLE: expected a number

Types: ``BOOLEAN``, ``BYTE``/``SHORT``/``INT``/``LONG``/``BIG_INT``, ``FLOAT``/``DOUBLE``,
``BIG_DEC`` (written without trailing zeros, as Jackson's node factory does: ``1.50`` is
``1.5``; read exactly), ``STRING``/``CHAR``, ``SQL_DATE``/``LOCAL_DATE``
(``2024-01-05``), ``SQL_TIME``/``LOCAL_TIME`` (``12:30:00Z``; reading refuses fractions,
as Flink), ``SQL_TIMESTAMP``/``LOCAL_DATE_TIME`` (``2024-01-05T12:30:00.123Z``; SQL types
at milliseconds, as PyFlink), ``PRIMITIVE_ARRAY(BYTE)`` (base64), arrays and ``LIST``
(JSON arrays), ``MAP`` (JSON objects; keys as text), nested ``ROW``/``TUPLE`` (objects; a
tuple's keys are ``f0``, ``f1``...). ``INSTANT`` and ``PICKLED_BYTE_ARRAY`` are refused when
the schema is built, as Flink's Jackson mapper cannot write them.

Both schemas are picklable (they are rebuilt from their settings) and do the per-record work
in functions compiled once per type; ``serialize_batch``/``deserialize_batch`` run the loop in
one call.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json as _json
import re
from decimal import Decimal
from json import encoder as _json_encoder
from typing import Any, Callable, Dict, List, Optional, Sequence

from flowray.common.sentinels import MISSING
from flowray.common.type_conversion import RecordTypeError, is_sequence, record_converter
from flowray.common.typeinfo import RowTypeInfo, TypeInformation, Types
from flowray.datastream.formats._common import (
    INT_BITS,
    INT_RANGES,
    ReadError,
    RowDeserializationSchema,
    RowSerializationSchema,
    VoidTypeInfo,
    compile_reader,
    compile_writer,
    cut_ms,
    field_label,
    fraction,
    hms,
    inline_text,
    java_double,
    java_float,
    java_trim,
    kind_of,
    micros,
    null_or,
    parse_java_decimal,
    parse_java_double,
    parse_java_int,
    row_factory,
    row_values,
    scalar_text,
    serialize_all,
    shown,
    to_f32,
)

__all__ = ["JsonRowSerializationSchema", "JsonRowDeserializationSchema"]

Encoder = Callable[[Any], str]
Decoder = Callable[[Any], Any]

_UNSUPPORTED = {"INSTANT", "PICKLED"}


def _check_row_type(type_info: Any, who: str) -> RowTypeInfo:
    if type_info is None:
        raise TypeError(f"{who}: type_info must be set (Types.ROW_NAMED(...) or Types.ROW(...))")
    if not isinstance(type_info, RowTypeInfo):
        raise TypeError(f"{who}: only row types are supported (Types.ROW_NAMED/Types.ROW), "
                        f"got {type_info!r}")
    return type_info


def _check_supported(t: TypeInformation, where: str, who: str) -> str:
    kind = kind_of(t)
    if kind in _UNSUPPORTED:
        raise TypeError(f"{who}: field {where} has type {t!r}, which Flink's JSON row format "
                        f"does not support")
    return kind


# -- writing -----------------------------------------------------------------------------------

_c_encode = _json_encoder.encode_basestring
#: Jackson's escapes: the short ones, else ``\\u00XX`` in upper case
_JACKSON_ESCAPES: Dict[int, str] = {i: f"\\u{i:04X}" for i in range(32)}
_JACKSON_ESCAPES.update({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"',
                         92: "\\\\"})


def _jstr(s: str) -> str:
    """A JSON string as Jackson writes it (UTF-8 kept, control characters escaped)."""
    r = _c_encode(s)
    if "\\u00" in r:  # Python writes \\u001f, Jackson \\u001F
        return '"' + s.translate(_JACKSON_ESCAPES) + '"'
    return r


def _json_double(x: float) -> str:
    """A double as Jackson writes it: Java's text, quoted when not finite (``"NaN"``)."""
    text = java_double(x)
    return text if x - x == 0.0 else '"' + text + '"'


def _json_float(x: Any) -> str:
    f = to_f32(x)
    text = java_float(f)
    return text if f - f == 0.0 else '"' + text + '"'


def _iso_time(t: Any) -> str:
    return hms(t) + fraction(t.microsecond) + "Z"


def _leaf_encoder(t: TypeInformation, kind: str) -> Encoder:
    coerce = record_converter(t)
    assert coerce is not None
    scalar = scalar_text(kind, coerce, _json_double, _json_float)
    if scalar is not None:
        return scalar
    if kind in ("STRING", "CHAR"):
        return lambda v: _jstr(v if type(v) is str else coerce(v))
    if kind in ("SQL_DATE", "LOCAL_DATE"):
        return lambda v: '"' + coerce(v).isoformat() + '"'
    if kind in ("SQL_TIME", "LOCAL_TIME"):
        return lambda v: '"' + _iso_time(coerce(v)) + '"'
    if kind in ("SQL_TIMESTAMP", "LOCAL_DATE_TIME"):
        def enc_ts(v: Any) -> str:
            d = coerce(v)
            return '"' + d.date().isoformat() + "T" + _iso_time(d) + '"'
        return enc_ts
    if kind == "BYTES":
        return lambda v: '"' + base64.b64encode(coerce(v)).decode("ascii") + '"'
    raise TypeError(f"no JSON encoder for {t!r}")  # pragma: no cover - kinds are checked


def _nullable(enc: Encoder) -> Encoder:
    return lambda v: "null" if v is None else enc(v)


def _array_encoder(t: Any, kind: str, where: str, who: str) -> Encoder:
    elem_t = t.element_type
    elem = _encoder(elem_t, where + "[]", who)
    type_name = repr(t)
    if kind == "PRIMITIVE_ARRAY":  # no None elements in a primitive array
        def element(x: Any) -> str:
            if x is None:
                raise RecordTypeError(x, repr(elem_t), "an element (not None)")
            return elem(x)
    else:
        element = _nullable(elem)

    def enc(v: Any) -> str:
        if not is_sequence(v):
            raise RecordTypeError(v, type_name, "a list or tuple")
        try:
            return "[" + ",".join(map(element, v)) + "]"
        except RecordTypeError:
            for i, x in enumerate(v):
                try:
                    element(x)
                except RecordTypeError as e:
                    e.segments.append(f"[{i}]")
                    raise e from None
            raise
    return enc


def _map_encoder(t: Any, where: str, who: str) -> Encoder:
    key = _encoder(t.key_type, where + "[key]", who)
    value = _nullable(_encoder(t.value_type, where + "[]", who))
    type_name = repr(t)

    def key_text(k: Any) -> str:
        if k is None:
            raise RecordTypeError(k, type_name, "keys that are not None")
        text = key(k)
        return text if text.startswith('"') else '"' + text + '"'

    def enc(v: Any) -> str:
        if not isinstance(v, dict):
            raise RecordTypeError(v, type_name, "a dict")
        parts = []
        for k, x in v.items():
            try:
                kt = key_text(k)
            except RecordTypeError as e:
                e.segments.append(f"[key {k!r}]")
                raise e from None
            try:
                parts.append(kt + ":" + value(x))
            except RecordTypeError as e:
                e.segments.append(f"[{k!r}]")
                raise e from None
        return "{" + ",".join(parts) + "}"
    return enc


def _fields_encoder(names: Sequence[str], types: Sequence[TypeInformation],
                    values: Callable[[Any], Sequence[Any]], where: str, who: str) -> Encoder:
    """A function writing a record of fields ``names``/``types`` as a JSON object; ``values``
    gives a record's field values in order."""
    kinds = [_check_supported(ft, where + field_label(nm), who) for nm, ft in zip(names, types)]
    encs = [_encoder(ft, where + field_label(nm), who) for nm, ft in zip(names, types)]
    keys = [("," if i else "{") + _jstr(nm) + ":" for i, nm in enumerate(names)]
    body = " + ".join(f"{keys[i]!r} + {inline_text(kinds[i], i, 'null')}"
                      for i in range(len(names)))
    return compile_writer(body + " + '}'" if names else "'{}'", values, encs,
                          [field_label(nm) for nm in names], f"<JSON writer of {where}>",
                          {"S": _jstr, "D": _json_double})


def _encoder(t: TypeInformation, where: str, who: str) -> Encoder:
    """A function writing a value (not ``None``) of type ``t`` as JSON text."""
    kind = _check_supported(t, where, who)
    if kind == "VOID":
        return lambda v: "null"
    if kind == "ROW":
        names = list(t.field_names)
        return _fields_encoder(names, t.field_types, row_values(names, repr(t)), where, who)
    if kind == "TUPLE":
        n = len(t.field_types)
        names = [f"f{i}" for i in range(n)]
        type_name = repr(t)

        def tuple_values(v: Any) -> Sequence[Any]:
            if not isinstance(v, (tuple, list)) or len(v) != n:
                raise RecordTypeError(v, type_name, f"a tuple, list or Row of {n} values")
            return v
        return _fields_encoder(names, t.field_types, tuple_values, where, who)
    if kind in ("ARRAY", "LIST", "PRIMITIVE_ARRAY"):
        return _array_encoder(t, kind, where, who)
    if kind == "MAP":
        return _map_encoder(t, where, who)
    return _leaf_encoder(t, kind)


# -- reading -----------------------------------------------------------------------------------

def _jkind(v: Any) -> str:
    if isinstance(v, str):
        return "JSON string"
    if isinstance(v, bool):
        return "JSON boolean"
    if isinstance(v, (int, float, Decimal)):
        return "JSON number"
    if isinstance(v, dict):
        return "JSON object"
    if isinstance(v, list):
        return "JSON array"
    return "JSON null" if v is None else type(v).__name__


def _as_text(v: Any) -> str:
    """Jackson's ``JsonNode.asText()`` (containers give ``""``)."""
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return java_double(v)
    if t is Decimal:
        return str(v)
    return ""


def _to_text(v: Any) -> str:
    """Jackson's ``JsonNode.toString()``: compact JSON."""
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "{" + ",".join(_jstr(k) + ":" + _to_text(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(map(_to_text, v)) + "]"
    if isinstance(v, str):
        return _jstr(v)
    return _as_text(v)


def _bad(v: Any, kind: str, why: str) -> ReadError:
    return ReadError(f"{shown(v)} ({_jkind(v)}) does not read as {kind}: {why}")


def _int_decoder(kind: str) -> Decoder:
    bits = INT_BITS[kind]
    lo, hi = INT_RANGES[kind]
    small = kind in ("BYTE", "SHORT")  # Byte.parseByte/Short.parseShort of asText

    def dec(v: Any) -> Any:
        t = type(v)
        if t is int:
            if lo <= v <= hi:
                return v
        elif (t is float or t is Decimal) and not small:
            if lo <= v <= hi:  # canConvertToInt/Long: the value truncated
                return int(v)
        try:
            return parse_java_int(_as_text(v), bits)
        except ValueError as e:
            raise _bad(v, kind, str(e)) from None
    return dec


def _decimal_decoder(v: Any) -> Any:
    if type(v) is Decimal:
        return v
    if type(v) is int:
        return Decimal(v)
    try:
        return parse_java_decimal(_as_text(v))
    except ValueError as e:
        raise _bad(v, "BIG_DEC", str(e)) from None


def _big_int_decoder(v: Any) -> Any:
    if type(v) is int:
        return v
    try:
        return parse_java_int(_as_text(v), 0)
    except ValueError as e:
        raise _bad(v, "BIG_INT", str(e)) from None


def _double_decoder(v: Any) -> Any:
    t = type(v)
    if t is float:
        return v
    if t is int or t is Decimal:
        return float(v)
    try:
        return parse_java_double(_as_text(v))
    except ValueError as e:
        raise _bad(v, "DOUBLE", str(e)) from None


def _float_decoder(v: Any) -> Any:
    t = type(v)
    if t is float or t is int or t is Decimal:
        return to_f32(float(v))
    try:
        return to_f32(parse_java_double(_as_text(v)))
    except ValueError as e:
        raise _bad(v, "FLOAT", str(e)) from None


def _boolean_decoder(v: Any) -> Any:
    if type(v) is bool:
        return v
    return java_trim(_as_text(v)).lower() == "true"  # Boolean.parseBoolean


def _string_decoder(v: Any) -> Any:
    if type(v) is str:
        return v
    return _to_text(v) if isinstance(v, (dict, list)) else _as_text(v)


def _char_decoder(v: Any) -> Any:
    if type(v) is str and len(v) == 1:
        return v
    if type(v) is int and 0 <= v <= 0xFFFF:
        return chr(v)
    raise _bad(v, "CHAR", "expected a string of one character")


_DATE_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME_RE = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{0,9}))?Z")
_TIMESTAMP_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T"
                           r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{0,9}))?Z")


def _date_decoder(kind: str) -> Decoder:
    def dec(v: Any) -> Any:
        m = _DATE_RE.fullmatch(_as_text(v))
        if m is None:
            raise _bad(v, kind, "expected an ISO date yyyy-MM-dd")
        try:
            return _dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError as e:
            raise _bad(v, kind, str(e)) from None
    return dec


def _time_decoder(kind: str) -> Decoder:
    def dec(v: Any) -> Any:
        m = _TIME_RE.fullmatch(_as_text(v))
        if m is None:
            raise _bad(v, kind, "expected an RFC 3339 time HH:mm:ssZ")
        if m[4] and int(m[4]):
            raise _bad(v, kind, "Only a time in UTC timezone without milliseconds is "
                                "supported yet (as in Flink)")
        try:
            return _dt.time(int(m[1]), int(m[2]), int(m[3]))
        except ValueError as e:
            raise _bad(v, kind, str(e)) from None
    return dec


def _timestamp_decoder(kind: str) -> Decoder:
    millis = kind == "SQL_TIMESTAMP"

    def dec(v: Any) -> Any:
        m = _TIMESTAMP_RE.fullmatch(_as_text(v))
        if m is None:
            raise _bad(v, kind, "expected an RFC 3339 timestamp yyyy-MM-ddTHH:mm:ss[.SSS]Z")
        us = micros(m[7])
        try:
            d = _dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]),
                             us)
        except ValueError as e:
            raise _bad(v, kind, str(e)) from None
        return cut_ms(d) if millis else d
    return dec


def _bytes_decoder(v: Any) -> Any:
    if type(v) is not str:
        return None  # JsonNode.binaryValue() of a non-text node
    try:
        return base64.b64decode("".join(v.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise _bad(v, "PRIMITIVE_ARRAY(BYTE)", f"not base64 ({e})") from None


def _array_decoder(t: Any, kind: str, opts: "_ReadOptions") -> Decoder:
    elem = _decoder(t.element_type, opts)
    element = null_or(elem, opts.ignore)
    type_name = repr(t)
    primitive = kind == "PRIMITIVE_ARRAY"

    def dec(v: Any) -> Any:
        if type(v) is not list:
            raise _bad(v, type_name, "expected a JSON array")
        out = []
        for i, x in enumerate(v):
            try:
                y = element(x)
            except ReadError as e:
                raise e.at(f"[{i}]") from None
            if y is None and primitive:
                raise _bad(x, type_name, "a primitive array has no null elements").at(f"[{i}]")
            out.append(y)
        return out
    return dec


def _map_decoder(t: Any, opts: "_ReadOptions") -> Decoder:
    key = null_or(_decoder(t.key_type, opts), opts.ignore)
    value = null_or(_decoder(t.value_type, opts), opts.ignore)

    def dec(v: Any) -> Any:
        if type(v) is not dict:
            return {}  # Jackson's fields() of a non-object: nothing
        out = {}
        for k, x in v.items():
            try:
                ck = key(k)
            except ReadError as e:
                raise e.at(f"[key {k!r}]") from None
            try:
                out[ck] = value(x)
            except ReadError as e:
                raise e.at(f"[{k!r}]") from None
        return out
    return dec


def _read_inline(kind: str, i: int) -> str:
    """A Python expression reading variable ``x{i}`` (fast paths for common types)."""
    x, r = f"x{i}", f"r{i}"
    if kind in INT_RANGES and kind not in ("BYTE", "SHORT"):
        lo, hi = INT_RANGES[kind]
        return f"({x} if type({x}) is int and {lo} <= {x} <= {hi} else {r}({x}))"
    if kind == "STRING":
        return f"({x} if type({x}) is str else {r}({x}))"
    if kind == "DOUBLE":
        return f"({x} if type({x}) is float else {r}({x}))"
    if kind == "BOOLEAN":
        return f"({x} if type({x}) is bool else {r}({x}))"
    return f"{r}({x})"


class _ReadOptions:
    def __init__(self, fail_on_missing: bool, ignore: bool, who: str) -> None:
        self.fail_on_missing, self.ignore, self.who = fail_on_missing, ignore, who


_MISSING = MISSING


def _missing(name: str) -> Any:
    raise ReadError(f"Could not find field with name {name!r}.")


def _object_decoder(names: Sequence[str], types: Sequence[TypeInformation],
                    make: Callable[[Any], Any], opts: "_ReadOptions", where: str) -> Decoder:
    """A function reading a JSON object into ``make(values)`` of fields ``names``."""
    kinds = [_check_supported(ft, where + field_label(nm), opts.who)
             for nm, ft in zip(names, types)]
    fields = [null_or(_decoder(ft, opts, where + field_label(nm)), opts.ignore)
              for nm, ft in zip(names, types)]
    head = ["def read(d):",
            "    if type(d) is not dict:",
            "        raise ReadError(f'{shown(d)} ({jkind(d)}) is not a JSON object')",
            "    g = d.get"]
    exprs = [_read_inline(kind, i) for i, kind in enumerate(kinds)]
    if opts.fail_on_missing:
        head += [f"    x{i} = g({nm!r}, MISSING)" for i, nm in enumerate(names)]
        exprs = [f"(missing({nm!r}) if x{i} is MISSING else {expr})"
                 for i, (nm, expr) in enumerate(zip(names, exprs))]
    else:
        head += [f"    x{i} = g({nm!r})" for i, nm in enumerate(names)]
    return compile_reader(head, exprs, [field_label(nm) for nm in names], make, fields,
                          f"<JSON reader of {where}>",
                          {"shown": shown, "jkind": _jkind, "MISSING": _MISSING,
                           "missing": _missing})


def _decoder(t: TypeInformation, opts: _ReadOptions, where: str = "record") -> Decoder:
    """A function reading a JSON value (not ``None``) as type ``t`` (raises ReadError)."""
    kind = _check_supported(t, where, opts.who)
    if kind == "VOID":
        return lambda v: None
    if kind == "ROW":
        return _object_decoder(t.field_names, t.field_types, row_factory(t.field_names), opts,
                               where)
    if kind == "TUPLE":
        n = len(t.field_types)
        return _object_decoder([f"f{i}" for i in range(n)], t.field_types, tuple, opts, where)
    if kind in ("ARRAY", "LIST", "PRIMITIVE_ARRAY"):
        return _array_decoder(t, kind, opts)
    if kind == "MAP":
        return _map_decoder(t, opts)
    if kind in INT_BITS and kind != "BIG_INT":
        return _int_decoder(kind)
    simple: Dict[str, Decoder] = {
        "BIG_INT": _big_int_decoder, "BIG_DEC": _decimal_decoder, "DOUBLE": _double_decoder,
        "FLOAT": _float_decoder, "BOOLEAN": _boolean_decoder, "STRING": _string_decoder,
        "CHAR": _char_decoder, "BYTES": _bytes_decoder}
    if kind in simple:
        return simple[kind]
    if kind in ("SQL_DATE", "LOCAL_DATE"):
        return _date_decoder(kind)
    if kind in ("SQL_TIME", "LOCAL_TIME"):
        return _time_decoder(kind)
    if kind in ("SQL_TIMESTAMP", "LOCAL_DATE_TIME"):
        return _timestamp_decoder(kind)
    raise TypeError(f"no JSON decoder for {t!r}")  # pragma: no cover - kinds are checked


def _has_big_dec(t: TypeInformation) -> bool:
    kind = kind_of(t)
    if kind == "BIG_DEC":
        return True
    if kind in ("ROW", "TUPLE"):
        return any(_has_big_dec(f) for f in t.field_types)
    if kind in ("ARRAY", "LIST", "PRIMITIVE_ARRAY"):
        return _has_big_dec(t.element_type)
    if kind == "MAP":
        return _has_big_dec(t.key_type) or _has_big_dec(t.value_type)
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (Jackson refuses non-numeric numbers)")


# -- JSON schema -------------------------------------------------------------------------------

def _json_schema_type(schema: str) -> TypeInformation:
    """Flink's ``JsonRowSchemaConverter.convert``: a JSON schema (draft 7 subset) as a type."""
    if schema is None:
        raise TypeError("The json_schema must not be None.")
    try:
        root = _json.loads(schema)
    except ValueError as e:
        raise ValueError(f"Invalid JSON schema: {e}") from None
    return _schema_node("<root>", root, root)


def _resolve(ref: str, origin: Any, root: Any) -> Any:
    if not ref.startswith("#"):
        raise ValueError("Only JSON schemes with simple references (one indirection in the "
                         f"same document) are supported yet. But was: {ref}")
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ValueError(f"Could not find reference: {ref}")
    if node is origin:
        raise ValueError(f"Cyclic references are not supported:{ref}")
    return node


def _schema_node(location: str, node: Any, root: Any) -> TypeInformation:
    if not isinstance(node, dict):
        raise ValueError(f"Invalid JSON schema node: {location}")
    found: List[TypeInformation] = []

    def add(t: TypeInformation) -> None:
        if t not in found:
            found.append(t)

    ref = None
    if isinstance(node.get("$ref"), str):
        ref = _resolve(node["$ref"], node, root)
    if "type" in node:
        types = node["type"]
        names = [str(x) for x in types] if isinstance(types, list) else \
            [types] if isinstance(types, str) else []
        for name in names:
            if name == "null":
                add(VoidTypeInfo())
            elif name == "boolean":
                add(Types.BOOLEAN())
            elif name == "string":
                if "format" in node:
                    fmt = node["format"]
                    if not isinstance(fmt, str):
                        raise ValueError(f"Invalid 'format' property in node: {location}")
                    add({"date": Types.SQL_DATE(), "time": Types.SQL_TIME(),
                         "date-time": Types.SQL_TIMESTAMP()}.get(fmt, Types.STRING()))
                elif "contentEncoding" in node:
                    enc = node["contentEncoding"]
                    if enc != "base64":
                        raise ValueError(f"Invalid encoding '{enc}' in node: {location}")
                    add(Types.PRIMITIVE_ARRAY(Types.BYTE()))
                else:
                    add(Types.STRING())
            elif name in ("number", "integer"):
                add(Types.BIG_DEC())
            elif name == "object":
                add(_schema_object(location, node, root))
            elif name == "array":
                add(_schema_array(location, node, root))
            else:
                raise ValueError(f"Unsupported type '{name}' in node: {location}")
    elif ref is not None and isinstance(ref, dict) and "type" in ref:
        add(_schema_node(node["$ref"], ref, root))
    one_of = node.get("oneOf")
    if isinstance(one_of, list):
        for i, sub in enumerate(one_of):
            add(_schema_node(f"{location}/oneOf[{i}]", sub, root))
    elif ref is not None and isinstance(ref, dict) and isinstance(ref.get("oneOf"), list):
        for i, sub in enumerate(ref["oneOf"]):
            add(_schema_node(f"{node['$ref']}/oneOf[{i}]", sub, root))
    if any(k in node for k in ("allOf", "anyOf", "not", "extends", "disallow")):
        raise ValueError("Union types are such as 'allOf', 'anyOf' etc. and extending are not "
                         "supported yet.")
    if not found:
        raise ValueError(f"No type could be found in node:{location}")
    voids = [t for t in found if isinstance(t, VoidTypeInfo)]
    if len(found) > 2 or (len(found) == 2 and not voids):
        raise ValueError("Union types with more than just a null type are not supported yet.")
    rest = [t for t in found if not isinstance(t, VoidTypeInfo)]
    return rest[0] if rest else found[0]


def _schema_object(location: str, node: Dict[str, Any], root: Any) -> TypeInformation:
    if "properties" not in node:
        return Types.ROW([])
    props = node["properties"]
    if not isinstance(props, dict):
        raise ValueError(f"Invalid 'properties' property for object type in node: {location}")
    names = list(props)
    types = [_schema_node(f"{location}/{k}", v, root) for k, v in props.items()]
    if node.get("additionalProperties") is True:
        raise ValueError(f"An object must not allow additional properties in node: {location}")
    return Types.ROW_NAMED(names, types)


def _schema_array(location: str, node: Dict[str, Any], root: Any) -> TypeInformation:
    if "items" not in node:
        raise ValueError(f"Arrays must specify an 'items' property in node: {location}")
    items = node["items"]
    if isinstance(items, dict):
        return Types.OBJECT_ARRAY(_schema_node(f"{location}/items", items, root))
    if isinstance(items, list):
        types = [_schema_node(f"{location}/items[{i}]", x, root) for i, x in enumerate(items)]
        if node.get("additionalItems") is True:
            raise ValueError(f"An array tuple must not allow additional items in node: "
                             f"{location}")
        return Types.ROW(types)
    raise ValueError(f"Invalid type for 'items' property in node: {location}")


# -- the schemas -------------------------------------------------------------------------------

class JsonRowSerializationSchema(RowSerializationSchema):
    """Writes a row (a Row, tuple or list of the type's arity, or a dict of its fields) as
    the UTF-8 bytes of one compact JSON object, as Flink's ``JsonRowSerializationSchema``.
    ``None`` is written as ``null``. Build it with
    ``JsonRowSerializationSchema.builder().with_type_info(type_info).build()``.

    >>> from flowray.common.typeinfo import Types
    >>> s = JsonRowSerializationSchema.builder().with_type_info(
    ...     Types.ROW([Types.LONG(), Types.SQL_TIMESTAMP()])).build()
    >>> import datetime
    >>> s.serialize_batch([(1, datetime.datetime(2024, 1, 5, 12, 30, 0, 500000)), (2, None)])
    [b'{"f0":1,"f1":"2024-01-05T12:30:00.5Z"}', b'{"f0":2,"f1":null}']
    """

    _who = "JsonRowSerializationSchema"
    _STATE = _HASHED = ("type_info",)

    def __init__(self, type_info: RowTypeInfo) -> None:
        self._type_info = _check_row_type(type_info, self._who)
        self._build()

    def _build(self) -> None:
        self._encode = _encoder(self._type_info, "record", "JsonRowSerializationSchema")

    @staticmethod
    def builder() -> "JsonRowSerializationSchema.Builder":
        """A :class:`JsonRowSerializationSchema.Builder`."""
        return JsonRowSerializationSchema.Builder()

    class Builder:
        """Builder of a :class:`JsonRowSerializationSchema`: ``with_type_info`` is required."""

        def __init__(self) -> None:
            self._type_info: Optional[TypeInformation] = None

        def with_type_info(self, type_info: TypeInformation) -> \
                "JsonRowSerializationSchema.Builder":
            """The row type (``Types.ROW_NAMED``/``Types.ROW``); its field names are the JSON
            keys."""
            self._type_info = type_info
            return self

        def build(self) -> "JsonRowSerializationSchema":
            """The schema; ``TypeError`` when no (row) type was set or a field's type cannot
            be written as JSON."""
            if self._type_info is None:
                raise TypeError("Typeinfo should be set.")
            return JsonRowSerializationSchema(self._type_info)  # type: ignore[arg-type]

    def serialize(self, element: Any) -> bytes:
        """The JSON bytes of ``element``; :class:`RecordTypeError` naming the field and the
        value when it does not fit the type."""
        if element is None:
            return b"null"
        text = self._encode(element)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise RecordTypeError(element, "JSON text", f"strings that encode as UTF-8 ({e})") \
                from None

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        """``[serialize(e) for e in elements]`` in one call; an error has ``index``."""
        write_all = getattr(self._encode, "write_all", None)
        if write_all is not None:
            try:
                return [text.encode("utf-8") for text in write_all(elements)]
            except Exception:  # noqa: BLE001 - one record at a time, to name the one that fails
                pass
        return serialize_all(self.serialize, elements)

    def get_type_info(self) -> RowTypeInfo:
        """The row type the schema writes."""
        return self._type_info

    def __repr__(self) -> str:
        return f"JsonRowSerializationSchema({self._type_info!r})"


class JsonRowDeserializationSchema(RowDeserializationSchema):
    """Reads the JSON object in a message as a :class:`~flowray.common.types.Row` of the
    type, as Flink's ``JsonRowDeserializationSchema``: fields are looked up by name (other
    keys are ignored), a missing field or ``null`` is ``None`` (an error with
    ``fail_on_missing_field``), a JSON ``null`` message is ``None``. A message that does not
    read raises :class:`~flowray.datastream.formats._common.DeserializationError`; with
    ``ignore_parse_errors`` a field that does not read is ``None`` and a message that does
    not read at all is ``None``. Build it with
    ``JsonRowDeserializationSchema.builder().type_info(type_info).build()``.

    >>> from flowray.common.typeinfo import Types
    >>> d = JsonRowDeserializationSchema.builder().json_schema(
    ...     '{"type": "object", "properties": {"id": {"type": "integer"}, '
    ...     '"tags": {"type": "array", "items": {"type": "string"}}}}').build()
    >>> d.get_produced_type()
    Row(id: BIG_DEC, tags: ObjectArray(STRING))
    >>> d.deserialize_batch([b'{"id": 1.50, "tags": ["a", null]}', b'null'])
    [Row(id=Decimal('1.50'), tags=['a', None]), None]
    """

    _who = "JsonRowDeserializationSchema"
    _STATE = _HASHED = ("type_info", "fail_on_missing_field", "ignore_parse_errors")

    def __init__(self, type_info: RowTypeInfo, fail_on_missing_field: bool = False,
                 ignore_parse_errors: bool = False) -> None:
        self._type_info = _check_row_type(type_info, self._who)
        if fail_on_missing_field and ignore_parse_errors:
            raise ValueError("JSON format doesn't support failOnMissingField and "
                             "ignoreParseErrors are both true.")
        self._fail_on_missing_field = bool(fail_on_missing_field)
        self._ignore_parse_errors = bool(ignore_parse_errors)
        self._build()

    def _build(self) -> None:
        opts = _ReadOptions(self._fail_on_missing_field, self._ignore_parse_errors, self._who)
        self._decode = _decoder(self._type_info, opts)
        big = _has_big_dec(self._type_info)
        self._json = _json.JSONDecoder(parse_float=Decimal if big else float,
                                       parse_constant=_reject_constant)

    @staticmethod
    def builder() -> "JsonRowDeserializationSchema.Builder":
        """A :class:`JsonRowDeserializationSchema.Builder`."""
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        """Builder of a :class:`JsonRowDeserializationSchema`: ``type_info`` or
        ``json_schema`` is required."""

        def __init__(self) -> None:
            self._type_info: Optional[TypeInformation] = None
            self._fail_on_missing_field = False
            self._ignore_parse_errors = False

        def type_info(self, type_info: TypeInformation) -> "JsonRowDeserializationSchema.Builder":
            """The row type; its field names are the JSON keys read."""
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str) -> "JsonRowDeserializationSchema.Builder":
            """The row type from a JSON schema, as Flink's ``JsonRowSchemaConverter``:
            ``object`` with ``properties`` is a named row, ``array`` an object array (a tuple
            ``items`` list a row), ``number``/``integer`` are ``BIG_DEC``, ``string`` with
            ``format`` ``date``/``time``/``date-time`` the SQL time types, with
            ``contentEncoding: base64`` bytes; ``null`` in a type list means nullable; simple
            ``#/...`` references are followed. ``ValueError`` for anything else."""
            self._type_info = _json_schema_type(json_schema)
            return self

        def fail_on_missing_field(self) -> "JsonRowDeserializationSchema.Builder":
            """Fail on a missing field (by default it is ``None``)."""
            self._fail_on_missing_field = True
            return self

        def ignore_parse_errors(self) -> "JsonRowDeserializationSchema.Builder":
            """A field that does not read is ``None``, a message that does not read is
            ``None`` (by default both raise)."""
            self._ignore_parse_errors = True
            return self

        def build(self) -> "JsonRowDeserializationSchema":
            """The schema; ``TypeError`` without a (row) type, ``ValueError`` with both
            ``fail_on_missing_field`` and ``ignore_parse_errors`` (as Flink)."""
            if self._type_info is None:
                raise TypeError("type_info (or json_schema) should be set.")
            return JsonRowDeserializationSchema(self._type_info,  # type: ignore[arg-type]
                                                self._fail_on_missing_field,
                                                self._ignore_parse_errors)

    def _read(self, message: bytes) -> Optional[Any]:
        """The row in ``message`` (``None`` for a JSON ``null``); ReadError when it does not
        read."""
        try:
            data = bytes(message) if not isinstance(message, bytes) else message
            # json.detect_encoding's answer for the common case, without calling it
            plain = data[:1] == b"{" and data[1:2] != b"\x00"
            text = data.decode("utf-8" if plain else _json.detect_encoding(data), "surrogatepass")
            try:
                value = self._json.decode(text)
            except _json.JSONDecodeError as e:
                if e.msg != "Extra data":
                    raise
                # Jackson reads the first value and ignores what follows it
                value = self._json.raw_decode(text.lstrip(" \t\n\r"))[0]
        except (ValueError, UnicodeDecodeError, TypeError) as e:
            raise ReadError(f"not JSON ({e})") from None
        return None if value is None else self._decode(value)

    def __repr__(self) -> str:
        return (f"JsonRowDeserializationSchema({self._type_info!r}, fail_on_missing_field="
                f"{self._fail_on_missing_field}, ignore_parse_errors="
                f"{self._ignore_parse_errors})")
