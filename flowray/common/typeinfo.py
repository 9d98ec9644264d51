"""``Types`` as in PyFlink. Records are Python objects; type information is kept for the
places that need a schema (e.g. writing to Spark) and otherwise not enforced."""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Callable, List, Optional, Sequence

__all__ = ["TypeInformation", "Types", "RowTypeInfo", "TupleTypeInfo", "BasicTypeInfo",
           "ListTypeInfo", "MapTypeInfo", "PickledBytesTypeInfo", "record_formatter",
           "value_converter"]


class TypeInformation:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeInformation) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicTypeInfo(TypeInformation):
    pass


class PickledBytesTypeInfo(TypeInformation):
    pass


class RowTypeInfo(TypeInformation):
    def __init__(self, field_types: Sequence[TypeInformation],
                 field_names: Optional[Sequence[str]] = None) -> None:
        self.field_types = list(field_types)
        self.field_names = list(field_names) if field_names is not None else \
            [f"f{i}" for i in range(len(self.field_types))]
        super().__init__("Row(" + ", ".join(f"{n}: {t}" for n, t in
                                            zip(self.field_names, self.field_types)) + ")")

    def get_field_names(self) -> List[str]:
        return list(self.field_names)

    def get_field_types(self) -> List[TypeInformation]:
        return list(self.field_types)


class TupleTypeInfo(TypeInformation):
    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        self.field_types = list(field_types)
        super().__init__("Tuple(" + ", ".join(map(repr, self.field_types)) + ")")


class ListTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        self.element_type = element_type
        super().__init__(f"List({element_type!r})")


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        self.key_type, self.value_type = key_type, value_type
        super().__init__(f"Map({key_type!r}, {value_type!r})")


class Types:
    """Factory of type information, as ``pyflink.common.typeinfo.Types``."""

    @staticmethod
    def STRING() -> TypeInformation: return BasicTypeInfo("STRING")
    @staticmethod
    def BYTE() -> TypeInformation: return BasicTypeInfo("BYTE")
    @staticmethod
    def BOOLEAN() -> TypeInformation: return BasicTypeInfo("BOOLEAN")
    @staticmethod
    def SHORT() -> TypeInformation: return BasicTypeInfo("SHORT")
    @staticmethod
    def INT() -> TypeInformation: return BasicTypeInfo("INT")
    @staticmethod
    def LONG() -> TypeInformation: return BasicTypeInfo("LONG")
    @staticmethod
    def FLOAT() -> TypeInformation: return BasicTypeInfo("FLOAT")
    @staticmethod
    def DOUBLE() -> TypeInformation: return BasicTypeInfo("DOUBLE")
    @staticmethod
    def CHAR() -> TypeInformation: return BasicTypeInfo("CHAR")
    @staticmethod
    def BIG_INT() -> TypeInformation: return BasicTypeInfo("BIG_INT")
    @staticmethod
    def BIG_DEC() -> TypeInformation: return BasicTypeInfo("BIG_DEC")
    @staticmethod
    def SQL_DATE() -> TypeInformation: return BasicTypeInfo("SQL_DATE")
    @staticmethod
    def SQL_TIME() -> TypeInformation: return BasicTypeInfo("SQL_TIME")
    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation: return BasicTypeInfo("SQL_TIMESTAMP")
    @staticmethod
    def INSTANT() -> TypeInformation: return BasicTypeInfo("INSTANT")
    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation: return PickledBytesTypeInfo("PICKLED_BYTE_ARRAY")
    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type)
    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type)
    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type)
    @staticmethod
    def LIST(element_type: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type)
    @staticmethod
    def MAP(key_type: TypeInformation, value_type: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type, value_type)
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
    ``Types.ROW`` as Java's ``Row.toString`` (``+I[hi, 4]``); untyped (pickled) records
    print as Python's ``str``.

    >>> record_formatter(Types.TUPLE([Types.STRING(), Types.INT()]))(("hi", 4))
    '(hi,4)'
    >>> record_formatter(Types.ROW([Types.STRING(), Types.BOOLEAN()]))(("hi", True))
    '+I[hi, true]'
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
            return "+I[" + ", ".join(_java_string(v, t) for v, t in zip(values, types)) + "]"
        return row_string
    return str


def _to_float32(value: object) -> object:
    if isinstance(value, float):
        return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return value


_FLOAT32 = struct.Struct("<f")


def value_converter(type_info: Optional[TypeInformation]) -> Optional[Callable[[object], object]]:
    """What a value of ``type_info`` becomes when PyFlink serializes it, for the types
    whose value changes (``Types.FLOAT`` is a 32-bit float: ``110.1`` reads back as
    ``110.0999984741211``); ``None`` when values pass unchanged.

    >>> value_converter(Types.TUPLE([Types.STRING(), Types.FLOAT()]))(("a", 110.1))
    ('a', 110.0999984741211)
    >>> value_converter(Types.TUPLE([Types.STRING(), Types.INT()])) is None
    True
    """
    if isinstance(type_info, BasicTypeInfo) and type_info.name == "FLOAT":
        return _to_float32
    if isinstance(type_info, (TupleTypeInfo, RowTypeInfo)):
        fields = [value_converter(t) for t in type_info.field_types]
        if not any(fields):
            return None

        def convert(record: object) -> object:
            if not isinstance(record, (tuple, list)) or len(record) != len(fields):
                return record
            out = [v if f is None else f(v) for v, f in zip(record, fields)]
            return type(record)(out) if type(record) in (tuple, list) else record
        return convert
    return None
