"""The C halves of hot paths (``flowray.common.native``) against their pure-Python twins:
each C function gives what its twin gives, case by case, and the suites of Row and of the
keyed sum pass with the twins alone (``FLOWRAY_PURE_PYTHON=1``, in a process of its own,
since ``Row`` is defined once per process)."""

import gc
import os
import subprocess
import sys
import weakref

import pytest

from flowray.common import Row, RowKind
from flowray.common import types as row_types
from flowray.common.native import native

_records = native("flowray.common._records")
_keyed = native("flowray.operators._keyed")
needs_c = pytest.mark.skipif(_records is None or _keyed is None,
                             reason="the C halves are not built here (no C compiler?)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _outcome(f, *args):
    """What ``f(*args)`` gives, comparable across twins: the value with its type and, for
    rows, their names and kind; or the exception's type."""
    try:
        v = f(*args)
    except Exception as e:  # noqa: BLE001 - the exception's type is the outcome
        return ("raises", type(e))
    if isinstance(v, Row):
        return (type(v), tuple(v), v._fields, v.get_row_kind())
    if isinstance(v, list):
        return ("list", [_outcome(lambda x: x, x) for x in v])
    return (type(v), v)


def _row_cases():
    named = Row(k="a", v=1)
    own_kind = Row(k="a", v=2)
    own_kind.set_row_kind(RowKind.DELETE)
    own_names = Row("a", 3)
    own_names.set_field_names(["x", "y"])
    holding_a_list = Row(k="b", v=[1])
    return [named, own_kind, own_names, Row("a", 4), holding_a_list, Row(k="c", v=2.5),
            Row(k="d", n=1, m=2)]


def test_the_twins_are_what_the_module_says_is_in_use():
    assert row_types.C_ROWS is (_records is not None)
    if _records is not None:
        assert row_types.make_row is _records.make
        assert issubclass(Row, _records.RowBase)
    assert isinstance(Row(a=1), tuple)


@needs_c
def test_flatten_and_unflatten_in_c_are_their_twins():
    named = Row(k="a", v=1)
    cls = type(named)
    other = type(Row(x="a", y=1))
    own_kind = Row(k="a", v=2)
    own_kind.set_row_kind(RowKind.UPDATE_AFTER)
    own_names = Row.with_fields(("k", "v"), ("a", 5))
    own_names.set_field_names(["x", "y"])
    back = Row(k="b", v=3)
    back.set_row_kind(RowKind.DELETE)
    back.set_row_kind(RowKind.INSERT)   # the class's again
    back.set_field_names(["k", "v"])    # the class's names
    batches = [[named, Row(k="b", v=2)], [named, own_kind], [named, Row(x="a", y=1)],
               [named, ("a", 1)], [named, own_names], [], [named] * 3, [named, back],
               [("a", 1), ("b", 2)], [("a", 1), ("b",)], [(), ()], [("a", 1), ["b", 2]],
               [("a", [1]), ("b", None)], [Row("a", 1), Row("b", 2)], [Row("a"), ("a",)],
               (("a", 1),), [("a", 1), Row(k="b", v=2)]]
    for records in batches:
        for c in (None, cls, other, Row):
            got = _outcome(_records.flatten, records, c)
            assert got == _outcome(row_types._flatten_py, records, c), (records, c)
            if got[0] is not type(None):
                width, values = _records.flatten(records, c)
                again = _outcome(_records.unflatten, c, width, values)
                assert again == _outcome(row_types._unflatten_py, c, width, values)
                assert again == _outcome(lambda: list(records))
    assert _records.flatten([named, Row(k="b", v=2)], cls) == (2, ["a", 1, "b", 2])
    assert _records.flatten([back], cls) == (2, ["b", 3])
    for c, width, values in ((None, 2, [1, 2, 3]), (cls, 0, []), (None, -1, [1])):
        assert _outcome(_records.unflatten, c, width, values) == \
            _outcome(row_types._unflatten_py, c, width, values) == ("raises", ValueError)


@needs_c
def test_make_and_from_tuples_in_c_are_tuple_new():
    cls = type(Row(k="a", v=1))
    for values in [("a", 1), ("a", [1, 2]), ["a", 1], (), 7]:
        assert _outcome(_records.make, cls, values) == _outcome(tuple.__new__, cls, values)
    assert _records.make(cls, iter(("a", 1))) == ("a", 1)
    assert _outcome(_records.from_tuples, cls, [("a", 1), ("b", 2)]) == \
        _outcome(lambda: [tuple.__new__(cls, t) for t in [("a", 1), ("b", 2)]])
    with pytest.raises(TypeError, match="Row class"):
        _records.make(tuple, ("a", 1))


@needs_c
def test_rows_of_atomic_values_are_left_to_reference_counting():
    cls = type(Row(k="a", v=1))
    assert not gc.is_tracked(_records.make(cls, ("a", 1)))
    assert not gc.is_tracked(_records.make(cls, ("a", (1, 2.5, None))))
    assert gc.is_tracked(_records.make(cls, ("a", [1])))   # a container: it may cycle
    r = _records.make(cls, ("a", 1))
    r.set_row_kind(RowKind.DELETE)   # an instance dict: tracked from then on
    assert gc.is_tracked(r)


@needs_c
def test_a_cycle_through_a_rows_own_attribute_is_still_collected():
    class Holder:
        pass
    r = _records.make(type(Row(k="a", v=1)), ("a", 1))
    h = Holder()
    h.row, r.holder = r, h        # a cycle through the row's own dict
    dead = weakref.ref(h)
    del h, r
    gc.collect()
    assert dead() is None


@needs_c
def test_field_sum_in_c_is_its_python_twin_case_by_case():
    from flowray.operators import keyed
    rows = _row_cases()
    values = [("a", 1), ("a", 2, "x"), ("a", 1.5), (1,), (), ("a", "s"), ("a", None),
              tuple(range(20)), ["a", 1], {"f": 1}, 3, 2.5, True, "s", None] + rows
    for field in (-3, -1, 0, 1, 2, 5, 19):
        c = keyed.field_aggregator("sum", field)
        assert type(c).__name__ == "FieldSum"
        py = keyed._with_short_tuples_inline(c.general, field)
        for a in values:
            for b in values:
                assert _outcome(c, a, b) == _outcome(py, a, b), (field, a, b)


@needs_c
def test_field_sum_pickles_as_the_call_that_builds_it():
    import pickle

    import cloudpickle

    from flowray.operators.keyed import field_aggregator
    agg = field_aggregator("sum", 1)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        back = pickle.loads(dumps(agg))
        assert back((1, 2), (3, 4)) == (1, 6) and back.__name__ == "sum(1)"
    with pytest.raises(TypeError, match="2 positional"):
        agg((1, 2))


def test_the_suites_pass_with_the_pure_python_twins_alone():
    """The tests of what has a C half (rows, type conversions, the keyed sum and fold, key
    groups, windows' folds, timers' batch paths, the RocksDB cache's fold; and this file's) in a process where FLOWRAY_PURE_PYTHON=1 leaves every C half
    unused."""
    env = dict(os.environ, FLOWRAY_PURE_PYTHON="1")
    check = ("from flowray.common import types; from flowray.operators import keyed; "
             "from flowray.state import key_groups; "
             "from flowray.operators.windowing import aligned_panes; "
             "assert not types.C_ROWS and keyed._keyed is None and not key_groups._NATIVE; "
             "assert aligned_panes._windows is None; "
             "from flowray.operators import timers; assert timers._timers is None; "
             "from flowray.state.rocksdb import value_accessor; "
             "assert value_accessor._value_cache is None; "
             "assert type(keyed.field_aggregator('sum', 1)).__name__ == 'function'")
    subprocess.run([sys.executable, "-c", check], env=env, cwd=ROOT, check=True)
    tests = ["tests/unit/common/test_row.py", "tests/unit/common/test_type_conversion.py",
             "tests/unit/common/test_native_twins.py",
             "tests/unit/runtime/execution/test_key_types_in_jobs.py",
             "tests/unit/operators/test_typed_output.py", "tests/unit/state/test_key_groups.py",
             "tests/unit/state/test_key_group_batch.py", "tests/unit/state/test_heap_cow.py",
             "tests/unit/state/test_heap_cow_operators.py",
             "tests/unit/operators/test_window_operator.py", "tests/unit/operators/windowing",
             "tests/unit/operators/test_timers.py",
             "tests/unit/state/test_rocksdb_batching.py",
             "tests/unit/state/test_rocksdb_value_accessor.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-k", "not pure_python_twins_alone", *tests],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _declared_types():
    from flowray.common import Types
    fields = [
        [Types.STRING(), Types.LONG()], [Types.INT(), Types.BOOLEAN()],
        [Types.BYTE(), Types.SHORT()], [Types.DOUBLE(), Types.BIG_DEC()],
        [Types.SQL_DATE(), Types.LOCAL_DATE()], [Types.PICKLED_BYTE_ARRAY(), Types.CHAR()],
        [Types.BIG_INT(), Types.STRING()]]
    for fs in fields:
        yield Types.TUPLE(fs)
        yield Types.ROW_NAMED(["a", "b"], fs)
        yield Types.ROW(fs)


def _records_to_convert():
    import datetime
    from decimal import Decimal

    class MyInt(int):
        pass

    class MyStr(str):
        pass
    own_kind = Row(a="x", b=1)
    own_kind.set_row_kind(RowKind.UPDATE_BEFORE)
    own_names = Row(a="x", b=1)
    own_names.set_field_names(["b", "a"])
    values = ["x", 1, -1, True, 1.5, None, 2 ** 40, 2 ** 63, -2 ** 63, 128, -129, 40000,
              Decimal("1.5"), datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2),
              MyInt(3), MyStr("s"), b"bytes", [1]]
    records = [(a, b) for a in values for b in values[:12]]
    records += [["x", 1], {"a": "x", "b": 1}, ("x",), ("x", 1, 2), (), "xy", None, 7,
                Row(a="x", b=1), Row(b=1, a="x"), Row(f0="x", f1=1), own_kind, own_names,
                Row("x", 1)]
    return records


