"""Watermark strategies (``pyflink.common.watermark_strategy``) and their runtime side.

A :class:`WatermarkStrategy` is an immutable, picklable definition: builder methods return
new strategies. At run time each subtask asks it for a :class:`WatermarkGenerator`
(:meth:`WatermarkStrategy.create_watermark_generator`) and an optional
:class:`TimestampAssigner` (:meth:`WatermarkStrategy.create_timestamp_assigner`). PyFlink
builds these in Java; here they are pure Python with the semantics of Flink's
``BoundedOutOfOrdernessWatermarks``, ``AscendingTimestampsWatermarks``,
``NoWatermarksGenerator`` and ``WatermarksWithIdleness``.

>>> out = ListWatermarkOutput()
>>> gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10)) \\
...     .create_watermark_generator()
>>> gen.on_periodic_emit(out)                     # nothing before the first event
>>> gen.on_events(["a", "b"], [100, 250], out)
>>> gen.on_periodic_emit(out)                     # 250 - 10 - 1
>>> out.events
[('watermark', 239)]
"""

from __future__ import annotations

import abc
import inspect
import numbers
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from flowray.common.clock import Clock, SystemClock
from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.common.time import Duration

__all__ = [
    "TimestampAssigner",
    "FunctionTimestampAssigner",
    "WatermarkOutput",
    "ListWatermarkOutput",
    "WatermarkGenerator",
    "BoundedOutOfOrdernessWatermarks",
    "AscendingTimestampsWatermarks",
    "NoWatermarksGenerator",
    "WatermarksWithIdleness",
    "CheckedWatermarkOutput",
    "WatermarkAlignmentParams",
    "WatermarkStrategy",
    "extract_timestamps",
]


# ---------------------------------------------------------------------------------------
# timestamp assigners
# ---------------------------------------------------------------------------------------

class TimestampAssigner(abc.ABC):
    """Assigns event-time timestamps (int milliseconds since the epoch) to records.

    >>> class First(TimestampAssigner):
    ...     def extract_timestamp(self, value, record_timestamp):
    ...         return value[0]
    >>> First().extract_timestamp((42, "x"), MIN_WATERMARK)
    42
    """

    @abc.abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """The timestamp of ``value``. ``record_timestamp`` is the timestamp the record
        already carries, or ``MIN_WATERMARK`` (Java's ``Long.MIN_VALUE``) when it has none."""


class FunctionTimestampAssigner(TimestampAssigner):
    """A plain ``(value, record_timestamp) -> int`` function as an assigner.

    >>> FunctionTimestampAssigner(lambda v, ts: v["t"]).extract_timestamp({"t": 3}, 0)
    3
    >>> FunctionTimestampAssigner(lambda v: v)
    Traceback (most recent call last):
    ...
    TypeError: timestamp assigner <lambda> must take two arguments (value, record_timestamp)
    """

    def __init__(self, fn: Callable[[Any, int], int]) -> None:
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"FunctionTimestampAssigner needs a function, got {fn!r}")
        self.fn = _check_assigner(fn)

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self.fn(value, record_timestamp)

    def __repr__(self) -> str:
        return _callable_name(self.fn)


def _callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _assigner_name(assigner: Any) -> str:
    if isinstance(assigner, FunctionTimestampAssigner):
        return _callable_name(assigner.fn)
    return type(assigner).__qualname__


def _check_assigner(assigner: Any) -> Any:
    """The assigner to store: a TimestampAssigner (or duck-typed object with
    ``extract_timestamp``) as is, or a two-argument callable."""
    if isinstance(assigner, type):
        raise TypeError(f"with_timestamp_assigner() needs an instance, got the class "
                        f"{assigner.__qualname__}; write {assigner.__qualname__}()")
    if callable(getattr(assigner, "extract_timestamp", None)):
        return assigner
    if not callable(assigner):
        raise TypeError(f"with_timestamp_assigner() needs a TimestampAssigner or a function "
                        f"(value, record_timestamp) -> int, got {assigner!r}")
    try:
        inspect.signature(assigner).bind(None, None)
    except TypeError:
        raise TypeError(f"timestamp assigner {_callable_name(assigner)} must take two "
                        f"arguments (value, record_timestamp)") from None
    except ValueError:  # no signature available (some builtins): find out at run time
        pass
    return assigner


