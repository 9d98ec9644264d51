"""Restart strategies: Flink's keys, defaults and decisions, on a caller-supplied clock."""

import random

import pytest
from flowray.runtime.jobmaster.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartStrategy,
    restart_strategy_from_config,
)

from flowray.common.configuration import INFINITE, Configuration, ConfigurationError
from flowray.common.options import (
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
from tests.support.restart_strategies import (
    TYPE,
    exp,
    fail_after_restart,
    from_conf,
)

# ---------------------------------------------------------------------------------------
# configuration: defaults, aliases, parsing, checkpointing default
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("option,default", [
    (RESTART_STRATEGY_TYPE, None),
    (FIXED_DELAY_ATTEMPTS, 1),
    (FIXED_DELAY_DELAY, 1000),
    (FAILURE_RATE_MAX_FAILURES, 1),
    (FAILURE_RATE_INTERVAL, 60_000),
    (FAILURE_RATE_DELAY, 1000),
    (EXP_DELAY_INITIAL_BACKOFF, 1000),
    (EXP_DELAY_MAX_BACKOFF, 60_000),
    (EXP_DELAY_MULTIPLIER, 1.5),
    (EXP_DELAY_RESET_THRESHOLD, 3_600_000),
    (EXP_DELAY_JITTER, 0.1),
    (EXP_DELAY_ATTEMPTS_BEFORE_RESET, INFINITE),
])
def test_every_key_has_flinks_default(option, default):
    assert Configuration().get(option) == default


def test_strategies_built_from_defaults():
    f = from_conf({TYPE: "fixed-delay"})
    assert (type(f), f.attempts, f.delay_ms) == (FixedDelayRestartStrategy, 1, 1000)
    r = from_conf({TYPE: "failure-rate"})
    assert (type(r), r.max_failures_per_interval, r.interval_ms, r.delay_ms) == (
        FailureRateRestartStrategy, 1, 60_000, 1000)
    e = from_conf({TYPE: "exponential-delay"})
    assert type(e) is ExponentialDelayRestartStrategy
    assert (e.initial_backoff_ms, e.max_backoff_ms, e.multiplier, e.reset_threshold_ms,
            e.jitter_factor, e.attempts_before_reset) == (1000, 60_000, 1.5, 3_600_000, 0.1,
                                                          INFINITE)


@pytest.mark.parametrize("value,cls", [
    ("none", NoRestartStrategy), ("off", NoRestartStrategy), ("disable", NoRestartStrategy),
    ("NONE", NoRestartStrategy), (" Off ", NoRestartStrategy),
    ("fixed-delay", FixedDelayRestartStrategy), ("fixeddelay", FixedDelayRestartStrategy),
    ("Fixed-Delay", FixedDelayRestartStrategy),
    ("failure-rate", FailureRateRestartStrategy), ("failurerate", FailureRateRestartStrategy),
    ("exponential-delay", ExponentialDelayRestartStrategy),
    ("exponentialdelay", ExponentialDelayRestartStrategy),
    ("EXPONENTIAL-DELAY", ExponentialDelayRestartStrategy),
])
def test_type_values_and_aliases(value, cls):
    for checkpointing in (False, True):
        s = from_conf({TYPE: value}, checkpointing)
        assert type(s) is cls
        assert s.name == {NoRestartStrategy: "none", FixedDelayRestartStrategy: "fixed-delay",
                          FailureRateRestartStrategy: "failure-rate",
                          ExponentialDelayRestartStrategy: "exponential-delay"}[cls]


@pytest.mark.parametrize("kind,key,raw,attr,expected", [
    ("fixed-delay", FIXED_DELAY_ATTEMPTS.key, "3", "attempts", 3),
    ("fixed-delay", FIXED_DELAY_ATTEMPTS.key, "0", "attempts", 0),
    ("fixed-delay", FIXED_DELAY_ATTEMPTS.key, "infinite", "attempts", INFINITE),
    ("fixed-delay", FIXED_DELAY_DELAY.key, "10 s", "delay_ms", 10_000),
    ("fixed-delay", FIXED_DELAY_DELAY.key, "10000 ms", "delay_ms", 10_000),
    ("fixed-delay", FIXED_DELAY_DELAY.key, "1 min", "delay_ms", 60_000),
    ("fixed-delay", FIXED_DELAY_DELAY.key, "0 ms", "delay_ms", 0),
    ("fixed-delay", FIXED_DELAY_DELAY.key, 250, "delay_ms", 250),
    ("failure-rate", FAILURE_RATE_MAX_FAILURES.key, "3", "max_failures_per_interval", 3),
    ("failure-rate", FAILURE_RATE_INTERVAL.key, "5 min", "interval_ms", 300_000),
    ("failure-rate", FAILURE_RATE_INTERVAL.key, "1 h", "interval_ms", 3_600_000),
    ("failure-rate", FAILURE_RATE_DELAY.key, "10 s", "delay_ms", 10_000),
    ("failure-rate", FAILURE_RATE_DELAY.key, "1500 ms", "delay_ms", 1500),
    ("exponential-delay", EXP_DELAY_INITIAL_BACKOFF.key, "10 s", "initial_backoff_ms", 10_000),
    ("exponential-delay", EXP_DELAY_INITIAL_BACKOFF.key, "1 ms", "initial_backoff_ms", 1),
    ("exponential-delay", EXP_DELAY_MAX_BACKOFF.key, "2 min", "max_backoff_ms", 120_000),
    ("exponential-delay", EXP_DELAY_MULTIPLIER.key, "1.4", "multiplier", 1.4),
    ("exponential-delay", EXP_DELAY_MULTIPLIER.key, "2", "multiplier", 2.0),
    ("exponential-delay", EXP_DELAY_RESET_THRESHOLD.key, "10 min", "reset_threshold_ms",
     600_000),
    ("exponential-delay", EXP_DELAY_JITTER.key, "0", "jitter_factor", 0.0),
    ("exponential-delay", EXP_DELAY_JITTER.key, "0.25", "jitter_factor", 0.25),
    ("exponential-delay", EXP_DELAY_JITTER.key, "1.0", "jitter_factor", 1.0),
    ("exponential-delay", EXP_DELAY_ATTEMPTS_BEFORE_RESET.key, "10", "attempts_before_reset",
     10),
    ("exponential-delay", EXP_DELAY_ATTEMPTS_BEFORE_RESET.key, "infinite",
     "attempts_before_reset", INFINITE),
])
def test_every_key_parsed_from_strings(kind, key, raw, attr, expected):
    for conf in ({TYPE: kind, key: raw}, Configuration().set_string(TYPE, kind).set(key, raw)):
        assert getattr(from_conf(conf), attr) == expected


def test_flink_docs_examples_parse():
    """The YAML examples on Flink's 'Task Failure Recovery' page."""
    f = from_conf({TYPE: "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                   "restart-strategy.fixed-delay.delay": "10 s"})
    assert f.describe() == "fixed-delay (3 attempts, 10 s delay)"
    r = from_conf({TYPE: "failure-rate",
                   "restart-strategy.failure-rate.max-failures-per-interval": "3",
                   "restart-strategy.failure-rate.failure-rate-interval": "5 min",
                   "restart-strategy.failure-rate.delay": "10 s"})
    assert r.describe() == "failure-rate (at most 3 failures per 5 min, 10 s delay)"
    e = from_conf({TYPE: "exponential-delay",
                   "restart-strategy.exponential-delay.initial-backoff": "10 s",
                   "restart-strategy.exponential-delay.max-backoff": "2 min",
                   "restart-strategy.exponential-delay.backoff-multiplier": "1.4",
                   "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
                   "restart-strategy.exponential-delay.jitter-factor": "0.1",
                   "restart-strategy.exponential-delay.attempts-before-reset-backoff": "10"})
    assert e.describe() == ("exponential-delay (initial backoff 10 s, max backoff 2 min, "
                            "multiplier 1.4, reset after 10 min, jitter 0.1, "
                            "10 attempts before reset)")


def test_unset_type_without_checkpointing_is_none():
    assert type(from_conf({}, False)) is NoRestartStrategy
    assert type(from_conf(None, False)) is NoRestartStrategy
    assert type(from_conf(Configuration(), False)) is NoRestartStrategy


def test_unset_type_with_checkpointing_is_default_exponential_delay():
    s = from_conf({}, True)
    assert type(s) is ExponentialDelayRestartStrategy
    assert (s.initial_backoff_ms, s.max_backoff_ms, s.multiplier, s.reset_threshold_ms,
            s.jitter_factor, s.attempts_before_reset) == (1000, 60_000, 1.5, 3_600_000, 0.1,
                                                          INFINITE)


def test_unset_type_with_checkpointing_uses_exponential_defaults_not_keys():
    """Flink's fallback builds exponential-delay from the options' *default* values."""
    s = from_conf({EXP_DELAY_MAX_BACKOFF.key: "5 min", EXP_DELAY_ATTEMPTS_BEFORE_RESET.key: "3"},
                  True)
    assert (s.max_backoff_ms, s.attempts_before_reset) == (60_000, INFINITE)
    s = from_conf({TYPE: "exponential-delay", EXP_DELAY_MAX_BACKOFF.key: "5 min"}, True)
    assert s.max_backoff_ms == 300_000


def test_explicit_type_wins_over_checkpointing_default():
    assert type(from_conf({TYPE: "none"}, True)) is NoRestartStrategy
    assert type(from_conf({TYPE: "fixed-delay"}, True)) is FixedDelayRestartStrategy
    assert type(from_conf({TYPE: "exponential-delay"}, False)) is ExponentialDelayRestartStrategy


def test_checkpointing_derived_from_interval_when_not_given():
    assert type(restart_strategy_from_config({})) is NoRestartStrategy
    s = restart_strategy_from_config({"execution.checkpointing.interval": "10 s"})
    assert type(s) is ExponentialDelayRestartStrategy
    s = restart_strategy_from_config({"execution.checkpointing.interval": "10 s"}, False)
    assert type(s) is NoRestartStrategy


def test_rng_is_passed_through_from_config():
    def delays(seed):
        s = from_conf({TYPE: "exponential-delay"}, rng=random.Random(seed))
        t, out = 0, []
        for _ in range(8):
            t = fail_after_restart(s, t)
            out.append(s.backoff_ms())
        return out
    assert delays(7) == delays(7)
    assert delays(7) != delays(8)


# ---------------------------------------------------------------------------------------
# configuration errors: name key and value
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,raw,fragment", [
    (TYPE, "sometimes", "expected one of none, fixed-delay, failure-rate, exponential-delay"),
    (FIXED_DELAY_ATTEMPTS.key, "-1", "must not be negative"),
    (FIXED_DELAY_ATTEMPTS.key, "three", "not an integer"),
    (FIXED_DELAY_DELAY.key, "ten seconds", "not a duration"),
    (FIXED_DELAY_DELAY.key, "10 parsecs", "unknown time unit"),
    (FAILURE_RATE_MAX_FAILURES.key, "0", "must be at least 1"),
    (FAILURE_RATE_INTERVAL.key, "0 s", "must be positive"),
    (FAILURE_RATE_DELAY.key, "-5 s", "not a duration"),
    (EXP_DELAY_INITIAL_BACKOFF.key, "0 ms", "must be at least 1 ms"),
    (EXP_DELAY_MULTIPLIER.key, "1.0", "must be greater than 1"),
    (EXP_DELAY_MULTIPLIER.key, "0.5", "must be"),
    (EXP_DELAY_MULTIPLIER.key, "double", "not a number"),
    (EXP_DELAY_RESET_THRESHOLD.key, "0 ms", "must be positive"),
    (EXP_DELAY_JITTER.key, "1.5", "must be between 0 and 1"),
    (EXP_DELAY_JITTER.key, "-0.1", "must be between 0 and 1"),
    (EXP_DELAY_ATTEMPTS_BEFORE_RESET.key, "0", "must be at least 1"),
])
def test_bad_values_name_key_and_value(key, raw, fragment):
    conf = {key: raw}
    if key != TYPE:
        conf[TYPE] = key.split(".")[1]  # restart-strategy.<type>.<setting>
    with pytest.raises(ConfigurationError) as info:
        from_conf(conf)
    text = str(info.value)
    assert repr(raw) in text and repr(key) in text and fragment in text


def test_max_backoff_below_initial_names_both_keys_and_values():
    with pytest.raises(ConfigurationError) as info:
        from_conf({TYPE: "exponential-delay", EXP_DELAY_INITIAL_BACKOFF.key: "2 s",
                   EXP_DELAY_MAX_BACKOFF.key: "500 ms"})
    text = str(info.value)
    for part in (EXP_DELAY_INITIAL_BACKOFF.key, "'2 s'", EXP_DELAY_MAX_BACKOFF.key, "'500 ms'"):
        assert part in text


def test_max_backoff_below_default_initial_names_the_default():
    with pytest.raises(ConfigurationError) as info:
        from_conf({TYPE: "exponential-delay", EXP_DELAY_MAX_BACKOFF.key: "10 ms"})
    text = str(info.value)
    assert EXP_DELAY_INITIAL_BACKOFF.key in text and "'1 s'" in text and "'10 ms'" in text


def test_max_backoff_equal_to_initial_is_allowed():
    s = from_conf({TYPE: "exponential-delay", EXP_DELAY_INITIAL_BACKOFF.key: "5 s",
                   EXP_DELAY_MAX_BACKOFF.key: "5 s"})
    assert (s.initial_backoff_ms, s.max_backoff_ms) == (5000, 5000)


def test_unknown_restart_key_suggests_the_right_one():
    with pytest.raises(ConfigurationError) as info:
        from_conf({"restart-strategy.fixed-delay.atempts": "3"})
    assert "did you mean 'restart-strategy.fixed-delay.attempts'" in str(info.value)


@pytest.mark.parametrize("make", [
    lambda: FixedDelayRestartStrategy(-1, 0),
    lambda: FixedDelayRestartStrategy(1, -1),
    lambda: FailureRateRestartStrategy(0, 1000, 0),
    lambda: FailureRateRestartStrategy(1, 0, 0),
    lambda: FailureRateRestartStrategy(1, 1000, -1),
    lambda: exp(initial=0),
    lambda: exp(initial=10, maximum=0),
    lambda: exp(initial=10, maximum=5),
    lambda: exp(multiplier=1.0),
    lambda: exp(reset=0),
    lambda: exp(jitter=-0.01),
    lambda: exp(jitter=1.01),
    lambda: exp(attempts=0),
])
def test_constructors_reject_what_flink_rejects(make):
    with pytest.raises(ValueError):
        make()


# ---------------------------------------------------------------------------------------
# none and fixed-delay
# ---------------------------------------------------------------------------------------

def test_no_restart_never_restarts():
    s = NoRestartStrategy()
    assert isinstance(s, RestartStrategy)
    assert s.notify_failure(0) is True
    assert s.can_restart() is False and s.backoff_ms() == 0


@pytest.mark.parametrize("attempts", [0, 1, 3, 10])
def test_fixed_delay_attempts_boundary(attempts):
    s = FixedDelayRestartStrategy(attempts, 10_000)
    assert s.can_restart()  # nothing failed yet
    for i in range(attempts):
        assert s.notify_failure(i * 20_000) is True
        assert s.can_restart(), f"restart {i + 1} of {attempts} must be allowed"
        assert s.backoff_ms() == 10_000
    s.notify_failure(attempts * 20_000)
    assert not s.can_restart()
    s.notify_failure(attempts * 20_000 + 1)
    assert not s.can_restart()


def test_fixed_delay_infinite_attempts():
    s = FixedDelayRestartStrategy(INFINITE, 0)
    for i in range(10_000):
        s.notify_failure(i)
    assert s.can_restart() and s.backoff_ms() == 0


def test_fixed_delay_counts_failures_regardless_of_time():
    s = FixedDelayRestartStrategy(2, 1000)
    for t in (0, 10 ** 9, 2 * 10 ** 9):
        s.notify_failure(t)
    assert not s.can_restart()


# ---------------------------------------------------------------------------------------
# failure-rate
# ---------------------------------------------------------------------------------------

def test_failure_rate_many_failures_within_rate():
    """Flink's testManyFailuresWithinRate: one failure per interval restarts forever."""
    s = FailureRateRestartStrategy(1, 1, 0)
    t = 0
    for _ in range(3):
        s.notify_failure(t)
        assert s.can_restart()
        t += 2
    assert s.can_restart()


def test_failure_rate_exceeding_rate():
    """Flink's testFailuresExceedingRate: max failures at once restart; one more does not."""
    s = FailureRateRestartStrategy(3, 10_000, 0)
    for _ in range(3):
        s.notify_failure(0)
        assert s.can_restart()
    s.notify_failure(0)
    assert not s.can_restart()


def test_failure_rate_keeps_max_plus_one_timestamps():
    s = FailureRateRestartStrategy(2, 60_000, 1000)
    for t in (0, 1, 2, 3, 4):
        s.notify_failure(t)
    assert s.failure_timestamps == (2, 3, 4)


def test_each_strategy_continues_from_its_snapshot():
    import json

    def fresh():
        return [FixedDelayRestartStrategy(3, 10),
                FailureRateRestartStrategy(2, 1_000, 10),
                ExponentialDelayRestartStrategy(100, 1_000, 2.0, 10_000, 0.0, 3,
                                                rng=random.Random(1))]

    def run(strategies, times):
        return [[(s.notify_failure(t), s.can_restart()) for t in times] for s in strategies]

    whole, first, second = fresh(), fresh(), fresh()
    expected = run(whole, [0, 500, 900, 2_500, 2_600])
    before = run(first, [0, 500, 900])
    for a, b in zip(first, second):   # a successor: same settings, state through JSON
        b.restore(json.loads(json.dumps(a.snapshot())))
    after = run(second, [2_500, 2_600])
    assert [x + y for x, y in zip(before, after)] == expected
    assert NoRestartStrategy().snapshot() == {}
