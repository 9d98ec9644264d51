"""``Types`` and the ``TypeInformation`` classes, as in ``pyflink.common.typeinfo``. A type
declared as ``output_type=``/``type_info=`` is applied to the records of that stream as
PyFlink's serializers would (:mod:`flowray.common.type_conversion`); undeclared records are
plain Python objects (``Types.PICKLED_BYTE_ARRAY()``)."""

from __future__ import annotations

from decimal import Decimal
from enum import Enum
from typing import Any, Callable, List, Optional, Sequence, Union

__all__ = ["TypeInformation", "Types", "BasicType", "BasicTypeInfo", "InstantTypeInfo",
           "SqlTimeTypeInfo", "DateTypeInfo", "TimeTypeInfo", "TimestampTypeInfo",
           "LocalTimeTypeInfo", "PrimitiveArrayTypeInfo", "BasicArrayTypeInfo",
           "ObjectArrayTypeInfo", "ListTypeInfo", "MapTypeInfo", "PickledBytesTypeInfo",
           "RowTypeInfo", "TupleTypeInfo", "record_formatter"]


class TypeInformation:
    """The type of a stream's records (Flink's ``TypeInformation``). A declared type is
    applied to the records an operator emits (see :mod:`flowray.common.type_conversion`)."""

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name if name is not None else type(self).__name__

    def __repr__(self) -> str:
        return self.name

    def need_conversion(self) -> bool:
        """PyFlink's hook for a Java-side form; flowray has none (records are converted
        by :func:`flowray.common.type_conversion.record_converter`)."""
        return False

    def to_internal_type(self, obj: Any) -> Any:
        """``obj`` (no Java-side form in flowray)."""
        return obj

    def from_internal_type(self, obj: Any) -> Any:
        """``obj`` (no Java-side form in flowray)."""
        return obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeInformation) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicType(Enum):
    """The basic types, valued by their Java class names (as PyFlink's ``BasicType``)."""

    STRING = "String"
    BYTE = "Byte"
    BOOLEAN = "Boolean"
    SHORT = "Short"
    INT = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    CHAR = "Char"
    BIG_INT = "BigInteger"
    BIG_DEC = "BigDecimal"
    INSTANT = "Instant"


class BasicTypeInfo(TypeInformation):
    """Numbers, booleans, strings, ``BigInteger``/``BigDecimal`` and ``Instant``.
    ``basic_type`` is a :class:`BasicType` or its name (``"INT"``)."""

    def __init__(self, basic_type: Union[BasicType, str]) -> None:
        if isinstance(basic_type, str):
            try:
                basic_type = BasicType[basic_type]
            except KeyError:
                raise ValueError(f"no basic type {basic_type!r}; one of "
                                 f"{[t.name for t in BasicType]}") from None
        self._basic_type = basic_type
        super().__init__(basic_type.name)

    @staticmethod
    def STRING_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.STRING)
    @staticmethod
    def BOOLEAN_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.BOOLEAN)
    @staticmethod
    def BYTE_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.BYTE)
    @staticmethod
    def SHORT_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.SHORT)
    @staticmethod
    def INT_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.INT)
    @staticmethod
    def LONG_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.LONG)
    @staticmethod
    def FLOAT_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.FLOAT)
    @staticmethod
    def DOUBLE_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.DOUBLE)
    @staticmethod
    def CHAR_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.CHAR)
    @staticmethod
    def BIG_INT_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.BIG_INT)
    @staticmethod
    def BIG_DEC_TYPE_INFO() -> "BasicTypeInfo": return BasicTypeInfo(BasicType.BIG_DEC)
    @staticmethod
    def INSTANT_TYPE_INFO() -> "InstantTypeInfo": return InstantTypeInfo(BasicType.INSTANT)


class InstantTypeInfo(BasicTypeInfo):
    """``java.time.Instant``: values are :class:`flowray.common.time.Instant`."""


class PickledBytesTypeInfo(TypeInformation):
    """Any picklable Python object (the default: no conversion)."""


class DateTypeInfo(TypeInformation):
    """``java.sql.Date``: values are ``datetime.date``."""


class TimeTypeInfo(TypeInformation):
    """``java.sql.Time``: values are naive ``datetime.time`` of millisecond precision."""


class TimestampTypeInfo(TypeInformation):
    """``java.sql.Timestamp``: values are naive ``datetime.datetime`` of millisecond
    precision."""


class SqlTimeTypeInfo:
    """Factories of the ``java.sql`` time types, as PyFlink's ``SqlTimeTypeInfo``."""

    @staticmethod
    def DATE() -> DateTypeInfo: return DateTypeInfo("SQL_DATE")
    @staticmethod
    def TIME() -> TimeTypeInfo: return TimeTypeInfo("SQL_TIME")
    @staticmethod
    def TIMESTAMP() -> TimestampTypeInfo: return TimestampTypeInfo("SQL_TIMESTAMP")


