"""``map_batches`` with Ray Data's batch formats and semantics, on rows and on columnar
streams; jobs run on the in-process executor (no Ray)."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from flowray.common.types import Row
from flowray.operators.columnar import MapBatchesOperator
from tests.support.environments import local_env
from tests.support.operator_harness import OperatorHarness


def _run(op, records):
    h = OperatorHarness(op)
    h.process(records)
    return h.records


@pytest.mark.parametrize("fmt, expected_type", [
    ("pyarrow", pa.Table), ("pandas", pd.DataFrame), ("numpy", dict), ("default", dict)])
def test_fn_gets_the_requested_format(fmt, expected_type):
    seen = []

    def fn(batch):
        seen.append(type(batch))
        return batch

    assert _run(MapBatchesOperator(fn, fmt), [(1, "a"), (2, "b")]) == [(1, "a"), (2, "b")]
    assert all(issubclass(t, expected_type) for t in seen) and seen


def test_numpy_batches_are_dicts_of_arrays():
    def fn(batch):
        assert isinstance(batch["f0"], np.ndarray)
        return {"f0": batch["f0"] * 2, "f1": batch["f1"]}

    assert _run(MapBatchesOperator(fn, "numpy"), [(1, 2.5), (3, 4.5)]) == [(2, 2.5), (6, 4.5)]


def test_rows_come_back_in_the_kind_they_went_in():
    dicts = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert _run(MapBatchesOperator(lambda t: t, "pyarrow"), dicts) == dicts
    rows = [Row(a=1, b="x"), Row(a=2, b="y")]
    out = _run(MapBatchesOperator(lambda t: t, "pyarrow"), rows)
    assert out == rows and out[0].a == 1
    assert _run(MapBatchesOperator(lambda t: t, "pyarrow"), [5, 6]) == [5, 6]
    # a result with other columns than the input's: named Rows
    out = _run(MapBatchesOperator(lambda t: {"n": t["f0"] + 1}, "numpy"), [(1,), (2,)])
    assert out == [Row(n=2), Row(n=3)] and out[0].n == 2


def test_batch_size_bounds_every_batch_and_none_takes_what_arrived():
    sizes = []

    def fn(t):
        sizes.append(t.num_rows)
        return t

    assert _run(MapBatchesOperator(fn, "pyarrow", batch_size=3), list(range(7))) == \
        list(range(7))
    assert sizes == [3, 3, 1]
    sizes.clear()
    _run(MapBatchesOperator(fn, "pyarrow", batch_size=None), list(range(7)))
    assert sizes == [7]


def test_pandas_results_and_generators():
    def fn(df):
        yield df[df["f0"] % 2 == 0]
        yield pd.DataFrame({"f0": [100]})

    assert _run(MapBatchesOperator(fn, "pandas", batch_size=None),
                [(1,), (2,), (4,)]) == [(2,), (4,), (100,)]


def test_a_callable_class_is_built_once_per_subtask_with_its_arguments():
    class AddN:
        built = 0

        def __init__(self, n):
            self.n = n
            AddN.built += 1

        def __call__(self, batch, factor=1):
            return {"item": (batch["item"] + self.n) * factor}

    op = MapBatchesOperator(AddN, "numpy", batch_size=1, fn_constructor_args=(10,),
                            fn_kwargs={"factor": 2})
    assert _run(op, [1, 2]) == [22, 24]
    assert AddN.built == 1


def test_bad_arguments_fail_at_once():
    with pytest.raises(ValueError, match="batch_format"):
        MapBatchesOperator(lambda b: b, "polars")
    with pytest.raises(ValueError, match="batch_size"):
        MapBatchesOperator(lambda b: b, "numpy", batch_size=0)
    with pytest.raises(ValueError, match="class"):
        MapBatchesOperator(lambda b: b, fn_constructor_args=(1,))


def test_a_wrong_result_names_what_was_returned():
    with pytest.raises(Exception, match="returned a int|got int"):
        _run(MapBatchesOperator(lambda b: 42, "numpy"), [1])


def test_a_job_with_map_batches_on_rows():
    env = local_env(parallelism=2)
    out = (env.from_collection([("a", i) for i in range(50)])
           .rebalance()
           .map_batches(lambda t: t.append_column("sq", pa.compute.multiply(t["f1"], t["f1"])),
                        batch_format="pyarrow", batch_size=8)
           .execute_and_collect(limit=50))
    assert sorted(out) == [Row(f0="a", f1=i, sq=i * i) for i in range(50)]


def test_map_batches_on_a_columnar_stream_stays_columnar():
    env = local_env(parallelism=1)
    t = pa.table({"x": list(range(10))})
    stream = env.from_arrow(t, batch_rows=4).map_batches(
        lambda b: {"x": b["x"] * 3}, batch_format="numpy", batch_size=None)
    assert type(stream).__name__ == "ColumnarDataStream"
    assert [r.x for r in stream.to_rows().execute_and_collect(limit=10)] == \
        [3 * i for i in range(10)]


def test_rows_to_columnar_and_back():
    env = local_env(parallelism=1)
    out = (env.from_collection([{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}])
           .to_columnar()
           .key_by("k").sum("v")
           .execute_and_collect(limit=3))
    assert sorted(out) == sorted([Row(k="a", v=1), Row(k="b", v=2), Row(k="a", v=4)])
