"""CSV rows, as ``pyflink.datastream.formats.csv``: :class:`CsvRowSerializationSchema` and
:class:`CsvRowDeserializationSchema` write and read one CSV record per message, byte for
byte as Flink's ``org.apache.flink.formats.csv.CsvRow*`` formats (Jackson's CSV mapper) do;
:class:`CsvSchema` describes a CSV layout with PyFlink's builder.

A row is written as its fields in the type's order, separated by ``,``, followed by the line
delimiter (``\\n``). Numbers are Java's text (``1``, ``1.5``, ``1.0E10``), booleans ``true``/
``false``, ``None`` the null literal (empty by default), arrays and nested rows their
elements joined by ``;``. Strings are quoted as Jackson quotes them: when they contain a
character below the separator and quote characters in code order (space, ``!``, ``"``, ``#``,
..., ``,``) or a backslash, or are longer than 24 characters; a quote inside is doubled.

>>> from flowray.common.typeinfo import Types
>>> row_type = Types.ROW_NAMED(["id", "name", "tags"], [Types.INT(), Types.STRING(),
...                                                      Types.OBJECT_ARRAY(Types.STRING())])
>>> ser = CsvRowSerializationSchema.Builder(row_type).build()
>>> ser.serialize_batch([(1, "hi", ["a", "b"]), (2, 'say "hi" now', []), (3, None, None)])
[b'1,hi,a;b\\n', b'2,"say ""hi"" now",\\n', b'3,,\\n']
>>> de = CsvRowDeserializationSchema.Builder(row_type).build()
>>> de.deserialize(b'1,hi,a;b\\n'), de.deserialize(b'2,"say ""hi"" now",')
(Row(id=1, name='hi', tags=['a', 'b']), Row(id=2, name='say "hi" now', tags=[]))

Reading follows Flink's rules: a number field is Java's parse of the trimmed text (an empty
field is an error unless it is the null literal); a boolean is ``true`` for ``true`` in any
case and ``false`` for anything else; a record with too few or too many fields is an error.
Errors raise :class:`~flowray.datastream.formats._common.DeserializationError` naming the
field and the value, unless ``set_ignore_parse_errors(True)``: then a field that does not
read is ``None``, missing fields are ``None``, and a message that does not read is ``None``.

>>> de.deserialize(b'x,hi,')
Traceback (most recent call last):
...
flowray.datastream.formats._common.DeserializationError: CsvRowDeserializationSchema: cannot read message b'x,hi,': record.id: 'x' does not read as INT: 'x' is not an integer
>>> lenient = CsvRowDeserializationSchema.Builder(row_type).set_ignore_parse_errors(True).build()
>>> lenient.deserialize(b'x,hi'), lenient.deserialize(b'1,a,b,c')
(Row(id=None, name='hi', tags=None), None)

Supported types (as Flink's ``CsvRowSchemaConverter``): ``STRING``, ``BOOLEAN``,
``BYTE``/``SHORT``/``INT``/``LONG``/``BIG_INT``, ``FLOAT``/``DOUBLE``/``BIG_DEC``, the SQL
and local date/time types (``SQL_TIMESTAMP`` is written as ``java.sql.Timestamp`` writes it:
``2024-01-05 12:30:00.0``; ``LOCAL_DATE_TIME`` as ``2024-01-05 12:30:00``),
``PRIMITIVE_ARRAY(BYTE)`` (base64), and one level of nesting: a basic or object array, or a
row, of those simple types (written as one field of ``;``-joined elements). Other types are
refused when the builder is made.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re
from itertools import repeat
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from flowray.common.type_conversion import RecordTypeError, record_converter
from flowray.common.typeinfo import RowTypeInfo, TypeInformation
from flowray.datastream.formats.csv_schema import (
    _SIMPLE_KINDS,
    _STRING_KINDS,
    CsvSchema,
    CsvSchemaBuilder,
)
from flowray.datastream.formats._common import (
    INT_BITS,
    ReadError,
    RowDeserializationSchema,
    RowSerializationSchema,
    compile_reader,
    compile_writer,
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
    shown,
    to_f32,
)

__all__ = ["CsvSchema", "CsvSchemaBuilder", "CsvRowSerializationSchema",
           "CsvRowDeserializationSchema"]



def _validate(type_info: Any, who: str) -> RowTypeInfo:
    """Flink's ``CsvRowSchemaConverter.convert``: the types a CSV row may have."""
    if type_info is None:
        raise TypeError("Type information must not be None")
    if not isinstance(type_info, RowTypeInfo):
        raise TypeError(f"{who}: Row type information expected, got {type_info!r}")
    for name, t in zip(type_info.field_names, type_info.field_types):
        kind = kind_of(t)
        if kind in _SIMPLE_KINDS or kind == "BYTES":
            continue
        if kind == "ARRAY":
            nested = [t.element_type]
        elif kind == "ROW":
            nested = list(t.field_types)
        else:
            raise ValueError(f"Unsupported type information '{t!r}' for field '{name}'.")
        for n in nested:
            if kind_of(n) not in _SIMPLE_KINDS:
                raise ValueError("Only simple types are supported in the second level nesting "
                                 f"of fields '{name}' but was: {n!r}")
    return type_info