@needs_c
def test_field_checks_in_c_are_the_per_record_converter():
    from flowray.common import type_conversion as tc
    records = _records_to_convert()
    for t in _declared_types():
        conv = tc.record_converter(t)
        batch = tc.batch_converter(t)
        assert type(batch).__name__ == "FieldChecks", t
        for r in records:
            assert _outcome(batch, [r]) == _outcome(lambda x: [conv(x)], r), (t, r)
        fitting = [r for r in records if _outcome(conv, r)[0] != "raises"]
        assert _outcome(batch, fitting) == _outcome(lambda: [conv(r) for r in fitting])
        failing = [r for r in records if _outcome(conv, r)[0] == "raises"]
        if failing:   # the first record that does not fit ends the batch, with its error
            with pytest.raises(tc.RecordTypeError) as c_error:
                batch(fitting[:3] + failing[:2])
            with pytest.raises(tc.RecordTypeError) as py_error:
                [conv(r) for r in fitting[:3] + failing[:2]]
            assert str(c_error.value) == str(py_error.value)


@needs_c
def test_field_checks_pass_fitting_records_through_as_they_are():
    from flowray.common import Types
    from flowray.common.type_conversion import batch_converter
    records = [("a", 1), ("b", 2)]
    out = batch_converter(Types.TUPLE([Types.STRING(), Types.LONG()]))(records)
    assert all(o is r for o, r in zip(out, records))
    rows = batch_converter(Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()]))(records)
    again = batch_converter(Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.LONG()]))(rows)
    assert all(a is r for a, r in zip(again, rows)) and rows[0].k == "a"