def extract_timestamps(assigner: TimestampAssigner, records: Sequence[Any],
                       previous_timestamps: Optional[Sequence[Optional[int]]],
                       operator_name: str) -> List[int]:
    """Calls ``assigner`` once per record and returns the timestamps, all ints.

    ``previous_timestamps[i]`` is the timestamp ``records[i]`` carries (``None`` for none);
    ``previous_timestamps`` itself may be ``None`` when no record has one. A record without
    a timestamp is passed ``MIN_WATERMARK``, as Flink passes ``Long.MIN_VALUE``. Integral
    values such as ``numpy.int64`` become ints; anything else (``bool``, ``float``, ``None``)
    raises ``TypeError`` naming the operator, the assigner, the record and the value.

    >>> extract_timestamps(FunctionTimestampAssigner(lambda v, ts: v * 10), [1, 2], None, "ts")
    [10, 20]
    >>> extract_timestamps(FunctionTimestampAssigner(lambda v, ts: v / 2), [3], None, "ts")
    Traceback (most recent call last):
    ...
    TypeError: operator 'ts': timestamp assigner <lambda> returned 1.5 (float) for record 3; a timestamp must be an int (milliseconds since the epoch): wrap it in int(...)
    """
    extract = assigner.extract_timestamp
    if previous_timestamps is None:
        out = [extract(r, MIN_WATERMARK) for r in records]
    else:
        if len(previous_timestamps) != len(records):
            raise ValueError(f"operator '{operator_name}': {len(records)} records but "
                             f"{len(previous_timestamps)} previous timestamps")
        out = [extract(r, MIN_WATERMARK if p is None else p)
               for r, p in zip(records, previous_timestamps)]
    for t in out:
        if type(t) is not int:
            break
    else:
        return out
    checked = []
    for record, t in zip(records, out):
        if type(t) is not int:
            if isinstance(t, numbers.Integral) and not isinstance(t, bool):
                t = int(t)
            else:
                hint = ": wrap it in int(...)" if isinstance(t, numbers.Real) \
                    and not isinstance(t, bool) else ""
                raise TypeError(
                    f"operator '{operator_name}': timestamp assigner {_assigner_name(assigner)}"
                    f" returned {t!r} ({type(t).__name__}) for record {_short(record)}; a "
                    f"timestamp must be an int (milliseconds since the epoch){hint}")
        checked.append(t)
    return checked


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------------------
# watermark outputs and generators (Flink's org.apache.flink.api.common.eventtime)
# ---------------------------------------------------------------------------------------

class WatermarkOutput(abc.ABC):
    """Where a generator sends watermarks and idleness."""

    @abc.abstractmethod
    def emit_watermark(self, timestamp: int) -> None:
        """Event time reached ``timestamp``: no record with a timestamp <= it should follow."""

    @abc.abstractmethod
    def mark_idle(self) -> None:
        """This output holds no watermark back until it emits or is marked active again."""

    @abc.abstractmethod
    def mark_active(self) -> None:
        """This output is active again after :meth:`mark_idle`."""


class ListWatermarkOutput(WatermarkOutput):
    """Records what it is sent, in order, in ``events``: ``('watermark', ts)``, ``'idle'``,
    ``'active'`` (for tests)."""

    def __init__(self) -> None:
        self.events: List[Any] = []

    def emit_watermark(self, timestamp: int) -> None:
        self.events.append(("watermark", timestamp))

    def mark_idle(self) -> None:
        self.events.append("idle")

    def mark_active(self) -> None:
        self.events.append("active")

    @property
    def watermarks(self) -> List[int]:
        return [e[1] for e in self.events if isinstance(e, tuple)]


