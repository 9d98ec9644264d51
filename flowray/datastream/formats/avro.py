"""Avro rows, as ``pyflink.datastream.formats.avro``: :class:`AvroRowSerializationSchema`
and :class:`AvroRowDeserializationSchema` write and read Avro's binary encoding of one
record per message without a header or schema id ("schemaless"), which is what Flink's
``AvroRowSerializationSchema`` writes to Kafka; the encoding is fastavro's
``schemaless_writer``/``schemaless_reader``.

The schema is an Avro record schema (a JSON string, as PyFlink takes it). A row is written by
position: field ``i`` of the row (a Row, tuple or list with as many values as the record has
fields, or a dict of the fields) is the record's field ``i``; nested records are nested rows.
Reading gives :class:`~flowray.common.types.Row` records named by the Avro fields.

>>> schema = '''{"type": "record", "name": "TestRecord", "fields": [
...     {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}'''
>>> ser = AvroRowSerializationSchema(avro_schema_string=schema)
>>> ser.serialize((1, "hi"))
b'\\x02\\x04hi'
>>> de = AvroRowDeserializationSchema(avro_schema_string=schema)
>>> de.deserialize(b'\\x02\\x04hi')
Row(id=1, name='hi')

Conversions follow Flink's ``AvroRowDeserializationSchema`` (its legacy type mapping, see
:meth:`AvroRowDeserializationSchema.get_produced_type`): ``enum`` and ``string`` give ``str``,
``bytes``/``fixed`` give ``bytes`` (``Decimal`` with a ``decimal`` logical type), ``array`` a
list, ``map`` a dict, a union with ``null`` its other type or ``None``; ``date`` gives a
``date``, ``time-millis``/``time-micros`` a ``time`` and ``timestamp-millis``/
``timestamp-micros`` a naive UTC ``datetime`` (both at milliseconds, as PyFlink's
``SQL_TIME``/``SQL_TIMESTAMP``); ``local-timestamp-*`` values stay epoch numbers (``LONG``) and
``uuid`` strings stay strings, as in Flink. Writing takes the same values (a naive
``datetime`` is UTC, as in Flink on a UTC JVM), checks ints, longs, floats, doubles,
booleans and strings with the rules flowray applies to declared types, and raises
:class:`~flowray.common.type_conversion.RecordTypeError` naming the field and the value for
a row that does not fit:

>>> ser.serialize((1, 2))
Traceback (most recent call last):
...
flowray.common.type_conversion.RecordTypeError: record.name: 2 (int) does not fit STRING: expected a str

A message that is not a record of the schema raises
:class:`~flowray.datastream.formats._common.DeserializationError` (Flink's Avro row format has
no option to skip it).

Decimals are rescaled to the schema's scale (``Decimal("1.5")`` in a ``decimal(4, 2)`` field
is written as 150); Flink 2.3's ``AvroRowSerializationSchema`` writes the unscaled value of
the decimal as given (15), a known bug, so the bytes agree when the decimal already has the
schema's scale.

:class:`AvroSchema` parses a schema (``parse_string``, ``parse_file``);
:class:`GenericRecordAvroTypeInfo` marks a stream of Avro generic records (dicts), which pass
between operators unchanged. PyFlink's ``AvroInputFormat`` and ``AvroBulkWriters`` (Avro
container files through Java file formats) are not provided.
"""

from __future__ import annotations

import copy
import datetime as _dt
import io
import json as _json
import uuid as _uuid
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from flowray.common.optional_deps import require
from flowray.common.type_conversion import RecordTypeError, record_converter
from flowray.common.typeinfo import PickledBytesTypeInfo, RowTypeInfo, TypeInformation, Types
from flowray.datastream.formats._common import (
    DeserializationError,
    RowDeserializationSchema,
    RowSerializationSchema,
    VoidTypeInfo,
    compile_writer,
    cut_ms,
    field_label,
    row_factory,
    row_values,
)

__all__ = ["AvroSchema", "GenericRecordAvroTypeInfo", "AvroRowSerializationSchema",
           "AvroRowDeserializationSchema"]

Converter = Callable[[Any], Any]


_FASTAVRO: Any = None


def _fastavro() -> Any:
    """fastavro (the ``avro`` extra), imported when a schema is first used."""
    global _FASTAVRO
    if _FASTAVRO is None:
        _FASTAVRO = require("fastavro", "avro", "The Avro row format")
    return _FASTAVRO