def first(r):
    """The key of a ``(key, value)`` record."""
    return r[0]


def failing_reduce(a, b):
    """A running sum of ``(key, value)`` records that fails at the value 13."""
    if b[1] == 13:
        raise ValueError("13")
    return (a[0], a[1] + b[1])


@needs_c
def test_the_keyed_fold_in_c_is_its_python_twin():
    """Both folds over the same batches into copies of the same dicts: the same outputs,
    the same dicts after, the same error at the same record (and what came before it
    folded)."""
    import copy
    import math

    from flowray.operators import keyed
    from flowray.state.key_types import canonical_key

    keys = ["a", "b", 1, 2, b"x", True, None, 1.5, math.nan, float("nan"), ("t", 1),
            ("t", math.nan), -7]
    records = [(k, i) for i, k in enumerate(keys * 3)]
    kgs = [i % 3 for i in range(len(records))]
    cases = [
        (records, kgs, 0, first, keyed.field_aggregator("sum", 1)),
        (records, [g + 5 for g in kgs], 5, first, keyed.field_aggregator("sum", 1)),
        (records, kgs, 0, first, failing_reduce),
        (records, kgs, 0, lambda r: [r[0]], keyed.field_aggregator("sum", 1)),  # unhashable
        (records, kgs, 0, lambda r: object(), keyed.field_aggregator("sum", 1)),  # no key type
        (records, kgs, 0, first, lambda a, b: None),
        (records, [7] * len(records), 0, first, keyed.field_aggregator("sum", 1)),  # no map
        (records, [-1] * len(records), 0, first, keyed.field_aggregator("sum", 1)),
        (records[:5], kgs, 0, first, keyed.field_aggregator("sum", 1)),   # zip's length
        ([], [], 0, first, keyed.field_aggregator("sum", 1)),
    ]
    for recs, groups, start, key_of, reduce in cases:
        maps = [{"a": ("a", 100)}, {}, {}]
        c_maps, py_maps = copy.deepcopy(maps), copy.deepcopy(maps)
        c = _outcome(_keyed.fold_reduce, recs, groups, c_maps, start, key_of, reduce,
                     canonical_key)
        py = _outcome(keyed._fold_reduce_py, recs, groups, py_maps, start, key_of, reduce,
                      canonical_key)
        assert c == py, (key_of, reduce)
        assert repr(c_maps) == repr(py_maps), (key_of, reduce)
    assert keyed._fold_reduce is _keyed.fold_reduce


