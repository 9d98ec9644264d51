import pickle

import pytest

from flowray.operators.windowing.assigners import (
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
)
from flowray.operators.windowing.merging_window_set import MergingWindowSet
from flowray.operators.windowing.windows import TimeWindow


class Merges(MergingWindowSet.MergeFunction):
    def __init__(self):
        self.calls = []

    def merge(self, merge_result, merged_windows, state_window_result, merged_state_windows):
        self.calls.append((merge_result, sorted(merged_windows), state_window_result,
                           sorted(merged_state_windows)))


def sessions(gap=5):
    return EventTimeSessionWindows.with_gap(gap)


def test_new_windows_are_their_own_state_windows():
    windows, merges = MergingWindowSet(sessions()), Merges()
    assert windows.add_window(TimeWindow(0, 5), merges) == TimeWindow(0, 5)
    assert windows.add_window(TimeWindow(10, 15), merges) == TimeWindow(10, 15)
    assert windows.get_state_window(TimeWindow(0, 5)) == TimeWindow(0, 5)
    assert windows.get_state_window(TimeWindow(10, 15)) == TimeWindow(10, 15)
    assert merges.calls == [] and len(windows) == 2


def test_merge_chain_keeps_the_first_state_window():
    windows, merges = MergingWindowSet(sessions()), Merges()
    windows.add_window(TimeWindow(0, 5), merges)
    windows.add_window(TimeWindow(10, 15), merges)
    assert windows.add_window(TimeWindow(3, 8), merges) == TimeWindow(0, 8)
    assert merges.calls == [(TimeWindow(0, 8), [TimeWindow(0, 5)], TimeWindow(0, 5), [])]
    assert windows.get_state_window(TimeWindow(0, 5)) is None
    assert windows.get_state_window(TimeWindow(0, 8)) == TimeWindow(0, 5)

    # bridges two in-flight windows: both state windows are folded into the first
    assert windows.add_window(TimeWindow(7, 12), merges) == TimeWindow(0, 15)
    assert merges.calls[1] == (TimeWindow(0, 15), [TimeWindow(0, 8), TimeWindow(10, 15)],
                               TimeWindow(0, 5), [TimeWindow(10, 15)])
    assert windows.persist() == [(TimeWindow(0, 15), TimeWindow(0, 5))]

    # extends the session at its end: still the same state window
    assert windows.add_window(TimeWindow(14, 19), merges) == TimeWindow(0, 19)
    assert merges.calls[2] == (TimeWindow(0, 19), [TimeWindow(0, 15)], TimeWindow(0, 5), [])
    assert windows.get_state_window(TimeWindow(0, 19)) == TimeWindow(0, 5)


def test_a_window_inside_an_in_flight_one_merges_without_a_merge_call():
    windows, merges = MergingWindowSet(sessions()), Merges()
    windows.add_window(TimeWindow(0, 5), merges)
    windows.add_window(TimeWindow(4, 9), merges)
    merges.calls.clear()
    assert windows.add_window(TimeWindow(2, 7), merges) == TimeWindow(0, 9)
    assert windows.add_window(TimeWindow(0, 5), merges) == TimeWindow(0, 9)
    assert merges.calls == []
    assert windows.persist() == [(TimeWindow(0, 9), TimeWindow(0, 5))]


def test_adding_an_equal_window_keeps_its_state_window():
    # dynamic gaps can make a new window equal a merged in-flight one: it keeps its state
    windows, merges = MergingWindowSet(DynamicEventTimeSessionWindows.with_dynamic_gap(
        lambda e: e)), Merges()
    windows.add_window(TimeWindow(0, 5), merges)
    windows.add_window(TimeWindow(5, 10), merges)
    assert windows.get_state_window(TimeWindow(0, 10)) == TimeWindow(0, 5)
    assert windows.add_window(TimeWindow(0, 10), merges) == TimeWindow(0, 10)
    assert windows.get_state_window(TimeWindow(0, 10)) == TimeWindow(0, 5)
    assert len(merges.calls) == 1


def test_retire_window():
    windows = MergingWindowSet(sessions())
    windows.add_window(TimeWindow(0, 5), Merges())
    windows.retire_window(TimeWindow(0, 5))
    assert windows.get_state_window(TimeWindow(0, 5)) is None and len(windows) == 0
    with pytest.raises(KeyError, match="not in the in-flight window set"):
        windows.retire_window(TimeWindow(0, 5))


def test_persist_and_restore():
    windows, merges = MergingWindowSet(sessions()), Merges()
    assert windows.has_changed() is False
    windows.add_window(TimeWindow(0, 5), merges)
    windows.add_window(TimeWindow(3, 8), merges)
    windows.add_window(TimeWindow(20, 25), merges)
    assert windows.has_changed() is True
    stored = pickle.loads(pickle.dumps(windows.persist()))
    assert windows.has_changed() is False
    assert sorted(stored) == [(TimeWindow(0, 8), TimeWindow(0, 5)),
                              (TimeWindow(20, 25), TimeWindow(20, 25))]

    restored = MergingWindowSet(sessions(), stored)
    assert restored.has_changed() is False
    assert restored.get_state_window(TimeWindow(0, 8)) == TimeWindow(0, 5)
    restored_merges = Merges()
    assert restored.add_window(TimeWindow(7, 12), restored_merges) == TimeWindow(0, 12)
    assert restored_merges.calls == [(TimeWindow(0, 12), [TimeWindow(0, 8)], TimeWindow(0, 5),
                                      [])]
    assert restored.has_changed() is True
    restored.retire_window(TimeWindow(0, 12))
    restored.retire_window(TimeWindow(20, 25))
    assert restored.persist() == []

    from_dict = MergingWindowSet(sessions(), {TimeWindow(0, 8): TimeWindow(0, 5)})
    assert from_dict.get_state_window(TimeWindow(0, 8)) == TimeWindow(0, 5)


def test_merge_function_may_be_a_plain_callable():
    calls = []
    windows = MergingWindowSet(sessions())
    windows.add_window(TimeWindow(0, 5), lambda *a: calls.append(a))
    windows.add_window(TimeWindow(1, 6), lambda *a: calls.append(a))
    assert calls == [(TimeWindow(0, 6), [TimeWindow(0, 5)], TimeWindow(0, 5), [])]
