"""Spark Parquet tables read in place (flowray/spark/parquet_table.py): which tables qualify,
the blocks of their files, reading them in the table's schema, and a file that is gone.
No Spark: the session is a stand-in answering the calls the decision makes."""

import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from flowray.operators.sources import SourceReaderContext
from flowray.spark.block_source import ArrowBlockSource
from flowray.spark.parquet_table import (
    ParquetTableBlockStore,
    TableFileGoneError,
    file_blocks,
    local_path,
    parquet_table_store,
)

SCHEMA = pa.schema([("user", pa.string()), ("n", pa.int64())])


def _write(folder, name, users, row_group_size=None):
    path = os.path.join(folder, name)
    # the columns in another order and n as int32: the reader selects and casts
    pq.write_table(pa.table({"n": pa.array(range(len(users)), pa.int32()), "user": users}),
                   path, row_group_size=row_group_size)
    return path


class FakeSpark:
    """What parquet_table_store asks of a session, for one table."""

    def __init__(self, location, files, provider="parquet", partitioned=False):
        self.location, self.files = location, files
        self.provider, self.partitioned = provider, partitioned
        self.catalog = SimpleNamespace(listColumns=lambda t: [
            SimpleNamespace(name="user", isPartition=self.partitioned),
            SimpleNamespace(name="n", isPartition=False)])

    def sql(self, query):
        assert query.startswith("DESCRIBE TABLE EXTENDED")
        row = lambda name, value: SimpleNamespace(col_name=name, data_type=value)  # noqa: E731
        rows = [row("user", "string"), row("Location", "a column named Location"),
                row("", ""), row("# Detailed Table Information", ""),
                row("Provider", self.provider), row("Location", self.location)]
        return SimpleNamespace(collect=lambda: rows)

    def table(self, name):
        schema = StructType([StructField("user", StringType()), StructField("n", LongType())])
        return SimpleNamespace(schema=schema, inputFiles=lambda: list(self.files))


def test_row_groups_are_the_blocks_in_file_order_and_empty_ones_are_left_out(tmp_path):
    a = _write(tmp_path, "part-0.parquet", ["a", "b", "c"], row_group_size=2)
    b = _write(tmp_path, "part-1.parquet", [])
    c = _write(tmp_path, "part-2.parquet", ["d"])
    assert file_blocks([a, b, c], ["user", "n"]) == [(a, 0), (a, 1), (c, 0)]


def test_a_file_without_a_table_column_is_not_read_in_place(tmp_path):
    a = _write(tmp_path, "part-0.parquet", ["a"])
    assert file_blocks([a], ["user", "n", "missing"]) is None


def test_blocks_come_in_the_table_schema_and_every_row_once(tmp_path):
    a = _write(tmp_path, "part-0.parquet", ["a", "b", "c"], row_group_size=2)
    c = _write(tmp_path, "part-1.parquet", ["d"])
    store = ParquetTableBlockStore("t", SCHEMA, file_blocks([a, c], SCHEMA.names))
    assert store.read(0).schema.equals(SCHEMA)
    source = ArrowBlockSource(store, columnar=True)
    reader = source.create_reader(SourceReaderContext(0, 1))
    reader.add_splits(source.create_splits(1))
    rows = []
    while (batch := reader.poll_next(100)) is not None:
        rows += [r for b in batch for r in b.to_pylist()]
    assert rows == [{"user": u, "n": n} for u, n in
                    [("a", 0), ("b", 1), ("c", 2), ("d", 0)]]


def test_a_file_gone_before_it_was_read_is_a_clear_error(tmp_path):
    a = _write(tmp_path, "part-0.parquet", ["a"])
    store = ParquetTableBlockStore("clicks", SCHEMA, file_blocks([a], SCHEMA.names))
    os.remove(a)
    with pytest.raises(TableFileGoneError, match="'clicks' is gone.*snapshot=True"):
        store.read(0)


def test_the_store_pickles_with_its_blocks_only(tmp_path):
    import pickle

    a = _write(tmp_path, "part-0.parquet", ["a", "b"])
    store = pickle.loads(pickle.dumps(
        ParquetTableBlockStore("t", SCHEMA, file_blocks([a], SCHEMA.names))))
    assert store.read(0).column("user").to_pylist() == ["a", "b"]


def test_an_unpartitioned_local_parquet_table_is_read_in_place(tmp_path):
    a = _write(tmp_path, "part-1.parquet", ["b"])
    b = _write(tmp_path, "part-0.parquet", ["a"])
    spark = FakeSpark(f"file:{tmp_path}", [f"file://{a}", f"file://{b}"])
    store = parquet_table_store(spark, "t")
    assert store is not None and store.blocks == [(b, 0), (a, 0)]  # sorted by file
    assert store.fields == ("user", "n")


@pytest.mark.parametrize("change", [
    {"provider": "csv"}, {"partitioned": True}, {"location": "s3a://bucket/t"},
    {"files": ["hdfs://nn/t/part-0.parquet"]}, {"location": ""}])
def test_other_tables_are_left_to_raydp(tmp_path, change):
    a = _write(tmp_path, "part-0.parquet", ["a"])
    spark = FakeSpark(f"file:{tmp_path}", [f"file:{a}"])
    for key, value in change.items():
        setattr(spark, key, value)
    assert parquet_table_store(spark, "t") is None


def test_a_file_that_cannot_be_read_leaves_the_table_to_raydp(tmp_path):
    bad = tmp_path / "part-0.parquet"
    bad.write_bytes(b"not parquet")
    assert parquet_table_store(FakeSpark(f"file:{tmp_path}", [f"file:{bad}"]), "t") is None


def test_local_paths_of_spark_locations():
    assert local_path("/w/t") == "/w/t"
    assert local_path("file:/w/a%25b") == "/w/a%b"
    assert local_path("hdfs://nn/w/t") is None
