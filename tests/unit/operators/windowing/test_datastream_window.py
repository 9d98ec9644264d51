import flowray.datastream.window as window_api
import flowray.operators.windowing as windowing

# pyflink.datastream.window.__all__ (2.3) without its three window serializers
PYFLINK_NAMES = [
    "Window", "TimeWindow", "CountWindow", "GlobalWindow", "WindowAssigner",
    "TumblingProcessingTimeWindows", "TumblingEventTimeWindows", "SlidingProcessingTimeWindows",
    "SlidingEventTimeWindows", "ProcessingTimeSessionWindows", "EventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows", "DynamicEventTimeSessionWindows", "GlobalWindows",
    "MergingWindowAssigner", "CountTumblingWindowAssigner", "CountSlidingWindowAssigner",
    "TriggerResult", "Trigger", "EventTimeTrigger", "ProcessingTimeTrigger",
    "ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger", "NeverTrigger",
    "PurgingTrigger", "CountTrigger", "SessionWindowTimeGapExtractor",
]


def test_pyflink_names_are_exported():
    missing = [n for n in PYFLINK_NAMES if n not in window_api.__all__]
    assert missing == []
    for name in window_api.__all__:
        assert getattr(window_api, name) is getattr(windowing, name), name


def test_the_package_exports_what_its_modules_do():
    for name in windowing.__all__:
        assert hasattr(windowing, name), name
    assert len(set(windowing.__all__)) == len(windowing.__all__)
