"""The window operator (Flink's ``WindowOperator``): assigns each record to windows, keeps
the panes (the contents of one key in one window) as keyed state, asks the trigger when to
evaluate and purge them, and cleans a window up once the watermark (or the clock) passes
its end plus the allowed lateness.

Everything it remembers is keyed state, so it is in every checkpoint of either backend:
pane contents (``window-contents``: per key, state window -> contents), the merging window
set of session windows (``window-merging-set``), trigger state (namespaced by window) and
timers (the operator's timer service, namespaced by window).

A pane's contents are, by the kind of window function: the running reduction
(``reduce``), the accumulator (``aggregate``) or the list of records (``process``/``apply``).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.state.descriptors import (
    MapStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupAssigner
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
from flowray.state.keyed_backend import StateAccessError
from flowray.state.namespaced import NamespacedKeyedStateStore, NamespacedStates

from flowray.operators.base import (
    OneInputOperator,
    UserFunctionError,
    adapt_function,
    close_function,
    open_function,
)
from flowray.operators.output_tag import OutputTag, ResultCollector
from flowray.operators.timers import InternalTimerService
from flowray.operators.windowing.aligned_panes import (
    APPEND,
    CONTENTS_FIRST,
    RECORD_FIRST,
    AlignedPanes,
)
from flowray.operators.windowing.assigners import (
    MergingWindowAssigner,
    WindowAssigner,
    WindowAssignerContext,
)
from flowray.operators.windowing.functions import InternalWindowFunction
from flowray.operators.windowing.merging_window_set import MergingWindowSet
from flowray.operators.windowing.triggers import Trigger, TriggerResult

__all__ = ["PaneContents", "WindowOperator"]


class PaneContents:
    """How records fold into a pane: ``add(contents, record)``, ``merge(a, b)`` and the
    value handed to the window function (``result``)."""

    def __init__(self, kind: str, function: Any = None) -> None:
        if kind not in ("reduce", "aggregate", "list"):
            raise ValueError(f"unknown pane kind {kind!r}")
        self.kind = kind
        self.function = function

    def user_functions(self) -> List[Any]:
        return [] if self.function is None else [self.function]

    def open(self, where: str) -> None:
        """Resolve the user's function; from here ``add`` is one specialised function."""
        if self.kind == "reduce":
            reduce = self._reduce = adapt_function(self.function, "reduce", where)

            def add(contents: Any, record: Any) -> Any:
                return record if contents is None else reduce(contents, record)
        elif self.kind == "aggregate":
            agg = self.function
            for m in ("create_accumulator", "add", "get_result"):
                if not callable(getattr(agg, m, None)):
                    raise TypeError(f"{where}: the aggregate function {agg!r} has no {m}()")
            agg_add, create = agg.add, agg.create_accumulator

            def add(contents: Any, record: Any) -> Any:
                return agg_add(record, create() if contents is None else contents)
        else:
            def add(contents: Any, record: Any) -> Any:
                if contents is None:
                    return [record]
                contents.append(record)
                return contents
        self.add = add  # type: ignore[method-assign]

    def add(self, contents: Any, record: Any) -> Any:
        """``contents`` with ``record`` folded in (after :meth:`open`)."""
        raise RuntimeError("PaneContents.open() was not called")

    def reduce_function(self) -> Optional[Callable[[Any, Any], Any]]:
        """The user's reduce function, resolved (``reduce`` panes, after :meth:`open`)."""
        return self._reduce if self.kind == "reduce" else None

    def native_combine(self) -> Tuple[int, Any]:
        """``add`` for contents that are not ``None``, as the C half of the aligned windows'
        fold takes it (``AlignedPanes``' ``native_combine``; after :meth:`open`)."""
        if self.kind == "reduce":
            return CONTENTS_FIRST, self._reduce
        if self.kind == "aggregate":
            return RECORD_FIRST, self.function.add
        return APPEND, None

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        if self.kind == "list":
            return list(a) + list(b)
        if self.kind == "reduce":
            return self._reduce(a, b)
        return self.function.merge(a, b)

    def result(self, contents: Any) -> Any:
        if self.kind == "aggregate":
            return self.function.get_result(contents)
        return contents