class WatermarkGenerator(abc.ABC):
    """Generates watermarks from events (punctuated, in :meth:`on_event`) or periodically
    (:meth:`on_periodic_emit`, called every ``pipeline.auto-watermark-interval``).

    The operator calls :meth:`on_events` once per batch; its default calls :meth:`on_event`
    per record, so a subclass needs only the two abstract methods.

    >>> class EveryEvent(WatermarkGenerator):
    ...     def on_event(self, event, event_timestamp, output):
    ...         output.emit_watermark(event_timestamp)
    ...     def on_periodic_emit(self, output):
    ...         pass
    >>> out = ListWatermarkOutput()
    >>> EveryEvent().on_events(["a", "b"], [5, 7], out)
    >>> out.watermarks
    [5, 7]
    """

    @abc.abstractmethod
    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for each record with its timestamp."""

    @abc.abstractmethod
    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called periodically; may emit a watermark."""

    def on_events(self, events: Sequence[Any], timestamps: Sequence[int],
                  output: WatermarkOutput) -> None:
        """Called once per batch; ``timestamps[i]`` belongs to ``events[i]``."""
        on_event = self.on_event
        for event, ts in zip(events, timestamps):
            on_event(event, ts, output)


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Periodic watermarks for records at most ``max_out_of_orderness`` late: watermark =
    highest timestamp seen - out-of-orderness (ms) - 1. Emits nothing before the first
    event, and only watermarks higher than the last it emitted.

    >>> g = BoundedOutOfOrdernessWatermarks(Duration.of_seconds(1)); out = ListWatermarkOutput()
    >>> g.on_events([None] * 3, [5000, 9000, 7000], out); g.on_periodic_emit(out)
    >>> g.on_periodic_emit(out); out.watermarks
    [7999]
    """

    def __init__(self, max_out_of_orderness: Duration) -> None:
        if not isinstance(max_out_of_orderness, Duration):
            raise TypeError(f"max_out_of_orderness must be a Duration, got "
                            f"{max_out_of_orderness!r}")
        if max_out_of_orderness.is_negative():
            raise ValueError(f"max_out_of_orderness cannot be negative, got "
                             f"{max_out_of_orderness!r}")
        self.out_of_orderness_ms = max_out_of_orderness.to_milliseconds()
        self.max_timestamp: Optional[int] = None
        self._last_emitted: Optional[int] = None

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if self.max_timestamp is None or event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def on_events(self, events: Sequence[Any], timestamps: Sequence[int],
                  output: WatermarkOutput) -> None:
        if timestamps:
            highest = max(timestamps)
            if self.max_timestamp is None or highest > self.max_timestamp:
                self.max_timestamp = highest

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.max_timestamp is None:
            return
        watermark = self.max_timestamp - self.out_of_orderness_ms - 1
        if self._last_emitted is None or watermark > self._last_emitted:
            self._last_emitted = watermark
            output.emit_watermark(watermark)


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """Watermarks for ascending timestamps: bounded out-of-orderness of zero
    (watermark = highest timestamp - 1)."""

    def __init__(self) -> None:
        super().__init__(Duration.ZERO)


class NoWatermarksGenerator(WatermarkGenerator):
    """Never emits a watermark (processing-time pipelines)."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_events(self, events: Sequence[Any], timestamps: Sequence[int],
                  output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


class WatermarksWithIdleness(WatermarkGenerator):
    """Wraps ``watermarks`` and marks the output idle when no event arrived for longer than
    ``idle_timeout``, and active again on the next event.

    As Flink's, idleness is checked only in :meth:`on_periodic_emit`: the first periodic
    call that sees no event since the previous call starts the inactivity clock
    (``clock.now_ms()``), and a later one marks idle once more than ``idle_timeout`` has
    passed since then. While idle, the wrapped generator's periodic emit is skipped.

    >>> from flowray.common.clock import ManualClock
    >>> clock = ManualClock(0); out = ListWatermarkOutput()
    >>> g = WatermarksWithIdleness(NoWatermarksGenerator(), Duration.of_millis(100), clock)
    >>> g.on_periodic_emit(out); clock.advance(101); g.on_periodic_emit(out)
    >>> g.on_event("x", 1, out); out.events
    ['idle', 'active']
    """

    def __init__(self, watermarks: WatermarkGenerator, idle_timeout: Duration,
                 clock: Clock) -> None:
        if not isinstance(idle_timeout, Duration):
            raise TypeError(f"idle_timeout must be a Duration, got {idle_timeout!r}")
        if idle_timeout.to_milliseconds() <= 0:
            raise ValueError(f"idle_timeout must be at least 1 ms, got {idle_timeout!r}")
        self.watermarks = watermarks
        self.idle_timeout_ms = idle_timeout.to_milliseconds()
        self._clock = clock
        self._counter = 0
        self._last_counter = 0
        self._inactive_since: Optional[int] = None
        self.idle = False

    def _activity(self, output: WatermarkOutput) -> None:
        self._counter += 1
        if self.idle:
            self.idle = False
            output.mark_active()

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self._activity(output)
        self.watermarks.on_event(event, event_timestamp, output)

    def on_events(self, events: Sequence[Any], timestamps: Sequence[int],
                  output: WatermarkOutput) -> None:
        if events:
            self._activity(output)
            self.watermarks.on_events(events, timestamps, output)

    def _idle_now(self) -> bool:
        if self._counter != self._last_counter:
            self._last_counter = self._counter
            self._inactive_since = None
            return False
        now = self._clock.now_ms()
        if self._inactive_since is None:
            self._inactive_since = now
            return False
        return now - self._inactive_since > self.idle_timeout_ms

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._idle_now():
            if not self.idle:
                self.idle = True
                output.mark_idle()
        else:
            self.watermarks.on_periodic_emit(output)