def _one_char(c: Any, what: str) -> str:
    if not isinstance(c, str) or len(c) != 1:
        raise ValueError(f"{what} must be a single character, got {c!r}")
    return c


class _Layout:
    """The CSV settings both schemas share (Jackson's ``CsvSchema`` of Flink's builders):
    the defaults, updated from ``state`` (a :meth:`state`)."""

    def __init__(self, state: Optional[Dict[str, Any]] = None) -> None:
        self.field_delimiter = ","
        self.line_delimiter = "\n"
        self.array_element_delimiter = ";"
        self.quote_character: Optional[str] = '"'
        self.escape_character: Optional[str] = None
        self.null_literal: Optional[str] = None
        self.allow_comments = False
        self.__dict__.update(state or {})

    def state(self) -> Dict[str, Any]:
        return dict(self.__dict__)


# -- writing -----------------------------------------------------------------------------------

def _quoter(layout: _Layout) -> Callable[[str], str]:
    """Jackson's ``CsvEncoder`` string output (loose quoting, the default): quoted when
    longer than 24 characters or holding a character below the "safe" one (one past the
    separator, quote and line separator characters), the quote's escape or the escape
    character (a backslash when none is set); a quote inside is doubled, an escape character
    escaped with itself."""
    q, esc = layout.quote_character, layout.escape_character
    if q is None:
        return lambda s: s
    safe = max([ord(layout.field_delimiter), ord(q)] + [ord(c) for c in layout.line_delimiter])
    specials = {q} | ({esc} if esc is not None else {"\\"})
    unsafe = re.compile("[\\x00-" + re.escape(chr(safe)) + "]|" +
                        "|".join(re.escape(c) for c in sorted(specials)))
    if esc is None:
        doubled = q + q

        def quoted(s: str) -> str:
            return q + s.replace(q, doubled) + q
    else:
        table = {ord(esc): esc + esc, ord(q): q + q}

        def quoted(s: str) -> str:
            return q + s.translate(table) + q

    search = unsafe.search

    def quote(s: str) -> str:
        if len(s) > 24 or search(s) is not None:
            return quoted(s)
        return s
    return quote


def _timestamp_text(d: Any) -> str:
    """``java.sql.Timestamp.toString``: ``yyyy-mm-dd hh:mm:ss.f`` (``.0`` for none)."""
    nanos = d.microsecond * 1000
    frac = f"{nanos:09d}".rstrip("0") if nanos else "0"
    return f"{d.date().isoformat()} {hms(d)}.{frac}"


def _local_time_text(t: Any) -> str:
    """``java.time.LocalTime.toString``: ``HH:mm``, ``:ss`` when not zero, the fraction in
    groups of three digits."""
    text = f"{t.hour:02d}:{t.minute:02d}"
    if t.second or t.microsecond:
        text += f":{t.second:02d}"
        if t.microsecond:
            text += "." + (f"{t.microsecond // 1000:03d}" if t.microsecond % 1000 == 0
                           else f"{t.microsecond:06d}")
    return text


