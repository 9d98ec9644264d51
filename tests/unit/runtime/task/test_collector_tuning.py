"""CollectorTuning: the collector's young threshold raised and the process's objects frozen
while a task runs, and both undone after it (also when the task fails)."""

import gc

import pytest

from flowray.common.configuration import Configuration
from flowray.common.options import TASK_GC_THRESHOLD
from flowray.runtime.task.collector_tuning import CollectorTuning


@pytest.fixture
def collector():
    """The test's changes to the collector do not outlive it."""
    saved = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.set_threshold(*saved)
    gc.unfreeze()


def test_inside_the_threshold_is_raised_and_older_generations_keep_theirs(collector):
    gc.set_threshold(700, 11, 12)
    with CollectorTuning(50_000):
        assert gc.get_threshold() == (50_000, 11, 12)
    assert gc.get_threshold() == (700, 11, 12)


def test_objects_alive_on_entry_are_frozen_and_given_back_on_exit(collector):
    held = [[i] for i in range(1000)]
    with CollectorTuning(10_000):
        assert gc.get_freeze_count() >= len(held)
        made_inside = [[i] for i in range(1000)]
        assert gc.is_tracked(made_inside[0])
    assert gc.get_freeze_count() == 0
    assert gc.is_tracked(held[0])


def test_a_cycle_made_before_the_task_is_freed_after_it(collector):
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    import weakref
    gone = weakref.ref(a)
    del a, b
    with CollectorTuning(10_000):
        gc.collect()
        assert gone() is not None    # frozen: a collection inside does not see it
    gc.collect()
    assert gone() is None


def test_a_failing_task_still_restores_the_collector(collector):
    gc.set_threshold(700, 10, 10)
    with pytest.raises(KeyError):
        with CollectorTuning(20_000):
            raise KeyError("task failed")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_zero_leaves_the_collector_as_it_is(collector):
    gc.set_threshold(700, 10, 10)
    held = [[i] for i in range(100)]
    with CollectorTuning(0):
        assert gc.get_threshold() == (700, 10, 10)
        assert gc.get_freeze_count() == 0
    assert held


def test_not_reentrant_and_no_negative_threshold(collector):
    tuning = CollectorTuning(10_000)
    with tuning:
        with pytest.raises(RuntimeError, match="not reentrant"):
            tuning.__enter__()
    with pytest.raises(ValueError, match="must not be negative"):
        CollectorTuning(-1)


def test_the_option_defaults_to_100000_and_names_a_bad_value():
    assert Configuration().get(TASK_GC_THRESHOLD) == 100_000
    with pytest.raises(ValueError, match="flowray.task.gc-threshold.*must not be negative"):
        Configuration({"flowray.task.gc-threshold": -5}).get(TASK_GC_THRESHOLD)
