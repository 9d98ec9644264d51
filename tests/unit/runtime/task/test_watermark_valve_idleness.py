"""WatermarkValve: the input's watermark is the minimum over channels that are neither
ended nor idle; an idle channel holds nothing back, rejoins only once it has caught up,
and the input is idle when every live channel is."""

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.runtime.task.watermark_valve import WatermarkValve


def valve(n=3):
    return WatermarkValve([f"c{i}" for i in range(n)])


def test_minimum_over_channels_and_only_advances():
    v = valve()
    assert v.current == MIN_WATERMARK and v.idle is False
    assert v.on_watermark("c0", 10) is None
    assert v.on_watermark("c1", 5) is None
    assert v.on_watermark("c2", 7) == 5
    assert v.on_watermark("c1", 4) is None  # a channel's watermark never goes back
    assert v.on_watermark("c1", 20) == 7
    assert v.on_watermark("c2", 30) == 10
    assert v.current == 10


def test_idle_channel_is_excluded():
    v = valve()
    v.on_watermark("c0", 10)
    v.on_watermark("c1", 20)
    assert v.on_status("c2", idle=True) == (10, None)  # c2 no longer holds it back
    assert v.on_watermark("c0", 15) == 15
    assert v.on_watermark("c2", 1) is None  # an idle channel's watermark counts for nothing
    assert v.on_status("c0", idle=True) == (20, None)
    assert v.idle is False


def test_all_idle_reports_the_input_idle_once():
    v = valve(2)
    v.on_watermark("c0", 3)
    v.on_watermark("c1", 8)
    assert v.on_status("c0", idle=True) == (8, None)
    assert v.on_status("c1", idle=True) == (None, True)
    assert v.idle is True
    assert v.on_status("c1", idle=True) == (None, None)  # again: no change to report
    assert v.on_status("c0", idle=True) == (None, None)
    assert v.current == 8


def test_active_again_reports_active_once():
    v = valve(2)
    v.on_status("c0", idle=True)
    assert v.on_status("c1", idle=True) == (None, True)
    assert v.on_status("c1", idle=False) == (None, False)
    assert v.on_status("c0", idle=False) == (None, None)
    assert v.on_status("c0", idle=False) == (None, None)  # was not idle: nothing happens
    assert v.idle is False


def test_reactivated_channel_joins_only_after_catching_up():
    v = valve(2)
    v.on_watermark("c0", 10)
    v.on_watermark("c1", 3)
    assert v.current == 3
    assert v.on_status("c1", idle=True) == (10, None)
    assert v.on_status("c1", idle=False) == (None, None)  # behind the input: not aligned
    assert v.on_watermark("c1", 5) is None
    assert v.current == 10  # the input's watermark never goes back
    assert v.on_watermark("c0", 20) == 20  # c1 still catching up: not in the minimum
    assert v.on_watermark("c1", 15) is None  # still behind 20
    assert v.on_watermark("c1", 25) is None  # caught up: aligned, min(20, 25) = 20
    assert v.on_watermark("c0", 40) == 25  # now c1 holds it back
    assert v.current == 25


def test_reactivated_channel_already_ahead_joins_at_once():
    v = valve(2)
    v.on_watermark("c0", 10)
    v.on_status("c1", idle=True)
    v.on_watermark("c1", 50)  # ignored while idle, but remembered
    assert v.on_status("c1", idle=False) == (None, None)
    assert v.on_watermark("c0", 60) == 50


def test_idle_input_comes_back_with_the_watermark_of_its_channel():
    v = valve(2)
    v.on_watermark("c0", 10)
    v.on_watermark("c1", 10)
    v.on_status("c0", idle=True)
    assert v.on_status("c1", idle=True) == (None, True)
    v.on_watermark("c0", 100)
    # c0 comes back ahead of the input (100 >= 10): aligned at once
    assert v.on_status("c0", idle=False) == (100, False)
    assert v.current == 100


def test_end_of_partition_of_an_active_channel_releases_the_minimum():
    v = valve()
    v.on_watermark("c0", 1)
    v.on_watermark("c1", 5)
    v.on_watermark("c2", 9)
    assert v.on_end_of_partition("c0") == 5
    assert v.on_end_of_partition("c2") is None  # c1 still holds 5
    assert v.on_end_of_partition("c1") == MAX_WATERMARK  # every channel ended


def test_end_of_partition_of_the_last_active_channel_while_others_are_idle():
    v = valve()
    v.on_watermark("c0", 10)
    v.on_watermark("c1", 4)
    v.on_status("c1", idle=True)
    v.on_status("c2", idle=True)
    assert v.current == 10
    # the idle channels may come back: the input must not jump to the final watermark,
    # but every live channel is idle now, so the input is
    assert v.on_end_of_partition("c0") is None
    assert v.current == 10
    assert v.status_change() is True and v.idle is True
    v.on_watermark("c2", 30)
    assert v.on_status("c2", idle=False) == (30, False)
    assert v.on_status("c1", idle=False) == (None, None)  # behind 30: catching up
    assert v.on_end_of_partition("c2") is None  # c1 is live, not yet aligned
    assert v.on_watermark("c1", 35) == 35
    assert v.on_end_of_partition("c1") == MAX_WATERMARK


def test_input_is_idle_once_the_last_active_channel_ended():
    v = valve(2)
    v.on_watermark("c0", 10)
    assert v.on_status("c1", idle=True) == (10, None)  # c1 no longer holds it at MIN
    assert v.status_change() is None  # nothing changed since
    assert v.on_end_of_partition("c0") is None
    assert v.status_change() is True and v.idle is True
    assert v.status_change() is None  # reported once
    assert v.on_end_of_partition("c1") == MAX_WATERMARK


def test_status_after_an_active_channel_ended_with_others_active():
    v = valve(3)
    v.on_status("c2", idle=True)
    v.on_end_of_partition("c0")
    assert v.status_change() is None and v.idle is False  # c1 is still active


def test_idle_channel_that_ends_no_longer_counts():
    v = valve(2)
    v.on_watermark("c0", 7)
    v.on_status("c1", idle=True)
    assert v.on_end_of_partition("c1") is None  # nothing changes: c1 held nothing back
    assert v.on_watermark("c0", 8) == 8
    assert v.on_status("c0", idle=True) == (None, True)
    assert v.on_end_of_partition("c0") == MAX_WATERMARK


def test_when_the_last_active_channel_goes_idle_event_time_moves_to_the_highest():
    # as Flink's StatusWatermarkValve: nothing holds event time back any more
    v = WatermarkValve(["a", "b"])
    v.on_watermark("a", 10)
    v.on_watermark("b", 5)
    assert v.on_status("a", idle=True) == (None, None)   # b (5) still active
    assert v.on_status("b", idle=True) == (10, True)
    assert v.current == 10
