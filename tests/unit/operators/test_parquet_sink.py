"""Exactly-once Parquet files (the Spark table sink's task side), without Spark."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowray.common.types import Row
from flowray.operators.parquet_sink import STAGING_DIR, ParquetFilesSink, SchemaMismatchError
from flowray.operators.sinks import SinkWriterContext

SCHEMA = pa.schema([("user", pa.string()), ("n", pa.int64())])


def _sink(folder, schema=SCHEMA, subtask=0, sink_id="s1"):
    sink = ParquetFilesSink(str(folder), schema, sink_id=sink_id)
    sink.open(SinkWriterContext(subtask, 2))
    return sink


def _rows(folder):
    if not any(n.endswith(".parquet") for n in os.listdir(folder)):
        return []
    return sorted(tuple(r.values()) for r in pq.read_table(str(folder)).to_pylist())


def test_only_committed_epochs_are_visible_and_a_retried_commit_adds_nothing(tmp_path):
    sink = _sink(tmp_path)
    t1 = sink.begin_transaction()
    sink.write(t1, [Row(user="a", n=1), ("b", 2)])
    sink.pre_commit(t1)
    t2 = sink.begin_transaction()
    sink.write(t2, [{"user": "c", "n": 3}])
    assert _rows(tmp_path) == []          # staged, not committed
    sink.commit(t1)
    sink.commit(t1)                       # e.g. after a restore
    sink.recover_and_commit(t1)
    assert _rows(tmp_path) == [("a", 1), ("b", 2)]
    sink.pre_commit(t2)
    sink.abort(t2)
    assert _rows(tmp_path) == [("a", 1), ("b", 2)]
    assert os.listdir(tmp_path / STAGING_DIR) == []


def test_an_empty_epoch_writes_no_file(tmp_path):
    sink = _sink(tmp_path)
    t = sink.begin_transaction()
    sink.pre_commit(t)
    sink.commit(t)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".parquet")] == []


@pytest.mark.parametrize("record,words", [
    (("a", 1, "extra"), "has 3 fields, the schema has 2"),
    ({"user": "a", "count": 1}, "has fields ['count', 'user']"),
    (("a", "not a number"), "first bad record"),
])
def test_a_record_that_does_not_fit_names_the_record_and_the_schema(tmp_path, record, words):
    sink = _sink(tmp_path)
    t = sink.begin_transaction()
    sink.write(t, [("ok", 1), record])
    with pytest.raises(SchemaMismatchError) as info:
        sink.pre_commit(t)
    assert words in str(info.value)
    assert _rows(tmp_path) == []


def test_without_a_schema_the_first_epoch_fixes_it(tmp_path):
    sink = _sink(tmp_path, schema=None)
    t1 = sink.begin_transaction()
    sink.write(t1, [Row(user="a", n=1)])
    sink.pre_commit(t1)
    sink.commit(t1)
    t2 = sink.begin_transaction()
    sink.write(t2, [Row(user="b", n="two")])
    with pytest.raises(SchemaMismatchError, match="user: string"):
        sink.pre_commit(t2)
    assert pq.read_table(str(tmp_path)).schema.names == ["user", "n"]


def test_a_new_attempt_deletes_its_earlier_attempts_staging_files_only(tmp_path):
    old = _sink(tmp_path, subtask=1)
    t = old.begin_transaction()
    old.write(t, [("lost", 1)])
    old.pre_commit(t)                      # never committed: the attempt died
    other = _sink(tmp_path, subtask=0)
    t0 = other.begin_transaction()
    other.write(t0, [("theirs", 1)])
    other.pre_commit(t0)
    new = _sink(tmp_path, subtask=1)
    new.finish_recovering_state()
    staged = os.listdir(tmp_path / STAGING_DIR)
    assert os.path.basename(t.staging_path) not in staged
    assert os.path.basename(t0.staging_path) in staged


def test_transactions_pickle_without_their_buffered_records(tmp_path):
    import pickle
    sink = _sink(tmp_path)
    t = sink.begin_transaction()
    sink.write(t, [("a", 1)])
    copy = pickle.loads(pickle.dumps(t))
    assert copy.records is None and copy.final_path == t.final_path
    assert "_token" not in pickle.loads(pickle.dumps(sink)).__dict__