class AvroSchema:
    """An Avro schema, as PyFlink's ``AvroSchema`` (which wraps Java's
    ``org.apache.avro.Schema``): made by :meth:`parse_string` or :meth:`parse_file` (or from
    the schema's JSON text or object); ``str()`` is its compact JSON.

    >>> s = AvroSchema.parse_string(
    ...     '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}')
    >>> str(s)
    '{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}'
    >>> AvroSchema.parse_string('{"type": "record", "name": "R"}')
    Traceback (most recent call last):
    ...
    ValueError: Could not parse Avro schema string: ...
    """

    def __init__(self, schema: Union[str, Dict[str, Any], List[Any]]) -> None:
        if isinstance(schema, AvroSchema):
            schema = schema.to_json()
        if isinstance(schema, str):
            try:
                schema = _json.loads(schema)
            except ValueError as e:
                raise ValueError(f"Could not parse Avro schema string: not JSON ({e})") from None
        fastavro = _fastavro()   # a missing extra is named, not taken for a bad schema
        try:
            _check_structure(schema, "schema")
            self._parsed = fastavro.parse_schema(copy.deepcopy(schema))
        except Exception as e:  # noqa: BLE001 - fastavro raises several kinds
            raise ValueError(f"Could not parse Avro schema string: {e}") from None
        self._json = schema
        self._schema_string: Optional[str] = None

    @staticmethod
    def parse_string(json_schema: str) -> "AvroSchema":
        """The schema in JSON text ``json_schema``; ``ValueError`` when it is not one."""
        return AvroSchema(json_schema)

    @staticmethod
    def parse_file(file_path: str) -> "AvroSchema":
        """The schema in the file ``file_path`` (an ``.avsc`` JSON file)."""
        with open(file_path, encoding="utf-8") as f:
            return AvroSchema(f.read())

    def to_json(self) -> Any:
        """The schema as a JSON object (dicts and lists)."""
        return copy.deepcopy(self._json)

    def __str__(self) -> str:
        if self._schema_string is None:
            self._schema_string = _json.dumps(self._json, separators=(",", ":"),
                                              ensure_ascii=False)
        return self._schema_string

    def __repr__(self) -> str:
        return f"AvroSchema({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and self._json == other._json

    def __hash__(self) -> int:
        return hash(str(self))

    def __getstate__(self) -> Dict[str, Any]:
        return {"json": self._json}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["json"])  # type: ignore[misc]


_REQUIRED = {"record": ("name", "fields"), "error": ("name", "fields"),
             "enum": ("name", "symbols"), "fixed": ("name", "size"), "array": ("items",),
             "map": ("values",)}


def _check_structure(node: Any, where: str) -> None:
    """The properties Avro's Java parser requires (fastavro's messages for these are bare
    ``KeyError``s, and it takes a record without ``fields``)."""
    if isinstance(node, list):
        for i, branch in enumerate(node):
            _check_structure(branch, f"{where}[{i}]")
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if isinstance(t, (dict, list)):
        _check_structure(t, where)
        return
    missing = [k for k in _REQUIRED.get(t, ()) if k not in node]  # type: ignore[arg-type]
    if missing:
        raise ValueError(f"{where}: an Avro {t} needs {', '.join(map(repr, missing))}")
    if t in ("record", "error"):
        if not isinstance(node["fields"], list):
            raise ValueError(f"{where}: the fields of a record must be a list")
        for f in node["fields"]:
            if isinstance(f, dict) and "type" in f:
                _check_structure(f["type"], f"{where}.{f.get('name')}")
    elif t == "array":
        _check_structure(node["items"], f"{where}[]")
    elif t == "map":
        _check_structure(node["values"], f"{where}[]")


class GenericRecordAvroTypeInfo(PickledBytesTypeInfo):
    """The type of a stream of Avro generic records of ``schema`` (dicts), as PyFlink's
    ``GenericRecordAvroTypeInfo``; the records pass between operators unchanged.

    >>> GenericRecordAvroTypeInfo(AvroSchema('{"type": "record", "name": "R", "fields": []}'))
    GenericRecordAvroTypeInfo(R)
    """

    def __init__(self, schema: AvroSchema) -> None:
        if not isinstance(schema, AvroSchema):
            schema = AvroSchema(schema)
        self._schema = schema
        parsed = schema._parsed
        name = parsed.get("name", parsed.get("type")) if isinstance(parsed, dict) else "union"
        super().__init__(f"GenericRecordAvroTypeInfo({name})")

    def get_schema(self) -> AvroSchema:
        return self._schema


