"""Triggers decide when a pane (the elements of one key in one window) is evaluated or purged,
as in ``pyflink.datastream.window``; the built-in ones keep Flink's semantics.

A trigger holds no state of its own: the same instance serves every key and window. What it
must remember lives in partitioned state reached through its context, scoped to the current
key and window.

>>> TriggerResult.FIRE_AND_PURGE.is_fire(), TriggerResult.FIRE_AND_PURGE.is_purge()
(True, True)
>>> PurgingTrigger.of(CountTrigger.of(3))
PurgingTrigger(CountTrigger(3))
"""

from __future__ import annotations

import abc
import enum
import operator
from typing import Any, Generic, TypeVar

from flowray.common.compat import not_implemented
from flowray.operators.windowing._time import to_millis
from flowray.operators.windowing.windows import Window
from flowray.state.descriptors import ReducingStateDescriptor, StateDescriptor
from flowray.state.keyed_backend import State

__all__ = [
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "NeverTrigger",
]

T = TypeVar("T")
W = TypeVar("W", bound=Window)


class TriggerResult(enum.Enum):
    """What to do with a pane. A fire on a pane with no contents emits nothing.

    CONTINUE: nothing; FIRE: evaluate, keep the contents; PURGE: drop the contents without
    evaluating; FIRE_AND_PURGE: evaluate, then drop the contents.
    """

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger(abc.ABC, Generic[T, W]):
    """Decides, per pane, when the window function runs.

    The window operator calls ``on_element`` for every element added to a pane, and
    ``on_event_time`` / ``on_processing_time`` when a timer the trigger registered through
    its context fires. With a merging assigner the trigger must return True from
    :meth:`can_merge` and implement :meth:`on_merge`. :meth:`clear` must delete the timers
    and the partitioned state the trigger made for the window.
    """

    class TriggerContext(abc.ABC):
        """What the operator gives a trigger: time, timers and state of the current key and
        window. Timers are per (key, window, time); registering one twice fires it once."""

        @abc.abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def get_current_watermark(self) -> int: ...

        @abc.abstractmethod
        def register_processing_time_timer(self, time: int) -> None:
            """Call ``on_processing_time(time, ...)`` once the clock reaches ``time``."""

        @abc.abstractmethod
        def register_event_time_timer(self, time: int) -> None:
            """Call ``on_event_time(time, ...)`` once the watermark reaches ``time``."""

        @abc.abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State:
            """State of ``state_descriptor`` scoped to the current key and window."""

        def get_metric_group(self) -> Any:
            raise NotImplementedError("metric groups are not available to triggers")

    class OnMergeContext(TriggerContext):
        """The context of :meth:`Trigger.on_merge`; its window is the merge result."""

        @abc.abstractmethod
        def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
            """Fold the state of ``state_descriptor`` of every merged window into the result
            window's (with the descriptor's reduce/aggregate function) and clear theirs."""

    @abc.abstractmethod
    def on_element(self, element: T, timestamp: int, window: W,
                   ctx: "Trigger.TriggerContext") -> TriggerResult: ...

    @abc.abstractmethod
    def on_processing_time(self, time: int, window: W,
                           ctx: "Trigger.TriggerContext") -> TriggerResult: ...

    @abc.abstractmethod
    def on_event_time(self, time: int, window: W,
                      ctx: "Trigger.TriggerContext") -> TriggerResult: ...

    def can_merge(self) -> bool:
        """True if :meth:`on_merge` is implemented (required by merging assigners)."""
        return False

    def on_merge(self, window: W, ctx: "Trigger.OnMergeContext") -> None:
        """Windows were merged into ``window``: re-establish timers and state for it."""
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    @abc.abstractmethod
    def clear(self, window: W, ctx: "Trigger.TriggerContext") -> None: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EventTimeTrigger(Trigger[Any, Window]):
    """Fires once the watermark passes the window's end (at once if it already has)."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        return EventTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        end = window.max_timestamp()
        if end <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(end)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        # a merged window already behind the watermark gets no timer; the operator's
        # lateness check deals with it
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger[Any, Window]):
    """Fires once the processing-time clock passes the window's end."""

    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        return ProcessingTimeTrigger()

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())


