"""``flowray.datastream.window``: as ``pyflink.datastream.window`` (windows, assigners,
triggers). PyFlink's window serializers have no counterpart: windows are pickled.

>>> TumblingEventTimeWindows.of(5000).assign_windows("x", 12345, None)
[TimeWindow(start=10000, end=15000)]
"""

from flowray.operators.windowing.assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    WindowAssignerContext,
)
from flowray.operators.windowing.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from flowray.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow, Window

__all__ = [
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "WindowAssigner",
    "WindowAssignerContext",
    "TumblingProcessingTimeWindows",
    "TumblingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "ProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "GlobalWindows",
    "MergingWindowAssigner",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "NeverTrigger",
    "PurgingTrigger",
    "CountTrigger",
    "SessionWindowTimeGapExtractor",
]