# -- schema helpers ----------------------------------------------------------------------------

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
#: logical types Flink reads as their plain Avro type
_RAW_LOGICAL = {"local-timestamp-millis", "local-timestamp-micros", "uuid"}


def _schema_of(avro_schema_string: Any, who: str) -> AvroSchema:
    if avro_schema_string is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    s = avro_schema_string if isinstance(avro_schema_string, AvroSchema) \
        else AvroSchema(avro_schema_string)
    parsed = s._parsed
    if not (isinstance(parsed, dict) and parsed.get("type") == "record"):
        raise ValueError(f"{who}: the Avro schema must be a record, got {str(s)[:200]}")
    return s


def _no_record_class(record_class: Any, who: str) -> None:
    if record_class is not None:
        raise ValueError(f"{who}: record_class names a Java SpecificRecord class "
                         f"({record_class!r}), which flowray (no JVM) cannot load; pass the "
                         "class's Avro schema as avro_schema_string instead")


class _Named:
    """The named types of a parsed schema, by full name."""

    def __init__(self, parsed: Dict[str, Any]) -> None:
        self.types: Dict[str, Any] = dict(parsed.get("__named_schemas", {}))

    def resolve(self, node: Any) -> Any:
        if isinstance(node, str) and node not in _PRIMITIVES:
            try:
                return self.types[node]
            except KeyError:
                raise ValueError(f"unknown Avro type {node!r}") from None
        return node


def _type_of(node: Any) -> Tuple[str, Optional[str]]:
    """``(Avro type, logical type)`` of a resolved schema node."""
    if isinstance(node, str):
        return node, None
    if isinstance(node, list):
        return "union", None
    return node["type"] if isinstance(node["type"], str) else "complex", node.get("logicalType")


def _nullable_branch(node: List[Any]) -> Optional[Any]:
    """Flink's reading of a union: ``[null, X]``, ``[X, null]`` and ``[X]`` are ``X``."""
    if len(node) == 2 and node[0] == "null":
        return node[1]
    if len(node) == 2 and node[1] == "null":
        return node[0]
    if len(node) == 1:
        return node[0]
    return None


Make = Callable[[Any, "_Named", Dict[str, Converter]], Optional[Converter]]


def _union(node: List[Any], named: "_Named", memo: Dict[str, Converter], make: Make
           ) -> Optional[Converter]:
    """``make``'s converter of a union's branch ``X`` (:func:`_nullable_branch`), passing
    ``None`` through; ``None`` (the value as it is) for a general union."""
    inner = _nullable_branch(node)
    conv = None if inner is None else make(inner, named, memo)
    if conv is None:
        return None
    return lambda v: None if v is None else conv(v)


# -- writing -----------------------------------------------------------------------------------

_CHECKED = {"boolean": Types.BOOLEAN(), "int": Types.INT(), "long": Types.LONG(),
            "float": Types.FLOAT(), "double": Types.DOUBLE(), "string": Types.STRING()}


def _null_only(v: Any) -> Any:
    if v is not None:
        raise RecordTypeError(v, "null", "None")
    return None


def _writer(node: Any, named: _Named, memo: Dict[str, Converter]) -> Optional[Converter]:
    """A function making fastavro's datum of a value (``None``: the value as it is)."""
    node = named.resolve(node)
    avro, logical = _type_of(node)
    if avro == "union":  # a general union: fastavro picks the branch, as Avro does
        return _union(node, named, memo, _writer)
    if avro == "null":
        return _null_only
    if avro in _CHECKED and logical is None:
        return record_converter(_CHECKED[avro])
    if avro == "record":
        return _record_writer(node, named, memo)
    if avro == "array":
        elem = _writer(node["items"], named, memo)
        if elem is None:
            return None

        def array(v: Any) -> Any:
            if not isinstance(v, (list, tuple)):
                raise RecordTypeError(v, "Avro array", "a list or tuple")
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(elem(x))
                except RecordTypeError as e:
                    e.segments.append(f"[{i}]")
                    raise e from None
            return out
        return array
    if avro == "map":
        value = _writer(node["values"], named, memo)
        if value is None:
            return None

        def mapping(v: Any) -> Any:
            if not isinstance(v, dict):
                raise RecordTypeError(v, "Avro map", "a dict")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = value(x)
                except RecordTypeError as e:
                    e.segments.append(f"[{k!r}]")
                    raise e from None
            return out
        return mapping
    return None  # enum, fixed, bytes, logical types: fastavro's own conversions


