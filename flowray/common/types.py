"""``Row`` and ``RowKind`` as in ``pyflink.common``: a row is a tuple whose fields may also
have names, and which carries a change kind (insert, update before/after, delete).

>>> r = Row(name="ann", clicks=3)
>>> r.name, r[1], r["clicks"], r.as_dict()
('ann', 3, 3, {'name': 'ann', 'clicks': 3})
>>> r
Row(name='ann', clicks=3)
>>> Row("a", 1)
<Row('a', 1)>
>>> Person = Row("name", "age")
>>> Person("Alice", 11)
Row(name='Alice', age=11)
>>> d = Row.of_kind(RowKind.DELETE, "a", 1)
>>> d.get_row_kind(), str(d.get_row_kind())
(<RowKind.DELETE: 3>, '-D')

Unlike PyFlink's ``Row`` (a mutable object), flowray's is an immutable ``tuple``, because
records are keys too: equality and hashing are the tuple's (field names and row kind are
not compared), so ``Row("a", 1) == ("a", 1)`` and a ``Row`` key is the same key as the
tuple of its values.

>>> Row("a", 1) == ("a", 1)
True
"""

from __future__ import annotations

import copyreg
from enum import Enum
from functools import partial
from operator import attrgetter
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["C_ROWS", "Row", "RowKind", "make_row", "rows_for_pickling", "rows_from_tuples"]

from flowray.common.native import native

# Row's C half (flowray/common/_records.c): its [] and attribute lookup, and the batch
# operations of the data path. Without it (not built where flowray was installed, or
# FLOWRAY_PURE_PYTHON=1) the pure-Python twins below do the same, slower.
_records: Any = native("flowray.common._records")

#: whether rows use their C half (``flowray.common._records``)
C_ROWS: bool = _records is not None


class RowKind(Enum):
    """The kind of change a row stands for (Flink's ``RowKind``); ``str`` gives the short
    form (``+I``, ``-U``, ``+U``, ``-D``)."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return _SHORT[self.value]


_SHORT = ("+I", "-U", "+U", "-D")
_KINDS = tuple(RowKind)
_INSERT = RowKind.INSERT
_NEW_TUPLE = tuple.__new__
_TUPLE_GETITEM = tuple.__getitem__


class _RowClass(type):
    """Metaclass of :class:`Row`: a named row's own class pickles as its field names."""


