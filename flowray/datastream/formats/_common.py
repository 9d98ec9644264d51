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

The schemas' common parts are here too: :class:`RowSerializationSchema` and
:class:`RowDeserializationSchema` (batches, pickling, equality, the message-level error
handling), the writers of numbers and booleans both text formats share (:func:`scalar_text`,
:func:`inline_text`), and the generated per-record functions (:func:`compile_writer`,
:func:`compile_reader`).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from flowray.common.serialization import DeserializationSchema, SerializationSchema
from flowray.common.type_conversion import (
    INT_BITS,
    RecordTypeError,
    field_label,
    to_f32,
    type_kind,
)
from flowray.common.typeinfo import PickledBytesTypeInfo, TypeInformation
from flowray.common.types import Row, _named_class, make_row

__all__ = ["DeserializationError", "ReadError", "RecordTypeError", "java_double", "java_float",
           "to_f32", "jackson_decimal", "java_trim", "parse_java_int", "parse_java_double",
           "parse_java_decimal", "parse_java_biginteger", "row_factory", "row_values",
           "deserialize_all", "serialize_all", "shown", "INT_BITS", "INT_RANGES", "kind_of",
           "VoidTypeInfo", "field_label", "cut_ms", "fraction", "hms", "naive", "micros",
           "null_or", "scalar_text", "inline_text", "compile_writer", "compile_reader",
           "RowSerializationSchema", "RowDeserializationSchema"]

#: the ``(lowest, highest)`` value of Flink's integer types (:data:`INT_BITS` bits each)
INT_RANGES = {kind: (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for kind, bits in INT_BITS.items()}

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
    return partial(make_row, cls)


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

def _collect(one: Callable[[Any], Any], items: Iterable[Any],
             indexed: Type[BaseException]) -> List[Any]:
    """``[one(x) for x in items]``; an ``indexed`` error gets ``index``, the failing
    position."""
    out: List[Any] = []
    append = out.append
    try:
        for x in items:
            append(one(x))
    except indexed as err:
        try:
            err.index = len(out)  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - exceptions with slots
            pass
        raise
    return out


def serialize_all(one: Callable[[Any], bytes], elements: Iterable[Any]) -> List[bytes]:
    """``[one(e) for e in elements]``; an error gets ``index``, the failing position."""
    return _collect(one, elements, Exception)


def deserialize_all(one: Callable[[bytes], Any], messages: Iterable[bytes]) -> List[Any]:
    """``[one(m) for m in messages]`` (``None`` where a message was skipped); a
    :class:`DeserializationError` gets ``index``, the failing position."""
    return _collect(one, messages, DeserializationError)


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


def micros(digits: Optional[str]) -> int:
    """The microseconds of a fraction's digits (``"5"`` is 500000; beyond six cut off)."""
    return int((digits or "").ljust(6, "0")[:6] or 0)


# -- types -----------------------------------------------------------------------------------

def kind_of(t: TypeInformation) -> str:
    """The name a format dispatches on: the declared types' kind
    (:func:`~flowray.common.type_conversion.type_kind`: ``INT``, ``STRING``...,
    ``SQL_TIMESTAMP``, ``LOCAL_DATE``..., ``ROW``, ``TUPLE``, ``BYTES``, ``PRIMITIVE_ARRAY``,
    ``ARRAY``, ``LIST``, ``MAP``, ``PICKLED``), or ``VOID``.

    >>> from flowray.common.typeinfo import Types
    >>> [kind_of(t) for t in
    ...  (Types.INT(), Types.SQL_TIMESTAMP(), Types.PRIMITIVE_ARRAY(Types.BYTE()))]
    ['INT', 'SQL_TIMESTAMP', 'BYTES']
    """
    if isinstance(t, VoidTypeInfo):
        return "VOID"
    kind = type_kind(t)
    if kind is None:
        raise TypeError(f"unknown type information {t!r}")
    return kind


class VoidTypeInfo(PickledBytesTypeInfo):
    """Java's ``Types.VOID`` (a JSON schema's ``"null"`` type): always ``None``."""

    def __init__(self) -> None:
        super().__init__("VOID")


# -- per-field readers and writers ---------------------------------------------------------

def null_or(read: Callable[[Any], Any], ignore: bool, null: Optional[str] = None
            ) -> Callable[[Any], Any]:
    """``read`` where ``None`` (a missing field; also ``null``, a null literal, when set)
    reads as ``None``; with ``ignore`` (Flink's ignoreParseErrors) a value that does not read
    is ``None`` too."""
    if ignore:
        literal = null is not None  # no ``s == None`` per value without one

        def lenient(s: Any) -> Any:
            if s is None or literal and s == null:
                return None
            try:
                return read(s)
            except Exception:  # noqa: BLE001 - Flink's ignoreParseErrors
                return None
        return lenient
    if null is None:
        return lambda s: None if s is None else read(s)
    return lambda s: None if s is None or s == null else read(s)


def scalar_text(kind: str, coerce: Callable[[Any], Any], double_text: Callable[[float], str],
                float_text: Callable[[float], str]) -> Optional[Callable[[Any], str]]:
    """The writer of a number or boolean value (not ``None``) of ``kind`` as both text formats
    write it (Jackson's text of the node Flink makes): an integer's digits, ``true``/
    ``false``, ``double_text``/``float_text`` of a double/float, a decimal as Jackson's node
    factory keeps it. ``coerce`` applies the field type's rules (a RecordTypeError when the
    value does not fit) to a value not of the exact Python type. ``None`` for other kinds.

    >>> from flowray.common.type_conversion import record_converter
    >>> from flowray.common.typeinfo import Types
    >>> text = scalar_text("INT", record_converter(Types.INT()), java_double, java_float)
    >>> text(7), text(True)
    ('7', '1')
    """
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]

        def int_text(v: Any) -> str:
            if type(v) is int and lo <= v <= hi:
                return str(v)
            return str(coerce(v))
        return int_text
    if kind == "BOOLEAN":
        return lambda v: "true" if (v if type(v) is bool else coerce(v)) else "false"
    if kind == "DOUBLE":
        return lambda v: double_text(v if type(v) is float else coerce(v))
    if kind == "FLOAT":
        return lambda v: float_text(coerce(v))
    if kind == "BIG_DEC":
        def decimal_text(v: Any) -> str:
            d = coerce(v)
            if not d.is_finite():
                raise RecordTypeError(v, "BIG_DEC", "a finite decimal")
            return jackson_decimal(d)
        return decimal_text
    return None