_key_groups = native("flowray.state._key_groups")


@pytest.mark.skipif(_key_groups is None, reason="the C halves are not built here")
def test_key_groups_in_c_are_the_numpy_twins_and_assign_to_key_group():
    import random

    from flowray.state import key_groups as kg
    rng = random.Random(7)
    strs = ["", "a", "k0", "ü", "日本語", "🙂", "x" * 300, "\x00", "a\u0301"] + [
        "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(128, 0x2FFF),
                                rng.randrange(0x10000, 0x10FFFF)]))
                for _ in range(rng.randrange(0, 12))) for _ in range(2000)]
    ints = [0, 1, -1, 2 ** 31, -2 ** 31, 2 ** 32, -2 ** 32 - 1, 2 ** 63 - 1, -2 ** 63] + [
        rng.randrange(-2 ** 63, 2 ** 63) for _ in range(2000)] + list(range(-500, 500))
    for maxp in (1, 7, 128, 32768):
        for keys, c, twin in ((strs, _key_groups.str_key_groups, kg._str_key_groups),
                              (ints, _key_groups.int_key_groups, kg._int_key_groups)):
            expected = [kg.assign_to_key_group(k, maxp) for k in keys]
            assert c(keys, maxp) == twin(keys, maxp) == expected
            assert kg.KeyGroupAssigner(maxp).assign_batch(keys) == expected
    # what the C half leaves to the caller: None, and the assigner then goes key by key
    for keys in (["a", "\ud800"], ["a", 1], [1, True], [1, 2 ** 63], [1, "a"], [1.5, 2.5]):
        c = _key_groups.str_key_groups if type(keys[0]) is str else _key_groups.int_key_groups
        if type(keys[0]) in (str, int):
            assert c(keys, 128) is None
        assert kg.KeyGroupAssigner(128).assign_batch(keys) == [
            kg.assign_to_key_group(k, 128) for k in keys]
    with pytest.raises(ValueError, match="positive"):
        _key_groups.str_key_groups(["a"], 0)