def _text_of(t: TypeInformation, kind: str) -> Callable[[Any], str]:
    """The raw (unquoted) text of a simple value (not ``None``), as Jackson's CSV writer
    writes the node Flink makes of it."""
    coerce = record_converter(t)
    assert coerce is not None
    scalar = scalar_text(kind, coerce, java_double, java_float)
    if scalar is not None:
        return scalar
    if kind == "STRING":
        return lambda v: v if type(v) is str else coerce(v)
    if kind in ("SQL_DATE", "LOCAL_DATE"):
        return lambda v: coerce(v).isoformat()
    if kind == "SQL_TIME":
        return lambda v: hms(coerce(v))
    if kind == "LOCAL_TIME":
        return lambda v: _local_time_text(coerce(v))
    if kind == "SQL_TIMESTAMP":
        return lambda v: _timestamp_text(coerce(v))
    if kind == "LOCAL_DATE_TIME":
        def ldt_text(v: Any) -> str:
            d = coerce(v)
            return f"{d.date().isoformat()} {hms(d)}{fraction(d.microsecond)}"
        return ldt_text
    if kind == "BYTES":
        return lambda v: base64.b64encode(coerce(v)).decode("ascii")
    raise TypeError(f"no CSV text for {t!r}")  # pragma: no cover - types are validated


_QUOTED_KINDS = _STRING_KINDS | {"BYTES"}  # written as strings: quoting applies


def _joined(elements: Sequence[TypeInformation], positional: bool, type_name: str,
            layout: _Layout, quote: Callable[[str], str]) -> Callable[[Any], str]:
    """An array (or a nested row, ``positional``) as one field: its elements' text joined
    by the array element delimiter, then quoted like a string."""
    texts = [_text_of(e, kind_of(e)) for e in elements]
    null = layout.null_literal or ""
    sep = layout.array_element_delimiter
    n = len(elements)

    def located(err: RecordTypeError, element_texts: Iterable[Callable[[Any], str]],
                v: Sequence[Any]) -> RecordTypeError:
        """The error of the first element that does not write, with its position."""
        for i, (text, x) in enumerate(zip(element_texts, v)):
            try:
                if x is not None:
                    text(x)
            except RecordTypeError as e:
                e.segments.append(f"[{i}]")
                return e
        return err  # pragma: no cover - the failing element fails again

    if positional:
        def row_text(v: Any) -> str:
            if not isinstance(v, (tuple, list)) or len(v) != n:
                raise RecordTypeError(v, type_name, f"a Row, tuple or list of {n} values")
            try:
                return quote(sep.join([null if x is None else t(x) for t, x in zip(texts, v)]))
            except RecordTypeError as e:
                raise located(e, texts, v) from None
        return row_text
    text = texts[0]

    def array_text(v: Any) -> str:
        if not isinstance(v, (list, tuple)):
            raise RecordTypeError(v, type_name, "a list or tuple")
        try:
            return quote(sep.join([null if x is None else text(x) for x in v]))
        except RecordTypeError as e:
            raise located(e, repeat(text), v) from None
    return array_text


def _field_writer(t: TypeInformation, layout: _Layout,
                  quote: Callable[[str], str]) -> Callable[[Any], str]:
    kind = kind_of(t)
    if kind == "ARRAY":
        return _joined([t.element_type], False, repr(t), layout, quote)
    if kind == "ROW":
        return _joined(list(t.field_types), True, repr(t), layout, quote)
    text = _text_of(t, kind)
    if kind in _QUOTED_KINDS:
        return lambda v: quote(text(v))
    return text


