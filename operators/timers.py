"""Timers as keyed state (Flink's ``InternalTimerService``).

Every timer is ``(timestamp, key, namespace)`` in one of two time domains. The timers of a
key live in the keyed state backend (a map state per domain, ``(timestamp, namespace)`` ->
``None``), so they are in every checkpoint of either backend, in the key group of their key,
and move with their key group when state is restored at another parallelism. An in-memory
priority queue over the same timers is only a cache: :meth:`InternalTimerService.restore`
rebuilds it from the state.

>>> from flowray.common.clock import ManualClock
>>> from flowray.operators.base import ProcessingTimeService
>>> from flowray.state.heap_backend import HeapKeyedStateBackend
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> fired = []
>>> timers = InternalTimerService("op", backend, ProcessingTimeService(ManualClock()),
...     lambda ts, ns: fired.append((backend.get_current_key(), ts)), lambda ts, ns: None)
>>> backend.set_current_key("a"); timers.register_event_time_timer(None, 10)
>>> timers.register_event_time_timer(None, 10)   # one timer per (key, timestamp, namespace)
>>> backend.set_current_key("b"); timers.register_event_time_timer(None, 5)
>>> timers.advance_watermark(10); fired
[('b', 5), ('a', 10)]
"""

from __future__ import annotations

import heapq
import numbers
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Set, Tuple

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.common.native import native
from flowray.common.sentinels import MISSING
from flowray.state.descriptors import MapStateDescriptor, StateKind
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.keyed_backend import KeyedStateBackend

from flowray.operators.functions import TimeDomain

__all__ = ["InternalTimerService", "timer_state_name"]

#: fired with the timer's key current on the backend: ``callback(timestamp, namespace)``
TimerCallback = Callable[[int, Any], None]
#: fired with no key made current: ``callback(timestamp, [(key, key group, namespace)])``,
#: the due timers of one timestamp in the order registered (:meth:`InternalTimerService.
#: fire_event_time_in_batches`)
BatchTimerCallback = Callable[[int, List[Tuple[Any, int, Any]]], None]


def timer_state_name(service: str, domain: TimeDomain) -> str:
    """The keyed state holding one timer service's timers of ``domain``."""
    suffix = "event" if domain is TimeDomain.EVENT_TIME else "processing"
    return f"_timer_state/{suffix}_{service}"


def _register_timers_py(timers: Iterable[Tuple[Any, int, Any, int]],
                        live: Set[Tuple[int, Any, Any]], maps: List[Dict[Any, Any]],
                        shared: List[Any], first: int,
                        buckets: Dict[int, Deque[Tuple[Any, int, Any]]], times: List[int],
                        heappush: Callable[[List[int], int], None],
                        put: Callable[[Any, int, int, Any], None]) -> Optional[Tuple[Any, int]]:
    """Add each ``(key, key group, namespace, timestamp)`` of ``timers`` not in ``live``
    to ``live``, to its timestamp's FIFO in ``buckets`` (a new FIFO's timestamp pushed on
    ``times`` with ``heappush``) and to the timer state: straight into the heap's dicts
    (``maps[key group - first][key][(timestamp, namespace)] = None``) where ``shared``
    of that offset is None, through ``put(key, key group, timestamp, namespace)``
    otherwise (an offset out of range too). Gives the (key, key group) of the last new
    timer when it went into the dicts, None when it went through ``put`` or none was new.
    (The C half is ``flowray.operators._timers.register_timers``.)"""
    groups = len(maps)
    last: Any = None
    bucket: Any = None
    newest: Optional[Tuple[Any, int]] = None
    for key, key_group, namespace, timestamp in timers:
        entry = (timestamp, key, namespace)
        if entry in live:
            continue
        off = key_group - first
        if 0 <= off < groups and shared[off] is None:
            m = maps[off]
            d = m.get(key)
            if d is None:
                m[key] = {(timestamp, namespace): None}
            else:
                d[(timestamp, namespace)] = None
            newest = (key, key_group)
        else:
            put(key, key_group, timestamp, namespace)
            newest = None
        live.add(entry)
        if bucket is None or timestamp != last:  # _TimerQueue.add, inlined
            bucket = buckets.get(timestamp)
            if bucket is None:
                bucket = buckets[timestamp] = deque()
                heappush(times, timestamp)
            last = timestamp
        bucket.append((key, key_group, namespace))
    return newest


