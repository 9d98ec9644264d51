"""State descriptors: the name and kind of a piece of keyed state, as in PyFlink.

>>> d = ValueStateDescriptor("total", None)
>>> d.name, d.kind.value
('total', 'value')
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Optional

__all__ = [
    "StateKind",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
]


class StateKind(enum.Enum):
    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


class StateDescriptor:
    """Base of all descriptors: a unique ``name`` per operator and a state kind."""

    kind: StateKind
    _ttl_config: Any = None  # a StateTtlConfig (flowray.state.ttl_config) or None

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"state name must be a non-empty string, got {name!r}")
        self.name = name
        self.type_info = type_info
        self._ttl_config = None
        self._queryable_name: Optional[str] = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: Any) -> None:
        """Values of this state expire as ``ttl_config`` (a ``StateTtlConfig``) says."""
        from flowray.state.ttl_config import StateTtlConfig
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"state {self.name!r}: enable_time_to_live expects a "
                            f"StateTtlConfig, got {ttl_config!r}")
        self._ttl_config = ttl_config

    def get_ttl_config(self) -> Any:
        """The ``StateTtlConfig`` given to :meth:`enable_time_to_live`, or ``None``."""
        return self._ttl_config

    def set_queryable(self, queryable_state_name: str) -> "StateDescriptor":
        """Make this keyed state readable from outside the job under
        ``queryable_state_name`` (Flink's ``setQueryable``), by
        :class:`flowray.queryable_state.QueryableStateClient`. Returns the descriptor."""
        if not isinstance(queryable_state_name, str) or not queryable_state_name:
            raise ValueError(f"state {self.name!r}: the queryable state name must be a "
                             f"non-empty string, got {queryable_state_name!r}")
        if self._queryable_name is not None and self._queryable_name != queryable_state_name:
            raise ValueError(f"state {self.name!r} is already queryable as "
                             f"{self._queryable_name!r}")
        self._queryable_name = queryable_state_name
        return self

    def get_queryable_state_name(self) -> Optional[str]:
        return getattr(self, "_queryable_name", None)

    def is_queryable(self) -> bool:
        return self.get_queryable_state_name() is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    kind = StateKind.VALUE

    def __init__(self, name: str, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    kind = StateKind.LIST

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    kind = StateKind.MAP

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)
        self.key_type_info = key_type_info


class ReducingStateDescriptor(StateDescriptor):
    kind = StateKind.REDUCING

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None) -> None:
        super().__init__(name, type_info)
        self._reduce_function = reduce_function
        self.reduce_function = _as_callable(reduce_function, "reduce", name)

    def get_reduce_function(self) -> Any:
        """The reduce function as given."""
        return self._reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    kind = StateKind.AGGREGATING

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        for method in ("create_accumulator", "add", "get_result"):
            if not callable(getattr(agg_function, method, None)):
                raise TypeError(
                    f"AggregatingStateDescriptor {name!r}: the aggregate function must have "
                    f"create_accumulator/add/get_result; {agg_function!r} lacks {method}"
                )
        self.agg_function = agg_function

    def get_agg_function(self) -> Any:
        """The aggregate function as given."""
        return self.agg_function


def _as_callable(fn: Any, method: str, state_name: str) -> Callable[..., Any]:
    bound: Optional[Callable[..., Any]] = getattr(fn, method, None)
    if callable(bound):
        return bound
    if callable(fn):
        return fn
    raise TypeError(f"state {state_name!r}: {fn!r} is neither callable nor has .{method}()")