_windows = native("flowray.operators._windows")


@pytest.mark.skipif(_windows is None, reason="the C halves are not built here")
def test_the_aligned_window_fold_in_c_is_its_python_twin():
    """fold_aligned against _fold_tumbling / _fold_sliding: the same panes created, in the
    same order, and the same dicts after (window first: key group -> window -> key), for tumbling and sliding windows (offsets,
    slides that do not divide the size, more windows a record than the C half keeps,
    negative timestamps, in and out of order), with and without a combine
    function (contents first, record first as an aggregate function's add, or appending to
    list contents, and what is not a list left to the fold), contents that are None, a fold
    that fails mid-batch, keys that already have panes, windows with an empty dict of keys,
    and key groups that start past 0."""
    import copy
    import random

    from flowray.operators.windowing import aligned_panes as aligned
    from flowray.operators.windowing.aligned_panes import AlignedPanes
    from flowray.operators.windowing.assigners import (
        SlidingEventTimeWindows,
        TumblingEventTimeWindows,
    )
    rng = random.Random(3)

    def add(acc, r):
        return r[1] if acc is None else acc + r[1]

    def none_at_7(acc, r):
        return None if r[1] == 7 else add(acc, r)

    def fails_at_13(acc, r):
        if r[1] == 13:
            raise ValueError("13")
        return add(acc, r)

    def combine(acc, r):
        return acc + r[1]

    def record_first(r, acc):   # an aggregate function's add(value, accumulator)
        return add(acc, r)

    def record_first_none_at_7(r, acc):
        return none_at_7(acc, r)

    def record_first_fails_at_13(r, acc):
        return fails_at_13(acc, r)

    def listed(acc, r):   # a process window function's contents (a tuple once in a while)
        if acc is None:
            return (r,) if r[1] == 5 else [r]
        return acc + (r,) if type(acc) is tuple else acc + [r]
    assigners = [TumblingEventTimeWindows.of(10), TumblingEventTimeWindows.of(10, 3),
                 TumblingEventTimeWindows.of(7), SlidingEventTimeWindows.of(10, 5),
                 SlidingEventTimeWindows.of(10, 3), SlidingEventTimeWindows.of(9, 3, 2),
                 # more windows a record than the C half keeps of the record before
                 SlidingEventTimeWindows.of(60, 3), SlidingEventTimeWindows.of(50, 3, 1)]
    for assigner in assigners:
        for fold, comb, native_combine in (
                (add, combine, None), (add, None, None), (none_at_7, combine, None),
                (fails_at_13, None, None), (add, None, (aligned.RECORD_FIRST, record_first)),
                (none_at_7, None, (aligned.RECORD_FIRST, record_first_none_at_7)),
                (fails_at_13, None, (aligned.RECORD_FIRST, record_first_fails_at_13)),
                (listed, None, (aligned.APPEND, None))):
            panes = AlignedPanes(assigner, fold, comb, native_combine)
            twin = panes._fold_tumbling if panes.size == panes.slide else panes._fold_sliding
            for first, in_order in ((0, False), (2, False), (0, True)):
                n = 200
                keys = [rng.choice(["a", "b", "c", 1, ("t", 2)]) for _ in range(n)]
                records = [(k, rng.randrange(0, 20)) for k in keys]
                timestamps = [rng.randrange(-40, 60) for _ in range(n)]
                if in_order:   # runs of records with the same windows
                    timestamps.sort()
                kgs = [first + (hash(str(k)) % 3) for k in keys]
                maps = [{panes.window(0): {"a": 100}}, {panes.window(10): {}}, {}]
                by_group = [None] * first + maps
                c_maps = copy.deepcopy(by_group)
                py_maps = copy.deepcopy(by_group)
                how, native = panes.native_combine
                c = _outcome(_windows.fold_aligned, c_maps, records, keys, kgs, timestamps,
                             panes.size, panes.slide, panes.offset, panes._windows,
                             panes.window, panes.fold, native, how)
                py = _outcome(twin, py_maps, records, keys, kgs, timestamps)
                assert c == py, (assigner, fold)
                assert repr(c_maps) == repr(py_maps), (assigner, fold)
    # timestamps it does not do: None, and nothing touched
    panes = AlignedPanes(TumblingEventTimeWindows.of(10), add, combine)
    maps = [{}]
    for stamps in ([1.5], [2 ** 62], [True]):
        assert _windows.fold_aligned(maps, [("a", 1)], ["a"], [0], stamps, 10, 10, 0,
                                     panes._windows, panes.window, add, combine, 0) is None
    assert maps == [{}]
    with pytest.raises(ValueError, match="how"):
        _windows.fold_aligned(maps, [], [], [], [], 10, 10, 0, panes._windows, panes.window,
                              add, combine, 3)