def _row_writer(t: RowTypeInfo, layout: _Layout) -> Callable[[Any], str]:
    quote = _quoter(layout)
    names = list(t.field_names)
    null = layout.null_literal or ""
    texts = [inline_text(kind_of(ft), i, null) for i, ft in enumerate(t.field_types)]
    body = f" + {layout.field_delimiter!r} + ".join(texts) if texts else "''"
    return compile_writer(f"{body} + {layout.line_delimiter!r}", row_values(names, repr(t)),
                          [_field_writer(ft, layout, quote) for ft in t.field_types],
                          [field_label(nm) for nm in names], f"<CSV writer of {t!r}>",
                          {"S": quote, "D": java_double})


# -- reading -----------------------------------------------------------------------------------

_UNESCAPE = {"0": "\0", "n": "\n", "r": "\r", "t": "\t"}


class _CsvSyntaxError(ValueError):
    pass


def _parser(layout: _Layout) -> Callable[[str], Optional[List[str]]]:
    """Jackson's ``CsvDecoder`` for the first record of a text: its fields as strings
    (``None`` when the text holds no record). A field that starts with the quote character
    is quoted (a doubled quote is a quote; line breaks are kept); the escape character takes
    the next character as it is (``0``, ``n``, ``r``, ``t`` as ``\\0``, ``\\n``...); an
    unquoted ``\\r`` or ``\\n`` ends the record; with comments, leading blank lines, spaces
    and ``#`` lines are skipped."""
    sep = layout.field_delimiter
    q = layout.quote_character
    esc = layout.escape_character
    comments = layout.allow_comments
    special = re.compile("[" + re.escape("".join(c for c in (q, esc, "\r") if c)) + "]").search

    def skip_comments(text: str, pos: int) -> int:
        n = len(text)
        while pos < n:
            c = text[pos]
            if c == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            elif c in "\r\n ":
                pos += 1
            else:
                break
        return pos

    def unescape(text: str, pos: int) -> str:
        if pos >= len(text):
            raise _CsvSyntaxError("Unexpected EOF in escaped character")
        c = text[pos]
        return _UNESCAPE.get(c, c)

    def slow(text: str, pos: int) -> List[str]:
        n = len(text)
        fields: List[str] = []
        while True:
            if pos >= n:
                fields.append("")
                return fields
            c = text[pos]
            if c == "\r" or c == "\n":
                fields.append("")
                return fields
            if q is not None and c == q:
                pos += 1
                buf: List[str] = []
                while True:
                    if pos >= n:
                        raise _CsvSyntaxError("Missing closing quote for value")
                    c = text[pos]
                    pos += 1
                    if c == q:
                        if pos < n and text[pos] == q:
                            buf.append(q)
                            pos += 1
                            continue
                        break
                    if esc is not None and c == esc:
                        buf.append(unescape(text, pos))
                        pos += 1
                        continue
                    buf.append(c)
                fields.append("".join(buf))
                while pos < n:  # after the closing quote: spaces, then separator or line end
                    c = text[pos]
                    pos += 1
                    if c == sep:
                        break
                    if c <= " ":
                        if c == "\r" or c == "\n":
                            return fields
                        continue
                    raise _CsvSyntaxError(
                        f"Unexpected character ({c!r}): Expected column separator character "
                        f"({sep!r}) or end-of-line")
                else:
                    return fields
                continue
            buf = []
            while pos < n:
                c = text[pos]
                if c == sep:
                    pos += 1
                    break
                if c == "\r" or c == "\n":
                    fields.append("".join(buf))
                    return fields
                if esc is not None and c == esc:
                    buf.append(unescape(text, pos + 1))
                    pos += 2
                    continue
                buf.append(c)
                pos += 1
            else:
                fields.append("".join(buf))
                return fields
            fields.append("".join(buf))

    def parse(text: str) -> Optional[List[str]]:
        pos = skip_comments(text, 0) if comments else 0
        if pos >= len(text):
            return None
        if pos == 0 and special(text) is None:
            end = text.find("\n")
            return (text if end < 0 else text[:end]).split(sep)
        return slow(text, pos)
    return parse


