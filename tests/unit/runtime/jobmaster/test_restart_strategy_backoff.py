"""Failure-rate windows and exponential-delay back-off, jitter and reset, checked against Flink's documented cases."""

import random

import pytest
from flowray.runtime.jobmaster.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    format_duration_ms,
)

from flowray.common.configuration import INFINITE
from flowray.common.options import (
    EXP_DELAY_JITTER,
)
from tests.support.restart_strategies import (
    TYPE,
    _check_merged,
    exp,
    fail_after_restart,
    from_conf,
)


def test_failure_rate_interval_comparison_is_strict():
    s = FailureRateRestartStrategy(1, 60_000, 1000)
    s.notify_failure(0)
    assert s.can_restart()
    s.notify_failure(60_000)  # exactly one interval after: still inside
    assert not s.can_restart()
    s = FailureRateRestartStrategy(1, 60_000, 1000)
    s.notify_failure(0)
    s.notify_failure(60_001)
    assert s.can_restart()


def test_failure_rate_window_slides():
    s = FailureRateRestartStrategy(2, 60_000, 5000)
    decisions = []
    for t in (0, 10_000, 20_000,     # third failure inside one minute: no restart
              70_001,                # oldest kept is now 10 000: 60 001 ms ago -> restart
              80_000,                # oldest kept 20 000: exactly 60 000 -> no restart
              150_000,               # the window has moved past all earlier failures
              150_001, 150_002):     # burst: three within the interval again
        s.notify_failure(t)
        decisions.append(s.can_restart())
        assert s.backoff_ms() == 5000
    assert decisions == [True, True, False, True, False, True, True, False]


def test_failure_rate_failures_outside_interval_allow_restart_again():
    s = FailureRateRestartStrategy(3, 300_000, 10_000)
    for t in (0, 1000, 2000, 3000):
        s.notify_failure(t)
    assert not s.can_restart()
    s.notify_failure(3000 + 300_001)  # kept: 1000, 2000, 3000, 303 001 -> 302 001 ms span
    assert s.can_restart()


# ---------------------------------------------------------------------------------------
# exponential-delay
# ---------------------------------------------------------------------------------------

def test_exponential_flink_docs_worked_example():
    """Flink docs 'Task Failure Recovery' example: initial 1 s, multiplier 2, max 10 s,
    jitter 0 -> delays 1 s, 2 s, 4 s, 8 s, then 10 s for every later retry; with
    attempts-before-reset-backoff 8 the job fails after 8 consecutive retries; with
    reset-backoff-threshold 6 min a job that ran 6 minutes starts over at 1 s."""
    s = exp(initial=1000, maximum=10_000, multiplier=2.0, reset=360_000, jitter=0.0,
            attempts=8)
    t, delays = 0, []
    for _ in range(8):
        t = fail_after_restart(s, t)
        assert s.can_restart()
        delays.append(s.backoff_ms())
    assert delays == [1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000]
    fail_after_restart(s, t)  # the 9th consecutive failure
    assert not s.can_restart()

    # after running 6 minutes without failure: 1 s again, counter back at 1
    s = exp(initial=1000, maximum=10_000, multiplier=2.0, reset=360_000, jitter=0.0,
            attempts=8)
    t = 0
    for _ in range(8):
        t = fail_after_restart(s, t)
    assert s.backoff_ms() == 10_000 and s.attempts == 8
    t = fail_after_restart(s, t, gap=360_000)
    assert (s.backoff_ms(), s.attempts, s.can_restart()) == (1000, 1, True)
    t = fail_after_restart(s, t)
    assert s.backoff_ms() == 2000


def test_exponential_flink_docs_jitter_ranges():
    """Docs: with jitter 0.1 the 3rd retry waits 3.6-4.4 s, the 4th 7.2-8.8 s."""
    rng = random.Random(1234)
    third, fourth = [], []
    for _ in range(2000):
        s = exp(initial=1000, maximum=10_000, multiplier=2.0, jitter=0.1, rng=rng)
        t = 0
        for n in range(4):
            t = fail_after_restart(s, t)
            if n == 2:
                third.append(s.backoff_ms())
        fourth.append(s.backoff_ms())
    assert 3600 <= min(third) < 3700 and 4300 < max(third) <= 4400
    assert 7200 <= min(fourth) < 7300 and 8700 < max(fourth) <= 8800
    assert len(set(third)) > 300 and len(set(fourth)) > 500  # spread exists
    mean = sum(third) / len(third)
    assert 3950 < mean < 4050  # centred on the un-jittered backoff


def test_exponential_default_multiplier_growth_truncates_like_java():
    s = from_conf({TYPE: "exponential-delay", EXP_DELAY_JITTER.key: "0"})
    t, delays = 0, []
    for _ in range(12):
        t = fail_after_restart(s, t)
        delays.append(s.backoff_ms())
    # (long) (1000 * 1.5^n), capped at the 1 min default max
    assert delays == [1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443,
                      57665, 60_000]


