"""Stateless record-at-a-time operators, run a batch at a time: map, flat_map, filter,
process, and their two-input (connect) forms. Each works on a keyed or non-keyed input:
on a keyed input (``KeyedStream.map`` ...) the current key is set before each call, so the
function may use keyed state."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from flowray.operators.base import (
    OneInputOperator,
    TwoInputOperator,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.functions import ProcessFunction, TimerService

__all__ = [
    "UserFunctionOperator",
    "MapOperator",
    "FlatMapOperator",
    "FilterOperator",
    "ProcessOperator",
    "CoMapOperator",
    "CoFlatMapOperator",
    "CoProcessOperator",
]


class UserFunctionOperator(OneInputOperator):
    """One input, one user function called per record through ``method``."""

    method = ""

    def __init__(self, fn: Any, name: Optional[str] = None,
                 key_selector: Optional[Callable[[Any], Any]] = None) -> None:
        super().__init__(name)
        adapt_function(fn, self.method, self.name)  # fail early on a wrong object
        self.fn = fn
        self.key_selector = key_selector
        self.is_keyed = key_selector is not None

    def user_functions(self) -> List[Any]:
        return [self.fn] + ([self.key_selector] if self.key_selector is not None else [])

    def open(self) -> None:
        self._call = adapt_function(self.fn, self.method, self.name)
        self._key_of = (adapt_function(self.key_selector, "get_key", self.name)
                        if self.key_selector is not None else None)
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]]) -> None:
        try:
            if self._key_of is None:
                out = self._apply(records)
            else:
                out = self._apply_keyed(records, key_groups)
        except Exception as e:
            raise self.user_error(e) from e
        if out:
            self.output.emit(out)

    def _apply(self, records: List[Any]) -> List[Any]:
        raise NotImplementedError

    def _apply_keyed(self, records: List[Any], key_groups: Optional[List[int]]) -> List[Any]:
        set_key = self.ctx.keyed_backend.set_current_key
        key_of = self._key_of
        out: List[Any] = []
        one = self._apply
        if key_groups is None:
            for r in records:
                set_key(key_of(r))
                out.extend(one([r]))
        else:
            for r, kg in zip(records, key_groups):
                set_key(key_of(r), kg)
                out.extend(one([r]))
        return out


class MapOperator(UserFunctionOperator):
    default_name = "Map"
    method = "map"

    def _apply(self, records):
        f = self._call
        return [f(r) for r in records]


class FlatMapOperator(UserFunctionOperator):
    default_name = "Flat Map"
    method = "flat_map"

    def _apply(self, records):
        f = self._call
        out: List[Any] = []
        extend = out.extend
        for r in records:
            res = f(r)
            if res is not None:
                extend(res)
        return out


class FilterOperator(UserFunctionOperator):
    default_name = "Filter"
    method = "filter"

    def _apply(self, records):
        f = self._call
        return [r for r in records if f(r)]


class _NoTimers(TimerService):
    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def current_processing_time(self) -> int:
        return self._clock.now_ms()

    def current_watermark(self) -> int:
        return -(1 << 63)

    def _fail(self, *_: Any) -> None:
        raise RuntimeError("timers are only supported on keyed streams; use key_by(...) first")

    register_processing_time_timer = register_event_time_timer = _fail
    delete_processing_time_timer = delete_event_time_timer = _fail


class _ProcessContext(ProcessFunction.Context):
    def __init__(self, timers: TimerService) -> None:
        self._timers = timers

    def timestamp(self) -> Optional[int]:
        return None

    def timer_service(self) -> TimerService:
        return self._timers


class ProcessOperator(UserFunctionOperator):
    """``DataStream.process(ProcessFunction)`` on a non-keyed stream."""

    default_name = "Process"
    method = "process_element"

    def open(self) -> None:
        super().open()
        self._pctx = _ProcessContext(_NoTimers(self.ctx.processing_time_service.clock))

    def _apply(self, records):
        f, ctx = self._call, self._pctx
        out: List[Any] = []
        for r in records:
            res = f(r, ctx)
            if res is not None:
                out.extend(res)
        return out


class _TwoInputFunctionOperator(TwoInputOperator):
    methods = ("", "")

    def __init__(self, fn: Any, name: Optional[str] = None) -> None:
        super().__init__(name)
        for m in self.methods:
            adapt_function(fn, m, self.name)
        self.fn = fn

    def user_functions(self) -> List[Any]:
        return [self.fn]

    def open(self) -> None:
        self._f1 = adapt_function(self.fn, self.methods[0], self.name)
        self._f2 = adapt_function(self.fn, self.methods[1], self.name)
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e

    def _run(self, f: Callable[[Any], Any], records: List[Any]) -> None:
        try:
            out = self._apply(f, records)
        except Exception as e:
            raise self.user_error(e) from e
        if out:
            self.output.emit(out)

    def process_batch(self, records, key_groups):
        self._run(self._f1, records)

    def process_batch2(self, records, key_groups):
        self._run(self._f2, records)

    def _apply(self, f: Callable[[Any], Any], records: List[Any]) -> List[Any]:
        raise NotImplementedError


class CoMapOperator(_TwoInputFunctionOperator):
    default_name = "Co-Map"
    methods = ("map1", "map2")

    def _apply(self, f, records):
        return [f(r) for r in records]


class CoFlatMapOperator(_TwoInputFunctionOperator):
    default_name = "Co-Flat Map"
    methods = ("flat_map1", "flat_map2")

    def _apply(self, f, records):
        out: List[Any] = []
        for r in records:
            res = f(r)
            if res is not None:
                out.extend(res)
        return out


class CoProcessOperator(_TwoInputFunctionOperator):
    default_name = "Co-Process"
    methods = ("process_element1", "process_element2")

    def open(self) -> None:
        super().open()
        self._pctx = _ProcessContext(_NoTimers(self.ctx.processing_time_service.clock))

    def _apply(self, f, records):
        out: List[Any] = []
        for r in records:
            res = f(r, self._pctx)
            if res is not None:
                out.extend(res)
        return out
