"""Helpers shared by test_restart_strategy.py, test_restart_strategy_backoff.py (moved out of one long test file)."""

from flowray.runtime.jobmaster.restart_strategy import (
    ExponentialDelayRestartStrategy,
    restart_strategy_from_config,
)

from flowray.common.configuration import INFINITE
from flowray.common.options import (
    RESTART_STRATEGY_TYPE,
)

TYPE = RESTART_STRATEGY_TYPE.key


def from_conf(conf, checkpointing=False, rng=None):
    return restart_strategy_from_config(conf, checkpointing, rng=rng)


def exp(initial=1000, maximum=10_000, multiplier=2.0, reset=360_000, jitter=0.0,
        attempts=INFINITE, rng=None):
    return ExponentialDelayRestartStrategy(initial, maximum, multiplier, reset, jitter,
                                           attempts, rng=rng)


def fail_after_restart(s, t, gap=1):
    """Notify a failure ``gap`` ms after the pending restart (a new attempt); return its time."""
    t = (s.next_restart_ms if s.next_restart_ms is not None else t) + gap
    assert s.notify_failure(t) is True
    return t


def _check_merged(s, start, expected_backoff):
    """Flink's checkMultipleExceptionsAreMerged: until the restart is due, failures merge."""
    t, first = start, True
    for advance in range(expected_backoff):
        for _ in range(10):
            assert s.notify_failure(t) is first
            first = False
            assert s.can_restart()
            assert s.backoff_ms() == expected_backoff - advance
        t += 1
    return t
