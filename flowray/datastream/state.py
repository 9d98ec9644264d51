"""``flowray.datastream.state``: as ``pyflink.datastream.state``."""

from flowray.state.keyed_backend import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    StateAccessError,
    ValueState,
)
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)

__all__ = ["AggregatingState", "ListState", "MapState", "ReducingState", "State",
           "StateAccessError", "ValueState", "AggregatingStateDescriptor",
           "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
           "StateDescriptor", "ValueStateDescriptor"]
