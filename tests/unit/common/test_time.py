"""Time, Duration, Instant: PyFlink's names, Java's arithmetic, errors that name the value."""

import pickle

import pytest

from flowray.common.time import Duration, Instant, Time


# ---------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("made,ms", [
    (Time.milliseconds(7), 7),
    (Time.seconds(3), 3_000),
    (Time.minutes(2), 120_000),
    (Time.hours(1), 3_600_000),
    (Time.days(2), 172_800_000),
    (Time.hours(-8), -28_800_000),      # window offsets may be negative, as in PyFlink
])
def test_time_constructors(made, ms):
    assert made.to_milliseconds() == ms


def test_time_equality_hash_repr_str():
    assert Time.seconds(1) == Time.milliseconds(1000)
    assert Time.seconds(1) != Time.seconds(2)
    assert Time.seconds(1) != Duration.of_seconds(1)
    assert len({Time.seconds(1), Time.milliseconds(1000)}) == 1
    assert Time.seconds(1) < Time.seconds(2)
    assert repr(Time.seconds(2)) == "Time.milliseconds(2000)"
    assert str(Time.seconds(2)) == "2000 ms"


@pytest.mark.parametrize("bad", [1.5, "10", None, True])
def test_time_rejects_non_ints_naming_the_value(bad):
    with pytest.raises(TypeError, match=repr(bad).replace(".", r"\.")):
        Time.seconds(bad)


def test_time_is_immutable_and_picklable():
    t = Time.minutes(5)
    with pytest.raises(AttributeError):
        t._milliseconds = 1
    assert pickle.loads(pickle.dumps(t)) == t


# ---------------------------------------------------------------------------------------
# Duration
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("made,nanos", [
    (Duration.of_nanos(5), 5),
    (Duration.of_millis(5), 5_000_000),
    (Duration.of_seconds(5), 5_000_000_000),
    (Duration.of_seconds(5, -1), 4_999_999_999),
    (Duration.of_minutes(1), 60_000_000_000),
    (Duration.of_hours(1), 3_600_000_000_000),
    (Duration.of_days(1), 86_400_000_000_000),
])
def test_duration_constructors(made, nanos):
    assert made.to_nanos() == nanos


def test_duration_conversions_floor_like_java():
    d = Duration.of_seconds(34, 500_000_000)
    assert (d.to_milliseconds(), d.to_millis(), d.to_seconds()) == (34_500, 34_500, 34)
    assert (d.get_seconds(), d.get_nano()) == (34, 500_000_000)
    # java.time.Duration.ofNanos(-1): seconds -1, nano 999999999, toMillis -1
    neg = Duration.of_nanos(-1)
    assert (neg.get_seconds(), neg.get_nano(), neg.to_milliseconds()) == (-1, 999_999_999, -1)
    # toMinutes/toHours/toDays divide the seconds truncating toward zero
    assert Duration.of_seconds(-61).to_minutes() == -1
    assert Duration.of_seconds(-59).to_minutes() == 0
    assert Duration.of_minutes(90).to_hours() == 1
    assert Duration.of_hours(49).to_days() == 2


def test_duration_predicates_ordering_repr():
    assert Duration.ZERO.is_zero() and not Duration.of_nanos(1).is_zero()
    assert Duration.of_millis(-1).is_negative() and not Duration.ZERO.is_negative()
    assert Duration.of_millis(1000) == Duration.of_seconds(1)
    assert len({Duration.of_millis(1000), Duration.of_seconds(1)}) == 1
    assert Duration.of_millis(999) < Duration.of_seconds(1)
    assert repr(Duration.of_millis(60_000)) == "Duration.of_minutes(1)"
    assert repr(Duration.of_millis(1500)) == "Duration.of_millis(1500)"
    assert repr(Duration.of_nanos(7)) == "Duration.of_nanos(7)"
    assert repr(Duration.ZERO) == "Duration.ZERO"


@pytest.mark.parametrize("ctor", [Duration.of_millis, Duration.of_seconds, Duration.of_days,
                                  Duration.of_nanos])
@pytest.mark.parametrize("bad", [2.5, "3", None, False])
def test_duration_rejects_non_ints_naming_the_value(ctor, bad):
    with pytest.raises(TypeError, match="must be an int, got " + repr(bad).replace(".", r"\.")):
        ctor(bad)


def test_duration_accepts_integral_non_int_types():
    class MyInt(int):
        pass
    assert Duration.of_millis(MyInt(3)).to_nanos() == 3_000_000


def test_duration_out_of_javas_range():
    with pytest.raises(ValueError, match="out of range"):
        Duration.of_seconds(1 << 63)
    assert Duration.of_seconds((1 << 63) - 1).get_seconds() == (1 << 63) - 1


def test_duration_is_immutable_and_picklable():
    d = Duration.of_seconds(3, 7)
    with pytest.raises(AttributeError):
        d._nanos = 0
    assert pickle.loads(pickle.dumps(d)) == d


# ---------------------------------------------------------------------------------------
# Instant
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("millis,seconds,nanos", [
    (0, 0, 0),
    (1500, 1, 500_000_000),
    (-1, -1, 999_000_000),
    (-1500, -2, 500_000_000),
])
def test_instant_epoch_milli_round_trip(millis, seconds, nanos):
    i = Instant.of_epoch_milli(millis)
    assert (i.seconds, i.nanos) == (seconds, nanos)
    assert (i.get_epoch_second(), i.get_nano()) == (seconds, nanos)
    assert i.to_epoch_milli() == millis


def test_instant_to_epoch_milli_floors_before_the_epoch():
    # java: Instant.ofEpochSecond(-1, 500_000) (0.5 ms into second -1) -> toEpochMilli -1000
    assert Instant(-1, 500_000).to_epoch_milli() == -1000
    assert Instant(-1, 1_500_000).to_epoch_milli() == -999


def test_instant_of_epoch_second_normalises_the_adjustment():
    assert Instant.of_epoch_second(3) == Instant(3, 0)
    assert Instant.of_epoch_second(3, -1) == Instant(2, 999_999_999)
    assert Instant.of_epoch_second(3, 2_000_000_001) == Instant(5, 1)


def test_instant_equality_ordering_repr():
    assert Instant(1, 2) == Instant(1, 2) and Instant(1, 2) != Instant(1, 3)
    assert len({Instant(1, 2), Instant.of_epoch_second(1, 2)}) == 1
    assert Instant(1, 2) < Instant(1, 3) < Instant(2, 0)
    assert repr(Instant(1, 2)) == "Instant<1, 2>"


def test_instant_bad_input():
    with pytest.raises(ValueError, match="1000000000"):
        Instant(0, 1_000_000_000)
    with pytest.raises(ValueError, match="-1"):
        Instant(0, -1)
    with pytest.raises(TypeError, match="1.5"):
        Instant.of_epoch_milli(1.5)
    with pytest.raises(ValueError, match="out of range"):
        Instant.of_epoch_second(1 << 60)
    with pytest.raises(ValueError, match="does not fit"):
        Instant.of_epoch_second(1 << 54).to_epoch_milli()


def test_instant_is_immutable_and_picklable():
    i = Instant.of_epoch_milli(123)
    with pytest.raises(AttributeError):
        i.seconds = 5
    assert pickle.loads(pickle.dumps(i)) == i
