"""How long a source task waits between polls (``source_pause_s``): never after a full
poll or a back-pressured one, a moment after a trickle, longer when there was nothing,
and never past its next flush or timer."""

import pytest

from flowray.runtime.task.stream_task import (
    IDLE_SOURCE_WAIT_S,
    TRICKLE_FRACTION,
    TRICKLE_WAIT_S,
    source_pause_s,
)


@pytest.mark.parametrize("asked, emitted", [(1000, 1000), (1000, 1000 // TRICKLE_FRACTION),
                                            (1, 1), (8, 1), (16, 1)])
def test_a_poll_that_gave_enough_of_what_was_asked_polls_again_at_once(asked, emitted):
    assert source_pause_s(asked, emitted, 0.1) is None


def test_a_trickle_waits_a_moment_for_more_records():
    assert source_pause_s(1000, 1000 // TRICKLE_FRACTION - 1, 0.1) == TRICKLE_WAIT_S
    assert source_pause_s(1000, 1, 0.1) == TRICKLE_WAIT_S


def test_nothing_waits_longer_and_no_wait_passes_the_next_duty():
    assert source_pause_s(1000, 0, 0.1) == IDLE_SOURCE_WAIT_S
    assert source_pause_s(1000, 0, 0.002) == 0.002
    assert source_pause_s(1000, 5, 0.0002) == 0.0002
    assert TRICKLE_WAIT_S < IDLE_SOURCE_WAIT_S
