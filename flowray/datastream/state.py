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
from flowray.state.broadcast_state import BroadcastState, ReadOnlyBroadcastState
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
__all__ += ["BroadcastState", "ReadOnlyBroadcastState"]

from flowray.state.ttl_config import StateTtlConfig  # noqa: E402
from flowray.state.keyed_backend import AppendingState, MergingState  # noqa: E402
from flowray.state.operator_state import OperatorStateStore  # noqa: E402

__all__ += ["StateTtlConfig", "AppendingState", "MergingState", "OperatorStateStore"]