def _valueof_date(text: str, kind: str) -> _dt.date:
    """``java.sql.Date.valueOf``: ``yyyy-[m]m-[d]d``."""
    m = _DATE_RE.fullmatch(text)
    if m is None:
        raise ReadError(f"{shown(text)} does not read as {kind}: expected yyyy-[m]m-[d]d")
    try:
        return _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as e:
        raise ReadError(f"{shown(text)} does not read as {kind}: {e}") from None


_DATE_RE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")
_TIME_RE = re.compile(r"([0-9]+):([0-9]+):([0-9]+)")
#: what flowray also reads for LOCAL_TIME: LocalTime.toString, which Flink writes
_LOCAL_TIME_RE = re.compile(r"([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?")
_TIMESTAMP_RE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) "
                           r"([0-9]+):([0-9]+):([0-9]+)(?:\.([0-9]{1,9}))?")


def _reader_of(t: TypeInformation, kind: str) -> Callable[[str], Any]:
    """A function reading the text of a simple value (raises ReadError)."""
    def fail(text: str, why: str) -> ReadError:
        return ReadError(f"{shown(text)} does not read as {kind}: {why}")

    if kind == "STRING":
        return lambda s: s
    if kind == "BOOLEAN":
        return lambda s: java_trim(s).lower() == "true"  # Boolean.valueOf
    if kind in INT_BITS:
        bits = 0 if kind == "BIG_INT" else INT_BITS[kind]

        def read_int(s: str) -> int:
            try:
                return parse_java_int(s, bits)
            except ValueError as e:
                raise fail(s, str(e)) from None
        return read_int
    if kind in ("DOUBLE", "FLOAT", "BIG_DEC"):
        parse: Callable[[str], Any] = {"DOUBLE": parse_java_double,
                                       "FLOAT": lambda s: to_f32(parse_java_double(s)),
                                       "BIG_DEC": parse_java_decimal}[kind]

        def read_number(s: str) -> Any:
            try:
                return parse(s)
            except ValueError as e:
                raise fail(s, str(e)) from None
        return read_number
    if kind in ("SQL_DATE", "LOCAL_DATE"):
        return lambda s: _valueof_date(s, kind)
    if kind == "SQL_TIME":
        def read_time(s: str) -> _dt.time:
            m = _TIME_RE.fullmatch(s)
            if m is None:
                raise fail(s, "expected hh:mm:ss")
            try:
                return _dt.time(int(m[1]), int(m[2]), int(m[3]))
            except ValueError as e:
                raise fail(s, str(e)) from None
        return read_time
    if kind == "LOCAL_TIME":
        def read_local_time(s: str) -> _dt.time:
            m = _TIME_RE.fullmatch(s) or _LOCAL_TIME_RE.fullmatch(s)
            if m is None:
                raise fail(s, "expected hh:mm:ss")
            us = micros(m[4]) if m.re is _LOCAL_TIME_RE else 0
            try:
                return _dt.time(int(m[1]), int(m[2]), int(m[3] or 0), us)
            except ValueError as e:
                raise fail(s, str(e)) from None
        return read_local_time
    if kind in ("SQL_TIMESTAMP", "LOCAL_DATE_TIME"):
        millis = kind == "SQL_TIMESTAMP"

        def read_timestamp(s: str) -> _dt.datetime:
            m = _TIMESTAMP_RE.fullmatch(java_trim(s))
            if m is None:
                raise fail(s, "expected yyyy-[m]m-[d]d hh:mm:ss[.f...]")
            us = micros(m[7])
            if millis:
                us = us // 1000 * 1000
            try:
                return _dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]),
                                    int(m[6]), us)
            except ValueError as e:
                raise fail(s, str(e)) from None
        return read_timestamp
    if kind == "BYTES":
        def read_bytes(s: str) -> bytes:
            try:
                return base64.b64decode(s, validate=True)
            except (binascii.Error, ValueError) as e:
                raise fail(s, f"Unable to deserialize byte array ({e})") from None
        return read_bytes
    raise TypeError(f"no CSV reader for {t!r}")  # pragma: no cover - types are validated


