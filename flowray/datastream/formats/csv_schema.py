"""``CsvSchema``: a CSV layout described with PyFlink's builder (named, typed columns and
the separator, quote, escape, null and header settings, as Jackson's ``CsvSchema``).
Importable from ``flowray.datastream.formats.csv`` as in PyFlink."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from flowray.common.typeinfo import RowTypeInfo, TypeInformation, Types
from flowray.datastream.formats._common import kind_of

__all__ = ["CsvSchema", "CsvSchemaBuilder"]

#: the type kinds of CSV columns (shared with the row schemas of ``csv``)
_STRING_KINDS = {"STRING", "SQL_DATE", "SQL_TIME", "SQL_TIMESTAMP", "LOCAL_DATE",
                 "LOCAL_TIME", "LOCAL_DATE_TIME"}
_NUMBER_KINDS = {"BYTE", "SHORT", "INT", "LONG", "DOUBLE", "FLOAT", "BIG_DEC", "BIG_INT"}
_SIMPLE_KINDS = _STRING_KINDS | _NUMBER_KINDS | {"BOOLEAN"}


class CsvSchema:
    """A CSV layout, as PyFlink's ``CsvSchema`` (Jackson's ``CsvSchema``): named, typed
    columns and the separator, quote, escape, null and header settings. Made by
    :meth:`builder`.

    >>> from flowray.common.typeinfo import Types
    >>> schema = (CsvSchema.builder().add_number_column("id", number_type=Types.INT())
    ...           .add_string_column("name").add_array_column("tags", ",")
    ...           .set_column_separator("|").build())
    >>> len(schema), str(schema)
    (3, '[CsvSchema: columns=["id"/NUMBER,"name"/STRING,"tags"/ARRAY], header? false, skipFirst? false, comments? false, any-properties? N/A]')
    >>> schema.get_type_info()
    Row(id: INT, name: STRING, tags: ObjectArray(STRING))
    """

    def __init__(self, columns: Sequence[Tuple[str, str, TypeInformation, str]],
                 settings: Dict[str, Any]) -> None:
        #: ``(name, Jackson column type, flowray type, array element separator)``
        self.columns: Tuple[Tuple[str, str, TypeInformation, str], ...] = tuple(columns)
        self.column_separator: str = settings["column_separator"]
        self.quote_char: Optional[str] = settings["quote_char"]
        self.escape_char: Optional[str] = settings["escape_char"]
        self.line_separator: str = settings["line_separator"]
        self.null_value: Optional[str] = settings["null_value"]
        self.array_element_separator: str = settings["array_element_separator"]
        self.allow_comments: bool = settings["allow_comments"]
        self.use_header: bool = settings["use_header"]
        self.skip_first_data_row: bool = settings["skip_first_data_row"]
        self.strict_headers: bool = settings["strict_headers"]
        self.any_property_name: Optional[str] = settings["any_property_name"]

    @staticmethod
    def builder() -> "CsvSchemaBuilder":
        """A :class:`CsvSchemaBuilder`."""
        return CsvSchemaBuilder()

    def size(self) -> int:
        """The number of columns."""
        return len(self.columns)

    def __len__(self) -> int:
        return self.size()

    def get_type_info(self) -> RowTypeInfo:
        """The row type of the columns (``Types.ROW_NAMED``), the type PyFlink gives the
        records of a CSV source of this schema."""
        return Types.ROW_NAMED([c[0] for c in self.columns], [c[2] for c in self.columns])

    def __str__(self) -> str:
        cols = ",".join(f'"{name}"/{ctype}' for name, ctype, _, _ in self.columns)
        anyp = "N/A" if self.any_property_name is None else f"as '{self.any_property_name}'"
        return (f"[CsvSchema: columns=[{cols}], header? {str(self.use_header).lower()}, "
                f"skipFirst? {str(self.skip_first_data_row).lower()}, comments? "
                f"{str(self.allow_comments).lower()}, any-properties? {anyp}]")

    def __repr__(self) -> str:
        return str(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CsvSchema) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(str(self))


def _single_char(char: Any, what: str) -> str:
    """``char`` when it is one character (PyFlink's check and message)."""
    if not isinstance(char, str) or len(char) != 1:
        raise ValueError('{} must be a single char, got {}'.format(what, char))
    return char


class CsvSchemaBuilder:
    """Builds a :class:`CsvSchema`, as PyFlink's ``CsvSchemaBuilder``. Column types are
    flowray types (``Types.INT()``) where PyFlink takes Table API ``DataTypes``."""

    def __init__(self) -> None:
        self._columns: List[Tuple[str, str, TypeInformation, str]] = []
        self._settings: Dict[str, Any] = {
            "column_separator": ",", "quote_char": '"', "escape_char": None,
            "line_separator": "\n", "null_value": None, "array_element_separator": ";",
            "allow_comments": False, "use_header": False, "skip_first_data_row": False,
            "strict_headers": False, "any_property_name": None}

    def build(self) -> CsvSchema:
        """The :class:`CsvSchema`."""
        return CsvSchema(self._columns, dict(self._settings))

    def _set(self, setting: str, value: Any) -> "CsvSchemaBuilder":
        self._settings[setting] = value
        return self

    def _add(self, name: str, ctype: str, t: TypeInformation, sep: str = "") -> "CsvSchemaBuilder":
        if not isinstance(name, str) or not name:
            raise ValueError(f"a column name must be a non-empty string, got {name!r}")
        self._columns.append((name, ctype, t, sep))
        return self

    def add_array_column(self, name: str, separator: str = ";",
                         element_type: Optional[TypeInformation] = None) -> "CsvSchemaBuilder":
        """An array column whose elements (of ``element_type``, a simple type; default
        ``Types.STRING()``) are separated by ``separator``."""
        element_type = Types.STRING() if element_type is None else element_type
        if kind_of(element_type) not in _SIMPLE_KINDS:
            raise TypeError(f"add_array_column: element_type must be a simple type, got "
                            f"{element_type!r}")
        return self._add(name, "ARRAY", Types.OBJECT_ARRAY(element_type), separator)

    def add_boolean_column(self, name: str) -> "CsvSchemaBuilder":
        """A ``Types.BOOLEAN()`` column."""
        return self._add(name, "BOOLEAN", Types.BOOLEAN())

    def add_number_column(self, name: str, number_type: Optional[TypeInformation] = None
                          ) -> "CsvSchemaBuilder":
        """A number column of ``number_type`` (default ``Types.LONG()``, PyFlink's
        ``BIGINT``)."""
        number_type = Types.LONG() if number_type is None else number_type
        if kind_of(number_type) not in _NUMBER_KINDS:
            raise TypeError(f"add_number_column: number_type must be a number type, got "
                            f"{number_type!r}")
        return self._add(name, "NUMBER", number_type)

    def add_string_column(self, name: str) -> "CsvSchemaBuilder":
        """A ``Types.STRING()`` column."""
        return self._add(name, "STRING", Types.STRING())

    def add_columns_from(self, schema: CsvSchema) -> "CsvSchemaBuilder":
        """The columns of ``schema`` not already here (by name, as Jackson)."""
        have = {c[0] for c in self._columns}
        for column in schema.columns:
            if column[0] not in have:
                self._columns.append(column)
        return self

    def clear_columns(self) -> "CsvSchemaBuilder":
        """Remove all columns."""
        self._columns.clear()
        return self

    def set_allow_comments(self, allow: bool = True) -> "CsvSchemaBuilder":
        """Allow ``#`` comment lines."""
        return self._set("allow_comments", bool(allow))

    def set_any_property_name(self, name: str) -> "CsvSchemaBuilder":
        """The name extra columns are exposed under."""
        return self._set("any_property_name", name)

    def disable_array_element_separator(self) -> "CsvSchemaBuilder":
        """Set the array element separator to ``""``."""
        return self._set("array_element_separator", "")

    def remove_array_element_separator(self, index: int) -> "CsvSchemaBuilder":
        """Set column ``index``'s array element separator to ``""``."""
        if not 0 <= index < len(self._columns):
            raise IndexError(f"Illegal index {index}; only got {len(self._columns)} columns")
        name, ctype, t, _ = self._columns[index]
        self._columns[index] = (name, ctype, t, "")
        return self

    def set_array_element_separator(self, separator: str) -> "CsvSchemaBuilder":
        """The array element separator of all columns (default ``;``)."""
        return self._set("array_element_separator", separator)

    def set_column_separator(self, char: str) -> "CsvSchemaBuilder":
        """The column separator, a single character (default ``,``)."""
        return self._set("column_separator", _single_char(char, "Column separator"))

    def disable_escape_char(self) -> "CsvSchemaBuilder":
        """No escape character (the default)."""
        return self._set("escape_char", None)

    def set_escape_char(self, char: str) -> "CsvSchemaBuilder":
        """The escape character, a single character."""
        return self._set("escape_char", _single_char(char, "Escape char"))

    def set_line_separator(self, separator: str) -> "CsvSchemaBuilder":
        """The line separator written (default ``\\n``; reading takes ``\\n``, ``\\r`` and
        ``\\r\\n``)."""
        return self._set("line_separator", separator)

    def set_null_value(self, null_value: str) -> "CsvSchemaBuilder":
        """The literal for ``None`` (default: the empty field)."""
        return self._set("null_value", null_value)

    def disable_quote_char(self) -> "CsvSchemaBuilder":
        """No quoting."""
        return self._set("quote_char", None)

    def set_quote_char(self, char: str) -> "CsvSchemaBuilder":
        """The quote character, a single character (default ``"``)."""
        return self._set("quote_char", _single_char(char, "Quote char"))

    def set_skip_first_data_row(self, skip: bool = True) -> "CsvSchemaBuilder":
        """Skip the first data row."""
        return self._set("skip_first_data_row", bool(skip))

    def set_strict_headers(self, strict: bool = True) -> "CsvSchemaBuilder":
        """Check the header's column names against the schema."""
        return self._set("strict_headers", bool(strict))

    def set_use_header(self, use: bool = True) -> "CsvSchemaBuilder":
        """The first line is a header."""
        return self._set("use_header", bool(use))

    def size(self) -> int:
        """The number of columns so far."""
        return len(self._columns)

    def __len__(self) -> int:
        return self.size()


# -- the schemas -------------------------------------------------------------------------------