def _record_writer(node: Dict[str, Any], named: _Named, memo: Dict[str, Converter]) -> Converter:
    name = node["name"]
    if name in memo:
        return memo[name]
    cell: List[Converter] = []
    memo[name] = lambda v: cell[0](v)  # recursive records refer to themselves
    fields = node["fields"]
    names = [f["name"] for f in fields]
    convs = [_writer(f["type"], named, memo) for f in fields]
    labels = [field_label(n) for n in names]
    values = row_values(names, f"Avro record {name}")
    n = len(names)

    def inline(i: int) -> str:
        a, w = f"a{i}", f"w{i}"
        if convs[i] is None:
            return a
        avro, logical = _type_of(named.resolve(fields[i]["type"]))
        if avro == "union":
            inner = _nullable_branch(named.resolve(fields[i]["type"]))
            avro, logical = _type_of(named.resolve(inner)) if inner is not None else ("", None)
        fast = {"int": f"type({a}) is int and -2147483648 <= {a} <= 2147483647",
                "long": f"type({a}) is int and -9223372036854775808 <= {a} <= "
                        f"9223372036854775807",
                "string": f"type({a}) is str", "double": f"type({a}) is float",
                "boolean": f"type({a}) is bool"}.get(avro if logical is None else "")
        return f"({a} if {fast} else {w}({a}))" if fast else f"{w}({a})"

    body = "{" + ", ".join(f"{names[i]!r}: {inline(i)}" for i in range(n)) + "}"
    by_name = dict(zip(names, zip(convs, labels)))

    def from_dict(v: Dict[str, Any]) -> Dict[str, Any]:
        """A dict's fields (a missing one takes its default, as in fastavro)."""
        unknown = [k for k in v if k not in by_name]
        if unknown:
            raise RecordTypeError(v, f"Avro record {name}", f"a dict of (some of) the fields "
                                  f"{names}, without {unknown}")
        out = {}
        for k, x in v.items():
            conv, label = by_name[k]
            try:
                out[k] = x if conv is None else conv(x)
            except RecordTypeError as e:
                e.segments.append(label)
                raise e from None
        return out

    write = compile_writer(body, values, convs, labels, f"<Avro writer of {name}>",
                           {"from_dict": from_dict},
                           head="    if isinstance(v, dict):\n        return from_dict(v)\n",
                           none_written=False)
    cell.append(write)
    return write


