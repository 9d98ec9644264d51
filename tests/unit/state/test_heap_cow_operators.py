"""Copy-on-write heap snapshots under the operators that write into the heap's dicts
directly (the keyed reduce hot path, the window operator's pane adder) and the merging
window path: a snapshot taken before more records are processed restores exactly what a
snapshot written at once holds."""

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.keyed import KeyedReduceOperator
from flowray.operators.window_operator import PaneContents, WindowOperator
from flowray.operators.windowing.assigners import (
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
)
from flowray.operators.windowing.functions import WindowFunction, internal_window_function
from tests.support.operator_harness import FileStorage, OperatorHarness

KEYS = [f"k{i}" for i in range(300)]


def first(record):
    return record[0]


def add_in_place(a, b):
    """A reduce function that changes its first argument (Flink copies it when shared)."""
    a[1].extend(b[1])
    return a


class Listing(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window, sorted(v for _, v in inputs)


class ListAgg:
    def create_accumulator(self):
        return []

    def add(self, value, acc):
        acc.append(value[1])
        return acc

    def get_result(self, acc):
        return sorted(acc)

    def merge(self, a, b):
        a.extend(b)
        return a


def snapshot_pending_and_at_once(h, after):
    """A pending snapshot and one written at once, both of the state as it is now; then
    ``after(h)`` changes the state and the pending one is written."""
    pending = h.backend.snapshot(100)
    at_once = h.backend.snapshot(101).write(h.storage.write_file, "chk-101/keyed")
    after(h)
    late = pending.write(h.storage.write_file, "chk-100/keyed")
    assert h.backend.pending_snapshots() == 0
    return [late], [at_once]


def test_keyed_reduce_hot_path(tmp_path):
    h = OperatorHarness(KeyedReduceOperator(add_in_place, first), storage=FileStorage(tmp_path))
    h.process([(k, [i]) for i, k in enumerate(KEYS)])

    def more(h):
        for n in range(3):
            h.process([(k, [n]) for k in KEYS] + [(f"new{n}", [n])])

    late, at_once = snapshot_pending_and_at_once(h, more)
    outputs = []
    for handles in (late, at_once):
        r = h.restore_into_new_harness(handles)
        r.process([(k, ["end"]) for k in KEYS])
        outputs.append(r.records)
    assert outputs[0] == outputs[1] == [(k, [i, "end"]) for i, k in enumerate(KEYS)]


def window_harness(tmp_path, kind, fn, assigner, window_fn=None):
    internal = internal_window_function(window_fn or Listing(), keyed=True,
                                        single_value=kind != "list")
    op = WindowOperator(assigner, assigner.get_default_trigger(), PaneContents(kind, fn),
                        internal, first, 0, None, name="win")
    return OperatorHarness(op, storage=FileStorage(tmp_path))


def check_windows(tmp_path, kind, fn, assigner, window_fn=None):
    h = window_harness(tmp_path, kind, fn, assigner, window_fn)
    h.process([(k, i) for i, k in enumerate(KEYS)], timestamps=[i % 7 for i in range(len(KEYS))])

    def more(h):
        h.process([(k, 1000 + i) for i, k in enumerate(KEYS)],
                  timestamps=[3] * len(KEYS))
        h.process([("new", 1)], timestamps=[4])
        h.watermark(20)  # fires and purges every window

    late, at_once = snapshot_pending_and_at_once(h, more)
    outputs = []
    for handles in (late, at_once):
        r = h.restore_into_new_harness(handles)
        r.watermark(MAX_WATERMARK)
        outputs.append(sorted(map(repr, r.records)))
    assert outputs[0] == outputs[1] and len(outputs[0]) == len(KEYS)


def test_window_list_panes_on_the_heap_fast_path(tmp_path):
    check_windows(tmp_path, "list", None, TumblingEventTimeWindows.of(10))


class Raw(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window, list(inputs)


def test_window_aggregate_changing_its_accumulator_in_place(tmp_path):
    check_windows(tmp_path, "aggregate", ListAgg(), TumblingEventTimeWindows.of(10),
                  window_fn=Raw())


def test_merging_session_windows(tmp_path):
    check_windows(tmp_path, "list", None, EventTimeSessionWindows.with_gap(5))
