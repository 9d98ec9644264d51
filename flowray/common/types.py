"""``Row`` as in ``pyflink.common``: a tuple whose fields may also have names.

>>> r = Row(name="ann", clicks=3)
>>> r.name, r[1], r.as_dict()
('ann', 3, {'name': 'ann', 'clicks': 3})
>>> Row("a", 1) == ("a", 1)
True
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

__all__ = ["Row"]


class Row(tuple):
    _fields: Optional[Tuple[str, ...]]

    def __new__(cls, *args: Any, **kwargs: Any) -> "Row":
        if args and kwargs:
            raise ValueError("Row takes positional values or named values, not both")
        row = super().__new__(cls, kwargs.values() if kwargs else args)
        row._fields = tuple(kwargs) if kwargs else None
        return row

    @classmethod
    def with_fields(cls, fields: Tuple[str, ...], values: Any) -> "Row":
        """A named row from field names and values in the same order (no dict built).

        >>> Row.with_fields(("a", "b"), (1, 2))
        Row(a=1, b=2)
        """
        row = tuple.__new__(cls, values)
        if len(row) != len(fields):
            raise ValueError(f"{len(fields)} field names for {len(row)} values")
        row._fields = tuple(fields)
        return row

    def __getattr__(self, item: str) -> Any:
        fields = tuple.__getattribute__(self, "_fields")
        if fields and item in fields:
            return self[fields.index(item)]
        raise AttributeError(item)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, str):
            if not self._fields or item not in self._fields:
                raise KeyError(item)
            return tuple.__getitem__(self, self._fields.index(item))
        return tuple.__getitem__(self, item)

    def _replace(self, **changes: Any) -> "Row":
        if not self._fields:
            raise ValueError("this Row has no field names")
        values = self.as_dict()
        values.update(changes)
        return Row(**values)

    def as_dict(self) -> Dict[str, Any]:
        if not self._fields:
            raise ValueError("this Row has no field names")
        return dict(zip(self._fields, self))

    def __reduce__(self) -> Any:
        if self._fields:
            return (_named_row, (self._fields, tuple(self)))
        return (Row, tuple(self))

    def __repr__(self) -> str:
        if self._fields:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self)) + ")"
        return "Row(" + ", ".join(repr(v) for v in self) + ")"


def _named_row(fields: Tuple[str, ...], values: Tuple[Any, ...]) -> Row:
    return Row(**dict(zip(fields, values)))