@needs_c
def test_rows_on_the_free_list_keep_their_classes_counts_and_values():
    """Rows of flowray's own classes go back to a free list when freed, and come out of
    it for new rows: each class's reference count comes back to what it was, values and
    instance dicts are the new row's own, a user's subclass (with a finalizer) still
    frees through CPython, and a deep chain of rows is freed without a deep C stack."""
    import gc

    gc.collect()   # garbage of earlier tests that holds the class goes now, not midway
    gc.disable()
    try:
        _free_list_round_trips()
    finally:
        gc.enable()


def _free_list_round_trips():
    import gc
    import sys

    cls = type(Row(k="a", v=1))
    base = sys.getrefcount(cls)
    rows = [_rowtype_make(cls, (f"k{i}", i)) for i in range(5000)]
    assert sys.getrefcount(cls) == base + 5000
    rows[7].set_row_kind(RowKind.DELETE)
    del rows
    assert sys.getrefcount(cls) == base
    again = [_rowtype_make(cls, ("x", i)) for i in range(3000)]   # from the free list
    assert [tuple(r) for r in again[:2]] == [("x", 0), ("x", 1)]
    assert all(r.get_row_kind() is RowKind.INSERT and r._fields == ("k", "v") for r in again)
    unnamed = Row(1, 2)   # Row's own rows too
    assert type(unnamed) is Row and tuple(unnamed) == (1, 2)
    del again, unnamed
    assert sys.getrefcount(cls) == base
    boxed, plain = _rowtype_make(cls, ("x", [1])), _rowtype_make(cls, ("y", 2))  # reused
    assert gc.is_tracked(boxed) and not gc.is_tracked(plain)
    del boxed, plain
    assert sys.getrefcount(cls) == base

    finalized = []

    class Mine(cls):   # a user's subclass, with a finalizer: freed by CPython
        def __del__(self):
            finalized.append(tuple(self))
    mine_base = sys.getrefcount(Mine)
    m = Mine("m", 1)
    m.extra = [1]
    del m
    assert finalized == [("m", 1)] and sys.getrefcount(Mine) == mine_base

    one = type(Row(x=1))
    chain = _rowtype_make(one, (None,))
    for _ in range(200_000):
        chain = _rowtype_make(one, (chain,))
    del chain   # freed through the trashcan, not 200,000 C frames deep


