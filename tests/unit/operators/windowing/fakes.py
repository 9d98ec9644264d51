"""Fakes the window operator would provide: trigger and assigner contexts backed by dicts."""

from typing import Any, Dict, List, Optional, Set, Tuple

from flowray.common.constants import MIN_WATERMARK
from flowray.operators.windowing.assigners import WindowAssignerContext
from flowray.operators.windowing.functions import InternalWindowFunction
from flowray.operators.windowing.triggers import Trigger, TriggerResult
from flowray.state.descriptors import ReducingStateDescriptor, ValueStateDescriptor


class FakeReducingState:
    def __init__(self, store: Dict[Any, Any], slot: Any, reduce: Any) -> None:
        self._store, self._slot, self._reduce = store, slot, reduce

    def get(self) -> Any:
        return self._store.get(self._slot)

    def add(self, value: Any) -> None:
        if self._slot in self._store:
            value = self._reduce(self._store[self._slot], value)
        self._store[self._slot] = value

    def clear(self) -> None:
        self._store.pop(self._slot, None)


class FakeTriggerContext(Trigger.OnMergeContext):
    """Partitioned state per (state name, window) in ``state``; timers as (window, time)."""

    def __init__(self, watermark: int = MIN_WATERMARK, processing_time: int = 0) -> None:
        self.watermark = watermark
        self.processing_time = processing_time
        self.window: Any = None
        self.merged_windows: List[Any] = []
        self.state: Dict[Tuple[str, Any], Any] = {}
        self.event_timers: Set[Tuple[Any, int]] = set()
        self.processing_timers: Set[Tuple[Any, int]] = set()

    def at(self, window: Any) -> "FakeTriggerContext":
        self.window = window
        return self

    def get_current_processing_time(self) -> int:
        return self.processing_time

    def get_current_watermark(self) -> int:
        return self.watermark

    def register_processing_time_timer(self, time: int) -> None:
        self.processing_timers.add((self.window, time))

    def register_event_time_timer(self, time: int) -> None:
        self.event_timers.add((self.window, time))

    def delete_processing_time_timer(self, time: int) -> None:
        self.processing_timers.discard((self.window, time))

    def delete_event_time_timer(self, time: int) -> None:
        self.event_timers.discard((self.window, time))

    def get_partitioned_state(self, state_descriptor: Any) -> FakeReducingState:
        assert isinstance(state_descriptor, ReducingStateDescriptor), state_descriptor
        return FakeReducingState(self.state, (state_descriptor.name, self.window),
                                 state_descriptor.reduce_function)

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        target = self.get_partitioned_state(state_descriptor)
        for merged in self.merged_windows:
            slot = (state_descriptor.name, merged)
            if slot in self.state:
                target.add(self.state.pop(slot))

    def value(self, name: str, window: Any) -> Optional[Any]:
        return self.state.get((name, window))


def advance_watermark(trigger: Trigger, ctx: FakeTriggerContext,
                      watermark: int) -> List[Tuple[Any, int, TriggerResult]]:
    """Fire due event-time timers in time order, as the operator would; (window, time, result)
    of each firing that was not CONTINUE."""
    ctx.watermark = watermark
    fired = []
    while True:
        due = sorted((t, w) for w, t in ctx.event_timers if t <= watermark)
        if not due:
            return fired
        time, window = due[0]
        ctx.event_timers.discard((window, time))
        result = trigger.on_event_time(time, window, ctx.at(window))
        if result is not TriggerResult.CONTINUE:
            fired.append((window, time, result))


class FakeValueState:
    def __init__(self, store: Dict[Any, Any], slot: Any) -> None:
        self._store, self._slot = store, slot

    def value(self) -> Any:
        return self._store.get(self._slot)

    def update(self, value: Any) -> None:
        self._store[self._slot] = value

    def clear(self) -> None:
        self._store.pop(self._slot, None)


class FakeRuntimeContext:
    """Keyed ValueState per (name, current key)."""

    def __init__(self) -> None:
        self.key: Any = None
        self.store: Dict[Tuple[str, Any], Any] = {}

    def get_state(self, descriptor: ValueStateDescriptor) -> FakeValueState:
        return FakeValueState(self.store, (descriptor.name, self.key))


class FakeAssignerContext(WindowAssignerContext):
    def __init__(self, now: int = 0) -> None:
        self.now = now
        self.runtime_context = FakeRuntimeContext()

    def get_current_processing_time(self) -> int:
        return self.now

    def get_runtime_context(self) -> FakeRuntimeContext:
        return self.runtime_context


class ClockOnlyContext(WindowAssignerContext):
    def get_current_processing_time(self) -> int:
        return 0


class FakeWindowContext(InternalWindowFunction.InternalWindowContext):
    def __init__(self, processing_time: int = 0, watermark: int = MIN_WATERMARK) -> None:
        self._processing_time, self._watermark = processing_time, watermark
        self.window_store = object()
        self.global_store = object()

    def current_processing_time(self) -> int:
        return self._processing_time

    def current_watermark(self) -> int:
        return self._watermark

    def window_state(self) -> Any:
        return self.window_store

    def global_state(self) -> Any:
        return self.global_store


class Millis:
    """A stand-in for ``Time``: anything with ``to_milliseconds()``."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def to_milliseconds(self) -> int:
        return self.ms
