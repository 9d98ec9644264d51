import pickle

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow, Window


class Recorder:
    def __init__(self):
        self.calls = []

    def merge(self, to_be_merged, merge_result):
        self.calls.append((list(to_be_merged), merge_result))


def test_time_window_bounds_and_repr():
    w = TimeWindow(10, 15)
    assert (w.start, w.end, w.max_timestamp()) == (10, 15, 14)
    assert repr(w) == "TimeWindow(start=10, end=15)"


def test_time_window_is_a_hashable_ordered_immutable_value():
    assert TimeWindow(0, 5) == TimeWindow(0, 5)
    assert TimeWindow(0, 5) != TimeWindow(0, 6)
    assert TimeWindow(0, 5) == (0, 5)   # a (start, end) tuple underneath, for speed
    assert len({TimeWindow(0, 5), TimeWindow(0, 5), TimeWindow(5, 10)}) == 2
    assert sorted([TimeWindow(5, 10), TimeWindow(0, 7), TimeWindow(0, 5)]) == \
        [TimeWindow(0, 5), TimeWindow(0, 7), TimeWindow(5, 10)]
    assert TimeWindow(0, 5) < TimeWindow(1, 2) and TimeWindow(0, 5) <= TimeWindow(0, 5)
    with pytest.raises(AttributeError):
        TimeWindow(0, 5).start = 3
    with pytest.raises(TypeError):
        Window()


def test_windows_survive_pickling():
    for window in (TimeWindow(-5, 5), CountWindow(7)):
        copy = pickle.loads(pickle.dumps(window))
        assert copy == window and hash(copy) == hash(window)
    assert pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get()


def test_intersects_includes_touching_windows_and_cover_spans_both():
    assert TimeWindow(0, 5).intersects(TimeWindow(5, 10))
    assert TimeWindow(5, 10).intersects(TimeWindow(0, 5))
    assert TimeWindow(0, 5).intersects(TimeWindow(2, 3))
    assert not TimeWindow(0, 5).intersects(TimeWindow(6, 10))
    assert TimeWindow(3, 8).cover(TimeWindow(0, 5)) == TimeWindow(0, 8)
    assert TimeWindow(0, 10).cover(TimeWindow(2, 3)) == TimeWindow(0, 10)


@pytest.mark.parametrize("timestamp, offset, size, start", [
    (0, 0, 5, 0), (4, 0, 5, 0), (5, 0, 5, 5), (-1, 0, 5, -5), (-5, 0, 5, -5), (-6, 0, 5, -10),
    (1, 2, 5, -3), (2, 2, 5, 2), (1, -2, 5, -2), (-1, 2, 5, -3), (1234567, 0, 1000, 1234000),
])
def test_window_start_with_offset(timestamp, offset, size, start):
    assert TimeWindow.get_window_start_with_offset(timestamp, offset, size) == start


def test_merge_windows_folds_overlapping_groups():
    rec = Recorder()
    TimeWindow.merge_windows(
        [TimeWindow(14, 20), TimeWindow(0, 5), TimeWindow(30, 35), TimeWindow(10, 15),
         TimeWindow(3, 8)], rec)
    assert rec.calls == [
        ([TimeWindow(0, 5), TimeWindow(3, 8)], TimeWindow(0, 8)),
        ([TimeWindow(10, 15), TimeWindow(14, 20)], TimeWindow(10, 20)),
    ]


def test_merge_windows_chains_and_touching():
    rec = Recorder()
    TimeWindow.merge_windows([TimeWindow(5, 9), TimeWindow(0, 3), TimeWindow(2, 6)], rec)
    assert rec.calls == [([TimeWindow(0, 3), TimeWindow(2, 6), TimeWindow(5, 9)],
                          TimeWindow(0, 9))]
    rec = Recorder()
    TimeWindow.merge_windows([TimeWindow(0, 5), TimeWindow(5, 10)], rec)
    assert rec.calls == [([TimeWindow(0, 5), TimeWindow(5, 10)], TimeWindow(0, 10))]


def test_merge_windows_ignores_lone_and_duplicate_windows():
    rec = Recorder()
    TimeWindow.merge_windows([TimeWindow(0, 5), TimeWindow(0, 5), TimeWindow(6, 9)], rec)
    TimeWindow.merge_windows([], rec)
    assert rec.calls == []


def test_count_window():
    assert CountWindow(3) == CountWindow(3) and CountWindow(3) != CountWindow(4)
    assert CountWindow(3).max_timestamp() == MAX_WATERMARK
    assert repr(CountWindow(3)) == "CountWindow(id=3)"
    assert len({CountWindow(1), CountWindow(1), TimeWindow(1, 2)}) == 2


def test_global_window_is_a_singleton():
    assert GlobalWindow() is GlobalWindow.get()
    assert GlobalWindow.get().max_timestamp() == MAX_WATERMARK
    assert repr(GlobalWindow.get()) == "GlobalWindow"
    assert GlobalWindow.get() != CountWindow(0)
