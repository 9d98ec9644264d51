"""Stateless record-at-a-time operators, run a batch at a time: map, flat_map, filter,
process, and their two-input (connect) forms. Each works on a keyed or non-keyed input:
on a keyed input (``KeyedStream.map`` ...) the current key is set before each call, so the
function may use keyed state."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from flowray.operators.base import (
    CollectingOutput,
    OneInputOperator,
    TwoInputOperator,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.functions import ProcessFunction, TimerService
from flowray.operators.output_tag import ResultCollector

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

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        try:
            if self._key_of is None:
                out, out_ts = self._apply(records, timestamps)
            else:
                out, out_ts = self._apply_keyed(records, key_groups, timestamps)
        except Exception as e:
            raise self.user_error(e) from e
        if out:
            self.output.emit(out, out_ts)

    def _apply(self, records: List[Any], timestamps: Optional[List[Any]]) -> Tuple[List[Any], Any]:
        """Results of ``records`` and their timestamps (each inherits its input's)."""
        raise NotImplementedError

    def _apply_keyed(self, records: List[Any], key_groups: Optional[List[int]],
                     timestamps: Optional[List[Any]]) -> Tuple[List[Any], Any]:
        set_key = self.ctx.keyed_backend.set_current_key
        key_of = self._key_of
        out: List[Any] = []
        out_ts: Optional[List[Any]] = None if timestamps is None else []
        one = self._apply
        for i, r in enumerate(records):
            set_key(key_of(r), None if key_groups is None else key_groups[i])
            res, ts = one([r], None if timestamps is None else [timestamps[i]])
            out.extend(res)
            if out_ts is not None:
                out_ts.extend(ts)
        return out, out_ts


class MapOperator(UserFunctionOperator):
    default_name = "Map"
    method = "map"

    def _apply(self, records, timestamps):
        f = self._call
        return [f(r) for r in records], timestamps


class FlatMapOperator(UserFunctionOperator):
    default_name = "Flat Map"
    method = "flat_map"

    def _apply(self, records, timestamps):
        f = self._call
        out: List[Any] = []
        extend = out.extend
        if timestamps is None:
            for r in records:
                res = f(r)
                if res is not None:
                    extend(res)
            return out, None
        out_ts: List[Any] = []
        for r, t in zip(records, timestamps):
            res = f(r)
            if res is not None:
                n = len(out)
                extend(res)
                out_ts.extend([t] * (len(out) - n))
        return out, out_ts


class FilterOperator(UserFunctionOperator):
    default_name = "Filter"
    method = "filter"

    def _apply(self, records, timestamps):
        f = self._call
        if timestamps is None:
            return [r for r in records if f(r)], None
        kept = [(r, t) for r, t in zip(records, timestamps) if f(r)]
        return [r for r, _ in kept], [t for _, t in kept]


class _NoTimers(TimerService):
    def __init__(self, op: Any) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def _fail(self, *_: Any) -> None:
        raise RuntimeError("timers are only supported on keyed streams; use key_by(...) first")

    register_processing_time_timer = register_event_time_timer = _fail
    delete_processing_time_timer = delete_event_time_timer = _fail


class _ProcessContext(ProcessFunction.Context):
    """The context of one call: the record's timestamp and the (timer-less) timer service."""

    def __init__(self, timers: TimerService) -> None:
        self._timers = timers
        self._timestamp: Optional[int] = None

    def timestamp(self) -> Optional[int]:
        return self._timestamp

    def timer_service(self) -> TimerService:
        return self._timers


class ProcessOperator(UserFunctionOperator):
    """``DataStream.process(ProcessFunction)`` on a non-keyed stream; the function may
    yield ``(output_tag, value)`` to a side output."""

    default_name = "Process"
    method = "process_element"

    def open(self) -> None:
        super().open()
        self._pctx = _ProcessContext(_NoTimers(self))
        self._collector = ResultCollector(self.output, self.side_outputs)

    def process_batch(self, records, key_groups, timestamps=None):
        f, ctx, collect = self._call, self._pctx, self._collector.collect
        try:
            if timestamps is None:
                for r in records:
                    collect(f(r, ctx), None)
            else:
                for r, t in zip(records, timestamps):
                    ctx._timestamp = t
                    collect(f(r, ctx), t)
                ctx._timestamp = None
        except Exception as e:
            raise self.user_error(e) from e
        self._collector.flush()


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

    def _run(self, f: Callable[..., Any], records: List[Any],
             timestamps: Optional[List[Any]]) -> None:
        try:
            out, out_ts = self._apply(f, records, timestamps)
        except Exception as e:
            raise self.user_error(e) from e
        if out:
            self.output.emit(out, out_ts)

    def process_batch(self, records, key_groups, timestamps=None):
        self._run(self._f1, records, timestamps)

    def process_batch2(self, records, key_groups, timestamps=None):
        self._run(self._f2, records, timestamps)

    def _apply(self, f: Callable[..., Any], records: List[Any],
               timestamps: Optional[List[Any]]) -> Tuple[List[Any], Any]:
        raise NotImplementedError


class CoMapOperator(_TwoInputFunctionOperator):
    default_name = "Co-Map"
    methods = ("map1", "map2")

    def _apply(self, f, records, timestamps):
        return [f(r) for r in records], timestamps


class CoFlatMapOperator(_TwoInputFunctionOperator):
    default_name = "Co-Flat Map"
    methods = ("flat_map1", "flat_map2")

    def _apply(self, f, records, timestamps):
        collector = CollectingOutput()
        for i, r in enumerate(records):
            res = f(r)
            if res is not None:
                res = list(res)
                collector.emit(res, None if timestamps is None else [timestamps[i]] * len(res))
        return collector.records, None if timestamps is None else collector.timestamps


class CoProcessOperator(_TwoInputFunctionOperator):
    default_name = "Co-Process"
    methods = ("process_element1", "process_element2")

    def open(self) -> None:
        super().open()
        self._pctx = _ProcessContext(_NoTimers(self))
        self._collector = ResultCollector(self.output, self.side_outputs)

    def _run(self, f, records, timestamps):
        ctx, collect = self._pctx, self._collector.collect
        try:
            for i, r in enumerate(records):
                t = None if timestamps is None else timestamps[i]
                ctx._timestamp = t
                collect(f(r, ctx), t)
            ctx._timestamp = None
        except Exception as e:
            raise self.user_error(e) from e
        self._collector.flush()