def _rowtype_make(cls, values):
    return _records.make(cls, values)


_value_cache = native("flowray.state._value_cache")


@pytest.mark.skipif(_value_cache is None, reason="the C halves are not built here")
def test_the_cached_fold_in_c_is_its_python_twin():
    """Both folds over the same batches into copies of the same cache: the same keys,
    values and plainness, the same cache and dirty set after, the same error at the same
    record; and a batch that cannot fold in the cache changes nothing in either."""
    import copy

    from flowray.operators import keyed
    from flowray.state.rocksdb import value_accessor as va


    def failing_key(r):
        if r[1] == 5:
            raise KeyError("5")
        return r[0]
    total = keyed.field_aggregator("sum", 1)
    cached = ["a", "b", 1, b"x", True, None, -7]
    records = [(k, i) for i, k in enumerate(cached * 3)]
    kgs = [i % 3 for i in range(len(records))]
    cases = [
        (records, kgs, first, total),
        (records, [g + 5 for g in kgs], first, total),          # out of [0, 2]
        (records, [True] * len(records), first, total),         # a bool is not a group
        (records + [("new", 1)], kgs + [0], first, total),      # a key not cached
        (records + [("held", 1)], kgs + [0], first, total),     # cached as stored bytes
        (records + [(1.5, 1)], kgs + [0], first, total),        # not a plain key type
        (records + [((1, 2), 1)], kgs + [0], first, total),
        (records, kgs, first, failing_reduce),
        (records, kgs, failing_key, total),
        (records, kgs, lambda r: [r[0]], total),                # unhashable
        (records, kgs, first, lambda a, b: None),               # clears
        (records, kgs, first, lambda a, b: [a, b]),             # not plain: a list
        (records, kgs, first, lambda a, b: (a[0], [b[1]])),     # a tuple holding a list
        (records, kgs, first, lambda a, b: (a[0], 2.5, None, b"y", "s", False)),
        (records[:5], kgs, first, total),                       # zip's length
        ([], [], first, total),
    ]
    for recs, groups, key_of, reduce in cases:
        cache = {k: va._ABSENT for k in cached}
        cache["a"] = ("a", 100)
        cache["held"] = va._Stored(b"\x01")
        c_cache, py_cache = copy.copy(cache), copy.copy(cache)
        c_dirty, py_dirty = {"z"}, {"z"}
        c = _outcome(_value_cache.fold_cached, recs, groups, 0, 2, key_of, reduce, c_cache,
                     c_dirty, va._ABSENT, va._Stored)
        py = _outcome(va._fold_cached_py, recs, groups, 0, 2, key_of, reduce, py_cache,
                      py_dirty, va._ABSENT, va._Stored)
        assert c == py, (groups[:1], key_of, reduce)
        assert c_cache == py_cache and c_dirty == py_dirty, (key_of, reduce)
        if c[0] is tuple and c[1][1] is None:  # did not fold: nothing changed
            assert c_cache == cache and c_dirty == {"z"}
        # no dirty set (the accessor finds its writes by the entries' identity): the same
        c_cache, py_cache = copy.copy(cache), copy.copy(cache)
        c = _outcome(_value_cache.fold_cached, recs, groups, 0, 2, key_of, reduce, c_cache,
                     None, va._ABSENT, va._Stored)
        py = _outcome(va._fold_cached_py, recs, groups, 0, 2, key_of, reduce, py_cache,
                      None, va._ABSENT, va._Stored)
        assert c == py and c_cache == py_cache, (key_of, reduce)
    with pytest.raises(TypeError, match="dirty a set or None"):
        _value_cache.fold_cached([], [], 0, 2, first, total, {}, [], va._ABSENT, va._Stored)
    assert va._fold_cached is _value_cache.fold_cached


_timers = native("flowray.operators._timers")