def _problem(node: Any, v: Any, named: _Named, path: List[str]
             ) -> Optional[Tuple[List[str], Any, str, str]]:
    """Why fastavro cannot write datum ``v`` as ``node``: ``(path, value, type, expected)``
    of the first bad value, or ``None`` when none is found."""
    node = named.resolve(node)
    avro, logical = _type_of(node)
    if avro == "union":
        problems = [_problem(b, v, named, path) for b in node]
        if any(p is None for p in problems):
            return None
        if v is not None and len(node) == 2 and "null" in node:
            return problems[1 if node[0] == "null" else 0]
        return (path, v, "Avro union " + _json.dumps(node)[:60], "a value of one of its types")
    checks: Dict[str, Tuple[Callable[[Any], bool], str]] = {
        "null": (lambda x: x is None, "None"),
        "boolean": (lambda x: isinstance(x, bool), "a bool"),
        "int": (lambda x: isinstance(x, int) and -(1 << 31) <= x < (1 << 31), "a 32-bit int"),
        "long": (lambda x: isinstance(x, int) and -(1 << 63) <= x < (1 << 63), "a 64-bit int"),
        "float": (lambda x: isinstance(x, (int, float)), "a number"),
        "double": (lambda x: isinstance(x, (int, float)), "a number"),
        "string": (lambda x: isinstance(x, str), "a str"),
        "bytes": (lambda x: isinstance(x, (bytes, bytearray)), "bytes"),
    }
    logical_checks: Dict[str, Tuple[Callable[[Any], bool], str]] = {
        "date": (lambda x: isinstance(x, (_dt.date, int)), "a datetime.date"),
        "time-millis": (lambda x: isinstance(x, (_dt.time, int)), "a datetime.time"),
        "time-micros": (lambda x: isinstance(x, (_dt.time, int)), "a datetime.time"),
        "timestamp-millis": (lambda x: isinstance(x, (_dt.datetime, int)), "a datetime"),
        "timestamp-micros": (lambda x: isinstance(x, (_dt.datetime, int)), "a datetime"),
        "local-timestamp-millis": (lambda x: isinstance(x, (_dt.datetime, int)), "a datetime"),
        "local-timestamp-micros": (lambda x: isinstance(x, (_dt.datetime, int)), "a datetime"),
        "uuid": (lambda x: isinstance(x, (str, _uuid.UUID)), "a UUID or str"),
        "decimal": (lambda x: isinstance(x, Decimal) and x.is_finite() and
                    -int(x.as_tuple().exponent) <= int(node.get("scale", 0)),
                    f"a Decimal of at most {node.get('scale', 0) if isinstance(node, dict) else 0}"
                    f" decimal places"),
    }
    type_name = avro if logical is None else f"{avro} ({logical})"
    if logical in logical_checks:
        ok, expected = logical_checks[logical]
        return None if ok(v) else (path, v, type_name, expected)
    if avro in checks:
        ok, expected = checks[avro]
        return None if ok(v) else (path, v, type_name, expected)
    if avro == "enum":
        return None if v in node["symbols"] else \
            (path, v, f"enum {node['name']}", f"one of {node['symbols']}")
    if avro == "fixed":
        ok = isinstance(v, (bytes, bytearray)) and len(v) == node["size"]
        return None if ok else (path, v, f"fixed {node['name']}", f"{node['size']} bytes")
    if avro == "array":
        if not isinstance(v, (list, tuple)):
            return (path, v, "array", "a list or tuple")
        for i, x in enumerate(v):
            p = _problem(node["items"], x, named, path + [f"[{i}]"])
            if p is not None:
                return p
        return None
    if avro == "map":
        if not isinstance(v, dict):
            return (path, v, "map", "a dict")
        for k, x in v.items():
            if not isinstance(k, str):
                return (path + [f"[key {k!r}]"], k, "map key", "a str")
            p = _problem(node["values"], x, named, path + [f"[{k!r}]"])
            if p is not None:
                return p
        return None
    if avro == "record":
        if not isinstance(v, dict):
            return (path, v, f"record {node['name']}", "a Row, tuple, list or dict")
        for f in node["fields"]:
            if f["name"] not in v:
                if "default" in f:
                    continue
                return (path + [field_label(f["name"])], None, "a field", "a value (missing)")
            p = _problem(f["type"], v[f["name"]], named, path + [field_label(f["name"])])
            if p is not None:
                return p
        return None
    return None


# -- reading -----------------------------------------------------------------------------------

def _ms_timestamp(d: _dt.datetime) -> _dt.datetime:
    return d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=None)


def _reader(node: Any, named: _Named, memo: Dict[str, Converter]) -> Optional[Converter]:
    """A function making Flink's value of fastavro's datum (``None``: as it is)."""
    node = named.resolve(node)
    avro, logical = _type_of(node)
    if avro == "union":  # a general union is Flink's "generic" value: as Avro gives it
        return _union(node, named, memo, _reader)
    if logical in ("timestamp-millis", "timestamp-micros"):
        return _ms_timestamp
    if logical == "time-micros":
        return cut_ms
    if avro == "record":
        return _record_reader(node, named, memo)
    if avro == "array":
        elem = _reader(node["items"], named, memo)
        return None if elem is None else (lambda v: [None if x is None else elem(x) for x in v])
    if avro == "map":
        value = _reader(node["values"], named, memo)
        return None if value is None else \
            (lambda v: {k: None if x is None else value(x) for k, x in v.items()})
    return None


