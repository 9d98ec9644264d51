"""ThinPollPacer: a source task waits after a thin poll while waiting brings more
records, and stops waiting for a while when its polls stay small however long it waits."""

import pytest

from flowray.runtime.task.source_pacing import ThinPollPacer


def test_full_and_empty_polls_never_wait():
    pacer = ThinPollPacer(wait_s=0.001)
    assert [pacer.after_poll(n, asked=1000) for n in (1000, 500, 63, 0)] == [0.0, 0.0, 0.0, 0.0]


def test_a_trickling_source_waits_after_each_thin_poll():
    pacer = ThinPollPacer(wait_s=0.001)
    # at 250k records/s: a few records at once, 250 after a 1 ms wait
    waits = [pacer.after_poll(n, asked=1000) for n in (3, 250, 2, 250, 5, 240) * 100]
    assert waits == [0.001, 0.0] * 300


def test_a_source_small_by_design_is_not_slowed_past_one_wait_per_retry():
    pacer = ThinPollPacer(wait_s=0.001, retry_polls=100)
    waits = [pacer.after_poll(1, asked=1000) for _ in range(1_000)]
    # one wait, then a poll that proves it useless, then 100 polls without: per 102 polls
    assert waits.count(0.001) == len(range(0, 1_000, 102))


def test_nothing_after_a_wait_is_no_verdict():
    pacer = ThinPollPacer(wait_s=0.001, retry_polls=100)
    assert pacer.after_poll(2, asked=1000) == 0.001
    assert pacer.after_poll(0, asked=1000) == 0.0     # a sparse source: nothing yet
    assert pacer.after_poll(2, asked=1000) == 0.001   # still waits after thin polls


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="must not be negative"):
        ThinPollPacer(wait_s=-1)