def _field_reader(t: TypeInformation, layout: _Layout, ignore: bool
                  ) -> Callable[[Optional[str]], Any]:
    kind = kind_of(t)
    null = layout.null_literal
    sep = layout.array_element_delimiter
    if kind in ("ARRAY", "ROW"):
        elements = [t.element_type] if kind == "ARRAY" else list(t.field_types)
        readers = [null_or(_reader_of(e, kind_of(e)), ignore, null) for e in elements]

        def split(s: str) -> List[str]:
            return [] if not java_trim(s) else s.split(sep)

        if kind == "ARRAY":
            element = readers[0]

            def read_array(s: str) -> List[Any]:
                out = []
                for i, x in enumerate(split(s)):
                    try:
                        out.append(element(x))
                    except ReadError as e:
                        raise e.at(f"[{i}]") from None
                return out
            return null_or(read_array, ignore)  # Jackson splits before the null test
        n = len(readers)
        make = row_factory(t.field_names)

        def read_row(s: str) -> Any:
            parts = split(s)
            if not parts:
                return None
            if len(parts) != n and not ignore:
                raise ReadError(f"{shown(s)} does not read as {t!r}: Row length mismatch. "
                                f"{n} fields expected but was {len(parts)}.")
            values = []
            for i in range(n):
                try:
                    values.append(readers[i](parts[i]) if i < len(parts) else None)
                except ReadError as e:
                    raise e.at(f"[{i}]") from None
            return make(values)
        return null_or(read_row, ignore)
    return null_or(_reader_of(t, kind), ignore, null)


def _fields_reader(t: RowTypeInfo, readers: Sequence[Callable[[Optional[str]], Any]],
                   labels: Sequence[str], make: Callable[[Any], Any], layout: _Layout
                   ) -> Callable[[List[str]], Any]:
    """A function reading exactly the row's fields (strings) into a row: ``readers`` with
    generated fast paths for plain strings, digits and booleans."""
    n = len(readers)
    null = layout.null_literal
    kinds = [kind_of(ft) for ft in t.field_types]

    def inline(i: int) -> str:
        x, r, kind = f"x{i}", f"r{i}", kinds[i]
        if kind == "STRING":
            return x if null is None else f"(None if {x} == NULL else {x})"
        if kind in ("INT", "LONG") and (null is None or not null.isdigit()):
            digits = 10 if kind == "INT" else 19
            return f"(int({x}) if {x}.isdigit() and len({x}) < {digits} and {x}.isascii() " \
                   f"else {r}({x}))"
        if kind == "BOOLEAN" and null not in ("true", "false"):
            return f"(True if {x} == 'true' else False if {x} == 'false' else {r}({x}))"
        return f"{r}({x})"

    head = ["def read(fields):"]
    if n:
        head.append("    " + ", ".join(f"x{i}" for i in range(n)) + ", = fields")
    return compile_reader(head, [inline(i) for i in range(n)], labels, make, readers,
                          f"<CSV reader of {t!r}>", {"NULL": null})


class _LayoutBuilder:
    """The setters both builders share."""

    def __init__(self, type_info: TypeInformation, who: str) -> None:
        self._type_info = _validate(type_info, who)
        self._layout = _Layout()
        self._last_quote = '"'

    def set_field_delimiter(self, c: str) -> Any:
        """The field delimiter, a single character (default ``,``)."""
        self._layout.field_delimiter = _one_char(c, "The field delimiter")
        return self

    def set_array_element_delimiter(self, delimiter: str) -> Any:
        """The delimiter of array (and nested row) elements (default ``;``)."""
        if not isinstance(delimiter, str) or not delimiter:
            raise ValueError(f"The array element delimiter must be a non-empty string, "
                             f"got {delimiter!r}")
        self._layout.array_element_delimiter = delimiter
        return self

    def set_quote_character(self, c: str) -> Any:
        """The quote character, a single character (default ``"``); enables quoting."""
        self._layout.quote_character = self._last_quote = _one_char(c, "The quote character")
        return self

    def disable_quote_character(self) -> Any:
        """No quoting: strings are written as they are, quote characters read as text."""
        self._layout.quote_character = None
        return self

    def enable_quote_character(self) -> Any:
        """Quoting again, with the last quote character set (``"`` by default); a flowray
        addition, the inverse of :meth:`disable_quote_character`."""
        self._layout.quote_character = self._last_quote
        return self

    def set_escape_character(self, c: str) -> Any:
        """The escape character, a single character (default: none)."""
        self._layout.escape_character = _one_char(c, "The escape character")
        return self

    def set_null_literal(self, s: str) -> Any:
        """The text of ``None`` (default: written as the empty field, and not read back
        as ``None``)."""
        if not isinstance(s, str):
            raise ValueError(f"The null literal must be a string, got {s!r}")
        self._layout.null_literal = s
        return self


