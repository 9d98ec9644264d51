"""Window assigners: which windows an element belongs to, as in ``pyflink.datastream.window``.

Durations are ``Time`` (anything with ``to_milliseconds()``), ``timedelta`` or int
milliseconds. Event-time assigners need the record's timestamp; processing-time ones read the
clock from the :class:`WindowAssignerContext`.

>>> TumblingEventTimeWindows.of(5).assign_windows("a", 7, None)
[TimeWindow(start=5, end=10)]
>>> SlidingEventTimeWindows.of(10, 5).assign_windows("a", 7, None)
[TimeWindow(start=5, end=15), TimeWindow(start=0, end=10)]
>>> EventTimeSessionWindows.with_gap(3).assign_windows("a", 7, None)
[TimeWindow(start=7, end=10)]
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Collection, Generic, Iterable, List, Optional, TypeVar

from flowray.common.compat import not_implemented
from flowray.common.constants import MIN_WATERMARK
from flowray.operators.windowing._time import to_millis
from flowray.operators.windowing.triggers import (
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
)
from flowray.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow, Window
from flowray.state.descriptors import ValueStateDescriptor

__all__ = [
    "MissingTimestampError",
    "WindowAssignerContext",
    "WindowAssigner",
    "MergingWindowAssigner",
    "SessionWindowTimeGapExtractor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
]

T = TypeVar("T")
W = TypeVar("W", bound=Window)
W2 = TypeVar("W2", bound=Window)


class MissingTimestampError(RuntimeError):
    """An event-time window assigner got a record without a timestamp."""


def _event_time(assigner: "WindowAssigner", timestamp: Optional[int]) -> int:
    if timestamp is None or timestamp <= MIN_WATERMARK:
        raise MissingTimestampError(
            f"{type(assigner).__name__} is an event-time window assigner but the record has no "
            "timestamp; call data_stream.assign_timestamps_and_watermarks(...) before the "
            "window, or use a processing-time assigner")
    return timestamp


class WindowAssignerContext(abc.ABC):
    """What the window operator gives an assigner."""

    @abc.abstractmethod
    def get_current_processing_time(self) -> int: ...

    def get_runtime_context(self) -> Any:
        """The keyed :class:`~flowray.operators.functions.RuntimeContext` of the operator, its
        current key set to the element's key. Only the count assigners need it."""
        raise NotImplementedError(
            f"{type(self).__name__} gives no runtime context; count window assigners need one")


class WindowAssigner(abc.ABC, Generic[T, W]):
    """Assigns zero or more windows to each element; the elements of one key in one window
    form a pane."""

    WindowAssignerContext = WindowAssignerContext

    get_window_serializer = not_implemented(
        "WindowAssigner.get_window_serializer",
        "nothing: windows are pickled, no serializer is needed")

    @abc.abstractmethod
    def assign_windows(self, element: T, timestamp: Optional[int],
                       context: WindowAssignerContext) -> Collection[W]: ...

    @abc.abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger[T, W]: ...

    @abc.abstractmethod
    def is_event_time(self) -> bool: ...


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows may merge (sessions); the operator keeps them in a
    :class:`~flowray.operators.windowing.merging_window_set.MergingWindowSet`."""

    class MergeCallback(abc.ABC, Generic[W2]):
        @abc.abstractmethod
        def merge(self, to_be_merged: Collection[W2], merge_result: W2) -> None:
            """``to_be_merged`` (two or more windows) become ``merge_result``."""

    @abc.abstractmethod
    def merge_windows(self, windows: Iterable[W],
                      callback: "MergingWindowAssigner.MergeCallback[W]") -> None: ...


class SessionWindowTimeGapExtractor(abc.ABC):
    """Gives the session gap (milliseconds) for an element, for dynamic session windows."""

    @abc.abstractmethod
    def extract(self, element: Any) -> int: ...


# -- time windows ------------------------------------------------------------------------

def _tumbling(name: str, size: Any, offset: Any) -> tuple:
    size_ms = to_millis(size, f"{name}: size")
    offset_ms = to_millis(0 if offset is None else offset, f"{name}: offset")
    if size_ms <= 0:
        raise ValueError(f"{name}: size must be > 0 ms, got {size_ms}")
    if abs(offset_ms) >= size_ms:
        raise ValueError(f"{name}: |offset| must be < size, got offset={offset_ms} ms, "
                         f"size={size_ms} ms")
    return size_ms, offset_ms


def _sliding(name: str, size: Any, slide: Any, offset: Any) -> tuple:
    size_ms = to_millis(size, f"{name}: size")
    slide_ms = to_millis(slide, f"{name}: slide")
    offset_ms = to_millis(0 if offset is None else offset, f"{name}: offset")
    if size_ms <= 0:
        raise ValueError(f"{name}: size must be > 0 ms, got {size_ms}")
    if slide_ms <= 0:
        raise ValueError(f"{name}: slide must be > 0 ms, got {slide_ms}")
    if abs(offset_ms) >= slide_ms:
        raise ValueError(f"{name}: |offset| must be < slide, got offset={offset_ms} ms, "
                         f"slide={slide_ms} ms")
    return size_ms, slide_ms, offset_ms


def _sliding_windows(timestamp: int, size: int, slide: int, offset: int) -> List[TimeWindow]:
    last_start = TimeWindow.get_window_start_with_offset(timestamp, offset, slide)
    return [TimeWindow(start, start + size)
            for start in range(last_start, timestamp - size, -slide)]


def _gap(name: str, gap: Any) -> int:
    gap_ms = to_millis(gap, f"{name}: gap")
    if gap_ms <= 0:
        raise ValueError(f"{name}: gap must be > 0 ms, got {gap_ms}")
    return gap_ms


class TumblingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Fixed-size, non-overlapping windows by element timestamp; ``offset`` shifts their
    starts (e.g. ``of(Time.days(1), Time.hours(-8))`` for local days in UTC+8)."""

    def __init__(self, size: Any, offset: Any = None) -> None:
        self._size, self._offset = _tumbling(type(self).__name__, size, offset)
        self._last: Optional[TimeWindow] = None  # consecutive records share windows

    @staticmethod
    def of(size: Any, offset: Any = None) -> "TumblingEventTimeWindows":
        return TumblingEventTimeWindows(size, offset)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: Any) -> List[TimeWindow]:
        if timestamp is None or timestamp <= MIN_WATERMARK:
            _event_time(self, timestamp)
        start = timestamp - (timestamp - self._offset) % self._size
        last = self._last
        if last is None or last[0] != start:
            last = self._last = TimeWindow(start, start + self._size)
        return [last]

    def __getstate__(self) -> dict:
        return {"_size": self._size, "_offset": self._offset, "_last": None}

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self._size}, {self._offset})"


class TumblingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Fixed-size, non-overlapping windows by the operator's processing-time clock."""

    def __init__(self, size: Any, offset: Any = None) -> None:
        self._size, self._offset = _tumbling(type(self).__name__, size, offset)

    @staticmethod
    def of(size: Any, offset: Any = None) -> "TumblingProcessingTimeWindows":
        return TumblingProcessingTimeWindows(size, offset)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: WindowAssignerContext) -> List[TimeWindow]:
        now = context.get_current_processing_time()
        start = TimeWindow.get_window_start_with_offset(now, self._offset, self._size)
        return [TimeWindow(start, start + self._size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TumblingProcessingTimeWindows({self._size}, {self._offset})"


class SlidingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Windows of ``size`` starting every ``slide`` by element timestamp; an element belongs
    to about size/slide of them (latest first). Requires |offset| < slide."""

    def __init__(self, size: Any, slide: Any, offset: Any = None) -> None:
        self._size, self._slide, self._offset = _sliding(type(self).__name__, size, slide, offset)

    @staticmethod
    def of(size: Any, slide: Any, offset: Any = None) -> "SlidingEventTimeWindows":
        return SlidingEventTimeWindows(size, slide, offset)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: Any) -> List[TimeWindow]:
        ts = _event_time(self, timestamp)
        return _sliding_windows(ts, self._size, self._slide, self._offset)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"SlidingEventTimeWindows({self._size}, {self._slide}, {self._offset})"


class SlidingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    """Sliding windows by the operator's processing-time clock."""

    def __init__(self, size: Any, slide: Any, offset: Any = None) -> None:
        self._size, self._slide, self._offset = _sliding(type(self).__name__, size, slide, offset)

    @staticmethod
    def of(size: Any, slide: Any, offset: Any = None) -> "SlidingProcessingTimeWindows":
        return SlidingProcessingTimeWindows(size, slide, offset)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: WindowAssignerContext) -> List[TimeWindow]:
        now = context.get_current_processing_time()
        return _sliding_windows(now, self._size, self._slide, self._offset)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"SlidingProcessingTimeWindows({self._size}, {self._slide}, {self._offset})"


# -- sessions ----------------------------------------------------------------------------

def _extractor(extractor: Any) -> Callable[[Any], Any]:
    extract = getattr(extractor, "extract", None)
    if callable(extract):
        return extract
    if callable(extractor):
        return extractor
    raise TypeError("a session gap extractor is a SessionWindowTimeGapExtractor or a "
                    f"callable element -> gap, got {extractor!r}")


class _Sessions(MergingWindowAssigner[Any, TimeWindow]):
    """Each element opens ``[t, t + gap)``; windows that intersect merge."""

    _event_time_based: bool

    def merge_windows(self, windows: Iterable[TimeWindow],
                      callback: MergingWindowAssigner.MergeCallback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def _gap_for(self, element: Any) -> int:
        raise NotImplementedError

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: WindowAssignerContext) -> List[TimeWindow]:
        if self._event_time_based:
            start = _event_time(self, timestamp)
        else:
            start = context.get_current_processing_time()
        return [TimeWindow(start, start + self._gap_for(element))]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger() if self._event_time_based else ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return self._event_time_based


class _FixedGapSessions(_Sessions):
    def __init__(self, session_gap: Any) -> None:
        self._session_gap = _gap(type(self).__name__, session_gap)

    def _gap_for(self, element: Any) -> int:
        return self._session_gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._session_gap})"