class CheckedWatermarkOutput(WatermarkOutput):
    """Guards ``output`` against a user-defined generator: a watermark must be an int (not a
    bool), within 0..MAX_WATERMARK, and not lower than the last one, else ``ValueError``
    naming the operator and the value. Forwards only watermarks that advance.

    >>> out = CheckedWatermarkOutput(ListWatermarkOutput(), "my source")
    >>> out.emit_watermark(10); out.emit_watermark(10)
    >>> out.emit_watermark(9)
    Traceback (most recent call last):
    ...
    ValueError: operator 'my source': watermark 9 is lower than the previous one, 10 (watermarks must not go back)
    """

    def __init__(self, output: WatermarkOutput, operator_name: str) -> None:
        self.output = output
        self.operator_name = operator_name
        self.last: Optional[int] = None

    def emit_watermark(self, timestamp: int) -> None:
        if type(timestamp) is not int:
            if isinstance(timestamp, numbers.Integral) and not isinstance(timestamp, bool):
                timestamp = int(timestamp)
            else:
                raise ValueError(f"operator '{self.operator_name}': watermark {timestamp!r} "
                                 f"({type(timestamp).__name__}) is not an int")
        if timestamp < 0 or timestamp > MAX_WATERMARK:
            raise ValueError(f"operator '{self.operator_name}': watermark {timestamp} is out "
                             f"of range (0..{MAX_WATERMARK})")
        if self.last is not None:
            if timestamp < self.last:
                raise ValueError(f"operator '{self.operator_name}': watermark {timestamp} is "
                                 f"lower than the previous one, {self.last} (watermarks "
                                 f"must not go back)")
            if timestamp == self.last:
                return
        self.last = timestamp
        self.output.emit_watermark(timestamp)

    def mark_idle(self) -> None:
        self.output.mark_idle()

    def mark_active(self) -> None:
        self.output.mark_active()


# ---------------------------------------------------------------------------------------
# the strategy
# ---------------------------------------------------------------------------------------

class WatermarkAlignmentParams(NamedTuple):
    """What :meth:`WatermarkStrategy.with_watermark_alignment` was given."""

    watermark_group: str
    max_allowed_watermark_drift: Duration
    update_interval: Duration


_BOUNDED = "bounded_out_of_orderness"
_MONOTONOUS = "monotonous_timestamps"
_NONE = "no_watermarks"
_GENERATOR = "generator"

_DEFAULT_ALIGNMENT_UPDATE_INTERVAL = Duration.of_millis(1000)


def _check_duration(what: str, value: Any) -> Duration:
    if not isinstance(value, Duration):
        hint = ""
        if type(value).__name__ == "Time":
            hint = " (Duration.of_millis(t.to_milliseconds()) converts a Time)"
        raise TypeError(f"{what} must be a Duration, got {value!r}{hint}")
    return value


def _strategy_from_state(state: Tuple[Any, ...]) -> "WatermarkStrategy":
    strategy = object.__new__(WatermarkStrategy)
    for name, value in zip(WatermarkStrategy.__slots__, state):
        object.__setattr__(strategy, name, value)
    return strategy


