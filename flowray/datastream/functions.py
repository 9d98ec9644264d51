"""``flowray.datastream.functions``: as ``pyflink.datastream.functions`` (window functions
included)."""

from flowray.operators.functions import (
    AggregateFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    TimeDomain,
    TimerService,
)
from flowray.operators.async_functions import (
    AsyncFunction,
    AsyncFunctionDescriptor,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
)
from flowray.operators.windowing.functions import (
    AllWindowFunction,
    KeyedStateStore,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from flowray.operators.broadcast import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)

__all__ = ["AggregateFunction", "CoFlatMapFunction", "CoMapFunction", "CoProcessFunction",
           "FilterFunction", "FlatMapFunction", "Function", "KeyedCoProcessFunction",
           "KeyedProcessFunction", "KeySelector", "MapFunction", "ProcessFunction",
           "ReduceFunction", "RuntimeContext", "SinkFunction", "TimeDomain", "TimerService",
           "WindowFunction", "AllWindowFunction", "ProcessWindowFunction",
           "ProcessAllWindowFunction", "PassThroughWindowFunction",
           "PassThroughAllWindowFunction", "KeyedStateStore"]
__all__ += ["AsyncFunction", "AsyncFunctionDescriptor", "AsyncRetryPredicate",
            "AsyncRetryStrategy"]
__all__ += ["BaseBroadcastProcessFunction", "BroadcastProcessFunction",
            "KeyedBroadcastProcessFunction"]
from flowray.operators.partitioner import Partitioner  # noqa: E402
from flowray.operators.source_function import SourceContext, SourceFunction  # noqa: E402

__all__ += ["Partitioner", "SourceFunction", "SourceContext"]