class LocalTimeTypeInfo(TypeInformation):
    """``java.time.LocalDate``/``LocalTime``/``LocalDateTime``: naive ``datetime.date``,
    ``datetime.time`` and ``datetime.datetime`` (microsecond precision)."""

    class TimeType(Enum):
        LOCAL_DATE = 0
        LOCAL_TIME = 1
        LOCAL_DATE_TIME = 2

    def __init__(self, time_type: "LocalTimeTypeInfo.TimeType") -> None:
        if not isinstance(time_type, LocalTimeTypeInfo.TimeType):
            raise TypeError(f"time_type must be a LocalTimeTypeInfo.TimeType, got {time_type!r}")
        self._time_type = time_type
        super().__init__(time_type.name)


class _ElementTypeInfo(TypeInformation):
    _label = ""

    def __init__(self, element_type: TypeInformation) -> None:
        _check_type("element_type", element_type)
        self.element_type = self.elem_type = self._element_type = element_type
        super().__init__(f"{self._label}({element_type!r})")


class PrimitiveArrayTypeInfo(_ElementTypeInfo):
    """An array of non-null primitives: a ``list`` (``bytes`` for ``Types.BYTE()``)."""

    _label = "PrimitiveArray"


class BasicArrayTypeInfo(_ElementTypeInfo):
    """An array of basic values (elements may be ``None``): a ``list``."""

    _label = "BasicArray"


class ObjectArrayTypeInfo(_ElementTypeInfo):
    """An array of objects (elements may be ``None``): a ``list``."""

    _label = "ObjectArray"


class ListTypeInfo(_ElementTypeInfo):
    """A ``java.util.List`` (elements may be ``None``): a ``list``."""

    _label = "List"


class MapTypeInfo(TypeInformation):
    """A ``java.util.Map``: a ``dict`` (keys not ``None``, values may be)."""

    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        _check_type("key_type_info", key_type)
        _check_type("value_type_info", value_type)
        self.key_type, self.value_type = key_type, value_type
        self._key_type_info, self._value_type_info = key_type, value_type
        super().__init__(f"Map({key_type!r}, {value_type!r})")


class RowTypeInfo(TypeInformation):
    """Rows of typed fields: values become :class:`~flowray.common.types.Row` named by
    ``field_names`` (``f0``, ``f1``... when not given)."""

    def __init__(self, field_types: Sequence[TypeInformation],
                 field_names: Optional[Sequence[str]] = None) -> None:
        self.field_types = list(field_types)
        for i, t in enumerate(self.field_types):
            _check_type(f"field_types[{i}]", t)
        if field_names is not None:
            names = list(field_names)
            if len(names) != len(self.field_types):
                raise ValueError(f"{len(names)} field names for {len(self.field_types)} "
                                 "field types")
            bad = [n for n in names if not isinstance(n, str) or not n]
            if bad or len(set(names)) != len(names):
                raise ValueError(f"field names must be distinct non-empty strings: {names}")
        self.field_names = list(field_names) if field_names is not None else \
            [f"f{i}" for i in range(len(self.field_types))]
        super().__init__("Row(" + ", ".join(f"{n}: {t}" for n, t in
                                            zip(self.field_names, self.field_types)) + ")")

    def get_field_names(self) -> List[str]:
        return list(self.field_names)

    def get_field_index(self, field_name: str) -> int:
        """The position of ``field_name``, -1 when there is none."""
        return self.field_names.index(field_name) if field_name in self.field_names else -1

    def get_field_types(self) -> List[TypeInformation]:
        return list(self.field_types)


class TupleTypeInfo(TypeInformation):
    """Tuples of typed fields: values become ``tuple``."""

    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        self.field_types = list(field_types)
        for i, t in enumerate(self.field_types):
            _check_type(f"field_types[{i}]", t)
        super().__init__("Tuple(" + ", ".join(map(repr, self.field_types)) + ")")

    def get_field_types(self) -> List[TypeInformation]:
        return list(self.field_types)


def _check_type(what: str, t: object) -> None:
    if not isinstance(t, TypeInformation):
        raise TypeError(f"{what} must be a TypeInformation (e.g. Types.INT()), got {t!r}")