def _take_due_timers_py(timestamp: int, timers: List[Tuple[Any, int, Any]],
                        live: Set[Tuple[int, Any, Any]], maps: List[Dict[Any, Any]],
                        shared: List[Any], first: int,
                        remove: Callable[[Any, int, int, Any], None]
                        ) -> List[Tuple[Any, int, Any]]:
    """The ``(key, key group, namespace)`` of ``timers`` (one timestamp's FIFO, taken out
    of the queue) still in ``live``, in order, each taken out of ``live`` and of the timer
    state: of the heap's dicts where ``shared`` of its offset is None (a key left without
    timers leaves its dict), through ``remove(key, key group, timestamp, namespace)``
    otherwise. (The C half is ``flowray.operators._timers.take_due_timers``.)"""
    groups = len(maps)
    due: List[Tuple[Any, int, Any]] = []
    for timer in timers:
        key, kg, ns = timer
        entry = (timestamp, key, ns)
        if entry not in live:
            continue  # deleted
        live.discard(entry)
        due.append(timer)
        off = kg - first
        if 0 <= off < groups and shared[off] is None:  # HeapMapState.remove
            m = maps[off]
            d = m.get(key)
            if d is not None and d.pop((timestamp, ns), MISSING) is not MISSING and not d:
                del m[key]
        else:
            remove(key, kg, timestamp, ns)
    return due


# the C halves of the two above (operators/_timers.c), or the twins
_timers: Any = native("flowray.operators._timers")
_register_timers = (_timers.register_timers if _timers is not None
                    else _register_timers_py)
_take_due_timers = (_timers.take_due_timers if _timers is not None
                    else _take_due_timers_py)


class _TimerQueue:
    """Timers of one domain, fired in timestamp order and, within a timestamp, in the
    order registered: per timestamp a FIFO of ``(key, key group, namespace)`` (``buckets``),
    the timestamps with a FIFO in a heap (``times``), over a set of live timers. A deleted
    timer stays in its FIFO until it comes up and is skipped then; an emptied FIFO leaves
    with its timestamp when that comes up. (Most timers share a few timestamps, as the
    windows of all keys end together: one heap entry per timestamp, not per timer.)"""

    __slots__ = ("times", "buckets", "live")

    def __init__(self) -> None:
        self.times: List[int] = []
        self.buckets: Dict[int, Deque[Tuple[Any, int, Any]]] = {}
        self.live: Set[Tuple[int, Any, Any]] = set()

    def add(self, timestamp: int, key: Any, key_group: int, namespace: Any) -> bool:
        entry = (timestamp, key, namespace)
        if entry in self.live:
            return False
        self.live.add(entry)
        bucket = self.buckets.get(timestamp)
        if bucket is None:
            bucket = self.buckets[timestamp] = deque()
            heapq.heappush(self.times, timestamp)
        bucket.append((key, key_group, namespace))
        return True

    def due(self, time: int) -> Optional[Tuple[int, Deque[Tuple[Any, int, Any]]]]:
        """The earliest timestamp at or before ``time`` whose FIFO is not empty, and that
        FIFO (emptied ones leave on the way); None when nothing is due."""
        times, buckets = self.times, self.buckets
        while times:
            ts = times[0]
            if ts > time:
                return None
            bucket = buckets[ts]
            if bucket:
                return ts, bucket
            heapq.heappop(times)
            del buckets[ts]
        return None

    def remove(self, timestamp: int, key: Any, namespace: Any) -> bool:
        entry = (timestamp, key, namespace)
        if entry not in self.live:
            return False
        self.live.discard(entry)
        return True

    def __len__(self) -> int:
        return len(self.live)