class _CsvRowSchema:
    """What both CSV schemas keep: the row type and the :class:`_Layout`; the pickled state
    holds the layout's settings, and is read back through ``__init__`` (which checks
    them)."""

    _STATE: Tuple[str, ...]
    _HASHED = ("type_info",)
    _who: str

    def _setup(self, type_info: RowTypeInfo, layout: Optional[Dict[str, Any]]) -> None:
        self._type_info = _validate(type_info, self._who)
        self._layout = _Layout(layout)

    def __getstate__(self) -> Dict[str, Any]:
        state = super().__getstate__()  # type: ignore[misc]
        state["layout"] = self._layout.state()
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


class CsvRowSerializationSchema(_CsvRowSchema, RowSerializationSchema):
    """Writes a row (a Row, tuple or list of the type's arity, or a dict of its fields) as
    one CSV record in UTF-8, as Flink's ``CsvRowSerializationSchema``. Build it with
    ``CsvRowSerializationSchema.Builder(type_info)...build()``.

    >>> from flowray.common.typeinfo import Types
    >>> s = (CsvRowSerializationSchema.Builder(Types.ROW([Types.STRING(), Types.DOUBLE()]))
    ...      .set_field_delimiter("|").set_line_delimiter("").set_null_literal("NULL").build())
    >>> s.serialize(("a b", 1e10)), s.serialize((None, 0.5))
    (b'"a b"|1.0E10', b'NULL|0.5')
    """

    _who = "CsvRowSerializationSchema"
    _STATE = ("type_info", "layout")

    def __init__(self, type_info: RowTypeInfo, layout: Optional[Dict[str, Any]] = None) -> None:
        self._setup(type_info, layout)
        self._build()

    def _build(self) -> None:
        self._write = _row_writer(self._type_info, self._layout)

    class Builder(_LayoutBuilder):
        """Builder of a :class:`CsvRowSerializationSchema` for a row type (``TypeError``
        without one, ``ValueError`` for a type CSV cannot hold)."""

        def __init__(self, type_info: TypeInformation) -> None:
            super().__init__(type_info, "CsvRowSerializationSchema")

        def set_line_delimiter(self, delimiter: str) -> "CsvRowSerializationSchema.Builder":
            """What ends a record: ``\\n`` (default), ``\\r``, ``\\r\\n`` or ``""``."""
            if delimiter not in ("\n", "\r", "\r\n", ""):
                raise ValueError("Unsupported new line delimiter. Only \\n, \\r, \\r\\n, or "
                                 "empty string are supported.")
            self._layout.line_delimiter = delimiter
            return self

        def build(self) -> "CsvRowSerializationSchema":
            """The schema."""
            return CsvRowSerializationSchema(self._type_info, self._layout.state())

    def serialize(self, element: Any) -> bytes:
        """The CSV record of ``element``; :class:`RecordTypeError` naming the field and the
        value when it does not fit the type."""
        return self._write(element).encode("utf-8")

    def get_type_info(self) -> RowTypeInfo:
        """The row type the schema writes."""
        return self._type_info

    def __repr__(self) -> str:
        return f"CsvRowSerializationSchema({self._type_info!r}, {self._layout.state()})"


