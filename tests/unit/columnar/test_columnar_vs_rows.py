"""The columnar and the row path give identical results for the same job: a property test
over random batches and keys, nulls included (seeded, so a failure repeats), at operator
level and for whole jobs; and columnar keyed state survives a snapshot and a rescale."""

import random

import pyarrow as pa
import pytest

from flowray.operators.base import StateSnapshotContext
from flowray.state.descriptors import StateKind
from flowray.operators.columnar import ColumnarKeyedAggregateOperator
from flowray.operators.keyed import KeyedReduceOperator, field_aggregator
from flowray.state.key_groups import assign_to_key_group
from tests.support.environments import local_env
from tests.support.operator_harness import LOWER, MAXP, UPPER, OperatorHarness

PICK = {"sum": lambda a, b: a + b, "min": min, "max": max}


def _random_batches(rng):
    """Random record batches of one schema: keys from a small pool with nulls, an int or
    float value column, a payload column with nulls, batch sizes from 0 to 40."""
    floats = rng.random() < 0.4
    int_keys = rng.random() < 0.3
    pool = ([rng.randrange(-50, 50) for _ in range(rng.randint(1, 12))] if int_keys else
            [f"u{rng.randrange(1000)}" for _ in range(rng.randint(1, 12))]) + [None]
    batches, i = [], 0
    for _ in range(rng.randint(1, 6)):
        n = rng.randint(0, 40)
        ks = [rng.choice(pool) for _ in range(n)]
        vs = [round(rng.uniform(-1e3, 1e3), 3) if floats else rng.randrange(-10**6, 10**6)
              for _ in range(n)]
        notes = [None if rng.random() < 0.3 else f"n{rng.randrange(9)}" for _ in range(n)]
        batches.append(pa.record_batch({
            "k": pa.array(ks, pa.int64() if int_keys else pa.string()),
            "v": pa.array(vs, pa.float64() if floats else pa.int64()),
            "note": pa.array(notes, pa.string()),
            "i": pa.array(range(i, i + n), pa.int64())}))
        i += n
    return batches


def _row_reducer(kind):
    pick = PICK[kind]
    return lambda a, b: {**b, "v": pick(a["v"], b["v"])}


@pytest.mark.parametrize("seed, backend", [(s, "heap") for s in range(60)] +
                         [(s, "rocksdb") for s in range(60, 70)])
def test_operator_columnar_equals_rows(seed, backend, tmp_path):
    rng = random.Random(seed)
    kind = rng.choice(["sum", "min", "max"])
    batches = _random_batches(rng)
    col = OperatorHarness(ColumnarKeyedAggregateOperator(kind, "k", "v"), backend=backend,
                          working_dir=str(tmp_path) if backend == "rocksdb" else None)
    row = OperatorHarness(KeyedReduceOperator(_row_reducer(kind), lambda r: r["k"]))
    flink = OperatorHarness(KeyedReduceOperator(field_aggregator(kind, "v"),
                                                lambda r: r["k"]))
    for b in batches:
        col.process([b])
        rows = b.to_pylist()
        if rows:
            row.process(rows)
            flink.process(rows)
    got = [r for b in col.records for r in b.to_pylist()]
    assert got == row.records
    # the aggregated field is Flink's sum/min/max of the row path (whose other fields are
    # the key's first record's)
    assert [(r["k"], r["v"]) for r in got] == [(r["k"], r["v"]) for r in flink.records]
    for b in col.records:
        assert b.schema == batches[0].schema


def test_a_null_value_fails_naming_the_column_as_the_row_path_fails():
    b = pa.record_batch({"k": ["a", "a"], "v": pa.array([1, None], pa.int64())})
    col = OperatorHarness(ColumnarKeyedAggregateOperator("sum", "k", "v"))
    with pytest.raises(ValueError, match="'v' has a null"):
        col.process([b])
    row = OperatorHarness(KeyedReduceOperator(_row_reducer("sum"), lambda r: r["k"]))
    with pytest.raises(Exception):
        row.process(b.to_pylist())


def test_a_non_numeric_column_is_refused_by_name():
    b = pa.record_batch({"k": ["a"], "v": ["x"]})
    with pytest.raises(TypeError, match="'v' is string"):
        OperatorHarness(ColumnarKeyedAggregateOperator("sum", "k", "v")).process([b])


def test_running_values_survive_a_snapshot_and_a_rescale():
    rng = random.Random(7)
    keys = [f"k{i}" for i in range(40)] + [None]
    first = pa.record_batch({"k": [rng.choice(keys) for _ in range(300)],
                             "v": [rng.randrange(100) for _ in range(300)]})
    later = pa.record_batch({"k": [rng.choice(keys) for _ in range(300)],
                             "v": [rng.randrange(100) for _ in range(300)]})
    h = OperatorHarness(ColumnarKeyedAggregateOperator("sum", "k", "v"))
    h.process([first])
    h.operator.snapshot_state(StateSnapshotContext(1, 0))  # the task's sync point
    handles = h.snapshot()
    totals = {}
    for r in first.to_pylist() + later.to_pylist():
        totals[r["k"]] = totals.get(r["k"], 0) + r["v"]
    got = {}
    for kgr in (LOWER, UPPER):
        restored = h.restore_into_new_harness(handles, key_group_range=kgr)
        mine = [i for i, k in enumerate(later.column("k").to_pylist())
                if assign_to_key_group(k, MAXP) in kgr]
        restored.process([later.take(pa.array(mine, pa.int64()))])
        for b in restored.records:
            for r in b.to_pylist():
                got[r["k"]] = r["v"]
    assert got == {k: totals[k] for k in got}
    assert set(got) == {r["k"] for r in later.to_pylist()}


@pytest.mark.parametrize("seed", range(4))
def test_a_job_columnar_equals_rows(seed):
    rng = random.Random(1000 + seed)
    kind = ["sum", "min", "max"][seed % 3]
    batches = [b for b in _random_batches(rng) if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    env = local_env(parallelism=2)
    columnar = getattr(env.from_arrow(table, batch_rows=rng.randint(1, 30))
                       .key_by("k"), kind)("v").to_rows()
    got = [r.as_dict() if hasattr(r, "as_dict") else dict(zip(r._fields, r))
           for r in columnar.execute_and_collect(limit=table.num_rows)]
    env = local_env(parallelism=2)
    rows = (env.from_collection(table.to_pylist())
            .key_by(lambda r: r["k"]).reduce(_row_reducer(kind)))
    want = list(rows.execute_and_collect(limit=table.num_rows))
    by_index = lambda rs: sorted(rs, key=lambda r: r["i"])  # noqa: E731
    assert by_index(got) == by_index(want)


def test_each_checkpoint_writes_the_values_changed_since_the_last_one():
    op = ColumnarKeyedAggregateOperator("sum", "k", "v")
    h = OperatorHarness(op)
    h.process([pa.record_batch({"k": ["a", "b", "a"], "v": [1, 2, 3]})])
    op.snapshot_state(StateSnapshotContext(1, 0))
    table = h.backend.get_state_table(op.state_name, StateKind.VALUE)
    assert {k: v for m in table.maps for k, v in m.items()} == {"a": 4, "b": 2}
    h.process([pa.record_batch({"k": ["b"], "v": [5]})])
    assert op._cache.dirty.sum() == 1
    op.snapshot_state(StateSnapshotContext(2, 0))
    assert {k: v for m in table.maps for k, v in m.items()} == {"a": 4, "b": 7}
    assert op._cache.dirty.sum() == 0