class WatermarkStrategy:
    """How a source (or ``assign_timestamps_and_watermarks``) assigns timestamps and
    generates watermarks. Immutable: every ``with_*`` returns a new strategy.

    >>> s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20)) \\
    ...     .with_idleness(Duration.of_minutes(1)) \\
    ...     .with_timestamp_assigner(lambda event, ts: event["time"])
    >>> s
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20)).with_idleness(Duration.of_minutes(1)).with_timestamp_assigner(<lambda>)
    >>> s.create_timestamp_assigner().extract_timestamp({"time": 7}, MIN_WATERMARK)
    7
    >>> WatermarkStrategy.no_watermarks().create_timestamp_assigner() is None
    True
    """

    __slots__ = ("_kind", "_max_out_of_orderness", "_generator_factory",
                 "_timestamp_assigner", "_idle_timeout", "_alignment")

    def __init__(self) -> None:
        raise TypeError("build a WatermarkStrategy with its static methods, e.g. "
                        "WatermarkStrategy.for_monotonous_timestamps()")

    @staticmethod
    def _make(kind: str, max_out_of_orderness: Optional[Duration] = None,
              generator_factory: Optional[Callable[[], WatermarkGenerator]] = None
              ) -> "WatermarkStrategy":
        return _strategy_from_state((kind, max_out_of_orderness, generator_factory,
                                     None, None, None))

    def _with(self, **changes: Any) -> "WatermarkStrategy":
        state = tuple(changes.get(name[1:], getattr(self, name)) for name in self.__slots__)
        return _strategy_from_state(state)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("WatermarkStrategy is immutable; its with_* methods return new "
                             "strategies")

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_strategy_from_state, (self._state(),))

    def _state(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not WatermarkStrategy:
            return NotImplemented
        return self._state() == other._state()

    def __hash__(self) -> int:
        return hash(self._state())

    # -- PyFlink's static constructors -----------------------------------------------------

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        """Timestamps ascend: periodic watermarks at the highest timestamp seen - 1."""
        return WatermarkStrategy._make(_MONOTONOUS, Duration.ZERO)

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> "WatermarkStrategy":
        """Records arrive at most ``max_out_of_orderness`` late: once timestamp T was seen,
        none older than T - bound follows. Periodic watermark: highest - bound (ms) - 1.

        >>> WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(-1))
        Traceback (most recent call last):
        ...
        ValueError: max_out_of_orderness cannot be negative, got Duration.of_millis(-1)
        """
        _check_duration("max_out_of_orderness", max_out_of_orderness)
        if max_out_of_orderness.is_negative():
            raise ValueError(f"max_out_of_orderness cannot be negative, got "
                             f"{max_out_of_orderness!r}")
        return WatermarkStrategy._make(_BOUNDED, max_out_of_orderness)

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        """No watermarks at all (processing-time pipelines)."""
        return WatermarkStrategy._make(_NONE)

    @staticmethod
    def for_generator(generator_factory: Callable[[], WatermarkGenerator]
                      ) -> "WatermarkStrategy":
        """A user-defined generator (Flink's ``forGenerator``): ``generator_factory()`` is
        called once per subtask and must return a fresh :class:`WatermarkGenerator`; a
        subclass itself is such a factory. Its watermarks are checked
        (:class:`CheckedWatermarkOutput`)."""
        if isinstance(generator_factory, WatermarkGenerator):
            raise TypeError(f"for_generator() needs a factory that makes one generator per "
                            f"subtask, got the instance {generator_factory!r}; pass its "
                            f"class or a lambda: ...")
        if not callable(generator_factory):
            raise TypeError(f"for_generator() needs a callable returning a "
                            f"WatermarkGenerator, got {generator_factory!r}")
        return WatermarkStrategy._make(_GENERATOR, generator_factory=generator_factory)

    # -- builders --------------------------------------------------------------------------

    def with_timestamp_assigner(self, timestamp_assigner: Any) -> "WatermarkStrategy":
        """A new strategy that takes timestamps from ``timestamp_assigner``: a
        :class:`TimestampAssigner` or a function ``(value, record_timestamp) -> int``."""
        return self._with(timestamp_assigner=_check_assigner(timestamp_assigner))

    def with_idleness(self, idle_timeout: Duration) -> "WatermarkStrategy":
        """A new strategy whose generator marks its output idle after ``idle_timeout``
        without events (see :class:`WatermarksWithIdleness`); replaces an earlier timeout.

        >>> WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.ZERO)
        Traceback (most recent call last):
        ...
        ValueError: idle_timeout must be at least 1 ms, got Duration.ZERO
        """
        _check_duration("idle_timeout", idle_timeout)
        if idle_timeout.to_milliseconds() <= 0:
            raise ValueError(f"idle_timeout must be at least 1 ms, got {idle_timeout!r}")
        return self._with(idle_timeout=idle_timeout)

    def with_watermark_alignment(self, watermark_group: str,
                                 max_allowed_watermark_drift: Duration,
                                 update_interval: Optional[Duration] = None
                                 ) -> "WatermarkStrategy":
        """Accepted and stored (:meth:`get_alignment_parameters`); flowray does not pause
        sources to align watermarks across them. ``update_interval`` defaults to 1 s."""
        if not isinstance(watermark_group, str):
            raise TypeError(f"watermark_group must be a str, got {watermark_group!r}")
        _check_duration("max_allowed_watermark_drift", max_allowed_watermark_drift)
        if update_interval is None:
            update_interval = _DEFAULT_ALIGNMENT_UPDATE_INTERVAL
        _check_duration("update_interval", update_interval)
        return self._with(alignment=WatermarkAlignmentParams(
            watermark_group, max_allowed_watermark_drift, update_interval))

    # -- introspection ---------------------------------------------------------------------

    def has_timestamp_assigner(self) -> bool:
        return self._timestamp_assigner is not None

    def is_no_watermarks(self) -> bool:
        """True for :meth:`no_watermarks` (with or without idleness)."""
        return self._kind == _NONE

    def has_custom_generator(self) -> bool:
        """True for :meth:`for_generator`: the runtime should wrap its output in a
        :class:`CheckedWatermarkOutput`."""
        return self._kind == _GENERATOR

    def get_idle_timeout(self) -> Optional[Duration]:
        return self._idle_timeout

    def get_alignment_parameters(self) -> Optional[WatermarkAlignmentParams]:
        return self._alignment

    # -- runtime side ----------------------------------------------------------------------

    def create_timestamp_assigner(self) -> Optional[TimestampAssigner]:
        """The assigner, or ``None`` when none was given: records then keep the timestamp
        they carry, as in Flink."""
        assigner = self._timestamp_assigner
        if assigner is None or callable(getattr(assigner, "extract_timestamp", None)):
            return assigner
        return FunctionTimestampAssigner(assigner)

    def create_watermark_generator(self, clock: Optional[Clock] = None) -> WatermarkGenerator:
        """A fresh generator for one subtask; ``clock`` (``now_ms()``, processing time)
        drives idleness and defaults to the system clock."""
        kind = self._kind
        if kind == _NONE:
            generator: WatermarkGenerator = NoWatermarksGenerator()
        elif kind == _MONOTONOUS:
            generator = AscendingTimestampsWatermarks()
        elif kind == _BOUNDED:
            generator = BoundedOutOfOrdernessWatermarks(self._max_out_of_orderness)
        else:
            generator = self._generator_factory()
            if not isinstance(generator, WatermarkGenerator):
                raise TypeError(f"the generator factory {_callable_name(self._generator_factory)}"
                                f" returned {generator!r}, not a WatermarkGenerator")
        if self._idle_timeout is not None:
            generator = WatermarksWithIdleness(generator, self._idle_timeout,
                                               clock if clock is not None else SystemClock())
        return generator

    def __repr__(self) -> str:
        kind = self._kind
        if kind == _BOUNDED:
            text = f"for_bounded_out_of_orderness({self._max_out_of_orderness!r})"
        elif kind == _MONOTONOUS:
            text = "for_monotonous_timestamps()"
        elif kind == _NONE:
            text = "no_watermarks()"
        else:
            text = f"for_generator({_callable_name(self._generator_factory)})"
        text = "WatermarkStrategy." + text
        if self._idle_timeout is not None:
            text += f".with_idleness({self._idle_timeout!r})"
        if self._alignment is not None:
            a = self._alignment
            text += (f".with_watermark_alignment({a.watermark_group!r}, "
                     f"{a.max_allowed_watermark_drift!r}, {a.update_interval!r})")
        if self._timestamp_assigner is not None:
            assigner = self._timestamp_assigner
            name = (type(assigner).__qualname__ + "()"
                    if callable(getattr(assigner, "extract_timestamp", None))
                    else _callable_name(assigner))
            text += f".with_timestamp_assigner({name})"
        return text