def inline_text(kind: str, i: int, null: str) -> str:
    """A Python expression of a generated writer (:func:`compile_writer`) writing field
    variable ``a{i}`` as text: ``null`` for ``None``, an int in range, a str (``S(a)``), a
    float (``D(a)``) or a bool at once, anything else with ``w{i}(a{i})``.

    >>> inline_text("DOUBLE", 2, "null")
    "(D(a2) if type(a2) is float else 'null' if a2 is None else w2(a2))"
    """
    a = f"a{i}"
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        fast = f"str({a}) if type({a}) is int and {lo} <= {a} <= {hi} else "
    elif kind == "STRING":
        fast = f"S({a}) if type({a}) is str else "
    elif kind == "DOUBLE":
        fast = f"D({a}) if type({a}) is float else "
    elif kind == "BOOLEAN":
        fast = f"'true' if {a} is True else 'false' if {a} is False else "
    else:
        fast = ""
    return f"({fast}{null!r} if {a} is None else w{i}({a}))"


#: builtins the generated functions find as globals (a dict lookup less)
_BUILTINS = {"type": type, "int": int, "str": str, "float": float, "bool": bool, "dict": dict,
             "isinstance": isinstance, "len": len}


def compile_writer(body: str, values: Callable[[Any], Sequence[Any]],
                   writers: Sequence[Optional[Callable[[Any], Any]]], labels: Sequence[str],
                   filename: str, env: Optional[Dict[str, Any]] = None, head: str = "",
                   none_written: bool = True) -> Callable[[Any], Any]:
    """A generated writer of one record: ``head`` (source lines: another way out first),
    then ``vals = values(v)`` (the record's field values, or a RecordTypeError),
    ``a0, a1, ... = vals`` and ``return body``, an expression over them that may call
    ``w{i}`` (``writers[i]``) and the names in ``env``. A RecordTypeError raised there is
    raised again from the first field whose writer fails on its own value, with the field's
    label (``labels[i]``) in its path; a ``None`` writer never fails, nor, when
    ``none_written`` (the body writes ``None`` itself), does a ``None`` value.

    Without ``head``, the writer has ``write_all``: the list of ``write(v)`` for a list of
    records in one call, raising (anything) where ``write`` would raise; the caller then
    writes the records one by one to name the failing one. (It is ``None`` otherwise.)"""
    n = len(writers)
    unpack = ", ".join(f"a{i}" for i in range(n)) + ", = vals" if n else "pass"
    src = (f"def write(v):\n{head}"
           f"    vals = values(v)\n"
           f"    try:\n"
           f"        {unpack}\n"
           f"        return {body}\n"
           f"    except RecordTypeError as e:\n"
           f"        raise locate(e, vals) from None\n")

    def locate(err: RecordTypeError, vals: Sequence[Any]) -> RecordTypeError:
        for i, (x, write) in enumerate(zip(vals, writers)):
            if write is None or (x is None and none_written):
                continue
            try:
                write(x)
            except RecordTypeError as e:
                e.segments.append(labels[i])
                return e
        return err  # pragma: no cover - the failing field fails again

    if not head and n:
        # every record of a batch in one call: a plain tuple or list of n values unpacked
        # at once (what ``values`` gives back unchanged); any error, and the caller writes
        # the batch again one record at a time, which finds and names it
        src += (f"def write_all(vs):\n"
                f"    out = []\n"
                f"    add = out.append\n"
                f"    for v in vs:\n"
                f"        if (type(v) is tuple or type(v) is list) and len(v) == {n}:\n"
                f"            {unpack[:-len(' = vals')]} = v\n"
                f"        else:\n"
                f"            {unpack[:-len(' = vals')]} = values(v)\n"
                f"        add({body})\n"
                f"    return out\n")
    namespace: Dict[str, Any] = {f"w{i}": w for i, w in enumerate(writers)}
    namespace.update(_BUILTINS)
    namespace.update(env or {})
    namespace.update(values=values, locate=locate, RecordTypeError=RecordTypeError)
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102
    write = namespace["write"]
    write.write_all = namespace.get("write_all")
    return write


