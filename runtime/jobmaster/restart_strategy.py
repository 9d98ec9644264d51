"""Restart strategies: whether a failed job restarts, and how long it waits first.

The same four strategies, keys and defaults as Flink's ``RestartBackoffTimeStrategy``
implementations (Flink 1.19+ semantics, including FLIP-364's exponential-delay rework).
They are pure state machines: the caller passes the failure time in milliseconds, so they
hold no clock, start no thread and never sleep. The job master calls, per failure::

    strategy.notify_failure(now_ms)
    if strategy.can_restart():
        restart after strategy.backoff_ms()
    else:
        fail the job

>>> s = restart_strategy_from_config({"restart-strategy.type": "fixed-delay",
...                                   "restart-strategy.fixed-delay.attempts": "2",
...                                   "restart-strategy.fixed-delay.delay": "10 s"}, False)
>>> s.describe()
'fixed-delay (2 attempts, 10 s delay)'
>>> [(s.notify_failure(t), s.can_restart(), s.backoff_ms())[1:] for t in (0, 20_000, 40_000)]
[(True, 10000), (True, 10000), (False, 10000)]
"""

from __future__ import annotations

import abc
import collections
import math
import random
from typing import Any, Deque, Dict, Mapping, Optional, Union

from flowray.common.configuration import (
    INFINITE,
    ConfigOption,
    Configuration,
    ConfigurationError,
    parse_duration_ms,
)
from flowray.common.options import (
    CHECKPOINTING_INTERVAL,
    EXP_DELAY_ATTEMPTS_BEFORE_RESET,
    EXP_DELAY_INITIAL_BACKOFF,
    EXP_DELAY_JITTER,
    EXP_DELAY_MAX_BACKOFF,
    EXP_DELAY_MULTIPLIER,
    EXP_DELAY_RESET_THRESHOLD,
    FAILURE_RATE_DELAY,
    FAILURE_RATE_INTERVAL,
    FAILURE_RATE_MAX_FAILURES,
    FIXED_DELAY_ATTEMPTS,
    FIXED_DELAY_DELAY,
    RESTART_STRATEGY_TYPE,
)

__all__ = [
    "RestartStrategy",
    "NoRestartStrategy",
    "FixedDelayRestartStrategy",
    "FailureRateRestartStrategy",
    "ExponentialDelayRestartStrategy",
    "restart_strategy_from_config",
    "format_duration_ms",
]

_LONG_MAX = (1 << 63) - 1  # Java's Long.MAX_VALUE: where Flink's (long) cast saturates


