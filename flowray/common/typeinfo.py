"""``Types`` as in PyFlink. Records are Python objects; type information is kept for the
places that need a schema (e.g. writing to Spark) and otherwise not enforced."""

from __future__ import annotations

from typing import List, Optional, Sequence

__all__ = ["TypeInformation", "Types", "RowTypeInfo", "TupleTypeInfo", "BasicTypeInfo",
           "ListTypeInfo", "MapTypeInfo", "PickledBytesTypeInfo"]


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