class InternalTimerService:
    """Timers of one operator. Register and delete with the timer's key current on the
    backend; ``on_event_time`` / ``on_processing_time`` fire with the key current again.

    Contract: a timer fires once per ``(key, timestamp, namespace)`` however often it was
    registered; event-time timers fire in timestamp order when the watermark reaches them
    (:meth:`advance_watermark`); processing-time timers fire from the task loop once the
    clock passes them, including those that fell due while the task was down.
    """

    def __init__(self, name: str, backend: KeyedStateBackend, processing_time_service: Any,
                 on_event_time: TimerCallback, on_processing_time: TimerCallback) -> None:
        self.name = name
        self._backend = backend
        self._pts = processing_time_service
        self._callbacks = {TimeDomain.EVENT_TIME: on_event_time,
                           TimeDomain.PROCESSING_TIME: on_processing_time}
        self._queues = {TimeDomain.EVENT_TIME: _TimerQueue(),
                        TimeDomain.PROCESSING_TIME: _TimerQueue()}
        self._states = {d: backend.get_partitioned_state(
            MapStateDescriptor(timer_state_name(name, d))) for d in TimeDomain}
        # the per-record path reaches these without hashing the enum
        self._event_queue = self._queues[TimeDomain.EVENT_TIME]
        self._event_live = self._event_queue.live
        self._event_state = self._states[TimeDomain.EVENT_TIME]
        # on the heap the event-time timers' dicts are written directly by the batch paths
        # (register_event_time_timers, batch firing), as HeapMapState's put and remove do
        self._event_table = (backend.get_state_table(
            timer_state_name(name, TimeDomain.EVENT_TIME), StateKind.MAP)
            if isinstance(backend, HeapKeyedStateBackend) else None)
        self._on_event_time_batch: Optional[BatchTimerCallback] = None
        self._scheduled: Set[int] = set()
        self.current_watermark = MIN_WATERMARK

    def fire_event_time_in_batches(self, callback: BatchTimerCallback) -> None:
        """Fire due event-time timers a timestamp at a time through ``callback(timestamp,
        timers)`` instead of the per-timer callback: ``timers`` are the live ``(key, key
        group, namespace)`` of that timestamp, in the order registered, already removed
        from the queue and the state, and no key is made current for them. For an
        operator whose timer callbacks register and delete no timers at or before the
        timestamp firing (the window operator's aligned windows): the timers fire as the
        per-timer path would fire them. Timers registered meanwhile fire in a next batch."""
        self._on_event_time_batch = callback

    # -- registering -------------------------------------------------------------------
    def _register(self, domain: TimeDomain, namespace: Any, timestamp: int) -> bool:
        if type(timestamp) is not int:
            if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Integral):
                raise TypeError(f"a timer's timestamp must be an int (milliseconds), got "
                                f"{timestamp!r}")
            timestamp = int(timestamp)  # e.g. numpy.int64
        backend = self._backend
        key = backend.get_current_key()
        if not self._queues[domain].add(timestamp, key, backend.get_current_key_group(),
                                        namespace):
            return False
        self._states[domain].put((timestamp, namespace), None)
        return True

    def register_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        if type(timestamp) is int:  # the common case, inlined: most calls find the timer
            key = self._backend.get_current_key()
            if (timestamp, key, namespace) in self._event_live:
                return
            self._event_queue.add(timestamp, key, self._backend.get_current_key_group(),
                                  namespace)
            self._event_state.put((timestamp, namespace), None)
            return
        self._register(TimeDomain.EVENT_TIME, namespace, timestamp)

    def register_event_time_timers(self, timers: Iterable[Tuple[Any, int, Any, int]]) -> None:
        """Register event-time timers of several keys at once: ``(key, key group,
        namespace, timestamp)`` each, keys as the backend stores them and timestamps as
        ints. The same as making each key current and calling
        :meth:`register_event_time_timer`; the key of the last new timer stays current."""
        queue = self._event_queue
        maps, shared, first = self._event_timer_dicts()
        newest = _register_timers(timers, queue.live, maps, shared, first, queue.buckets,
                                  queue.times, heapq.heappush, self._put_event_timer)
        if newest is not None:
            self._backend.set_current_key(*newest)

    def _event_timer_dicts(self) -> Tuple[List[Dict[Any, Any]], List[Any], int]:
        """What the batch paths write event-time timers into directly: the heap's
        key-group dicts, which of them a pending snapshot holds, and the first key group
        (HeapMapState's put and remove); nothing off the heap (all through the backend)."""
        table = self._event_table
        if table is None:
            return [], [], 0
        return table.maps, table.shared, self._backend.key_group_range.start

    def _put_event_timer(self, key: Any, key_group: int, timestamp: int,
                         namespace: Any) -> None:
        """A timer into the state through the backend: not the heap, a key group out of
        range (``set_current_key`` says so) or held by a pending snapshot."""
        self._backend.set_current_key(key, key_group)
        self._event_state.put((timestamp, namespace), None)

    def _remove_event_timer(self, key: Any, key_group: int, timestamp: int,
                            namespace: Any) -> None:
        """A fired timer out of the state through the backend (as ``_put_event_timer``)."""
        self._backend.set_current_key(key, key_group)
        self._event_state.remove((timestamp, namespace))

    def register_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        if self._register(TimeDomain.PROCESSING_TIME, namespace, timestamp):
            self._schedule(int(timestamp))

    def _delete(self, domain: TimeDomain, namespace: Any, timestamp: int) -> None:
        if self._queues[domain].remove(timestamp, self._backend.get_current_key(), namespace):
            self._states[domain].remove((timestamp, namespace))

    def delete_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._delete(TimeDomain.EVENT_TIME, namespace, timestamp)

    def delete_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._delete(TimeDomain.PROCESSING_TIME, namespace, timestamp)

    def current_processing_time(self) -> int:
        return self._pts.current_processing_time()

    def num_timers(self, domain: TimeDomain) -> int:
        return len(self._queues[domain])

    # -- firing ------------------------------------------------------------------------
    def _fire_until(self, domain: TimeDomain, time: int) -> None:
        if domain is TimeDomain.EVENT_TIME and self._on_event_time_batch is not None:
            return self._fire_batches_until(time)
        queue, state = self._queues[domain], self._states[domain]
        set_key, remove, callback = self._backend.set_current_key, state.remove, \
            self._callbacks[domain]
        due, live = queue.due, queue.live
        while True:  # the first live timer, each time: a callback may add timers
            next_due = due(time)
            if next_due is None:
                return
            ts, bucket = next_due
            key, kg, ns = bucket.popleft()
            entry = (ts, key, ns)
            if entry not in live:
                continue  # deleted
            live.discard(entry)
            set_key(key, kg)
            remove((ts, ns))
            callback(ts, ns)

    def _fire_batches_until(self, time: int) -> None:
        """``_fire_until`` of event time through the batch callback: each due timestamp's
        live timers taken out of the queue and the state, then handed over at once."""
        queue, callback = self._event_queue, self._on_event_time_batch
        live, remove = queue.live, self._remove_event_timer
        maps, shared, first = self._event_timer_dicts()
        while True:
            next_due = queue.due(time)
            if next_due is None:
                return
            ts, bucket = next_due
            timers = list(bucket)   # nothing adds to it before the callback
            bucket.clear()
            callback(ts, _take_due_timers(ts, timers, live, maps, shared, first, remove))

    def advance_watermark(self, watermark: int) -> None:
        """Event time reached ``watermark``: fire every event-time timer at or before it."""
        self.current_watermark = watermark
        self._fire_until(TimeDomain.EVENT_TIME, watermark)

    def fire_all_processing_time(self) -> None:
        """BATCH end of input: every processing-time timer fires now (as in Flink)."""
        self._fire_until(TimeDomain.PROCESSING_TIME, MAX_WATERMARK)

    def _schedule(self, timestamp: int) -> None:
        if timestamp not in self._scheduled:
            self._scheduled.add(timestamp)
            self._pts.register_timer(timestamp, self._on_processing_time)

    def _on_processing_time(self, timestamp: int) -> None:
        self._scheduled.discard(timestamp)
        self._fire_until(TimeDomain.PROCESSING_TIME, timestamp)

    # -- recovery ----------------------------------------------------------------------
    def restore(self) -> int:
        """Rebuild the queues from the keyed state (after the backend was restored) and
        schedule the processing-time timers; returns how many timers there are."""
        backend = self._backend
        restored = 0
        for domain in TimeDomain:
            state, queue = self._states[domain], self._queues[domain]
            name = timer_state_name(self.name, domain)
            for key in list(backend.get_keys(name)):
                backend.set_current_key(key)
                kg = backend.get_current_key_group()
                for ts, ns in state.keys():
                    if queue.add(ts, key, kg, ns):
                        restored += 1
                        if domain is TimeDomain.PROCESSING_TIME:
                            self._schedule(ts)
        return restored

    def timers_by_key(self, domain: TimeDomain) -> Dict[Any, List[Tuple[int, Any]]]:
        """Live timers of ``domain`` per key (for tests and diagnostics), each key's in
        the order they fire: by timestamp, then as registered."""
        queue = self._queues[domain]
        live, seen = queue.live, set()
        out: Dict[Any, List[Tuple[int, Any]]] = {}
        for ts in sorted(queue.buckets):
            for key, _, ns in queue.buckets[ts]:
                entry = (ts, key, ns)
                if entry in live and entry not in seen:  # (a FIFO keeps deleted timers)
                    seen.add(entry)
                    out.setdefault(key, []).append((ts, ns))
        return out
