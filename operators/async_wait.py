"""The async wait operator (Flink's ``AsyncWaitOperator``): each record starts an
``async_invoke`` coroutine on an event loop in a thread of the task; at most ``capacity``
records are in flight (the task blocks its input while the queue is full); results are
emitted in the task's thread, in input order (ordered) or as they complete (unordered,
never across a watermark). Timeouts and retry delays run on the task's clock.

On a checkpoint the records not yet emitted (in flight or completed but held back) and the
watermarks between them go into operator state; a restored operator issues them again, so
async enrichment followed by a two-phase-commit sink is exactly once.

Pure parts: :class:`AsyncWaitQueue` (ordering, capacity, watermarks) and the operator's
logic given an executor; :class:`AsyncioThreadExecutor` is the only part with a thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Tuple

from flowray.operators.base import (
    OneInputOperator,
    StateInitializationContext,
    StateSnapshotContext,
    close_function,
    open_function,
)

__all__ = [
    "ORDERED",
    "UNORDERED",
    "AsyncEntry",
    "AsyncWaitQueue",
    "AsyncExecutor",
    "AsyncioThreadExecutor",
    "AsyncWaitOperator",
    "AsyncTaskCancelled",
    "run_attempt",
]

ORDERED = "ordered"
UNORDERED = "unordered"

#: the operator-state list holding the records (and watermarks) to issue again
ASYNC_WAIT_STATE = "_async_wait_operator_state_"

#: longest one blocking wait lasts before cancellation and timers are looked at again
_MAX_BLOCK_S = 0.05

#: how often the event loop thread checks that the task's thread still runs
_OWNER_CHECK_S = 1.0


class AsyncTaskCancelled(Exception):
    """The task was cancelled while the operator waited for results."""


class AsyncEntry:
    """One input record in the queue: its value and timestamp, the attempt running, and
    (once complete) its results."""

    __slots__ = ("value", "timestamp", "attempt", "done", "results", "segment", "deadline")

    def __init__(self, value: Any, timestamp: Any) -> None:
        self.value = value
        self.timestamp = timestamp
        self.attempt = 0
        self.done = False
        self.results: List[Any] = []
        self.segment: Any = None
        self.deadline: Optional[int] = None


class _Segment:
    """Unordered mode: the records between two watermarks, and the watermark closing them."""

    __slots__ = ("pending", "ready", "watermark", "order")

    def __init__(self) -> None:
        self.pending = 0
        self.ready: List[AsyncEntry] = []
        self.watermark: Optional[int] = None
        self.order: dict = {}  # id -> entry: the records not yet popped, in input order


class AsyncWaitQueue:
    """Records and watermarks waiting to be emitted.

    ``add_record`` / ``add_watermark`` append; ``complete(entry, results)`` marks a record
    done; ``pop_ready()`` returns what may be emitted now, in emission order, as
    ``("record", entry)`` and ``("watermark", ts)`` items. Ordered: the head only, in
    input order. Unordered: completed records as they complete, but a watermark only after
    every record before it, and no record before the watermarks ahead of it.
    ``len(queue)`` counts the records not yet popped (watermarks do not count towards
    capacity).

    >>> q = AsyncWaitQueue(UNORDERED, capacity=2)
    >>> a, b = q.add_record("a", None), q.add_record("b", None); q.add_watermark(5)
    >>> q.is_full(), q.complete(b, ["B"]), [k for k, _ in q.pop_ready()]
    (True, None, ['record'])
    >>> q.complete(a, ["A"]); [(k, v if k == "watermark" else v.results) for k, v in q.pop_ready()]
    [('record', ['A']), ('watermark', 5)]
    """

    def __init__(self, mode: str, capacity: int) -> None:
        if mode not in (ORDERED, UNORDERED):
            raise ValueError(f"output mode must be {ORDERED!r} or {UNORDERED!r}, got {mode!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.mode = mode
        self.capacity = capacity
        self._records = 0
        self._ordered: Deque[Tuple[str, Any]] = deque()
        self._segments: Deque[_Segment] = deque()

    def __len__(self) -> int:
        return self._records

    def is_full(self) -> bool:
        return self._records >= self.capacity

    def is_empty(self) -> bool:
        return not self._ordered and not self._segments

    def add_record(self, value: Any, timestamp: Any) -> AsyncEntry:
        entry = AsyncEntry(value, timestamp)
        self._records += 1
        if self.mode == ORDERED:
            self._ordered.append(("record", entry))
        else:
            segs = self._segments
            if not segs or segs[-1].watermark is not None:
                segs.append(_Segment())
            seg = segs[-1]
            seg.pending += 1
            seg.order[id(entry)] = entry
            entry.segment = seg
        return entry

    def add_watermark(self, timestamp: int) -> None:
        if self.mode == ORDERED:
            self._ordered.append(("watermark", timestamp))
            return
        segs = self._segments
        if not segs or segs[-1].watermark is not None:
            segs.append(_Segment())
        segs[-1].watermark = timestamp

    def complete(self, entry: AsyncEntry, results: List[Any]) -> None:
        if entry.done:
            return
        entry.done = True
        entry.results = results
        if self.mode == UNORDERED:
            seg = entry.segment
            seg.pending -= 1
            seg.ready.append(entry)

    def pop_ready(self) -> List[Tuple[str, Any]]:
        out: List[Tuple[str, Any]] = []
        if self.mode == ORDERED:
            q = self._ordered
            while q and (q[0][0] == "watermark" or q[0][1].done):
                item = q.popleft()
                out.append(item)
                if item[0] == "record":
                    self._records -= 1
            return out
        segs = self._segments
        while segs:
            seg = segs[0]
            for e in seg.ready:
                out.append(("record", e))
                del seg.order[id(e)]
            self._records -= len(seg.ready)
            seg.ready = []
            if seg.pending:
                break
            if seg.watermark is None:  # the open last segment, now empty
                segs.popleft()
                break
            out.append(("watermark", seg.watermark))
            segs.popleft()
        return out

    def elements(self) -> List[Tuple[str, Any]]:
        """Everything not yet popped, in input order: ``("record", entry)`` and
        ``("watermark", ts)`` (what a checkpoint keeps)."""
        if self.mode == ORDERED:
            return list(self._ordered)
        out: List[Tuple[str, Any]] = []
        for seg in self._segments:
            out.extend(("record", e) for e in seg.order.values())
            if seg.watermark is not None:
                out.append(("watermark", seg.watermark))
        return out


async def run_attempt(function: Any, entry: AsyncEntry, attempt: int,
                      on_done: Callable[[AsyncEntry, int, bool, Any], None]) -> None:
    """One attempt: ``on_done(entry, attempt, True, results)`` or ``(..., False, error)``;
    nothing when cancelled."""
    try:
        results = await function.async_invoke(entry.value)
    except asyncio.CancelledError:
        return
    except BaseException as e:  # noqa: BLE001 - the operator decides (retry or fail)
        on_done(entry, attempt, False, e)
        return
    on_done(entry, attempt, True, results)


class AsyncExecutor:
    """Runs attempts somewhere; reports each outcome through ``on_done`` (any thread)."""

    def start(self, function: Any,
              on_done: Callable[[AsyncEntry, int, bool, Any], None]) -> None:
        raise NotImplementedError

    def invoke(self, calls: List[Tuple[AsyncEntry, int]]) -> None:
        """Start attempt ``attempt`` of each entry."""
        raise NotImplementedError

    def cancel(self, entry: AsyncEntry) -> None:
        """Stop the entry's running attempt, if any (its outcome is ignored anyway)."""

    def wait(self, timeout_s: float) -> None:
        """Block until an outcome may have been reported, or ``timeout_s`` passed."""
        raise NotImplementedError

    def stop(self) -> None:
        pass