class Types:
    """Factory of type information, as ``pyflink.common.typeinfo.Types``."""

    @staticmethod
    def STRING() -> TypeInformation: return BasicTypeInfo(BasicType.STRING)
    @staticmethod
    def BYTE() -> TypeInformation: return BasicTypeInfo(BasicType.BYTE)
    @staticmethod
    def BOOLEAN() -> TypeInformation: return BasicTypeInfo(BasicType.BOOLEAN)
    @staticmethod
    def SHORT() -> TypeInformation: return BasicTypeInfo(BasicType.SHORT)
    @staticmethod
    def INT() -> TypeInformation: return BasicTypeInfo(BasicType.INT)
    @staticmethod
    def LONG() -> TypeInformation: return BasicTypeInfo(BasicType.LONG)
    @staticmethod
    def FLOAT() -> TypeInformation: return BasicTypeInfo(BasicType.FLOAT)
    @staticmethod
    def DOUBLE() -> TypeInformation: return BasicTypeInfo(BasicType.DOUBLE)
    @staticmethod
    def CHAR() -> TypeInformation: return BasicTypeInfo(BasicType.CHAR)
    @staticmethod
    def BIG_INT() -> TypeInformation: return BasicTypeInfo(BasicType.BIG_INT)
    @staticmethod
    def BIG_DEC() -> TypeInformation: return BasicTypeInfo(BasicType.BIG_DEC)
    @staticmethod
    def INSTANT() -> TypeInformation: return InstantTypeInfo(BasicType.INSTANT)
    @staticmethod
    def SQL_DATE() -> TypeInformation: return SqlTimeTypeInfo.DATE()
    @staticmethod
    def SQL_TIME() -> TypeInformation: return SqlTimeTypeInfo.TIME()
    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation: return SqlTimeTypeInfo.TIMESTAMP()
    @staticmethod
    def LOCAL_DATE() -> TypeInformation:
        """Java's ``Types.LOCAL_DATE`` (not a PyFlink factory: there it is
        ``LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE)``)."""
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE)
    @staticmethod
    def LOCAL_TIME() -> TypeInformation:
        """Java's ``Types.LOCAL_TIME``."""
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_TIME)
    @staticmethod
    def LOCAL_DATE_TIME() -> TypeInformation:
        """Java's ``Types.LOCAL_DATE_TIME``."""
        return LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE_TIME)
    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation: return PickledBytesTypeInfo("PICKLED_BYTE_ARRAY")
    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return PrimitiveArrayTypeInfo(element_type)
    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return BasicArrayTypeInfo(element_type)
    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ObjectArrayTypeInfo(element_type)
    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type_info)
    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type_info, value_type_info)
    @staticmethod
    def TUPLE(field_types: Sequence[TypeInformation]) -> TypeInformation:
        return TupleTypeInfo(field_types)
    @staticmethod
    def ROW(field_types: Sequence[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)
    @staticmethod
    def ROW_NAMED(field_names: Sequence[str], field_types: Sequence[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)


def _java_float(value: float) -> str:
    """``Double.toString``: ``1.0E10`` and ``1.0E-5`` where Python writes ``1e+10``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    mantissa, exponent = f"{Decimal(repr(float(value))).normalize():E}".split("E")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def _java_string(value: object, type_info: Optional[TypeInformation]) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_float(value)
    if isinstance(type_info, (TupleTypeInfo, RowTypeInfo)) and isinstance(value, (tuple, list)):
        return record_formatter(type_info)(value)
    return str(value)


def record_formatter(type_info: Optional[TypeInformation]) -> "Callable[[object], str]":
    """How ``print()`` shows a record of ``type_info``, as PyFlink does: records of a
    declared ``Types.TUPLE`` print as Java's ``Tuple.toString`` (``(hi,0,5,4)``), of a
    ``Types.ROW`` as PyFlink 2.3 prints them (``+I[hi,4]``, measured with its Kafka examples);
    untyped (pickled) records
    print as Python's ``str``.

    >>> record_formatter(Types.TUPLE([Types.STRING(), Types.INT()]))(("hi", 4))
    '(hi,4)'
    >>> record_formatter(Types.ROW([Types.STRING(), Types.BOOLEAN()]))(("hi", True))
    '+I[hi,true]'
    >>> record_formatter(None)(("hi", 4))
    "('hi', 4)"
    """
    if isinstance(type_info, TupleTypeInfo):
        fields = type_info.field_types

        def tuple_string(record: object) -> str:
            values = list(record)  # type: ignore[call-overload]
            types = fields if len(fields) == len(values) else [None] * len(values)
            return "(" + ",".join(_java_string(v, t) for v, t in zip(values, types)) + ")"
        return tuple_string
    if isinstance(type_info, RowTypeInfo):
        fields_r = type_info.field_types

        def row_string(record: object) -> str:
            values = list(record)  # type: ignore[call-overload]
            types = fields_r if len(fields_r) == len(values) else [None] * len(values)
            kind = getattr(record, "get_row_kind", None)
            prefix = str(kind()) if kind is not None else "+I"
            return prefix + "[" + ",".join(_java_string(v, t) for v, t in zip(values, types)) + "]"
        return row_string
    return str