class Row(_records.RowBase if C_ROWS else tuple, metaclass=_RowClass):  # type: ignore[misc]
    """A fixed-length row of values, optionally named (``Row(a=1)``), with a
    :class:`RowKind` (``INSERT`` unless set). ``Row("a", "b")`` (strings) also serves as a
    template: calling it with values gives a row named by them."""

    #: field names, or ``None`` for a row of positional values
    _fields: Optional[Tuple[str, ...]] = None
    _row_kind: RowKind = RowKind.INSERT

    def __new__(cls, *args: Any, **kwargs: Any) -> "Row":
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            return Row.with_fields(tuple(kwargs), kwargs.values())
        fields = cls._fields
        if fields is not None and len(args) != len(fields):  # a named row's own class
            raise ValueError(f"{len(fields)} field names for {len(args)} values")
        return super().__new__(cls, args)

    @classmethod
    def with_fields(cls, fields: Sequence[str], values: Iterable[Any],
                    row_kind: Optional[RowKind] = None) -> "Row":
        """A named row from field names and values in the same order (no dict built).

        >>> Row.with_fields(("a", "b"), (1, 2))
        Row(a=1, b=2)
        """
        fields = tuple(fields)
        named = _named_class(fields) if cls is Row or cls._fields is not None else None
        row = tuple.__new__(named or cls, values)
        if len(row) != len(fields):
            raise ValueError(f"{len(fields)} field names for {len(row)} values")
        if named is None:
            row._fields = fields
        if row_kind is not None and row_kind is not RowKind.INSERT:
            row._row_kind = row_kind
        return row

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> "Row":
        """A row of ``row_kind``.

        >>> Row.of_kind(RowKind.UPDATE_AFTER, x=1).get_row_kind() is RowKind.UPDATE_AFTER
        True
        """
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    # -- row kind ------------------------------------------------------------------------
    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        if not isinstance(row_kind, RowKind):
            raise TypeError(f"row_kind must be a RowKind, got {row_kind!r}")
        self._set_own("_row_kind", row_kind)

    def _is_retract_msg(self) -> bool:
        return self._row_kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    def _is_accumulate_msg(self) -> bool:
        return self._row_kind in (RowKind.UPDATE_AFTER, RowKind.INSERT)

    # -- names ---------------------------------------------------------------------------
    def set_field_names(self, field_names: Sequence[str]) -> None:
        """Name this row's fields (as many names as values)."""
        names = tuple(field_names)
        if len(names) != len(self):
            raise ValueError(f"{len(names)} field names for a row of {len(self)} values")
        self._set_own("_fields", names)

    def _set_own(self, name: str, value: Any) -> None:
        """Set the row's own ``_fields`` or ``_row_kind``; a value equal to its class's
        leaves the class's in force (a row that keeps nothing of its own is the fast case
        of the data path: ``rows_for_pickling``, ``sum``)."""
        if value == getattr(type(self), name):
            self.__dict__.pop(name, None)
        else:
            setattr(self, name, value)

    def get_fields_by_names(self, names: Sequence[str]) -> List[Any]:
        """The values of fields ``names``, in that order (all values, in order, when the
        row has no names or exactly these)."""
        fields = self._fields
        if fields is None or tuple(names) == fields:
            return list(self)
        missing = [n for n in names if n not in fields]
        if missing:
            raise KeyError(f"Field names {missing} not exist in {list(fields)}.")
        return [tuple.__getitem__(self, fields.index(n)) for n in names]

    def as_dict(self, recursive: bool = False) -> Dict[str, Any]:
        """``{name: value}``; ``recursive`` also turns nested rows (in lists and dicts
        too) into dicts. Raises ``TypeError`` for a row without field names."""
        if self._fields is None:
            raise _NoNames("Cannot convert a Row without field names into dict")
        if not recursive:
            return dict(zip(self._fields, self))
        return {k: _as_plain(v) for k, v in zip(self._fields, self)}

    def _replace(self, **changes: Any) -> "Row":
        if self._fields is None:
            raise ValueError("this Row has no field names")
        values = self.as_dict()
        unknown = set(changes) - set(values)
        if unknown:
            raise ValueError(f"Row has no fields {sorted(unknown)}")
        values.update(changes)
        return Row.with_fields(self._fields, values.values(), self._row_kind)

    def _with_values(self, values: Iterable[Any]) -> "Row":
        """A row like this one (names, kind) holding ``values`` (as many as this one's)."""
        cls = type(self)
        row = tuple.__new__(cls, values)
        if len(row) != len(self):
            raise ValueError(f"{len(row)} values for a row of {len(self)}")
        if self._fields is not cls._fields:
            row._fields = self._fields
        if self._row_kind is not _INSERT:
            row._row_kind = self._row_kind
        return row

    # -- access --------------------------------------------------------------------------
    # row.name and row["name"] as well as row[0]: in C (the base class) when C_ROWS, here
    # otherwise; both behave the same (tests/unit/common/test_row.py runs against each)
    if not C_ROWS:
        def __getattr__(self, item: str) -> Any:
            if item.startswith("_"):
                raise AttributeError(item)
            fields = self._fields
            if fields is not None and item in fields:
                return tuple.__getitem__(self, fields.index(item))
            raise AttributeError(item)

        def __getitem__(self, item: Any) -> Any:
            if type(item) is int:   # the common case first: r[0] in a key selector
                return _TUPLE_GETITEM(self, item)
            if isinstance(item, str):
                fields = self._fields
                if fields is None or item not in fields:
                    raise KeyError(item)
                return _TUPLE_GETITEM(self, fields.index(item))
            return _TUPLE_GETITEM(self, item)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("a flowray Row is immutable (a tuple); build a new one, e.g. "
                        "row._replace(name=value) or Row(*values)")

    def __contains__(self, item: Any) -> bool:
        """Named row: whether ``item`` is a field name; otherwise whether it is a value."""
        if self._fields is not None:
            return item in self._fields
        return tuple.__contains__(self, item)

    def __call__(self, *args: Any) -> "Row":
        """A row named by this template's values: ``Row("name", "age")("ann", 3)``."""
        if len(args) > len(self):
            raise ValueError(f"Can not create Row with fields {self!r}, expected {len(self)} "
                             f"values but got {args!r}")
        return Row.with_fields(tuple(self)[:len(args)], args, self._row_kind)

    # -- pickling and display ------------------------------------------------------------
    def __reduce_ex__(self, protocol: Any) -> Any:
        cls = type(self)
        if self._row_kind is _INSERT and self._fields is cls._fields:  # the common case
            return (_NEW_TUPLE, (cls, tuple(self)))  # a named class pickles as its names
        return (_create_row, (self._fields, tuple(self), self._row_kind.value))

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self) + ")>"