def _record_reader(node: Dict[str, Any], named: _Named, memo: Dict[str, Converter]) -> Converter:
    name = node["name"]
    if name in memo:
        return memo[name]
    cell: List[Converter] = []
    memo[name] = lambda v: cell[0](v)
    names = [f["name"] for f in node["fields"]]
    make = row_factory(names)
    convs = [_reader(f["type"], named, memo) for f in node["fields"]]
    n = len(names)
    if all(c is None for c in convs):
        def read(d: Dict[str, Any]) -> Any:
            return make(d.values())
    else:
        unpack = ", ".join(f"a{i}" for i in range(n)) + ", = d.values()"
        parts = ", ".join(f"a{i}" if convs[i] is None else f"c{i}(a{i})" for i in range(n))
        src = f"def read(d):\n    {unpack}\n    return make(({parts},))\n"
        namespace: Dict[str, Any] = {f"c{i}": convs[i] for i in range(n)}
        namespace["make"] = make
        exec(compile(src, f"<Avro reader of {name}>", "exec"), namespace)  # noqa: S102
        read = namespace["read"]
    cell.append(read)
    return read


def _strip_raw_logical(node: Any) -> Any:
    """The schema with the logical types Flink reads as plain values removed."""
    if isinstance(node, list):
        return [_strip_raw_logical(x) for x in node]
    if isinstance(node, dict):
        out = {k: _strip_raw_logical(v) for k, v in node.items()}
        if out.get("logicalType") in _RAW_LOGICAL:
            del out["logicalType"]
        return out
    return node


def _produced(node: Any, named: _Named, busy: frozenset) -> TypeInformation:
    """Flink's ``AvroSchemaConverter.convertToTypeInfo`` (legacy timestamp mapping)."""
    node = named.resolve(node)
    avro, logical = _type_of(node)
    if avro == "record":
        if node["name"] in busy:  # a recursive record
            return Types.PICKLED_BYTE_ARRAY()
        inner = busy | {node["name"]}
        return Types.ROW_NAMED([f["name"] for f in node["fields"]],
                               [_produced(f["type"], named, inner) for f in node["fields"]])
    if avro in ("enum", "string"):
        return Types.STRING()
    if avro == "array":
        return Types.OBJECT_ARRAY(_produced(node["items"], named, busy))
    if avro == "map":
        return Types.MAP(Types.STRING(), _produced(node["values"], named, busy))
    if avro == "union":
        inner = _nullable_branch(node)
        return Types.PICKLED_BYTE_ARRAY() if inner is None else _produced(inner, named, busy)
    if avro in ("fixed", "bytes"):
        return Types.BIG_DEC() if logical == "decimal" else Types.PRIMITIVE_ARRAY(Types.BYTE())
    if avro == "int":
        return {"date": Types.SQL_DATE(), "time-millis": Types.SQL_TIME()}.get(
            logical or "", Types.INT())
    if avro == "long":
        if logical in ("timestamp-millis", "timestamp-micros"):
            return Types.SQL_TIMESTAMP()
        if logical in ("time-millis", "time-micros"):
            return Types.SQL_TIME()
        return Types.LONG()
    simple = {"float": Types.FLOAT(), "double": Types.DOUBLE(), "boolean": Types.BOOLEAN()}
    if avro in simple:
        return simple[avro]
    if avro == "null":
        return VoidTypeInfo()
    raise ValueError(f"Unsupported Avro type '{avro}'.")  # pragma: no cover


# -- the schemas -------------------------------------------------------------------------------

class _AvroRowSchema:
    """What both Avro schemas keep: the record schema (which is what pickles, compares and
    hashes)."""

    _STATE = _HASHED = ("schema",)
    _who: str

    def __init__(self, record_class: str = None, avro_schema_string: str = None) -> None:
        _no_record_class(record_class, self._who)
        self._schema = _schema_of(avro_schema_string, self._who)
        self._build()

    def get_schema(self) -> AvroSchema:
        """The Avro schema."""
        return self._schema

    def __repr__(self) -> str:
        return f"{self._who}(avro_schema_string={str(self._schema)!r})"


