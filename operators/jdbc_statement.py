r"""A JDBC statement for psycopg: ``?`` placeholders translated, records matched to them.

JDBC writes parameters as ``?``; psycopg 3 as ``%s`` and reads every ``%`` of the query as
the start of a placeholder. :func:`translate_placeholders` scans the statement the way
PostgreSQL's lexer splits it and rewrites it:

* a ``?`` outside quotes and comments is a parameter and becomes ``%s``;
* ``??`` outside quotes and comments is the literal ``?`` (PgJDBC's escape, for the jsonb
  operators ``?``, ``?|``, ``?&``);
* ``?`` inside a string constant (``'...'``, ``E'...'`` with backslash escapes), a quoted
  identifier (``"..."``), a dollar-quoted string (``$tag$...$tag$``) or a comment
  (``-- ...``, nested ``/* ... */``) stays as it is;
* every ``%`` becomes ``%%`` (psycopg looks for placeholders everywhere, quotes included);
* one statement only: a ``;`` followed by anything but blanks and comments is refused.

>>> translate_placeholders("insert into t values (?, '?', 'it''s 100%', ?)")
("insert into t values (%s, '?', 'it''s 100%%', %s)", 2)
>>> translate_placeholders("select * from t where doc ?? 'key' and id = ? -- why?")
("select * from t where doc ? 'key' and id = %s -- why?", 1)
>>> query, count = translate_placeholders("select $q$?$q$, E'\\'?', \"a?\" from t")
>>> print(query, count)
select $q$?$q$, E'\'?', "a?" from t 0

:class:`JdbcStatement` adds the record side: each record is checked against the row type
given to the sink (``Types.ROW`` / ``Types.ROW_NAMED``; a Row, tuple, list, or a dict of
the named fields, converted as PyFlink's coders would) and becomes the tuple of the
statement's parameters, in field order:

>>> from flowray.common.typeinfo import Types
>>> row = Types.ROW([Types.INT(), Types.STRING()])
>>> statement = JdbcStatement("insert into t values (?, ?)", row)
>>> statement.query, statement.parameters((1, "one"))
('insert into t values (%s, %s)', (1, 'one'))
>>> JdbcStatement("insert into t values (?)", row)    # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: JdbcSink: the statement has 1 '?' parameter but type_info has 2 fields (...): ...
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Callable, List, Optional, Tuple

from flowray.common.time import Instant
from flowray.common.type_conversion import record_converter
from flowray.common.typeinfo import InstantTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation

__all__ = ["translate_placeholders", "JdbcStatement", "describe_record"]

_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\U0010ffff]")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)?\$")


def _fail(sql: str, message: str) -> ValueError:
    return ValueError(f"JdbcSink: {message} in the statement {sql!r}")


def translate_placeholders(sql: str) -> Tuple[str, int]:
    """``(psycopg query, number of parameters)`` for the JDBC statement ``sql`` (see the
    module docstring). Raises ``ValueError`` for an unterminated quote or comment and for
    more than one statement."""
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError(f"JdbcSink: the statement must be a non-empty SQL string, got {sql!r}")
    out: List[str] = []
    count = 0
    i, n = 0, len(sql)
    ended = False  # a top-level ';' was seen: only blanks and comments may follow

    def copy_until(end: int) -> None:
        out.append(sql[i:end].replace("%", "%%"))

    while i < n:
        c = sql[i]
        if c in " \t\r\n\f":
            out.append(c)
            i += 1
            continue
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            copy_until(end)
            i = end
            continue
        if c == "/" and sql.startswith("/*", i):
            depth, j = 1, i + 2
            while depth:
                if j >= n:
                    raise _fail(sql, "an unterminated /* comment")
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            copy_until(j)
            i = j
            continue
        if ended:
            raise _fail(sql, "more than one statement (only one is allowed)")
        if c == "'":
            escapes = (i > 0 and sql[i - 1] in "eE"
                       and (i < 2 or not _IDENT_CHAR.match(sql[i - 2])))
            j = i + 1
            while True:
                if j >= n:
                    raise _fail(sql, "an unterminated string constant")
                if escapes and sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == "'":
                    if j + 1 < n and sql[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            copy_until(j + 1)
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while True:
                j = sql.find('"', j)
                if j < 0:
                    raise _fail(sql, "an unterminated quoted identifier")
                if j + 1 < n and sql[j + 1] == '"':
                    j += 2
                    continue
                break
            copy_until(j + 1)
            i = j + 1
            continue
        if c == "$" and (i == 0 or not _IDENT_CHAR.match(sql[i - 1])):
            m = _DOLLAR_TAG.match(sql, i)
            if m is not None:
                tag = m.group(0)
                end = sql.find(tag, m.end())
                if end < 0:
                    raise _fail(sql, f"an unterminated dollar-quoted string {tag}")
                copy_until(end + len(tag))
                i = end + len(tag)
                continue
        if c == "?":
            if sql.startswith("??", i):
                out.append("?")
                i += 2
            else:
                out.append("%s")
                count += 1
                i += 1
            continue
        if c == ";":
            ended = True
            out.append(c)
            i += 1
            continue
        out.append("%%" if c == "%" else c)
        i += 1
    return "".join(out), count


def describe_record(record: Any, limit: int = 200) -> str:
    """``repr(record)``, cut to ``limit`` characters (for error messages)."""
    try:
        text = repr(record)
    except Exception as e:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(record).__name__} with a failing repr: {e}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _instant_to_datetime(v: Any) -> Any:
    if isinstance(v, Instant):
        return (_dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
                + _dt.timedelta(seconds=v.get_epoch_second(), microseconds=v.get_nano() // 1000))
    return v


def _type_text(type_info: TypeInformation) -> str:
    if isinstance(type_info, RowTypeInfo):
        names = list(type_info.get_field_names())
        types = ", ".join(repr(t) for t in type_info.get_field_types())
        if names == [f"f{i}" for i in range(len(names))]:
            return f"Types.ROW([{types}])"
        return f"Types.ROW_NAMED({names}, [{types}])"
    return repr(type_info)


class JdbcStatement:
    """One DML statement with ``?`` parameters and the row type of its records.

    ``query`` is the statement for psycopg, ``parameter_count`` its number of parameters
    (equal to the row type's arity, checked here); :meth:`parameters` turns one record
    into the tuple of parameter values (``RecordTypeError`` when it does not fit the row
    type). ``Types.INSTANT`` fields are passed as UTC ``datetime`` values. Picklable.
    """

    def __init__(self, sql: str, type_info: TypeInformation) -> None:
        if not isinstance(type_info, (RowTypeInfo, TupleTypeInfo)):
            raise TypeError(f"JdbcSink: type_info must be a row type (Types.ROW([...]) or "
                            f"Types.ROW_NAMED([...], [...])), got {type_info!r}")
        self.sql = sql
        self.type_info = type_info
        self.query, self.parameter_count = translate_placeholders(sql)
        fields = type_info.get_field_types()
        if self.parameter_count != len(fields):
            s = "" if self.parameter_count == 1 else "s"
            raise ValueError(
                f"JdbcSink: the statement has {self.parameter_count} '?' parameter{s} but "
                f"type_info has {len(fields)} fields ({_type_text(type_info)}): {sql!r}")
        self._instants = [i for i, t in enumerate(fields) if isinstance(t, InstantTypeInfo)]
        self._convert: Optional[Callable[[Any], Any]] = None

    def __getstate__(self) -> dict:  # the compiled converter is rebuilt where it is used
        state = dict(self.__dict__)
        state["_convert"] = None
        return state

    def parameters(self, record: Any) -> Tuple[Any, ...]:
        """The statement's parameter values for ``record``, in field order."""
        convert = self._convert
        if convert is None:
            convert = self._convert = record_converter(self.type_info)
        values = tuple(convert(record))
        if self._instants:
            values = tuple(_instant_to_datetime(v) if i in self._instants else v
                           for i, v in enumerate(values))
        return values

    def __repr__(self) -> str:
        return f"JdbcStatement({self.sql!r}, {_type_text(self.type_info)})"