def test_exponential_backoff_multiplier_flink_case():
    """Flink's testBackoffMultiplier: 4, 4*2.3 = 9, 4*2.3*2.3 = 21."""
    s = exp(initial=4, maximum=300, multiplier=2.3, reset=INFINITE, jitter=0.0, attempts=10)
    got = []
    t = 0
    for _ in range(3):
        assert s.notify_failure(t) is True
        got.append(s.backoff_ms())
        t += 301
    assert got == [4, 9, 21]


def test_exponential_caps_at_max_and_stays():
    s = exp(initial=1, maximum=6, multiplier=2.0, reset=8, jitter=0.25)
    t = 0
    for _ in range(50):
        t = fail_after_restart(s, t)
        assert 1 <= s.backoff_ms() <= 6
    assert s.backoff_ms() == 6  # far past the cap even the lowest jitter stays at max


def test_exponential_huge_attempt_counts_stay_at_max():
    for jitter in (0.0, 0.1, 0.5):
        s = exp(initial=1000, maximum=60_000, multiplier=1.5, reset=10 ** 12, jitter=jitter,
                rng=random.Random(3))
        t = 0
        for _ in range(3000):  # 1.5 ** 3000 overflows a float
            t = fail_after_restart(s, t)
        assert s.backoff_ms() == 60_000 and s.can_restart() and s.attempts == 3000


def test_exponential_reset_threshold_boundary():
    """Flink's testResetBackoff: reset iff now - previous restart time >= threshold."""
    s = exp(initial=1, maximum=5, multiplier=2.0, reset=8, jitter=0.25)
    assert s.notify_failure(0) is True
    assert s.backoff_ms() == 1  # restart due at 1
    t = 8 + s.backoff_ms() - 1  # 8: only 7 ms after the restart
    assert s.notify_failure(t) is True
    assert s.backoff_ms() == 2, "backoff should be increased"  # restart due at 10
    t += 8 + s.backoff_ms()     # 18: exactly 8 ms after the restart
    assert s.notify_failure(t) is True
    assert s.backoff_ms() == 1, "backoff should be reset"


def test_exponential_multiple_settings_flink_case():
    """Flink's testMultipleSettings."""
    s = exp(initial=1, maximum=9, multiplier=2.0, reset=80, jitter=0.25)
    t = 0
    assert s.notify_failure(t) and s.can_restart() and s.backoff_ms() == 1
    t += 81
    assert s.notify_failure(t) and s.can_restart() and s.backoff_ms() == 1
    t += 4
    assert s.notify_failure(t) and s.can_restart() and s.backoff_ms() == 2
    t += 80 + 9 + 1
    assert s.notify_failure(t) and s.can_restart() and s.backoff_ms() == 1
    t += 10
    assert s.notify_failure(t) and s.can_restart() and s.backoff_ms() == 2


def test_exponential_attempts_before_reset():
    """Flink's testMaxAttempts: ``attempts`` restarts are allowed, the next failure is not."""
    s = exp(initial=1, maximum=3, multiplier=1.2, reset=10, jitter=0.25, attempts=13)
    t = 0
    for _ in range(14):
        assert s.can_restart()
        assert s.notify_failure(t) is True
        t += 4
    assert not s.can_restart()


def test_exponential_attempts_count_again_after_reset():
    s = exp(initial=1000, maximum=10_000, reset=60_000, attempts=2)
    t = fail_after_restart(s, 0)
    t = fail_after_restart(s, t)
    assert s.can_restart()
    t = fail_after_restart(s, t, gap=60_000)  # ran a minute: counter resets to 1
    assert s.can_restart() and s.attempts == 1
    t = fail_after_restart(s, t)
    assert s.can_restart()
    fail_after_restart(s, t)
    assert not s.can_restart()


def test_exponential_merges_failures_while_a_restart_is_pending():
    s = exp(initial=2, maximum=6, multiplier=2.0, reset=80, jitter=0.0, attempts=3)
    t = _check_merged(s, 0, 2)
    t = _check_merged(s, t + 1, 4)
    t = _check_merged(s, t + 1, 6)
    assert s.notify_failure(t + 1) is True  # a new round, beyond the 3 attempts
    assert not s.can_restart()


def test_exponential_merging_works_with_resetting():
    s = exp(initial=2, maximum=6, multiplier=2.0, reset=80, jitter=0.0, attempts=3)
    t = 0
    for _ in range(10):
        t = _check_merged(s, t, 2)
        t = _check_merged(s, t + 1, 4)
        t = _check_merged(s, t + 1, 6)
        t += 80