class CsvRowDeserializationSchema(_CsvRowSchema, RowDeserializationSchema):
    """Reads the first CSV record of a message as a :class:`~flowray.common.types.Row` of
    the type, as Flink's ``CsvRowDeserializationSchema`` (fields by position; a trailing
    line break, and one trailing empty field, are ignored). Build it with
    ``CsvRowDeserializationSchema.Builder(type_info)...build()``.

    >>> from flowray.common.typeinfo import Types
    >>> t = Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.SQL_DATE()])
    >>> d = (CsvRowDeserializationSchema.Builder(t)
    ...      .set_allow_comments(True).set_null_literal("null").build())
    >>> d.deserialize_batch([b"# header\\n7,2024-01-05\\n", b"null,null"])
    [Row(a=7, b=datetime.date(2024, 1, 5)), Row(a=None, b=None)]
    """

    _who = "CsvRowDeserializationSchema"
    _STATE = ("type_info", "layout", "ignore_parse_errors")

    def __init__(self, type_info: RowTypeInfo, layout: Optional[Dict[str, Any]] = None,
                 ignore_parse_errors: bool = False) -> None:
        self._setup(type_info, layout)
        self._ignore_parse_errors = bool(ignore_parse_errors)
        self._build()

    def _build(self) -> None:
        t, layout, ignore = self._type_info, self._layout, self._ignore_parse_errors
        self._parse = _parser(layout)
        self._readers = [_field_reader(ft, layout, ignore) for ft in t.field_types]
        self._labels = [field_label(n) for n in t.field_names]
        self._make = row_factory(t.field_names)
        self._fast = _fields_reader(t, self._readers, self._labels, self._make, layout)

    class Builder(_LayoutBuilder):
        """Builder of a :class:`CsvRowDeserializationSchema` for a row type (``TypeError``
        without one, ``ValueError`` for a type CSV cannot hold)."""

        def __init__(self, type_info: TypeInformation) -> None:
            super().__init__(type_info, "CsvRowDeserializationSchema")
            self._ignore_parse_errors = False

        def set_allow_comments(self, allow_comments: bool) -> "CsvRowDeserializationSchema.Builder":
            """Skip ``#`` comment lines (and blank lines and leading spaces) before the
            record."""
            self._layout.allow_comments = bool(allow_comments)
            return self

        def set_ignore_parse_errors(self, ignore_parse_errors: bool
                                    ) -> "CsvRowDeserializationSchema.Builder":
            """A field that does not read is ``None``, and a message that does not read is
            ``None`` (by default both raise)."""
            self._ignore_parse_errors = bool(ignore_parse_errors)
            return self

        def build(self) -> "CsvRowDeserializationSchema":
            """The schema."""
            return CsvRowDeserializationSchema(self._type_info, self._layout.state(),
                                               self._ignore_parse_errors)

    def _read(self, message: bytes) -> Optional[Any]:
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ReadError(f"not UTF-8 ({e})") from None
        try:
            fields = self._parse(text)
        except _CsvSyntaxError as e:
            raise ReadError(str(e)) from None
        if fields is None:
            raise ReadError("No content to map due to end-of-input")
        readers = self._readers
        n = len(readers)
        got = len(fields)
        if got == n + 1 and not java_trim(fields[n]):
            got = n  # Jackson's ALLOW_TRAILING_COMMA: one empty trailing field is skipped
        elif got > n:
            extra = fields[n]
            raise ReadError(f"Too many entries: expected at most {n} (value #{n} "
                            f"({len(extra)} chars) \"{extra}\")")
        if got == n and len(fields) == n:
            return self._fast(fields)
        if got != n:
            if not self._ignore_parse_errors:
                raise ReadError(f"Row length mismatch. {n} fields expected but was {got}.")
            fields = list(fields[:got]) + [None] * (n - got)
        values = []
        i = 0
        try:
            for i in range(n):
                values.append(readers[i](fields[i]))
        except ReadError as e:
            raise e.at(self._labels[i]) from None
        return self._make(values)

    def __repr__(self) -> str:
        return (f"CsvRowDeserializationSchema({self._type_info!r}, {self._layout.state()}, "
                f"ignore_parse_errors={self._ignore_parse_errors})")