class AvroRowSerializationSchema(_AvroRowSchema, RowSerializationSchema):
    """Writes a row as the Avro binary encoding of a record of the schema (no header, no
    schema id), as Flink's ``AvroRowSerializationSchema``. ``avro_schema_string`` is the
    record schema's JSON (an :class:`AvroSchema` or a parsed JSON object also do);
    ``record_class`` (a Java ``SpecificRecord`` class in PyFlink) cannot be used without a
    JVM and raises ``ValueError``.

    >>> s = AvroRowSerializationSchema(avro_schema_string='''{"type": "record", "name": "R",
    ...     "fields": [{"name": "n", "type": ["null", "long"]}, {"name": "tags",
    ...     "type": {"type": "array", "items": "string"}}]}''')
    >>> s.serialize_batch([(None, []), (3, ["a"])])
    [b'\\x00\\x00', b'\\x02\\x06\\x02\\x02a\\x00']
    """

    _who = "AvroRowSerializationSchema"

    def _build(self) -> None:
        parsed = self._schema._parsed
        self._parsed = parsed
        self._named = _Named(parsed)
        self._to_avro = _record_writer(parsed, self._named, {})

    def _fail(self, element: Any, datum: Any, error: Exception) -> RecordTypeError:
        problem = None
        if isinstance(datum, dict):
            try:
                problem = _problem(self._parsed, datum, self._named, [])
            except Exception:  # noqa: BLE001 - diagnosis only
                problem = None
        if problem is not None:
            path, value, type_name, expected = problem
            return RecordTypeError(value, type_name, f"{expected} ({error})",
                                   list(reversed(path)))
        return RecordTypeError(element, f"Avro record {self._parsed['name']}",
                               f"a row fastavro can write ({type(error).__name__}: {error})")

    def serialize(self, element: Any) -> bytes:
        """The Avro bytes of ``element``; :class:`RecordTypeError` naming the field and the
        value when it does not fit the schema."""
        datum = self._to_avro(element)
        buf = io.BytesIO()
        try:
            _fastavro().schemaless_writer(buf, self._parsed, datum)
        except Exception as e:  # noqa: BLE001 - fastavro raises several kinds
            raise self._fail(element, datum, e) from None
        return buf.getvalue()


class AvroRowDeserializationSchema(_AvroRowSchema, RowDeserializationSchema):
    """Reads a message holding the Avro binary encoding of one record of the schema as a
    :class:`~flowray.common.types.Row` named by its fields, as Flink's
    ``AvroRowDeserializationSchema``. ``avro_schema_string`` is the record schema's JSON;
    ``record_class`` (a Java class) raises ``ValueError``. A message that is not such a
    record raises :class:`~flowray.datastream.formats._common.DeserializationError`.

    >>> d = AvroRowDeserializationSchema(avro_schema_string='''{"type": "record", "name": "R",
    ...     "fields": [{"name": "when",
    ...                 "type": {"type": "long", "logicalType": "timestamp-millis"}}]}''')
    >>> d.deserialize(b'\\x80\\xd0\\x8f\\xa5\\x98c')
    Row(when=datetime.datetime(2024, 1, 1, 0, 0))
    >>> d.get_produced_type()
    Row(when: SQL_TIMESTAMP)
    >>> d.deserialize(b'\\x80')
    Traceback (most recent call last):
    ...
    flowray.datastream.formats._common.DeserializationError: AvroRowDeserializationSchema: cannot read message b'\\x80': not an Avro record R: the message ends before the record does
    """

    _who = "AvroRowDeserializationSchema"

    def _build(self) -> None:
        self._parsed = _fastavro().parse_schema(_strip_raw_logical(self._schema.to_json()))
        self._named = _Named(self._parsed)
        self._from_avro = _record_reader(self._parsed, self._named, {})
        self._name = self._parsed["name"]

    def deserialize(self, message: bytes) -> Any:
        """The row in ``message`` (Flink's Avro row format has no option to skip a message
        that does not read: a :class:`DeserializationError`)."""
        if message is None:
            raise DeserializationError(self._who, "the message is None")
        try:
            datum = _fastavro().schemaless_reader(io.BytesIO(message), self._parsed, None)
        except (EOFError, IndexError, StopIteration):
            raise DeserializationError(
                self._who, f"not an Avro record {self._name}: the message ends before the "
                "record does", message) from None
        except Exception as e:  # noqa: BLE001 - fastavro raises several kinds
            raise DeserializationError(
                self._who, f"not an Avro record {self._name} ({type(e).__name__}: {e})",
                message) from None
        return self._from_avro(datum)

    def get_produced_type(self) -> RowTypeInfo:
        """The row type of the records read (Flink's ``AvroSchemaConverter`` legacy mapping:
        ``timestamp-*`` are ``SQL_TIMESTAMP``, ``local-timestamp-*`` ``LONG``, a general union
        ``PICKLED_BYTE_ARRAY``)."""
        named = _Named(self._schema._parsed)
        return _produced(self._schema._parsed, named, frozenset())  # type: ignore[return-value]
