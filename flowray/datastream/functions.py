"""``flowray.datastream.functions``: as ``pyflink.datastream.functions``."""

from flowray.operators.functions import (
    AggregateFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
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

__all__ = ["AggregateFunction", "CoFlatMapFunction", "CoMapFunction", "CoProcessFunction",
           "FilterFunction", "FlatMapFunction", "Function", "KeyedProcessFunction",
           "KeySelector", "MapFunction", "ProcessFunction", "ReduceFunction", "RuntimeContext",
           "SinkFunction", "TimeDomain", "TimerService"]