class AsyncioThreadExecutor(AsyncExecutor):
    """An asyncio event loop in a daemon thread of the task."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._tasks: dict = {}
        self.signal = threading.Event()

    def start(self, function: Any,
              on_done: Callable[[AsyncEntry, int, bool, Any], None]) -> None:
        self._function = function
        signal = self.signal

        def done(entry: AsyncEntry, attempt: int, ok: bool, value: Any) -> None:
            self._tasks.pop(id(entry), None)
            on_done(entry, attempt, ok, value)
            signal.set()

        self._done = done
        loop = self._loop = asyncio.new_event_loop()
        owner = threading.current_thread()

        def watch() -> None:  # a task that failed never calls stop(): end with its thread
            if owner.is_alive():
                loop.call_later(_OWNER_CHECK_S, watch)
            else:
                self._shutdown(loop)
        loop.call_soon(watch)
        self._thread = threading.Thread(target=loop.run_forever, name="async-wait-loop",
                                        daemon=True)
        self._thread.start()

    def _shutdown(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the loop's thread: cancel every attempt and stop the loop."""
        for task in list(self._tasks.values()):
            task.cancel()
        self._tasks.clear()
        loop.stop()

    def _start_all(self, calls: List[Tuple[AsyncEntry, int]]) -> None:
        loop, fn, done, tasks = self._loop, self._function, self._done, self._tasks
        for entry, attempt in calls:
            tasks[id(entry)] = loop.create_task(run_attempt(fn, entry, attempt, done))

    def invoke(self, calls: List[Tuple[AsyncEntry, int]]) -> None:
        self._loop.call_soon_threadsafe(self._start_all, calls)

    def cancel(self, entry: AsyncEntry) -> None:
        def cancel() -> None:
            task = self._tasks.pop(id(entry), None)
            if task is not None:
                task.cancel()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(cancel)

    def wait(self, timeout_s: float) -> None:
        self.signal.wait(timeout_s)
        self.signal.clear()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        self._loop = None
        try:
            loop.call_soon_threadsafe(self._shutdown, loop)
        except RuntimeError:  # already closed
            return
        if thread is not None:
            thread.join(5.0)
        if thread is None or not thread.is_alive():
            loop.close()