def compile_reader(head: Sequence[str], exprs: Sequence[str], labels: Sequence[str],
                   make: Callable[[Any], Any], readers: Sequence[Callable[[Any], Any]],
                   filename: str, env: Optional[Dict[str, Any]] = None) -> Callable[[Any], Any]:
    """A generated reader of one record: ``head`` (source lines from ``def read(...):``),
    then ``v{i} = exprs[i]`` for each field (a ReadError raised gets the field's label,
    ``labels[i]``) and ``return make((v0, v1, ...))``; the expressions may call ``r{i}``
    (``readers[i]``) and the names in ``env``."""
    lines = list(head)
    for i, expr in enumerate(exprs):
        lines += ["    try:",
                  f"        v{i} = {expr}",
                  "    except ReadError as e:",
                  f"        raise e.at({labels[i]!r}) from None"]
    lines.append("    return make((" + "".join(f"v{i}, " for i in range(len(exprs))) + "))")
    namespace: Dict[str, Any] = {f"r{i}": r for i, r in enumerate(readers)}
    namespace.update(_BUILTINS)
    namespace.update(env or {})
    namespace.update(make=make, ReadError=ReadError)
    exec(compile("\n".join(lines) + "\n", filename, "exec"), namespace)  # noqa: S102
    return namespace["read"]


# -- the schemas ------------------------------------------------------------------------------

class _RowSchema:
    """What the schemas share: ``_STATE`` names the settings (each in attribute
    ``_<name>``) that pickle and compare, ``_HASHED`` those that hash; ``_build`` compiles
    the per-record functions from them (again after unpickling). ``_who`` names the schema
    in errors."""

    _who = ""
    _STATE: Tuple[str, ...] = ()
    _HASHED: Tuple[str, ...] = ()

    def _build(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> Dict[str, Any]:
        return {k: getattr(self, "_" + k) for k in self._STATE}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        for k in self._STATE:
            setattr(self, "_" + k, state[k])
        self._build()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and \
            self.__getstate__() == other.__getstate__()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + tuple(getattr(self, "_" + k) for k in self._HASHED))


class RowSerializationSchema(_RowSchema, SerializationSchema):
    """The base of the formats' serialization schemas."""

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        """``[serialize(e) for e in elements]`` in one call; an error has ``index``."""
        return serialize_all(self.serialize, elements)


class RowDeserializationSchema(_RowSchema, DeserializationSchema):
    """The base of the formats' deserialization schemas: ``deserialize`` reads a message with
    ``_read`` (which raises :class:`ReadError` for one that does not read)."""

    _ignore_parse_errors: bool

    def _read(self, message: bytes) -> Any:
        raise NotImplementedError

    def deserialize(self, message: bytes) -> Optional[Any]:
        """The row in ``message`` (``None`` for a message that holds none, and with
        ``ignore_parse_errors`` for one that does not read); else a
        :class:`DeserializationError`."""
        if message is None:
            if self._ignore_parse_errors:
                return None
            raise DeserializationError(self._who, "the message is None")
        try:
            return self._read(message)
        except ReadError as e:
            if self._ignore_parse_errors:
                return None
            raise DeserializationError(self._who, str(e), message) from None

    def deserialize_batch(self, messages: List[bytes]) -> List[Any]:
        """``[deserialize(m) for m in messages]`` in one call (``None`` where a message
        gave none); a :class:`DeserializationError` has ``index``, the failing position."""
        return deserialize_all(self.deserialize, messages)

    def get_produced_type(self) -> Any:
        """The row type of the records read."""
        return self._type_info  # type: ignore[attr-defined]
