"""``BroadcastStream`` and ``BroadcastConnectedStream``, as PyFlink's (the broadcast state
pattern): ``rules.broadcast(descriptor, ...)`` then ``ds.connect(...)`` or
``keyed.connect(...)``, then ``process(func)``.

>>> from flowray.common import Configuration
>>> from flowray.datastream import StreamExecutionEnvironment
>>> from flowray.datastream.functions import BroadcastProcessFunction
>>> from flowray.datastream.state import MapStateDescriptor
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> factor = MapStateDescriptor("factor")
>>> class Scale(BroadcastProcessFunction):
...     def process_element(self, value, ctx):
...         f = ctx.get_broadcast_state(factor).get("f")
...         if f is not None:
...             yield value * f
...     def process_broadcast_element(self, value, ctx):
...         ctx.get_broadcast_state(factor).put("f", value)
>>> rules = env.from_collection([10]).broadcast(factor)
>>> out = env.from_collection([1, 2]).connect(rules).process(Scale())
>>> type(out).__name__
'DataStream'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Union

from flowray.operators.base import keyed_state_methods_used
from flowray.operators.broadcast import (
    BroadcastProcessFunction,
    BroadcastProcessOperator,
    KeyedBroadcastProcessFunction,
    KeyedBroadcastProcessOperator,
    check_broadcast_descriptors,
)
from flowray.runtime.graph.transformations import GraphError
from flowray.state.descriptors import MapStateDescriptor

if TYPE_CHECKING:
    from flowray.datastream.data_stream import DataStream, KeyedStream

__all__ = ["BroadcastStream", "BroadcastConnectedStream"]


class BroadcastStream:
    """A stream broadcast to every subtask, with the broadcast states it fills. Nothing can
    be applied to it but ``connect`` from another stream."""

    def __init__(self, input_stream: "DataStream",
                 broadcast_state_descriptors: List[MapStateDescriptor]) -> None:
        self.input_stream = input_stream
        self.broadcast_state_descriptors = check_broadcast_descriptors(
            broadcast_state_descriptors)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"BroadcastStream has no {name!r}: connect it from another stream "
            "(ds.connect(broadcast_stream)) and call process(...)")


class BroadcastConnectedStream:
    """A stream (keyed or not) connected to a :class:`BroadcastStream`."""

    def __init__(self, non_broadcast_stream: Union["DataStream", "KeyedStream"],
                 broadcast_stream: BroadcastStream,
                 broadcast_state_descriptors: List[MapStateDescriptor]) -> None:
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream
        self.broadcast_state_descriptors = broadcast_state_descriptors

    def _is_keyed_stream(self) -> bool:
        return getattr(self.non_broadcast_stream, "_key_selector", None) is not None

    def process(self, func: Union[BroadcastProcessFunction, KeyedBroadcastProcessFunction],
                output_type: Any = None) -> "DataStream":
        """Apply ``func``: a :class:`BroadcastProcessFunction` on a non-keyed stream, a
        :class:`KeyedBroadcastProcessFunction` on a keyed one (other objects need
        ``process_element`` and ``process_broadcast_element``)."""
        keyed = self._is_keyed_stream()
        if isinstance(func, BroadcastProcessFunction) and keyed:
            raise TypeError("BroadcastProcessFunction should be applied to a non-keyed "
                            "DataStream; use a KeyedBroadcastProcessFunction after key_by")
        if isinstance(func, KeyedBroadcastProcessFunction) and not keyed:
            raise TypeError("KeyedBroadcastProcessFunction should be applied to a keyed "
                            "DataStream (after key_by); use a BroadcastProcessFunction")
        descriptors = self.broadcast_state_descriptors
        if keyed:
            op: Any = KeyedBroadcastProcessOperator(
                func, self.non_broadcast_stream._key_selector, descriptors)  # type: ignore
        else:
            used = keyed_state_methods_used(func)
            if used:
                raise GraphError(
                    f"operator 'Co-Process-Broadcast' uses keyed state ({', '.join(used)}) "
                    "but its input is not keyed; connect a KeyedStream (after key_by(...)) "
                    "and use a KeyedBroadcastProcessFunction")
            op = BroadcastProcessOperator(func, descriptors)
        # input 1: the non-broadcast stream, input 2: the broadcast one
        result = self.non_broadcast_stream._one_input(op, output_type)
        result._t.inputs.append(self.broadcast_stream.input_stream._t)
        return result