if C_ROWS:
    _records.fast_class(Row)   # Row's own rows on the C half's free list too


#: one subclass of Row per tuple of field names, holding them as a class attribute: a named
#: row then needs no instance dict (rows are as cheap as they can be, and not GC-heavier)
_NAMED_CLASSES: Dict[Tuple[str, ...], type] = {}
_MAX_NAMED_CLASSES = 4096


def _named_class(fields: Tuple[str, ...]) -> Optional[type]:
    """The Row class named by ``fields`` (``None`` when too many distinct schemas exist)."""
    cls = _NAMED_CLASSES.get(fields)
    if cls is None:
        if len(_NAMED_CLASSES) >= _MAX_NAMED_CLASSES:
            return None
        cls = _NAMED_CLASSES.setdefault(fields, _new_row_class(fields))
    return cls


def _new_row_class(fields: Tuple[str, ...]) -> type:
    """A new subclass of Row holding ``fields`` (its rows on the C half's free list)."""
    cls = type("Row", (Row,), {"_fields": fields, "__slots__": (),
                               "__module__": Row.__module__, "__qualname__": "Row"})
    if C_ROWS:
        _records.fast_class(cls)
    return cls


def _class_for(fields: Tuple[str, ...]) -> type:
    """The Row class named by ``fields`` (for unpickling)."""
    cls = _named_class(tuple(fields))
    if cls is None:
        cls = _new_row_class(tuple(fields))
    return cls


def _reduce_row_class(cls: type) -> Any:
    fields = cls.__dict__.get("_fields")
    if fields is None:  # Row itself, or a user's subclass: by name
        return cls.__qualname__
    return (_class_for, (fields,))


copyreg.dispatch_table[_RowClass] = _reduce_row_class


class _NoNames(TypeError, ValueError):
    """A row without field names where names are needed (a ``TypeError`` as in PyFlink; a
    ``ValueError`` as flowray raised before)."""


