"""The state primitives (value, list, map, reducing, aggregating) over RocksDB column
families (values stored by :mod:`flowray.state.value_codec`); :class:`RocksDBValueAccessor`
(:mod:`flowray.state.rocksdb.value_accessor`) is re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Tuple

from flowray.state.descriptors import (
    StateKind,
)
from flowray.state.keyed_backend import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    StateAccessError,
    ValueState,
)
from flowray.state.rocksdb.layout import _MISSING
from flowray.state.rocksdb.value_accessor import RocksDBValueAccessor
from flowray.state.value_codec import decode_value, encode_value
from rocksdict import Rdict

if TYPE_CHECKING:
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend

__all__ = ["RocksDBValueAccessor"]


# ---------------------------------------------------------------------------------------
# state objects
# ---------------------------------------------------------------------------------------


class _RocksState(State):
    __slots__ = ("_backend", "_cf", "_name")

    def __init__(self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str) -> None:
        self._backend = backend
        self._cf = cf
        self._name = name

    def _key(self) -> bytes:
        k = self._backend._current_db_key
        if k is None:
            raise StateAccessError(f"state {self._name!r} accessed with no current key")
        return k

    def _get(self) -> Any:
        raw = self._cf.get(self._key())
        return _MISSING if raw is None else decode_value(raw)

    def _set(self, value: Any) -> None:
        self._cf.put(self._key(), encode_value(value))

    def clear(self) -> None:
        self._cf.delete(self._key())


class RocksDBValueState(_RocksState, ValueState):
    def value(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._set(value)


class RocksDBListState(_RocksState, ListState):
    def get(self) -> List[Any]:
        v = self._get()
        return [] if v is _MISSING else v

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self._name!r}: cannot add None")
        cur = self._get()
        self._set([value] if cur is _MISSING else cur + [value])

    def add_all(self, values: Iterable[Any]) -> None:
        values = list(values)
        for v in values:
            if v is None:
                raise ValueError(f"list state {self._name!r}: cannot add None")
        if values:
            cur = self._get()
            self._set(values if cur is _MISSING else cur + values)

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._set(values)
        else:
            self.clear()


class RocksDBMapState(_RocksState, MapState):
    def _entries(self) -> Dict[Any, Any]:
        d = self._get()
        return {} if d is _MISSING else d

    def get(self, key: Any) -> Any:
        return self._entries().get(key)

    def put(self, key: Any, value: Any) -> None:
        d = self._entries()
        d[key] = value
        self._set(d)

    def put_all(self, dict_value: dict) -> None:
        if dict_value:
            d = self._entries()
            d.update(dict_value)
            self._set(d)

    def remove(self, key: Any) -> None:
        d = self._get()
        if d is _MISSING or key not in d:
            return
        del d[key]
        if d:
            self._set(d)
        else:
            self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def items(self) -> List[Tuple[Any, Any]]:
        return list(self._entries().items())

    def keys(self) -> List[Any]:
        return list(self._entries())

    def values(self) -> List[Any]:
        return list(self._entries().values())

    def is_empty(self) -> bool:
        return not self._entries()


class RocksDBReducingState(_RocksState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(
        self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str, reduce_fn: Any
    ) -> None:
        super().__init__(backend, cf, name)
        self._reduce = reduce_fn

    def get(self) -> Any:
        v = self._get()
        return None if v is _MISSING else v

    def add(self, value: Any) -> None:
        cur = self._get()
        self._set(value if cur is _MISSING else self._reduce(cur, value))


class RocksDBAggregatingState(_RocksState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(
        self, backend: "RocksDBKeyedStateBackend", cf: Rdict, name: str, agg: Any
    ) -> None:
        super().__init__(backend, cf, name)
        self._agg = agg

    def get(self) -> Any:
        acc = self._get()
        return None if acc is _MISSING else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self._get()
        if acc is _MISSING:
            acc = self._agg.create_accumulator()
        self._set(self._agg.add(value, acc))


_STATE_CLASSES = {
    StateKind.VALUE: RocksDBValueState,
    StateKind.LIST: RocksDBListState,
    StateKind.MAP: RocksDBMapState,
}
