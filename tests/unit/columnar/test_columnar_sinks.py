"""Record batches go into Parquet (and so Spark table) sinks as they are: no rows, the
sink's schema enforced by column name, and exactly-once files as for rows."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowray.operators.parquet_sink import (
    ParquetFilesSink,
    SchemaMismatchError,
    records_to_table,
)
from tests.support.environments import local_env

SCHEMA = pa.schema([("user", pa.string()), ("total", pa.int64())])


def test_batches_become_the_table_in_the_sink_schema():
    b = pa.record_batch({"total": pa.array([1, 2], pa.int32()), "user": ["a", None]})
    table = records_to_table([b, b], SCHEMA)
    assert table.schema == SCHEMA
    assert table.to_pylist() == [{"user": "a", "total": 1}, {"user": None, "total": 2}] * 2


def test_a_batch_with_other_columns_is_named():
    b = pa.record_batch({"user": ["a"], "n": [1]})
    with pytest.raises(SchemaMismatchError, match=r"\['n', 'user'\].*\['total', 'user'\]"):
        records_to_table([b], SCHEMA, "table t")


def test_a_value_that_does_not_fit_is_a_schema_mismatch():
    b = pa.record_batch({"user": ["a"], "total": ["not a number"]})
    with pytest.raises(SchemaMismatchError, match="does not fit"):
        records_to_table([b], SCHEMA)


def test_a_columnar_job_into_an_exactly_once_parquet_sink(tmp_path):
    env = local_env(parallelism=2)
    env.enable_checkpointing(50)
    users = [f"u{i % 7}" for i in range(200)]
    source = pa.table({"user": users, "amount": pa.array([i % 5 for i in range(200)],
                                                         pa.int64())})
    (env.from_arrow(source, batch_rows=16)
        .key_by("user").sum("amount")
        .map_batches(lambda t: {"user": t["user"], "total": t["amount"]},
                     batch_format="numpy", batch_size=None)
        .sink_to(ParquetFilesSink(str(tmp_path), SCHEMA)))
    env.execute("columnar-to-parquet")
    got = pq.read_table(str(tmp_path)).to_pylist()
    assert len(got) == 200
    final = {}
    for u, a in zip(users, source.column("amount").to_pylist()):
        final[u] = final.get(u, 0) + a
    assert {u: max(r["total"] for r in got if r["user"] == u) for u in final} == final