class _AssignerContext(WindowAssignerContext):
    def __init__(self, op: "WindowOperator") -> None:
        self._op = op

    def get_current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def get_runtime_context(self) -> Any:
        return self._op._runtime_context


class _TriggerContext(Trigger.OnMergeContext):
    """The trigger's view of the current key and ``window``; ``merged`` lists the state
    windows folded into it during ``on_merge``."""

    def __init__(self, op: "WindowOperator") -> None:
        self._op = op
        self.window: Any = None
        self.merged: List[Any] = []

    def get_current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def get_current_watermark(self) -> int:
        return self._op.current_watermark

    def register_processing_time_timer(self, time: int) -> None:
        self._op.timer_service.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._op.timer_service.register_event_time_timer(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._op.timer_service.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._op.timer_service.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> Any:
        return self._op._trigger_states.get(state_descriptor, self.window)

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        self._op._trigger_states.merge(state_descriptor, self.window, self.merged)


class _MergingWindowStateStore:
    """``window_state()`` of merging (session) windows: per-window state cannot follow a
    merge, so any use of it fails, as in Flink."""

    def __init__(self, operator_name: str) -> None:
        self._name = operator_name

    def _unsupported(self, state_descriptor: Any) -> Any:
        raise RuntimeError(f"{self._name}: per-window state (window_state()) is not supported "
                           "with merging windows (session windows), as in Flink; use "
                           "global_state()")

    get_state = get_list_state = get_map_state = _unsupported
    get_reducing_state = get_aggregating_state = _unsupported


class _WindowContext(InternalWindowFunction.InternalWindowContext):
    def __init__(self, op: "WindowOperator") -> None:
        self._op = op
        self._window_store = NamespacedKeyedStateStore(op._window_states)

    def bind(self, window: Any) -> "_WindowContext":
        self._window_store.namespace = window
        return self

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def window_state(self) -> Any:
        if self._op._merging:
            return _MergingWindowStateStore(self._op.name)
        return self._window_store

    def global_state(self) -> Any:
        return self._op._runtime_context


class WindowOperator(OneInputOperator):
    """``KeyedStream.window(...)`` / ``window_all(...)`` followed by ``reduce``,
    ``aggregate``, ``process`` or ``apply``.

    Contract (Flink's): a record goes to every window its assigner gives; a window whose
    cleanup time (end - 1 + allowed lateness, event time) has passed the watermark is late
    and gets nothing; a record that went to no window because all were late is late data
    (to ``late_data_tag``'s side output if set, else dropped and counted in
    :attr:`late_records_dropped`). Output records carry ``window.max_timestamp()``.
    """

    default_name = "Window"
    is_keyed = True
    CONTENTS = "window-contents"
    MERGING_SET = "window-merging-set"

    def __init__(self, assigner: WindowAssigner, trigger: Trigger, contents: PaneContents,
                 window_function: InternalWindowFunction, key_selector: Callable[[Any], Any],
                 allowed_lateness: int = 0, late_data_tag: Optional[OutputTag] = None,
                 name: Optional[str] = None) -> None:
        super().__init__(name)
        self.assigner = assigner
        self.trigger = trigger
        self.contents = contents
        self.window_function = window_function
        self.key_selector = key_selector
        self.allowed_lateness = allowed_lateness
        self.late_data_tag = late_data_tag
        if isinstance(assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise ValueError(f"{self.name}: the trigger {trigger!r} cannot merge windows, "
                             f"which the merging assigner {assigner!r} needs")
        self.late_records_dropped = 0

    def user_functions(self) -> List[Any]:
        return [self.window_function, self.key_selector, *self.contents.user_functions()]

    # -- lifecycle ---------------------------------------------------------------------
    def open(self) -> None:
        ctx = self.ctx
        backend = ctx.keyed_backend
        self._backend = backend
        self._key_of = adapt_function(self.key_selector, "get_key", self.name)
        self._runtime_context = ctx.runtime_context(self.name)
        # on the heap the panes are kept window first (per key group: window -> key ->
        # contents), so that a record looks up its window among the few live ones first
        self._heap_contents = (backend.namespace_first_table(self.CONTENTS)
                               if isinstance(backend, HeapKeyedStateBackend) else None)
        self._contents_state = backend.get_partitioned_state(MapStateDescriptor(self.CONTENTS))
        self._merging = isinstance(self.assigner, MergingWindowAssigner)
        self._merging_state = (backend.get_partitioned_state(
            ValueStateDescriptor(self.MERGING_SET)) if self._merging else None)
        self._trigger_states = NamespacedStates(backend, "window-trigger/")
        self._window_states = NamespacedStates(backend, "window-state/")
        self._trigger_ctx = _TriggerContext(self)
        self._assigner_ctx = _AssignerContext(self)
        self._window_ctx = _WindowContext(self)
        self._collector = ResultCollector(self.output, self.side_outputs)
        self._event_time = self.assigner.is_event_time()
        self.contents.open(self.name)
        self._add_to_pane = self._pane_adder()
        # aligned event-time windows under their default trigger fold a batch at a time
        self._aligned = (AlignedPanes(self.assigner, self.contents.add,
                                      self.contents.reduce_function(),
                                      self.contents.native_combine())
                         if not self._merging and AlignedPanes.applies(self.assigner,
                                                                       self.trigger)
                         else None)
        self._assign_key_group = KeyGroupAssigner(backend.max_parallelism)
        on_event_time = (self._on_event_time if self._aligned is None
                         else self._on_aligned_event_time)
        # a window function that keeps no per-window state has nothing to clear
        self._clears_windows = self.window_function.clears_windows()
        self.timer_service = InternalTimerService(
            self.uid or self.name, backend, ctx.processing_time_service,
            on_event_time, self._on_processing_time)
        if self._aligned is not None:  # its timers register and delete no timers
            self.timer_service.fire_event_time_in_batches(self._on_aligned_event_times)
        self.timer_service.restore()
        try:
            open_function(self.window_function, self._runtime_context)
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        try:
            close_function(self.window_function)
        except Exception as e:
            raise self.user_error(e) from e

    # -- records -----------------------------------------------------------------------
    def process_batch(self, records, key_groups, timestamps=None):
        if self._aligned is not None and timestamps is not None and records:
            try:
                lowest = min(timestamps)
            except TypeError:  # a record without a timestamp: the per-record path says so
                lowest = None
            if lowest is not None and lowest > MIN_WATERMARK:
                self._process_aligned(records, key_groups, timestamps, lowest)
                self._collector.flush()
                return
        self._process_records(records, key_groups, timestamps)
        self._collector.flush()

    def _process_records(self, records, key_groups, timestamps) -> None:
        """The per-record path: assigner, trigger and lateness consulted for each record."""
        set_key, key_of = self._backend.set_current_key, self._key_of
        process = self._process_merging if self._merging else self._process_record
        try:
            for i, r in enumerate(records):
                set_key(key_of(r), None if key_groups is None else key_groups[i])
                process(r, None if timestamps is None else timestamps[i])
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def _process_aligned(self, records: List[Any], key_groups: Optional[List[int]],
                         timestamps: List[int], lowest: int) -> None:
        """Fold the batch a batch at a time (:class:`AlignedPanes`). A record at or behind
        the watermark (it may fire its window at once, or be late) takes the per-record
        path in its place in the batch, so every pane still sees its records in order."""
        try:
            keys = [self._key_of(r) for r in records]
        except Exception as e:
            raise self.user_error(e) from e
        if not set(map(type, keys)) <= PLAIN_KEY_TYPES:
            keys = [k if type(k) in PLAIN_KEY_TYPES else canonical_key(k) for k in keys]
        if key_groups is None:
            key_groups = self._key_groups_of(keys)
        watermark = self.current_watermark
        if lowest > watermark:
            return self._fold_aligned(records, keys, key_groups, timestamps)
        begin = 0
        for i, ts in enumerate(timestamps):
            if ts <= watermark:
                self._fold_aligned(records[begin:i], keys[begin:i], key_groups[begin:i],
                                   timestamps[begin:i])
                self._process_records([records[i]], [key_groups[i]], [ts])
                begin = i + 1
        self._fold_aligned(records[begin:], keys[begin:], key_groups[begin:],
                           timestamps[begin:])

    def _key_groups_of(self, keys: List[Any]) -> List[int]:
        key_groups = self._assign_key_group.assign_batch(keys)
        kg_range = self._backend.key_group_range
        for k, kg in zip(keys, key_groups):
            if kg not in kg_range:
                raise StateAccessError(
                    f"{self.name}: key {k!r} belongs to key group {kg}, outside this "
                    f"subtask's range [{kg_range.start}, {kg_range.end}]; is the key "
                    "selector deterministic?")
        return key_groups

    def _fold_aligned(self, records: List[Any], keys: List[Any], key_groups: List[int],
                      timestamps: List[int]) -> None:
        if not records:
            return
        aligned, set_key = self._aligned, self._backend.set_current_key
        try:
            if self._heap_contents is not None:
                new = aligned.fold_heap(self._heap_contents, self._backend.key_group_range.start,
                                        records, keys, key_groups, timestamps)
            else:
                new = aligned.fold_by_key(self._contents_state, set_key, records, keys,
                                          key_groups, timestamps)
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e
        # the trigger's timer (the window's end) and the cleanup timer, once per new pane
        register = self.timer_service.register_event_time_timers
        if not self.allowed_lateness:
            register([(k, kg, w, w[1] - 1) for k, kg, w in new])
            return
        timers = []
        for k, kg, w in new:
            timers.append((k, kg, w, w[1] - 1))
            cleanup = self._cleanup_time(w)
            if cleanup != MAX_WATERMARK:
                timers.append((k, kg, w, cleanup))
        register(timers)

    def _process_record(self, record: Any, timestamp: Optional[int]) -> None:
        windows = self.assigner.assign_windows(record, timestamp, self._assigner_ctx)
        skipped = True
        event_time, watermark = self._event_time, self.current_watermark
        trigger, add_to_pane = self.trigger, self._add_to_pane
        for window in windows:
            cleanup = self._cleanup_time(window)
            if event_time and cleanup <= watermark:
                continue  # the window is late: it was (or will be) cleaned up
            skipped = False
            add_to_pane(window, record)
            result = trigger.on_element(record, timestamp, window, self._bind(window))
            if result is not TriggerResult.CONTINUE:
                self._on_trigger(result, window, window)
            if cleanup != MAX_WATERMARK:
                if event_time:
                    self.timer_service.register_event_time_timer(window, cleanup)
                else:
                    self.timer_service.register_processing_time_timer(window, cleanup)
        if skipped and self._is_element_late(timestamp):
            self._late(record, timestamp)

    def _pane_adder(self) -> Callable[[Any, Any], None]:
        """``add(window, record)``: fold ``record`` into the current key's pane of
        ``window``; on the heap backend straight into its dicts (the per-record path)."""
        fold = self.contents.add
        backend = self._backend
        table = self._heap_contents
        if table is not None:
            maps, shared = table.maps, table.shared

            def add_on_heap(window: Any, record: Any) -> None:
                off = backend._current_offset
                m = maps[off]
                keyed = m.get(window)
                if shared[off] is not None:  # copy-on-write while a snapshot is pending
                    m, keyed = table.for_change(off, window, keyed)
                if keyed is None:
                    keyed = m[window] = {}
                key = backend._current_key
                keyed[key] = fold(keyed.get(key), record)
            return add_on_heap
        state = self._contents_state

        def add(window: Any, record: Any) -> None:
            state.put(window, fold(state.get(window), record))
        return add

    def _process_merging(self, record: Any, timestamp: Optional[int]) -> None:
        windows = self.assigner.assign_windows(record, timestamp, self._assigner_ctx)
        merging = MergingWindowSet(self.assigner, self._merging_state.value())
        state, skipped = self._contents_state, True
        for window in windows:
            actual = merging.add_window(window, self._merge_function)
            if self._is_window_late(actual):
                merging.retire_window(actual)
                continue
            skipped = False
            state_window = merging.get_state_window(actual)
            state.put(state_window, self.contents.add(state.get(state_window), record))
            self._on_trigger(self.trigger.on_element(record, timestamp, actual,
                                                     self._bind(actual)), actual, state_window)
            self._register_cleanup_timer(actual)
        self._persist(merging)
        if skipped and self._is_element_late(timestamp):
            self._late(record, timestamp)

    def _merge_function(self, merge_result: Any, merged_windows: List[Any],
                        state_window_result: Any, merged_state_windows: List[Any]) -> None:
        """Windows merged: their timers and trigger state go, their contents fold into the
        result's state window, and the trigger re-establishes itself for the result."""
        if self._event_time and merge_result.max_timestamp() + self.allowed_lateness \
                <= self.current_watermark:
            raise RuntimeError(f"{self.name}: windows {merged_windows} merged into "
                               f"{merge_result}, which is already late")
        trigger, ctx = self.trigger, self._trigger_ctx
        # as Flink: the trigger merges its state into the result first, then the merged
        # windows' trigger state and cleanup timers go
        self._bind(merge_result)
        ctx.merged = list(merged_windows)
        try:
            trigger.on_merge(merge_result, ctx)
        finally:
            ctx.merged = []
        for window in merged_windows:
            trigger.clear(window, self._bind(window))
            self._delete_cleanup_timer(window)
        state = self._contents_state
        acc = state.get(state_window_result)
        for sw in merged_state_windows:
            acc = self.contents.merge(acc, state.get(sw))
            state.remove(sw)
        if acc is not None:
            state.put(state_window_result, acc)

    def _late(self, record: Any, timestamp: Optional[int]) -> None:
        if self.late_data_tag is not None:
            self._collector.collect_side(self.late_data_tag, record, timestamp)
        else:
            self.late_records_dropped += 1

    # -- triggers and timers -----------------------------------------------------------
    def _bind(self, window: Any) -> _TriggerContext:
        self._trigger_ctx.window = window
        return self._trigger_ctx

    def _on_trigger(self, result: TriggerResult, window: Any, state_window: Any) -> None:
        if result is TriggerResult.CONTINUE:
            return
        state = self._contents_state
        if result.is_fire():
            contents = state.get(state_window)
            if contents is not None:
                self._emit(window, contents)
        if result.is_purge():
            state.remove(state_window)

    def _emit(self, window: Any, contents: Any) -> None:
        key = self._backend.get_current_key()
        out = self.window_function.process(key, window, self._window_ctx.bind(window),
                                           self.contents.result(contents))
        self._collector.collect(out, window.max_timestamp())

    def _on_timer(self, fire: Callable[..., TriggerResult], time: int, window: Any) -> None:
        merging = None
        state_window = window
        if self._merging:
            merging = MergingWindowSet(self.assigner, self._merging_state.value())
            state_window = merging.get_state_window(window)
            if state_window is None:
                return  # the window was merged away or already cleaned up
        try:
            self._on_trigger(fire(time, window, self._bind(window)), window, state_window)
            if self._is_cleanup_time(window, time):
                self._clear_all_state(window, state_window, merging)
            if merging is not None:
                self._persist(merging)
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def _on_event_time(self, time: int, window: Any) -> None:
        self._on_timer(self.trigger.on_event_time, time, window)

    def _on_aligned_event_time(self, time: int, window: Any) -> None:
        """``_on_event_time`` for aligned windows under ``EventTimeTrigger`` (no merging):
        fire at the window's end, clean up at the cleanup time; the trigger's only timer
        is the one firing, so there is nothing of it to clear."""
        try:
            state = self._contents_state
            end = window[1] - 1
            if time == end and not self.allowed_lateness:  # fires and is cleaned up
                contents = self._take_pane(window)
                if contents is not None:
                    self._emit(window, contents)
                if self._clears_windows:
                    self.window_function.clear(window, self._window_ctx.bind(window))
                return
            if time == end:
                contents = state.get(window)
                if contents is not None:
                    self._emit(window, contents)
            if time == self._cleanup_time(window):
                state.remove(window)
                if self._clears_windows:
                    self.window_function.clear(window, self._window_ctx.bind(window))
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def _on_aligned_event_times(self, time: int, timers: List[Tuple[Any, int, Any]]) -> None:
        """The due timers of one timestamp: ``_on_aligned_event_time`` for each with its key
        made current, except where a pass-through function's pane fires and is cleaned up
        by the same timer on the heap: its result is collected there, with no call and no
        key made current."""
        table = self._heap_contents
        direct = (table is not None and not self.allowed_lateness and not self._clears_windows
                  and self.window_function.passes_through())
        set_key, fire = self._backend.set_current_key, self._on_aligned_event_time
        first = self._backend.key_group_range.start
        collect, result = self._collector.collect, self.contents.result
        try:
            for key, kg, window in timers:
                if direct and time == window[1] - 1:
                    contents = _pop_pane(table, kg - first, key, window)
                    if contents is not None:
                        collect((result(contents),), time)
                    continue
                set_key(key, kg)
                fire(time, window)
        except UserFunctionError:
            raise
        except Exception as e:
            raise self.user_error(e) from e

    def _take_pane(self, window: Any) -> Any:
        """The current key's contents of ``window``, removed from the state (None if it
        has none); on the heap backend one lookup, with its copy-on-write rules."""
        table = self._heap_contents
        if table is None:
            contents = self._contents_state.get(window)
            if contents is not None:
                self._contents_state.remove(window)
            return contents
        backend = self._backend
        return _pop_pane(table, backend._current_offset, backend._current_key, window)

    def _on_processing_time(self, time: int, window: Any) -> None:
        self._on_timer(self.trigger.on_processing_time, time, window)
        self._collector.flush()

    def on_watermark(self, timestamp: int) -> None:
        self.timer_service.advance_watermark(timestamp)
        self._collector.flush()

    def finish(self) -> None:
        if self.ctx.batch_execution:  # processing time ends with the input in BATCH
            self.timer_service.fire_all_processing_time()
            self._collector.flush()

    def _clear_all_state(self, window: Any, state_window: Any,
                         merging: Optional[MergingWindowSet]) -> None:
        self._contents_state.remove(state_window)
        self.trigger.clear(window, self._bind(window))
        self.window_function.clear(window, self._window_ctx.bind(window))
        if merging is not None:
            merging.retire_window(window)

    def _persist(self, merging: MergingWindowSet) -> None:
        if merging.has_changed():
            pairs = merging.persist()
            if pairs:
                self._merging_state.update(pairs)
            else:
                self._merging_state.clear()

    # -- lateness ----------------------------------------------------------------------
    def _cleanup_time(self, window: Any) -> int:
        end = window.max_timestamp()
        if not self._event_time:
            return end
        cleanup = end + self.allowed_lateness
        return cleanup if cleanup >= end and cleanup < MAX_WATERMARK else MAX_WATERMARK

    def _is_cleanup_time(self, window: Any, time: int) -> bool:
        return time == self._cleanup_time(window)

    def _is_window_late(self, window: Any) -> bool:
        return self._event_time and self._cleanup_time(window) <= self.current_watermark

    def _is_element_late(self, timestamp: Optional[int]) -> bool:
        return (self._event_time and timestamp is not None
                and timestamp + self.allowed_lateness <= self.current_watermark)

    def _register_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_WATERMARK:
            return  # global and count windows are never cleaned up by time
        if self._event_time:
            self.timer_service.register_event_time_timer(window, cleanup)
        else:
            self.timer_service.register_processing_time_timer(window, cleanup)

    def _delete_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_WATERMARK:
            return
        if self._event_time:
            self.timer_service.delete_event_time_timer(window, cleanup)
        else:
            self.timer_service.delete_processing_time_timer(window, cleanup)


def _pop_pane(table: Any, off: int, key: Any, window: Any) -> Any:
    """``key``'s contents of ``window`` taken out of the heap's window table (window
    first; None if it has none), copying on write what a pending snapshot holds."""
    m = table.maps[off]
    keyed = m.get(window)
    if keyed is None or key not in keyed:
        return None
    if table.shared[off] is not None:  # copy-on-write while a snapshot is pending
        m, keyed = table.for_change(off, window, keyed)
    contents = keyed.pop(key)
    if not keyed:
        del m[window]
    return contents