class AsyncWaitOperator(OneInputOperator):
    """Applies an :class:`~flowray.operators.async_functions.AsyncFunction` (see module
    docstring). ``timeout_ms`` <= 0: no timeout. ``executor_factory`` makes the executor
    (tests pass one driving an event loop by hand)."""

    default_name = "async wait operator"

    def __init__(self, async_function: Any, timeout_ms: int, capacity: int,
                 retry_strategy: Any, mode: str, name: Optional[str] = None,
                 executor_factory: Callable[[], AsyncExecutor] = AsyncioThreadExecutor
                 ) -> None:
        super().__init__(name)
        AsyncWaitQueue(mode, capacity)  # validates both
        self.fn = async_function
        self.timeout_ms = int(timeout_ms)
        self.capacity = capacity
        self.retry_strategy = retry_strategy
        self.mode = mode
        self.executor_factory = executor_factory
        self._restored: List[Tuple[str, Any, Any]] = []
        self._state: Any = None

    def user_functions(self) -> List[Any]:
        return [self.fn]

    # -- lifecycle ---------------------------------------------------------------------
    def initialize_state(self, context: StateInitializationContext) -> None:
        super().initialize_state(context)
        self._state = context.get_operator_state_store().get_list_state(ASYNC_WAIT_STATE)
        if context.is_restored():
            self._restored = list(self._state.get())
        self._state.clear()

    def open(self) -> None:
        self._queue = AsyncWaitQueue(self.mode, self.capacity)
        self._inbox: Deque[Tuple[AsyncEntry, int, bool, Any]] = deque()
        self._timeouts: Deque[AsyncEntry] = deque()  # by deadline: one timeout for all
        self._retries: List[Tuple[int, int, AsyncEntry]] = []
        self._seq = itertools.count()
        self._timer_at: Optional[int] = None
        self._mail_pending = False
        self._invokes: List[Tuple[AsyncEntry, int]] = []
        services = self.ctx.services if self.ctx is not None else {}
        self._mailbox: Optional[Callable[[Callable[[], None]], None]] = services.get("mailbox")
        self._cancelled: Callable[[], bool] = services.get("cancelled") or (lambda: False)
        predicate = self.retry_strategy.get_retry_predicate()
        self._result_retry = predicate.result_predicate()
        self._error_retry = predicate.exception_predicate()
        self._clock = self.ctx.processing_time_service
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e
        self._executor = self.executor_factory()
        self._executor.start(self.fn, self._on_done)
        restored, self._restored = self._restored, []
        for kind, value, ts in restored:  # issue again what the checkpoint held
            if kind == "watermark":
                self._queue.add_watermark(value)
            else:
                self._add_record(value, ts)
        self._flush_invokes()

    def close(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.stop()
            self._executor = None
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e

    # -- input -------------------------------------------------------------------------
    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        self.drain()
        if timestamps is None:
            for r in records:
                self._add_record(r, None)
        else:
            for r, ts in zip(records, timestamps):
                self._add_record(r, ts)
        self._flush_invokes()

    def process_watermark(self, timestamp: int, input_index: int = 0) -> None:
        if timestamp <= self.current_watermark:
            return
        self.current_watermark = timestamp
        self._watermarks[0] = timestamp
        self._queue.add_watermark(timestamp)
        self.drain()

    def finish(self) -> None:
        """End of input: wait for every record's results and emit them."""
        self._flush_invokes()
        while not self._queue.is_empty():
            self._block_once()

    # -- the queue ---------------------------------------------------------------------
    def _add_record(self, value: Any, timestamp: Any) -> None:
        q = self._queue
        if q.is_full():
            self._flush_invokes()
            while q.is_full():
                self._block_once()
        entry = q.add_record(value, timestamp)
        if self.timeout_ms > 0:
            entry.deadline = self._clock.current_processing_time() + self.timeout_ms
            self._timeouts.append(entry)
            if self._timer_at is None:
                self._arm_timer(entry.deadline)
        entry.attempt = 1
        self._invokes.append((entry, 1))

    def _flush_invokes(self) -> None:
        calls = self._invokes
        if calls:
            self._invokes = []
            self._executor.invoke(calls)

    def _block_once(self) -> None:
        """Wait (in the task's thread) for an outcome or the next timer, then act on it."""
        if self._cancelled():
            raise AsyncTaskCancelled(f"{self.name}: task cancelled while waiting for results")
        wait = _MAX_BLOCK_S
        nxt = self._next_deadline()
        if nxt is not None:
            wait = min(wait, max(0.0, (nxt - self._clock.current_processing_time()) / 1000.0))
        if not self._inbox and wait > 0:
            self._executor.wait(wait)
        self.drain()

    def _on_done(self, entry: AsyncEntry, attempt: int, ok: bool, value: Any) -> None:
        """An attempt ended (the executor's thread): hand it to the task's thread."""
        self._inbox.append((entry, attempt, ok, value))
        if self._mailbox is not None and not self._mail_pending:
            self._mail_pending = True
            self._mailbox(self._from_mailbox)

    def _from_mailbox(self) -> None:
        self._mail_pending = False
        self.drain()

    def drain(self) -> None:
        """Act on reported outcomes and due timers, then emit what is ready (task thread)."""
        inbox, q = self._inbox, self._queue
        while inbox:
            entry, attempt, ok, value = inbox.popleft()
            if entry.done or attempt != entry.attempt:
                continue  # timed out meanwhile, or a stale attempt
            if ok:
                self._on_result(entry, value)
            else:
                self._on_error(entry, value)
        self._fire_due(self._clock.current_processing_time())
        self._flush_invokes()
        ready = q.pop_ready()
        if ready:
            self._emit(ready)

    def _on_result(self, entry: AsyncEntry, results: Any) -> None:
        if isinstance(results, (list, tuple)):
            results = list(results)
        elif results is None:
            results = []
        else:
            raise self.user_error(TypeError(
                f"async_invoke must return a list of results, got {type(results).__name__}: "
                f"{results!r}"))
        pred = self._result_retry
        if pred is not None and self._test(pred, results) and self._retry(entry):
            return
        self._queue.complete(entry, results)

    def _on_error(self, entry: AsyncEntry, error: BaseException) -> None:
        pred = self._error_retry
        if pred is not None and self._test(pred, error) and self._retry(entry):
            return
        raise self.user_error(error) from error

    def _test(self, predicate: Callable[[Any], bool], value: Any) -> bool:
        try:
            return bool(predicate(value))
        except Exception as e:
            raise self.user_error(e) from e

    def _retry(self, entry: AsyncEntry) -> bool:
        strategy = self.retry_strategy
        if not strategy.can_retry(entry.attempt):
            return False
        delay = max(0, int(strategy.get_backoff_time_millis(entry.attempt)))
        entry.attempt += 1  # a late outcome of the previous attempt is now stale
        due = self._clock.current_processing_time() + delay
        heapq.heappush(self._retries, (due, next(self._seq), entry))
        self._arm_timer(due)
        return True

    # -- timers ------------------------------------------------------------------------
    def _next_deadline(self) -> Optional[int]:
        t = self._timeouts
        while t and t[0].done:
            t.popleft()
        candidates = []
        if t:
            candidates.append(t[0].deadline)
        if self._retries:
            candidates.append(self._retries[0][0])
        return min(candidates) if candidates else None

    def _arm_timer(self, at: int) -> None:
        if self._timer_at is not None and self._timer_at <= at:
            return
        self._timer_at = at
        self._clock.register_timer(at, self._on_timer)

    def _on_timer(self, ts: int) -> None:
        if self._timer_at == ts:
            self._timer_at = None
        self.drain()

    def _fire_due(self, now: int) -> None:
        retries, q = self._retries, self._queue
        calls = []
        while retries and retries[0][0] <= now:
            _, _, entry = heapq.heappop(retries)
            if not entry.done:
                calls.append((entry, entry.attempt))
        if calls:
            self._executor.invoke(calls)
        t = self._timeouts
        while t and (t[0].done or t[0].deadline <= now):
            entry = t.popleft()
            if entry.done:
                continue
            self._executor.cancel(entry)
            entry.attempt += 1  # any later outcome is stale
            try:
                results = self.fn.timeout(entry.value)
            except Exception as e:
                raise self.user_error(e) from e
            q.complete(entry, list(results) if results is not None else [])
        nxt = self._next_deadline()
        if nxt is not None and (self._timer_at is None or self._timer_at > nxt):
            self._arm_timer(nxt)

    # -- output ------------------------------------------------------------------------
    def _emit(self, ready: List[Tuple[str, Any]]) -> None:
        out = self.output
        records: List[Any] = []
        stamps: List[Any] = []
        for kind, item in ready:
            if kind == "record":
                n = len(item.results)
                if n:
                    records.extend(item.results)
                    stamps.extend([item.timestamp] * n)
            else:
                if records:
                    out.emit(records, _stamps(stamps))
                    records, stamps = [], []
                out.emit_watermark(item)
        if records:
            out.emit(records, _stamps(stamps))

    # -- checkpoints -------------------------------------------------------------------
    def snapshot_state(self, context: StateSnapshotContext) -> None:
        """Keep every record not yet emitted (and the watermarks between them)."""
        super().snapshot_state(context)
        if self._state is None:
            raise RuntimeError(f"{self.name}: snapshot without initialize_state")
        self._flush_invokes()
        items = []
        for kind, item in self._queue.elements():
            if kind == "record":
                items.append(("record", item.value, item.timestamp))
            else:
                items.append(("watermark", item, None))
        self._state.update(items)


def _stamps(stamps: List[Any]) -> Optional[List[Any]]:
    return None if all(s is None for s in stamps) else stamps