def _as_plain(obj: Any) -> Any:
    if isinstance(obj, Row) and obj._fields is not None:
        return obj.as_dict(True)
    if isinstance(obj, list):
        return [_as_plain(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _as_plain(v) for k, v in obj.items()}
    return obj


def _create_row(fields: Optional[Sequence[str]], values: Tuple[Any, ...],
                kind: int = 0) -> Row:
    if fields is not None:
        row = Row.with_fields(fields, values)
    else:
        row = tuple.__new__(Row, values)
    if kind:
        row._row_kind = _KINDS[kind]
    return row


def _named_row(fields: Tuple[str, ...], values: Tuple[Any, ...]) -> Row:
    """Unpickles rows pickled before row kinds existed."""
    return _create_row(fields, values)


# -- batches on the wire -------------------------------------------------------------------
_KIND_OF = attrgetter("_row_kind")
_FIELDS_OF = attrgetter("_fields")


class _FlatBatch:
    """A batch of records of one shape (plain tuples of one length, or rows of one Row
    class keeping nothing of their own) pickled as one flat list of their values, record
    after record (no per-record tuple in the pickle); it unpickles as an equal list."""

    __slots__ = ("fields", "width", "values")

    def __init__(self, fields: Any, width: int, values: List[Any]) -> None:
        self.fields = fields   # None: plain tuples; True: rows of Row; else a class's names
        self.width = width
        self.values = values

    def __reduce__(self) -> Any:
        if self.fields is None:
            return (_flat_tuples, (self.width, self.values))
        return (_flat_rows, (None if self.fields is True else self.fields, self.width,
                             self.values))


def _flat_tuples(width: int, values: List[Any]) -> List[tuple]:
    return _unflatten(None, width, values)


def _flat_rows(fields: Optional[Tuple[str, ...]], width: int, values: List[Any]) -> List[Row]:
    return _unflatten(Row if fields is None else _class_for(tuple(fields)), width, values)


def _named_rows(fields: Tuple[str, ...], values: List[tuple]) -> List[Row]:
    """Unpickles batches of named rows written as field names and plain tuples (before
    _FlatBatch; frames of that form may wait in an unaligned checkpoint's channel state)."""
    return rows_from_tuples(_class_for(tuple(fields)), values)


def _flatten_py(records: List[Any], cls: Optional[type]) -> Optional[Tuple[int, List[Any]]]:
    """The pure-Python twin of ``_records.flatten`` (whose docstring is the contract)."""
    if type(records) is not list or not records:
        return None
    want = tuple if cls is None else cls
    if set(map(type, records)) != {want}:
        return None
    widths = set(map(len, records))
    if len(widths) != 1 or 0 in widths:
        return None
    if cls is not None and not (
            set(map(id, map(_KIND_OF, records))) <= {id(_INSERT)}   # ids: no Enum __hash__
            and set(map(id, map(_FIELDS_OF, records))) <= {id(cls._fields)}):  # type: ignore[attr-defined]
        return None
    return widths.pop(), [v for r in records for v in r]


def _unflatten_py(cls: Optional[type], width: int, values: List[Any]) -> List[Any]:
    """The pure-Python twin of ``_records.unflatten``."""
    if width <= 0 or len(values) % width:
        raise ValueError(f"unflatten(): {len(values)} values are not records of {width}")
    records = list(zip(*[iter(values)] * width))
    return records if cls is None else list(map(partial(_NEW_TUPLE, cls), records))


#: make_row(cls, values): a row of the Row class ``cls`` holding ``values`` (a tuple), as
#: ``tuple.__new__(cls, values)`` does; rows_from_tuples(cls, tuples): a list of them
make_row: Callable[[type, Any], Any]
rows_from_tuples: Callable[[type, List[tuple]], List[Any]]
_flatten: Callable[[List[Any], Optional[type]], Optional[Tuple[int, List[Any]]]]
_unflatten: Callable[[Optional[type], int, List[Any]], List[Any]]
if C_ROWS:
    make_row = _records.make
    rows_from_tuples = _records.from_tuples
    _flatten, _unflatten = _records.flatten, _records.unflatten
else:
    make_row = _NEW_TUPLE

    def rows_from_tuples(cls: type, tuples: List[tuple]) -> List[Any]:
        return list(map(partial(_NEW_TUPLE, cls), tuples))

    _flatten, _unflatten = _flatten_py, _unflatten_py


def rows_for_pickling(records: List[Any]) -> Any:
    """What to pickle for the batch ``records``: the list itself, or, when its records
    are of one shape (plain tuples of one length, or rows of one Row class, all of kind
    ``INSERT`` and named by their class), a stand-in that pickles as one flat list of
    their values and unpickles as an equal list (about half the pickling of the tuples).

    >>> import pickle
    >>> rows = [Row(k="a", v=1), Row(k="b", v=2)]
    >>> back = pickle.loads(pickle.dumps(rows_for_pickling(rows)))
    >>> back == rows and [r.k for r in back] == ["a", "b"]
    True
    >>> pickle.loads(pickle.dumps(rows_for_pickling([("a", 1), ("b", 2)])))
    [('a', 1), ('b', 2)]
    >>> rows_for_pickling([1, 2])
    [1, 2]
    """
    if not records:
        return records
    cls = type(records[0])
    if cls is tuple:
        if not C_ROWS:   # in pure Python, checking and flattening costs what it saves
            return records
        flat = _flatten(records, None)
        return records if flat is None else _FlatBatch(None, *flat)
    if not issubclass(cls, Row):
        return records
    fields = cls.__dict__.get("_fields")   # a named row class holds its names; Row: None
    if fields is None and cls is not Row:
        return records   # a user's subclass of Row: pickled as it is
    flat = _flatten(records, cls)
    if flat is None:
        return records
    return _FlatBatch(True if cls is Row else fields, *flat)
