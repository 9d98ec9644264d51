"""``DataStream``, ``KeyedStream``, ``ConnectedStreams`` and ``DataStreamSink``, as PyFlink's
``pyflink.datastream.data_stream``: each call records a transformation; nothing runs until
the environment executes.

>>> from flowray.common import Configuration
>>> from flowray.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> ds = env.from_collection(["a b", "b"]).flat_map(lambda s: s.split())
>>> counts = ds.map(lambda w: (w, 1)).key_by(lambda t: t[0]).sum(1)
>>> sorted(counts.execute_and_collect())
[('a', 1), ('b', 1), ('b', 2)]
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Optional, Union

from flowray.common.typeinfo import Types, record_formatter
from flowray.operators.base import StreamOperator, keyed_state_methods_used
from flowray.operators.functions import KeyedProcessFunction
from flowray.operators.basic import (
    CoFlatMapOperator,
    CoMapOperator,
    CoProcessOperator,
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    ProcessOperator,
)
from flowray.operators.keyed import (
    KeyedCoProcessOperator,
    KeyedProcessOperator,
    KeyedReduceOperator,
    QueryableStateSinkOperator,
    field_aggregator,
)
from flowray.operators.iteration import FEEDBACK_TAG, IterationHeadOperator
from flowray.operators.output_tag import OutputTag
from flowray.operators.typed_output import (
    declare_output_type,
    declare_side_output_type,
    typed_key_selector,
)
from flowray.operators.watermarks import TimestampsAndWatermarksOperator
from flowray.operators.sinks import (
    DriverSinkOperator,
    Sink,
    SinkFunctionOperator,
    SinkWriterOperator,
)
from flowray.operators.two_phase_commit import (
    TwoPhaseCommitSink,
    TwoPhaseCommitSinkOperator,
)
from flowray.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from flowray.datastream.function_checks import check_reduce_function
from flowray.runtime.execution.client import CollectIterator
from flowray.datastream.stream_api import DataStreamApiMixin, DataStreamSinkApiMixin
from flowray.runtime.graph.transformations import (
    ChainingStrategy,
    GraphError,
    IterationHeadTransformation,
    OperatorTransformation,
    PartitionTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
)
from flowray.runtime.network.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    ShufflePartitioner,
    StreamPartitioner,
)

if TYPE_CHECKING:
    from flowray.datastream.stream_execution_environment import (
        StreamExecutionEnvironment,
    )
    from flowray.datastream.windowed_stream import AllWindowedStream, WindowedStream

__all__ = ["DataStream", "DataStreamSink", "KeyedStream", "ConnectedStreams",
           "BroadcastStream", "BroadcastConnectedStream", "QueryableStateStream",
           "IterativeStream", "ConnectedIterativeStreams"]


def _check_not_keyed_state(fn: Any, operator_name: str) -> None:
    used = keyed_state_methods_used(fn)
    if used:
        raise GraphError(
            f"operator {operator_name!r} uses keyed state ({', '.join(used)}) but its input is "
            "not keyed; apply it to a KeyedStream (after key_by(...))"
        )


class DataStream(DataStreamApiMixin):
    """A stream of records, as PyFlink's ``DataStream`` (more methods in
    :mod:`flowray.datastream.stream_api`)."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._t = transformation

    # -- naming and parallelism ----------------------------------------------------------
    def _physical(self, what: str) -> Transformation:
        if self._t.is_virtual:
            raise GraphError(
                f"cannot set {what} on a partitioning or union; set it on an "
                "operator (e.g. after map)"
            )
        return self._t

    def name(self, name: str) -> "DataStream":
        self._physical("a name").name = name
        return self

    def get_name(self) -> str:
        return self._t.name

    def uid(self, uid: str) -> "DataStream":
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"uid must be a non-empty string, got {uid!r}")
        self._physical("a uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> "DataStream":
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"parallelism must be a positive integer, got {parallelism!r}")
        self._physical("parallelism").parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> "DataStream":
        self._physical("max parallelism").max_parallelism = max_parallelism
        return self

    def start_new_chain(self) -> "DataStream":
        self._physical("chaining").chaining = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> "DataStream":
        self._physical("chaining").chaining = ChainingStrategy.NEVER
        return self

    # -- transformations ---------------------------------------------------------------
    def _one_input(self, op: StreamOperator, output_type: Any = None,
                   keeps_type: bool = False) -> "DataStream":
        """A stream of ``op`` applied to this one; its records are of ``output_type``, or
        of this stream's type when ``keeps_type`` (filter, reduce...)."""
        if not keeps_type:
            declare_output_type(op, output_type)  # records are converted to it, as in PyFlink
        t = self._env._add(OperatorTransformation(op, [self._t]))
        t.output_type = self.get_type() if keeps_type else output_type
        return DataStream(self._env, t)

    def get_type(self) -> Any:
        """The declared type of this stream's records (``output_type=`` / ``type_info=``
        upstream), or ``Types.PICKLED_BYTE_ARRAY()`` for plain Python objects."""
        t = self._t
        while getattr(t, "output_type", None) is None and t.is_virtual and t.inputs:
            t = t.inputs[0]
        declared = getattr(t, "output_type", None)
        return declared if declared is not None else Types.PICKLED_BYTE_ARRAY()

    def _check_stateless(self, fn: Any, name: str) -> None:
        _check_not_keyed_state(fn, name)

    def map(self, func: Any, output_type: Any = None) -> "DataStream":
        self._check_stateless(func, "Map")
        return self._one_input(MapOperator(func), output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> "DataStream":
        self._check_stateless(func, "Flat Map")
        return self._one_input(FlatMapOperator(func), output_type)

    def filter(self, func: Any) -> "DataStream":
        self._check_stateless(func, "Filter")
        return self._one_input(FilterOperator(func), keeps_type=True)

    def process(self, func: Any, output_type: Any = None) -> "DataStream":
        if isinstance(func, KeyedProcessFunction):
            raise GraphError(
                f"process(): {type(func).__name__} is a KeyedProcessFunction, which needs a "
                "keyed stream (its context has the current key and keyed timers): call "
                "key_by(...) first, or make it a ProcessFunction")
        self._check_stateless(func, "Process")
        return self._one_input(ProcessOperator(func), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> "DataStream":
        """Records get timestamps from the strategy's assigner and the stream gets the
        strategy's watermarks (upstream watermarks are dropped, as in Flink)."""
        return self._one_input(TimestampsAndWatermarksOperator(watermark_strategy),
                               keeps_type=True)

    def get_side_output(self, output_tag: OutputTag) -> "DataStream":
        """The records this operator sent to ``output_tag`` (yielded as ``(tag, value)``,
        or late data of a window)."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"get_side_output expects an OutputTag, got {output_tag!r}")
        if self._t.is_virtual:
            raise GraphError("get_side_output applies to the output of an operator (e.g. "
                             "after process(...)), not to a partitioning, union or side output")
        declare_side_output_type(self._t.operator, output_tag.tag_id, output_tag.type_info)
        t = SideOutputTransformation(self._t, output_tag.tag_id)
        t.output_type = output_tag.type_info
        return DataStream(self._env, t)

    def window_all(self, window_assigner: Any) -> "AllWindowedStream":
        """All records in windows of ``window_assigner``, evaluated at parallelism 1."""
        from flowray.datastream.windowed_stream import AllWindowedStream, all_window_key

        return AllWindowedStream(self.key_by(all_window_key), all_window_key, window_assigner)

    def _not_windowed(self, what: str) -> None:
        raise GraphError(f"{what}() applies to a windowed stream: call key_by(...).window("
                         "assigner) or window_all(assigner) first")

    def trigger(self, trigger: Any) -> None:
        self._not_windowed("trigger")

    def allowed_lateness(self, time_ms: Any) -> None:
        self._not_windowed("allowed_lateness")

    def side_output_late_data(self, output_tag: Any) -> None:
        self._not_windowed("side_output_late_data")

    def key_by(self, key_selector: Any, key_type: Any = None) -> "KeyedStream":
        if not callable(key_selector) and not callable(getattr(key_selector, "get_key", None)):
            raise TypeError(f"key_by expects a function or KeySelector, got {key_selector!r}")
        key_selector = typed_key_selector(key_selector, key_type)  # keys of key_type, as PyFlink
        partitioner = KeyGroupStreamPartitioner(key_selector, self._env._max_parallelism)
        return KeyedStream(self._env, PartitionTransformation(self._t, partitioner), key_selector)

    def union(self, *streams: "DataStream") -> "DataStream":
        return DataStream(self._env, UnionTransformation([self._t] + [s._t for s in streams]))

    def iterate(self, max_wait_time_ms: Optional[int] = None) -> Any:
        """An :class:`~flowray.datastream.iterative_stream.IterativeStream`: a loop whose
        body is what is applied to it, closed with ``close_with(feedback)``. With
        ``max_wait_time_ms`` the loop ends once its inputs ended and nothing came back
        for that long (Flink's meaning); without, once no record is left in it."""
        return start_iteration(self, max_wait_time_ms)

    def connect(self, ds: Any) -> Any:
        """``ConnectedStreams`` with another stream, or a ``BroadcastConnectedStream`` with
        a ``BroadcastStream`` (from ``broadcast(descriptor, ...)``)."""
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds, ds.broadcast_state_descriptors)
        return ConnectedStreams(self, ds)

    def _partition(self, partitioner: StreamPartitioner) -> "DataStream":
        return DataStream(self._env, PartitionTransformation(self._t, partitioner))

    def forward(self) -> "DataStream":
        return self._partition(ForwardPartitioner())

    def rebalance(self) -> "DataStream":
        return self._partition(RebalancePartitioner())

    def shuffle(self) -> "DataStream":
        return self._partition(ShufflePartitioner())

    def broadcast(self, broadcast_state_descriptor: Any = None,
                  *other_broadcast_state_descriptors: Any) -> Any:
        """Every record to every subtask of the next operator; with ``MapStateDescriptor``
        arguments, a ``BroadcastStream`` holding those broadcast states (to ``connect``)."""
        if broadcast_state_descriptor is not None:
            return BroadcastStream(self._partition(BroadcastPartitioner()),
                                   [broadcast_state_descriptor,
                                    *other_broadcast_state_descriptors])
        if other_broadcast_state_descriptors:
            raise TypeError("broadcast(None, ...): the first broadcast state descriptor is "
                            "None")
        return self._partition(BroadcastPartitioner())

    def global_(self) -> "DataStream":
        return self._partition(GlobalPartitioner())

    # -- sinks -------------------------------------------------------------------------
    def _sink(self, op: StreamOperator) -> "DataStreamSink":
        t = self._env._add(OperatorTransformation(op, [self._t]))
        return DataStreamSink(DataStream(self._env, t))

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """Print each record on the driver's stdout, as Flink: ``"2> record"`` when
        parallel, ``"id> record"`` / ``"id:2> record"`` with a ``sink_identifier``."""
        name = f"Sink: Print to Std. Out{f' ({sink_identifier})' if sink_identifier else ''}"
        return self._sink(DriverSinkOperator("print", uuid.uuid4().hex[:8], name,
                                             record_formatter(self.get_type()),
                                             sink_identifier))

    def sink_to(self, sink: Union[Sink, TwoPhaseCommitSink]) -> "DataStreamSink":
        """Write to ``sink``: a :class:`Sink` (at-least-once) or a
        :class:`TwoPhaseCommitSink` such as ``FileSink`` (exactly-once with checkpoints)."""
        if isinstance(sink, TwoPhaseCommitSink):
            return self._sink(TwoPhaseCommitSinkOperator(sink))
        return self._sink(SinkWriterOperator(sink))

    def add_sink(self, sink_func: Any) -> "DataStreamSink":
        if isinstance(sink_func, TwoPhaseCommitSink):
            return self._sink(TwoPhaseCommitSinkOperator(sink_func))
        return self._sink(SinkFunctionOperator(sink_func))

    def execute_and_collect(
        self, job_execution_name: Optional[str] = None, limit: Optional[int] = None
    ) -> Any:
        """Run the job; an iterator over this stream's records (a list if ``limit``).

        Close the iterator (or use it in ``with``) to cancel a job still running.
        """
        endpoint_id = uuid.uuid4().hex[:8]
        sink = self._sink(DriverSinkOperator("collect", endpoint_id))
        sink._ds._t.parallelism = 1
        client = self._env.execute_async(job_execution_name)
        it = CollectIterator(
            client,
            client.endpoints_by_id[endpoint_id],  # type: ignore
            limit,
        )
        if limit is not None:
            with it:
                return list(it)
        return it


class DataStreamSink(DataStreamSinkApiMixin):
    def __init__(self, ds: DataStream) -> None:
        self._ds = ds

    def name(self, name: str) -> "DataStreamSink":
        self._ds.name(name)
        return self

    def uid(self, uid: str) -> "DataStreamSink":
        self._ds.uid(uid)
        return self

    def set_parallelism(self, parallelism: int) -> "DataStreamSink":
        self._ds.set_parallelism(parallelism)
        return self

    def disable_chaining(self) -> "DataStreamSink":
        self._ds.disable_chaining()
        return self


class KeyedStream(DataStream):
    """A stream partitioned by key; operators on it may use keyed state and timers."""

    def __init__(
        self, env: StreamExecutionEnvironment, t: Transformation, key_selector: Any
    ) -> None:
        super().__init__(env, t)
        self._key_selector = key_selector

    def _check_stateless(self, fn: Any, name: str) -> None:
        pass  # keyed state is allowed here

    def _keyed(self, op: StreamOperator, output_type: Any = None,
               keeps_type: bool = False) -> DataStream:
        return self._one_input(op, output_type, keeps_type)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(MapOperator(func, key_selector=self._key_selector), output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(FlatMapOperator(func, key_selector=self._key_selector), output_type)

    def filter(self, func: Any) -> DataStream:
        return self._keyed(FilterOperator(func, key_selector=self._key_selector),
                           keeps_type=True)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        return self._keyed(KeyedProcessOperator(func, self._key_selector), output_type)

    def reduce(self, func: Any) -> DataStream:
        check_reduce_function(func, "reduce()")
        return self._keyed(KeyedReduceOperator(func, self._key_selector), keeps_type=True)

    def _aggregate(self, kind: str, field: Union[int, str]) -> DataStream:
        return self._keyed(
            KeyedReduceOperator(
                field_aggregator(kind, field),
                self._key_selector,
                name=f"Keyed Aggregation ({kind})",
            ),
            keeps_type=True,
        )

    def sum(self, position_to_sum: Union[int, str] = 0) -> DataStream:
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: Union[int, str] = 0) -> DataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: Union[int, str] = 0) -> DataStream:
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: Union[int, str] = 0) -> DataStream:
        return self._aggregate("max_by", position_to_max_by)

    def window(self, window_assigner: Any) -> "WindowedStream":
        """Group this stream's keys into windows of ``window_assigner``."""
        from flowray.datastream.windowed_stream import WindowedStream

        return WindowedStream(self, self._key_selector, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        """Tumbling (``slide`` 0) or sliding windows of ``size`` records per key."""
        from flowray.operators.windowing.assigners import (
            CountSlidingWindowAssigner,
            CountTumblingWindowAssigner,
        )

        if slide is None or slide == 0:
            return self.window(CountTumblingWindowAssigner.of(size))
        return self.window(CountSlidingWindowAssigner.of(size, slide))

    def as_queryable_state(self, queryable_state_name: str,
                           state_descriptor: Any = None) -> "QueryableStateStream":
        """Keep this stream's records per key in a state readable from outside the job
        as ``queryable_state_name`` (Flink's ``asQueryableState``): the latest record with
        a ``ValueStateDescriptor`` (the default, named after the queryable name), or the
        records folded in with a reducing, aggregating or list state descriptor. Read it
        with :class:`flowray.queryable_state.QueryableStateClient`.

        >>> from flowray import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> q = env.from_collection([("a", 1)]).key_by(lambda r: r[0]).as_queryable_state(
        ...     "latest")
        >>> q.get_queryable_state_name()
        'latest'
        """
        from flowray.state.descriptors import StateDescriptor, ValueStateDescriptor

        if state_descriptor is None:
            state_descriptor = ValueStateDescriptor(queryable_state_name)
        if not isinstance(state_descriptor, StateDescriptor):
            raise TypeError(f"as_queryable_state({queryable_state_name!r}): expected a "
                            f"StateDescriptor, got {state_descriptor!r}")
        op = QueryableStateSinkOperator(queryable_state_name, state_descriptor,
                                        self._key_selector)
        return QueryableStateStream(queryable_state_name, state_descriptor, self._sink(op))

    def _physical(self, what: str) -> Transformation:
        raise GraphError(f"cannot set {what} on a KeyedStream; set it on the operator after it")


class QueryableStateStream:
    """What ``as_queryable_state`` returns (Flink's ``QueryableStateStream``): the name and
    descriptor to query with; ``sink`` is the operator keeping the state (set its uid)."""

    def __init__(self, name: str, descriptor: Any, sink: "DataStreamSink") -> None:
        self._name = name
        self._descriptor = descriptor
        self.sink = sink

    def get_queryable_state_name(self) -> str:
        return self._name

    def get_state_descriptor(self) -> Any:
        return self._descriptor


class ConnectedStreams:
    """Two streams processed by one two-input function (``connect``)."""

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        self.stream1 = stream1
        self.stream2 = stream2

    def _two_input(self, op: StreamOperator, output_type: Any = None) -> DataStream:
        env = self.stream1._env
        declare_output_type(op, output_type)
        t = env._add(OperatorTransformation(op, [self.stream1._t, self.stream2._t]))
        t.output_type = output_type
        return DataStream(env, t)

    def key_by(self, key_selector1: Any, key_selector2: Any,
               key_type: Any = None) -> "ConnectedStreams":
        return ConnectedStreams(
            self.stream1.key_by(key_selector1, key_type),
            self.stream2.key_by(key_selector2, key_type)
        )

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        _check_not_keyed_state(func, "Co-Map")
        return self._two_input(CoMapOperator(func), output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        _check_not_keyed_state(func, "Co-Flat Map")
        return self._two_input(CoFlatMapOperator(func), output_type)

    def _keyed_selectors(self) -> Optional[tuple]:
        s1, s2 = self.stream1, self.stream2
        if isinstance(s1, KeyedStream) and isinstance(s2, KeyedStream):
            return s1._key_selector, s2._key_selector
        return None

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """A ``CoProcessFunction``, or on two keyed streams (``key_by(k1, k2)``) a
        ``KeyedCoProcessFunction`` with keyed state and timers."""
        selectors = self._keyed_selectors()
        if selectors is not None:
            return self._two_input(KeyedCoProcessOperator(func, *selectors), output_type)
        _check_not_keyed_state(func, "Co-Process")
        return self._two_input(CoProcessOperator(func), output_type)


# -- cycles: Flink's DataStream iteration API (docs/iterations.md) --------------------
def start_iteration(stream: DataStream, max_wait_time_ms: Optional[int]) -> "IterativeStream":
    if max_wait_time_ms is not None and (not isinstance(max_wait_time_ms, int)
                                         or isinstance(max_wait_time_ms, bool)
                                         or max_wait_time_ms < 0):
        raise ValueError(f"max_wait_time_ms must be None or a non-negative int of "
                         f"milliseconds, got {max_wait_time_ms!r}")
    head = IterationHeadTransformation(IterationHeadOperator(max_wait_time_ms), stream._t)
    head.output_type = stream.get_type()
    stream._env._add(head)
    return IterativeStream(stream._env, head)


def _close(head: IterationHeadTransformation, feedback_stream: Any) -> None:
    if not isinstance(feedback_stream, DataStream):
        raise TypeError(f"close_with takes a DataStream, got {type(feedback_stream).__name__}")
    if head.feedback:
        raise GraphError(f"iteration {head.name!r} is already closed: close_with() is called "
                         "once (union the feedback streams first)")
    fb = feedback_stream._t
    if fb is head:
        raise GraphError(f"iteration {head.name!r}: the feedback stream is the iteration "
                         "itself; it must come from an operator applied to it")
    if not head.reaches_from(fb):
        raise GraphError(f"the feedback stream {fb.name!r} does not come from iteration "
                         f"{head.name!r}: close_with() takes a stream computed from the "
                         "stream iterate() returned")
    physical = fb
    while physical.is_virtual and physical.inputs and len(physical.inputs) == 1:
        physical = physical.inputs[0]
    if (head.parallelism is not None and physical.parallelism is not None
            and not physical.is_virtual and physical.parallelism != head.parallelism):
        raise GraphError(
            f"the feedback of iteration {head.name!r} comes from {physical.name!r} with "
            f"parallelism {physical.parallelism}, but the iteration head has "
            f"{head.parallelism}: as in Flink, the feedback stream must have the head's "
            f"parallelism")
    head.feedback.append(fb)


class IterativeStream(DataStream):
    """The stream inside an iteration (Flink's ``IterativeStream``): the iteration's
    input and its feedback. Close the loop with :meth:`close_with`. The job ends once
    every input has ended and no record is left in the loop; checkpoints hold the
    records in the loop, so the output is exactly once (docs/iterations.md).

    >>> from flowray.datastream import StreamExecutionEnvironment
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> it = env.from_collection([3, 6, 7]).map(lambda n: (n, n, 0)).iterate()
    >>> step = it.map(lambda r: (r[0], r[1] // 2 if r[1] % 2 == 0 else 3 * r[1] + 1,
    ...                          r[2] + 1))
    >>> _ = it.close_with(step.filter(lambda r: r[1] != 1))    # not at 1 yet: again
    >>> done = step.filter(lambda r: r[1] == 1).map(lambda r: (r[0], r[2]))
    """

    def __init__(self, env: Any, head: IterationHeadTransformation) -> None:
        super().__init__(env, head)
        self._head = head

    def close_with(self, feedback_stream: DataStream) -> DataStream:
        """Send ``feedback_stream`` (computed from this stream, with its parallelism)
        back to the head of the iteration; returns ``feedback_stream``. A keyed feedback
        stream keeps its partitioning."""
        _close(self._head, feedback_stream)
        return feedback_stream

    def with_feedback_type(self, feedback_type: Any) -> "ConnectedIterativeStreams":
        """The iteration as two streams: the input (first) and a feedback of another
        type (second), for a co-function (Flink's ``withFeedbackType``)."""
        head = self._head
        if head.feedback:
            raise GraphError(f"iteration {head.name!r} is already closed")
        op = head.operator
        assert isinstance(op, IterationHeadOperator)
        op.connected = True
        feedback = SideOutputTransformation(head, FEEDBACK_TAG)
        feedback.output_type = feedback_type
        return ConnectedIterativeStreams(DataStream(self._env, head),
                                         DataStream(self._env, feedback), head)


class ConnectedIterativeStreams(ConnectedStreams):
    """An iteration whose feedback has its own type (Flink's ``ConnectedIterativeStreams``):
    ``stream1`` is the iteration's input, ``stream2`` what comes back through
    :meth:`close_with`; ``map``/``flat_map``/``process`` take a co-function."""

    def __init__(self, stream1: DataStream, stream2: DataStream,
                 head: IterationHeadTransformation) -> None:
        super().__init__(stream1, stream2)
        self._head = head

    def close_with(self, feedback_stream: DataStream) -> DataStream:
        _close(self._head, feedback_stream)
        return feedback_stream


# PyFlink's other names in this module
from flowray.datastream.windowed_stream import AllWindowedStream, WindowedStream  # noqa: E402

#: ``execute_and_collect``'s iterator (``next()``, ``close()``), PyFlink's name for it
CloseableIterator = CollectIterator
__all__ += ["WindowedStream", "AllWindowedStream", "CloseableIterator"]