class _DynamicGapSessions(_Sessions):
    def __init__(self, session_window_time_gap_extractor: Any) -> None:
        self._extractor = session_window_time_gap_extractor
        self._extract = _extractor(session_window_time_gap_extractor)

    def _gap_for(self, element: Any) -> int:
        gap = to_millis(self._extract(element), f"{type(self).__name__}: extracted gap")
        if gap <= 0:
            raise ValueError(f"Dynamic session time gap must satisfy 0 < gap, got {gap} ms "
                             f"for element {element!r}")
        return gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._extractor!r})"


class DynamicEventTimeSessionWindows(_DynamicGapSessions):
    """Event-time sessions whose gap comes from each element."""

    _event_time_based = True

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> "DynamicEventTimeSessionWindows":
        return DynamicEventTimeSessionWindows(extractor)


class DynamicProcessingTimeSessionWindows(_DynamicGapSessions):
    """Processing-time sessions whose gap comes from each element."""

    _event_time_based = False

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> "DynamicProcessingTimeSessionWindows":
        return DynamicProcessingTimeSessionWindows(extractor)


class EventTimeSessionWindows(_FixedGapSessions):
    """Sessions by element timestamp: a key's session closes after ``gap`` without elements."""

    _event_time_based = True

    @staticmethod
    def with_gap(size: Any) -> "EventTimeSessionWindows":
        return EventTimeSessionWindows(size)

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(_FixedGapSessions):
    """Sessions by the operator's processing-time clock."""

    _event_time_based = False

    @staticmethod
    def with_gap(size: Any) -> "ProcessingTimeSessionWindows":
        return ProcessingTimeSessionWindows(size)

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)


# -- global and count windows ------------------------------------------------------------

class GlobalWindows(WindowAssigner[Any, GlobalWindow]):
    """Every element into the one :class:`GlobalWindow`; its default trigger never fires, so
    set one with ``.trigger(...)``."""

    @staticmethod
    def create() -> "GlobalWindows":
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: Any) -> List[GlobalWindow]:
        return [GlobalWindow.get()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


def _count(name: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: {what} must be an int number of elements, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name}: {what} must be > 0, got {value}")
    return value


def _next_count(context: WindowAssignerContext, descriptor: ValueStateDescriptor) -> int:
    """The 0-based position of this element among its key's elements (kept in keyed state)."""
    state = context.get_runtime_context().get_state(descriptor)
    count = state.value() or 0
    state.update(count + 1)
    return count


class CountTumblingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Element ``n`` (0-based, per key) goes to ``CountWindow(n // size)``.

    How the operator feeds it: ``context.get_runtime_context()`` must return the keyed
    RuntimeContext with the element's key current; the assigner keeps the key's element
    count in the keyed ValueState ``"tumble-count-assigner"`` (so it is checkpointed with
    the key). Default trigger: ``PurgingTrigger(CountTrigger(size))`` — PyFlink uses a bare
    CountTrigger; a full count window never receives another element, so purging changes no
    output and frees the pane.
    """

    def __init__(self, window_size: int) -> None:
        self._window_size = _count(type(self).__name__, "window_size", window_size)
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner")

    @staticmethod
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: WindowAssignerContext) -> List[CountWindow]:
        return [CountWindow(_next_count(context, self._count_descriptor) // self._window_size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger(CountTrigger(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Window ``i`` holds a key's elements ``i*slide .. i*slide + size - 1`` (0-based); only
    full windows fire. Fed like :class:`CountTumblingWindowAssigner` (keyed ValueState
    ``"slide-count-assigner"``); default trigger ``PurgingTrigger(CountTrigger(size))``."""

    def __init__(self, window_size: int, window_slide: int) -> None:
        name = type(self).__name__
        self._window_size = _count(name, "window_size", window_size)
        self._window_slide = _count(name, "window_slide", window_slide)
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner")

    @staticmethod
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: Optional[int],
                       context: WindowAssignerContext) -> List[CountWindow]:
        count = _next_count(context, self._count_descriptor)
        windows = []
        window_id = count // self._window_slide
        while window_id >= 0 and count < window_id * self._window_slide + self._window_size:
            windows.append(CountWindow(window_id))
            window_id -= 1
        return windows

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger(CountTrigger(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"