def test_exponential_failure_exactly_at_restart_time_is_merged():
    s = exp(initial=1000, maximum=10_000)
    s.notify_failure(5000)
    assert s.next_restart_ms == 6000
    assert s.notify_failure(6000) is False
    assert (s.attempts, s.backoff_ms(), s.next_restart_ms) == (1, 0, 6000)
    assert s.notify_failure(6001) is True
    assert (s.attempts, s.backoff_ms(), s.next_restart_ms) == (2, 2000, 8001)


def test_exponential_jitter_exact_ranges_flink_case():
    """Flink's testJitter: initial 2, max 7, multiplier 2, jitter 0.25."""
    rng = random.Random(99)

    def seen(failures):
        out = set()
        for _ in range(400):
            s = exp(initial=2, maximum=7, multiplier=2.0, reset=INFINITE, jitter=0.25, rng=rng)
            t = 0
            for _ in range(failures):
                t += 8
                assert s.notify_failure(t)
            out.add(s.backoff_ms())
        return out

    assert seen(2) == {3, 4, 5}
    assert seen(3) == {6, 7}
    assert seen(4) == {7}


def test_exponential_jitter_never_below_initial_nor_above_max():
    """Flink's testJitterNoHigherThanMax: jitter 1, results clamped to [initial, max]."""
    rng = random.Random(5)

    def seen(failures):
        out = set()
        for _ in range(400):
            s = exp(initial=1, maximum=7, multiplier=2.0, reset=INFINITE, jitter=1.0, rng=rng)
            t = 0
            for _ in range(failures):
                t += 8
                s.notify_failure(t)
            out.add(s.backoff_ms())
        return out

    assert seen(1) == {1, 2}
    assert seen(2) == {1, 2, 3, 4}
    assert seen(3) == {1, 2, 3, 4, 5, 6, 7}


def test_exponential_jitter_with_default_rng_stays_in_bounds():
    s = exp(initial=1000, maximum=60_000, multiplier=1.5, jitter=0.1)
    assert isinstance(s.rng, random.Random)
    t = fail_after_restart(s, 0)
    t = fail_after_restart(s, t)
    assert 1350 <= s.backoff_ms() <= 1650


def test_exponential_seeded_rng_is_deterministic():
    def run(seed):
        s = exp(jitter=0.5, rng=random.Random(seed))
        t, out = 0, []
        for _ in range(10):
            t = fail_after_restart(s, t)
            out.append(s.backoff_ms())
        return out
    assert run(42) == run(42)


def test_exponential_backoff_before_any_failure_is_an_error():
    s = exp()
    assert s.can_restart()
    with pytest.raises(RuntimeError):
        s.backoff_ms()


def test_exponential_first_failure_at_time_zero():
    s = exp(initial=1000, reset=10 ** 12)
    assert s.notify_failure(0) is True
    assert (s.backoff_ms(), s.attempts, s.next_restart_ms) == (1000, 1, 1000)


# ---------------------------------------------------------------------------------------
# describe()
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy,text", [
    (NoRestartStrategy(), "none (a failure fails the job)"),
    (FixedDelayRestartStrategy(3, 10_000), "fixed-delay (3 attempts, 10 s delay)"),
    (FixedDelayRestartStrategy(1, 1000), "fixed-delay (1 attempt, 1 s delay)"),
    (FixedDelayRestartStrategy(INFINITE, 250), "fixed-delay (infinite attempts, 250 ms delay)"),
    (FailureRateRestartStrategy(1, 60_000, 1000),
     "failure-rate (at most 1 failure per 1 min, 1 s delay)"),
    (ExponentialDelayRestartStrategy(1000, 60_000, 1.5, 3_600_000, 0.1, INFINITE),
     "exponential-delay (initial backoff 1 s, max backoff 1 min, multiplier 1.5, "
     "reset after 1 h, jitter 0.1, infinite attempts before reset)"),
    (ExponentialDelayRestartStrategy(1, 1500, 2, 90_000, 0, 1),
     "exponential-delay (initial backoff 1 ms, max backoff 1500 ms, multiplier 2, "
     "reset after 90 s, jitter 0, 1 attempt before reset)"),
])
def test_describe_is_one_line_with_settings(strategy, text):
    assert strategy.describe() == text
    assert "\n" not in text
    assert repr(strategy) == f"{type(strategy).__name__}<{text}>"


@pytest.mark.parametrize("ms,text", [
    (0, "0 ms"), (1, "1 ms"), (999, "999 ms"), (1000, "1 s"), (1500, "1500 ms"),
    (90_000, "90 s"), (60_000, "1 min"), (7_200_000, "2 h"), (86_400_000, "24 h"),
])
def test_format_duration_ms(ms, text):
    assert format_duration_ms(ms) == text