def _timer_world(first):
    """A timer service's queue and heap dicts, as the batch paths see them: live timers,
    FIFOs per timestamp, key-group dicts (one held by a snapshot), and what went through
    the backend's own path."""
    import collections
    maps = [{"a": {(5, "w"): None}}, {"b": None}, {}]
    shared = [None, None, object()]   # key group first + 2: held by a pending snapshot
    live = {(5, "a", "w")}
    buckets = {5: collections.deque([("a", first, "w")])}
    times = [5]
    return {"live": live, "maps": maps, "shared": shared, "buckets": buckets,
            "times": times, "calls": [], "pushes": []}


def _timer_state(w):
    return (w["live"], w["maps"], {t: list(b) for t, b in w["buckets"].items()},
            w["times"], w["calls"], w["pushes"])


@pytest.mark.skipif(_timers is None, reason="the C halves are not built here")
def test_the_timer_batch_paths_in_c_are_their_python_twins():
    """register_timers and take_due_timers against _register_timers_py and
    _take_due_timers_py: the same result and the same live set, FIFOs, heap pushes, dicts
    and calls through the backend's path after, for timers already live and repeated in
    the batch, keys with and without timers (and a None where a key's dict would be),
    timestamps that come back after another (an existing FIFO), key groups held by a
    snapshot or out of range (the backend's path), key groups that start past 0, a
    backend path that fails mid-batch, and fired timers that were deleted or leave their
    key without timers."""
    import heapq
    import random

    from flowray.operators import timers as tm
    rng = random.Random(5)

    class Boom(Exception):
        pass

    for first in (0, 3):
        for fail_at in (None, 4):
            batches = []
            for _ in range(30):
                n = rng.randrange(0, 12)
                batches.append([(rng.choice(["a", "b", "c", 7]),
                                 first + rng.randrange(-1, 4),   # -1 and 3: out of range
                                 rng.choice(["w", "v"]), rng.choice([5, 9, 12]))
                                for _ in range(n)])
            batches.append([("a", first, "w", 5)] * 3)   # live already, repeated
            states = {}
            for name, register, take in (
                    ("c", _timers.register_timers, _timers.take_due_timers),
                    ("py", tm._register_timers_py, tm._take_due_timers_py)):
                w = _timer_world(first)
                outcomes = []

                def put(key, kg, ts, ns, w=w):
                    w["calls"].append(("put", key, kg, ts, ns))
                    if fail_at is not None and len(w["calls"]) == fail_at:
                        raise Boom()

                def remove(key, kg, ts, ns, w=w):
                    w["calls"].append(("remove", key, kg, ts, ns))

                def push(times, ts, w=w):
                    w["pushes"].append(ts)
                    heapq.heappush(times, ts)

                for i, batch in enumerate(batches):
                    outcomes.append(_outcome(register, batch, w["live"], w["maps"],
                                             w["shared"], first, w["buckets"], w["times"],
                                             push, put))
                    if i % 7 == 6:   # a timestamp fires: its FIFO taken, some deleted
                        ts = w["times"][0]
                        fifo = list(w["buckets"][ts])
                        w["buckets"][ts].clear()
                        for timer in fifo[::3]:
                            w["live"].discard((ts, timer[0], timer[2]))
                        outcomes.append(_outcome(take, ts, fifo, w["live"], w["maps"],
                                                 w["shared"], first, remove))
                states[name] = (outcomes, _timer_state(w))
            assert states["c"] == states["py"], (first, fail_at)
            assert any(o[0] == "raises" for o in states["py"][0]) == (fail_at is not None)
    assert tm._register_timers is _timers.register_timers
    assert tm._take_due_timers is _timers.take_due_timers
    with pytest.raises(TypeError, match="live must be a set"):
        _timers.register_timers([], [], [], [], 0, {}, [], heapq.heappush, print)
    with pytest.raises(ValueError, match="key, key group, namespace, timestamp"):
        _timers.register_timers([("a", 0, "w")], set(), [{}], [None], 0, {}, [],
                                heapq.heappush, print)