class CountTrigger(Trigger[Any, Window]):
    """Fires (without purging) each time the pane has received ``count`` more elements; the
    running count is a ReducingState named ``"count"`` of the pane."""

    def __init__(self, window_size: int) -> None:
        count = window_size
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"CountTrigger: count must be an int, got {count!r}")
        if count <= 0:
            raise ValueError(f"CountTrigger: count must be > 0, got {count}")
        self._count = count
        self._state_desc = ReducingStateDescriptor("count", operator.add)

    @staticmethod
    def of(window_size: int) -> "CountTrigger":
        return CountTrigger(window_size)

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        state: Any = ctx.get_partitioned_state(self._state_desc)
        state.add(1)
        if state.get() >= self._count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state_desc)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self._state_desc).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self._count})"


class PurgingTrigger(Trigger[Any, Window]):
    """Wraps a trigger and turns each of its fires into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise TypeError(f"PurgingTrigger wraps a Trigger, got {nested_trigger!r}")
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested_trigger)

    def get_nested_trigger(self) -> Trigger:
        return self.nested_trigger

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


def _interval(trigger: str, interval: Any) -> int:
    millis = to_millis(interval, f"{trigger}: interval")
    if millis <= 0:
        raise ValueError(f"{trigger}: interval must be > 0 ms, got {millis}")
    return millis


class _ContinuousTrigger(Trigger[Any, Window]):
    """Fires every ``interval`` of one time domain (at multiples of the interval, none past
    the window's end); the next fire time is a ReducingState (min) named ``"fire-time"``
    of the pane. Subclasses say which domain's timers to use."""

    def __init__(self, interval: Any) -> None:
        self.interval = _interval(type(self).__name__, interval)
        self._state_desc = ReducingStateDescriptor("fire-time", min)

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _register_next(self, time: int, window: Window, ctx: Trigger.TriggerContext,
                       state: Any) -> None:
        next_fire = min(time + self.interval, window.max_timestamp())
        state.add(next_fire)
        self._register_timer(ctx, next_fire)

    def _start(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> None:
        """The pane's first element: the first fire is the next multiple after ``time``."""
        state: Any = ctx.get_partitioned_state(self._state_desc)
        if state.get() is None:
            self._register_next(time - time % self.interval, window, ctx, state)

    def _fire_if_due(self, time: int, window: Window,
                     ctx: Trigger.TriggerContext) -> TriggerResult:
        state: Any = ctx.get_partitioned_state(self._state_desc)
        if state.get() == time:
            state.clear()
            self._register_next(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state_desc)
        next_fire = ctx.get_partitioned_state(self._state_desc).get()  # type: ignore[attr-defined]
        if next_fire is not None:
            self._register_timer(ctx, next_fire)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        state: Any = ctx.get_partitioned_state(self._state_desc)
        next_fire = state.get()
        if next_fire is not None:
            self._delete_timer(ctx, next_fire)
            state.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval})"

    register_next_fire_timestamp = not_implemented(
        "register_next_fire_timestamp",
        "nothing: an internal step of PyFlink's trigger; flowray's registers its own timers")


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of event time (at multiples of the interval) and at the
    window's end."""

    @staticmethod
    def of(interval: Any) -> "ContinuousEventTimeTrigger":
        return ContinuousEventTimeTrigger(interval)

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        self._start(timestamp, window, ctx)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._fire_if_due(time, window, ctx)


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every ``interval`` of processing time (at multiples of the interval, the last
    one at the window's end)."""

    @staticmethod
    def of(interval: Any) -> "ContinuousProcessingTimeTrigger":
        return ContinuousProcessingTimeTrigger(interval)

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        self._start(ctx.get_current_processing_time(), window, ctx)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE


class NeverTrigger(Trigger[Any, Window]):
    """Never fires: the default of :class:`GlobalWindows`."""

    def on_element(self, element: Any, timestamp: int, window: Window,
                   ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window,
                           ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window,
                      ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        pass

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        pass