def format_duration_ms(ms: int) -> str:
    """A duration in the largest whole unit Flink's notation has (``h``, ``min``, ``s``, ``ms``).

    >>> format_duration_ms(3_600_000), format_duration_ms(120_000), format_duration_ms(1500)
    ('1 h', '2 min', '1500 ms')
    """
    for unit_ms, unit in ((3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if ms and ms % unit_ms == 0:
            return f"{ms // unit_ms} {unit}"
    return f"{ms} ms"


def _count(n: int, noun: str) -> str:
    if n >= INFINITE:
        return f"infinite {noun}s"
    return f"{n} {noun}" + ("" if n == 1 else "s")


class RestartStrategy(abc.ABC):
    """Decides whether and when a failed job restarts (Flink's ``RestartBackoffTimeStrategy``).

    Contract: call :meth:`notify_failure` with the failure time, then :meth:`can_restart`;
    if it is true, restart after :meth:`backoff_ms` milliseconds, else fail the job.
    Time is whatever millisecond clock the caller uses, as long as it does not go back.

    >>> s = NoRestartStrategy(); s.notify_failure(5)
    True
    >>> s.can_restart(), s.name
    (False, 'none')
    """

    #: The ``restart-strategy.type`` value this strategy is configured with.
    name: str = ""

    @abc.abstractmethod
    def notify_failure(self, now_ms: int) -> bool:
        """Record a failure at ``now_ms``.

        Returns True when the failure counts as a new restart attempt, False when it was
        merged into a restart that is already pending (only exponential-delay merges).
        """

    @abc.abstractmethod
    def can_restart(self) -> bool:
        """Whether the job may restart after the failures notified so far."""

    @abc.abstractmethod
    def backoff_ms(self) -> int:
        """Milliseconds to wait, from the latest notified failure, before restarting."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for logs: the strategy and its settings."""

    def snapshot(self) -> Dict[str, Any]:
        """What it remembers of the failures so far (JSON-able), for a successor of the
        job master: :meth:`restore` on a strategy of the same settings continues from it,
        so a job master restart never grants a fresh budget."""
        return {}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Continue from :meth:`snapshot` of a strategy with the same settings."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{self.describe()}>"


class NoRestartStrategy(RestartStrategy):
    """Never restarts: the first failure fails the job (``restart-strategy.type: none``).

    >>> NoRestartStrategy().describe()
    'none (a failure fails the job)'
    """

    name = "none"

    def notify_failure(self, now_ms: int) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_ms(self) -> int:
        return 0

    def describe(self) -> str:
        return "none (a failure fails the job)"


class FixedDelayRestartStrategy(RestartStrategy):
    """Restarts ``attempts`` times, each after ``delay_ms``; the next failure fails the job.

    As in Flink, failures are counted and restart is allowed while the count is at most
    ``attempts`` (so ``attempts=0`` never restarts; ``INFINITE`` always does).

    >>> s = FixedDelayRestartStrategy(1, 500)
    >>> _ = s.notify_failure(0); s.can_restart(), s.backoff_ms()
    (True, 500)
    >>> _ = s.notify_failure(900); s.can_restart()
    False
    """

    name = "fixed-delay"

    def __init__(self, attempts: int, delay_ms: int) -> None:
        if attempts < 0:
            raise ValueError(f"maximum number of restart attempts must be at least 0, "
                             f"got {attempts}")
        if delay_ms < 0:
            raise ValueError(f"delay between restart attempts must be at least 0 ms, "
                             f"got {delay_ms}")
        self.attempts = int(attempts)
        self.delay_ms = int(delay_ms)
        self.failures = 0

    def notify_failure(self, now_ms: int) -> bool:
        self.failures += 1
        return True

    def snapshot(self) -> Dict[str, Any]:
        return {"failures": self.failures}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.failures = int(snapshot.get("failures", 0))

    def can_restart(self) -> bool:
        return self.failures <= self.attempts

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return (f"fixed-delay ({_count(self.attempts, 'attempt')}, "
                f"{format_duration_ms(self.delay_ms)} delay)")


class FailureRateRestartStrategy(RestartStrategy):
    """Restarts unless more than ``max_failures_per_interval`` failures fall in one interval.

    Flink's exact rule: the last ``max + 1`` failure times are kept; once there are
    ``max + 1`` of them, a restart is allowed only if the newest is *more than*
    ``interval_ms`` after the oldest. Time is the latest notified failure.

    >>> s = FailureRateRestartStrategy(2, 60_000, 1000)
    >>> [(s.notify_failure(t), s.can_restart())[1] for t in (0, 10_000, 20_000, 70_001)]
    [True, True, False, True]
    """

    name = "failure-rate"

    def __init__(self, max_failures_per_interval: int, interval_ms: int, delay_ms: int) -> None:
        if max_failures_per_interval <= 0:
            raise ValueError(f"maximum number of failures per interval must be greater than 0, "
                             f"got {max_failures_per_interval}")
        if interval_ms <= 0:
            raise ValueError(f"failure rate interval must be greater than 0 ms, "
                             f"got {interval_ms}")
        if delay_ms < 0:
            raise ValueError(f"delay must be at least 0 ms, got {delay_ms}")
        self.max_failures_per_interval = int(max_failures_per_interval)
        self.interval_ms = int(interval_ms)
        self.delay_ms = int(delay_ms)
        self._failures: Deque[int] = collections.deque()
        self._now: Optional[int] = None

    @property
    def failure_timestamps(self) -> tuple:
        """The failure times kept (at most ``max_failures_per_interval + 1``), oldest first."""
        return tuple(self._failures)

    def _full(self) -> bool:
        return len(self._failures) > self.max_failures_per_interval

    def notify_failure(self, now_ms: int) -> bool:
        if self._full():
            self._failures.popleft()
        self._failures.append(int(now_ms))
        self._now = int(now_ms)
        return True

    def snapshot(self) -> Dict[str, Any]:
        return {"failures": list(self._failures), "now": self._now}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self._failures = collections.deque(int(t) for t in snapshot.get("failures", ()))
        now = snapshot.get("now")
        self._now = int(now) if now is not None else None

    def can_restart(self) -> bool:
        if self._full():
            assert self._now is not None
            return self._now - self._failures[0] > self.interval_ms
        return True

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return (f"failure-rate (at most {_count(self.max_failures_per_interval, 'failure')} "
                f"per {format_duration_ms(self.interval_ms)}, "
                f"{format_duration_ms(self.delay_ms)} delay)")


class ExponentialDelayRestartStrategy(RestartStrategy):
    """Waits ``initial * multiplier**n`` (with jitter, capped) before the n-th restart.

    Flink 1.19+ semantics (``ExponentialDelayRestartBackoffTimeStrategy``):

    * A failure at or before the pending restart time is merged into that restart: it
      returns False and changes neither the attempt count nor the restart time.
    * Otherwise, if at least ``reset_threshold_ms`` passed since the previous restart time,
      the attempt count resets to 0. The restart is scheduled ``backoff`` after the
      failure, where ``backoff = max(initial, min(b + j, max))`` with
      ``b = int(initial * multiplier**attempts)`` and ``j`` a uniform integer in
      ``[-int(b * jitter), int(b * jitter)]``; then the attempt count goes up by one.
    * ``can_restart()`` is true while the attempts since the last reset are at most
      ``attempts_before_reset``.

    >>> s = ExponentialDelayRestartStrategy(1000, 10_000, 2.0, 360_000, 0.0, INFINITE)
    >>> t, delays = 0, []
    >>> for _ in range(6):
    ...     _ = s.notify_failure(t); delays.append(s.backoff_ms()); t += s.backoff_ms() + 1
    >>> delays
    [1000, 2000, 4000, 8000, 10000, 10000]
    """

    name = "exponential-delay"

    def __init__(self, initial_backoff_ms: int, max_backoff_ms: int, multiplier: float,
                 reset_threshold_ms: int, jitter_factor: float, attempts_before_reset: int,
                 rng: Optional[random.Random] = None) -> None:
        if initial_backoff_ms < 1:
            raise ValueError(f"initial backoff must be at least 1 ms, got {initial_backoff_ms}")
        if max_backoff_ms < 1:
            raise ValueError(f"maximum backoff must be at least 1 ms, got {max_backoff_ms}")
        if initial_backoff_ms > max_backoff_ms:
            raise ValueError(f"initial backoff ({initial_backoff_ms} ms) cannot be higher than "
                             f"maximum backoff ({max_backoff_ms} ms)")
        if not multiplier > 1:
            raise ValueError(f"backoff multiplier must be greater than 1, got {multiplier}")
        if reset_threshold_ms < 1:
            raise ValueError(f"threshold for the backoff reset must be at least 1 ms, "
                             f"got {reset_threshold_ms}")
        if not 0 <= jitter_factor <= 1:
            raise ValueError(f"jitter factor must be >= 0 and <= 1, got {jitter_factor}")
        if attempts_before_reset < 1:
            raise ValueError(f"attempts before reset must be at least 1, "
                             f"got {attempts_before_reset}")
        self.initial_backoff_ms = int(initial_backoff_ms)
        self.max_backoff_ms = int(max_backoff_ms)
        self.multiplier = float(multiplier)
        self.reset_threshold_ms = int(reset_threshold_ms)
        self.jitter_factor = float(jitter_factor)
        self.attempts_before_reset = int(attempts_before_reset)
        self.rng = rng if rng is not None else random.Random()
        self.attempts = 0                              # restart attempts since the last reset
        self.next_restart_ms: Optional[int] = None     # when the pending restart is due
        self._now: Optional[int] = None

    def notify_failure(self, now_ms: int) -> bool:
        now_ms = int(now_ms)
        self._now = now_ms
        if self.next_restart_ms is not None and now_ms <= self.next_restart_ms:
            return False  # merged into the restart already scheduled
        if self.next_restart_ms is None or now_ms - self.next_restart_ms >= self.reset_threshold_ms:
            self.attempts = 0
        self.next_restart_ms = now_ms + self._actual_backoff_ms()
        self.attempts += 1
        return True

    def can_restart(self) -> bool:
        return self.attempts <= self.attempts_before_reset

    def snapshot(self) -> Dict[str, Any]:
        return {"attempts": self.attempts, "next_restart": self.next_restart_ms,
                "now": self._now}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.attempts = int(snapshot.get("attempts", 0))
        nxt, now = snapshot.get("next_restart"), snapshot.get("now")
        self.next_restart_ms = int(nxt) if nxt is not None else None
        self._now = int(now) if now is not None else None

    def backoff_ms(self) -> int:
        if self.next_restart_ms is None or self._now is None:
            raise RuntimeError("call notify_failure() before backoff_ms()")
        return max(0, self.next_restart_ms - self._now)

    def _actual_backoff_ms(self) -> int:
        try:
            raw = self.initial_backoff_ms * math.pow(self.multiplier, self.attempts)
        except OverflowError:
            raw = math.inf
        # Java's (long) cast saturates; Python ints then add without Java's overflow.
        current = _LONG_MAX if raw >= _LONG_MAX else int(raw)
        jitter = 0
        if self.jitter_factor != 0:
            offset = int(current * self.jitter_factor)
            jitter = self.rng.randint(-offset, offset)
        return max(self.initial_backoff_ms, min(current + jitter, self.max_backoff_ms))

    def describe(self) -> str:
        return (f"exponential-delay (initial backoff "
                f"{format_duration_ms(self.initial_backoff_ms)}, max backoff "
                f"{format_duration_ms(self.max_backoff_ms)}, multiplier {self.multiplier:g}, "
                f"reset after {format_duration_ms(self.reset_threshold_ms)}, "
                f"jitter {self.jitter_factor:g}, "
                f"{_count(self.attempts_before_reset, 'attempt')} before reset)")


def _raw(conf: Configuration, option: ConfigOption) -> Any:
    """The value as the user wrote it, for error messages; the default if unset."""
    if conf.contains_key(option.key):
        return conf.to_dict()[option.key]
    if option.parse is parse_duration_ms:
        return format_duration_ms(option.default)
    return option.default


def _invalid(conf: Configuration, option: ConfigOption, problem: str) -> ConfigurationError:
    return ConfigurationError(
        f"invalid value {_raw(conf, option)!r} for configuration key {option.key!r}: {problem}")


def _exponential_from(conf: Configuration, rng: Optional[random.Random]
                      ) -> ExponentialDelayRestartStrategy:
    initial = conf.get(EXP_DELAY_INITIAL_BACKOFF)
    maximum = conf.get(EXP_DELAY_MAX_BACKOFF)
    multiplier = conf.get(EXP_DELAY_MULTIPLIER)
    if initial < 1:
        raise _invalid(conf, EXP_DELAY_INITIAL_BACKOFF, "must be at least 1 ms")
    if maximum < 1:
        raise _invalid(conf, EXP_DELAY_MAX_BACKOFF, "must be at least 1 ms")
    if maximum < initial:
        raise ConfigurationError(
            f"{EXP_DELAY_MAX_BACKOFF.key} ({_raw(conf, EXP_DELAY_MAX_BACKOFF)!r}) must not be "
            f"less than {EXP_DELAY_INITIAL_BACKOFF.key} "
            f"({_raw(conf, EXP_DELAY_INITIAL_BACKOFF)!r})")
    if not multiplier > 1:
        raise _invalid(conf, EXP_DELAY_MULTIPLIER, "must be greater than 1")
    return ExponentialDelayRestartStrategy(
        initial, maximum, multiplier, conf.get(EXP_DELAY_RESET_THRESHOLD),
        conf.get(EXP_DELAY_JITTER), conf.get(EXP_DELAY_ATTEMPTS_BEFORE_RESET), rng=rng)


def restart_strategy_from_config(config: Union[Configuration, Mapping[str, Any], None],
                                 checkpointing_enabled: Optional[bool] = None,
                                 rng: Optional[random.Random] = None) -> RestartStrategy:
    """The strategy ``restart-strategy.type`` and its keys describe, validated.

    Unset type: ``none`` without checkpointing, and with it ``exponential-delay`` with
    the *default* exponential-delay settings (Flink ignores ``exponential-delay.*`` keys
    unless the type is set). ``checkpointing_enabled=None`` means: enabled iff
    ``execution.checkpointing.interval`` is set. Bad values raise ``ConfigurationError``
    naming key and value.

    >>> restart_strategy_from_config({}, checkpointing_enabled=False).describe()
    'none (a failure fails the job)'
    >>> restart_strategy_from_config({}, checkpointing_enabled=True).describe()
    'exponential-delay (initial backoff 1 s, max backoff 1 min, multiplier 1.5, \
reset after 1 h, jitter 0.1, infinite attempts before reset)'
    >>> restart_strategy_from_config({"restart-strategy.type": "failurerate",
    ...     "restart-strategy.failure-rate.max-failures-per-interval": "3",
    ...     "restart-strategy.failure-rate.failure-rate-interval": "5 min"}).describe()
    'failure-rate (at most 3 failures per 5 min, 1 s delay)'
    """
    conf = config if isinstance(config, Configuration) else Configuration(config or {})
    if checkpointing_enabled is None:
        checkpointing_enabled = conf.get(CHECKPOINTING_INTERVAL) is not None
    kind = conf.get(RESTART_STRATEGY_TYPE)
    if kind is None:
        if not checkpointing_enabled:
            return NoRestartStrategy()
        return _exponential_from(Configuration(), rng)
    if kind == "none":
        return NoRestartStrategy()
    if kind == "fixed-delay":
        return FixedDelayRestartStrategy(conf.get(FIXED_DELAY_ATTEMPTS),
                                         conf.get(FIXED_DELAY_DELAY))
    if kind == "failure-rate":
        return FailureRateRestartStrategy(conf.get(FAILURE_RATE_MAX_FAILURES),
                                          conf.get(FAILURE_RATE_INTERVAL),
                                          conf.get(FAILURE_RATE_DELAY))
    if kind == "exponential-delay":
        return _exponential_from(conf, rng)
    raise ConfigurationError(  # unreachable while the option's choices match the branches
        f"invalid value {kind!r} for configuration key {RESTART_STRATEGY_TYPE.key!r}")
