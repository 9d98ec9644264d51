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
from flowray.operators.windowing.functions import (
    AllWindowFunction,
    KeyedStateStore,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

__all__ = ["AggregateFunction", "CoFlatMapFunction", "CoMapFunction", "CoProcessFunction",
           "FilterFunction", "FlatMapFunction", "Function", "KeyedCoProcessFunction",
           "KeyedProcessFunction", "KeySelector", "MapFunction", "ProcessFunction",
           "ReduceFunction", "RuntimeContext", "SinkFunction", "TimeDomain", "TimerService",
           "WindowFunction", "AllWindowFunction", "ProcessWindowFunction",
           "ProcessAllWindowFunction", "PassThroughWindowFunction",
           "PassThroughAllWindowFunction", "KeyedStateStore"]
