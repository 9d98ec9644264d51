"""Exactly-once Parquet files (the Spark table sink's task side), without Spark."""

import os
import pickle

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


# ---------------------------------------------------------------------------------------
# staged records past the spill threshold
# ---------------------------------------------------------------------------------------

def _spilling_sink(folder, spill_dir, threshold=2048, subtask=0):
    sink = ParquetFilesSink(str(folder), SCHEMA, sink_id="s1", spill_threshold=threshold,
                            spill_dir=str(spill_dir))
    sink.open(SinkWriterContext(subtask, 2))
    return sink


def _batches(start, n_batches, size=100):
    return [[(f"u{start + b}", (start + b) * size + i) for i in range(size)]
            for b in range(n_batches)]


def _rows_in_file_order(folder):
    out = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".parquet")):
        out.extend(tuple(r.values()) for r in pq.read_table(os.path.join(folder, name))
                   .to_pylist())
    return out


def test_an_epoch_past_the_threshold_spills_and_commits_every_record_in_order_once(tmp_path):
    out, spill = tmp_path / "table", tmp_path / "spill"
    sink = _spilling_sink(out, spill)
    t = sink.begin_transaction()
    batches = _batches(0, 60)
    for b in batches:
        sink.write(t, b)
    assert t.records.spilled and t.records.spilled_records > 5000
    assert t.records.held_bytes <= 2048
    sink.pre_commit(t)
    assert t.records is None
    staging = pq.ParquetFile(t.staging_path)
    assert staging.metadata.num_row_groups > 1            # written piece by piece
    sink.commit(t)
    sink.commit(t)                                         # a retry adds nothing
    assert _rows_in_file_order(out) == [r for b in batches for r in b]


def test_a_spilled_epoch_that_is_aborted_leaves_nothing(tmp_path):
    out, spill = tmp_path / "table", tmp_path / "spill"
    sink = _spilling_sink(out, spill)
    t = sink.begin_transaction()
    for b in _batches(0, 30):
        sink.write(t, b)
    staged = t.records
    assert staged.spilled
    sink.abort(t)
    assert not staged.spilled and len(staged) == 0          # the spill file is closed
    assert _rows(out) == [] and os.listdir(out / STAGING_DIR) == []
    assert os.listdir(spill) == []


def test_a_record_that_does_not_fit_after_a_spill_leaves_no_staging_file(tmp_path):
    out, spill = tmp_path / "table", tmp_path / "spill"
    sink = _spilling_sink(out, spill)
    t = sink.begin_transaction()
    for b in _batches(0, 30):
        sink.write(t, b)
    sink.write(t, [("bad", "not a number")])
    with pytest.raises(SchemaMismatchError, match="first bad record"):
        sink.pre_commit(t)
    assert os.listdir(out / STAGING_DIR) == []


def test_the_threshold_comes_from_the_jobs_configuration(tmp_path):
    sink = ParquetFilesSink(str(tmp_path), SCHEMA, sink_id="s1", spill_dir=str(tmp_path))
    sink.open(SinkWriterContext(0, 1, 0, {"flowray.sink.spill-threshold": "1 kb"}))
    assert sink.begin_transaction().records.threshold == 1024
    sink.open(SinkWriterContext(0, 1))
    assert sink.begin_transaction().records.threshold == 64 << 20
    assert "_threshold" not in pickle.loads(pickle.dumps(sink)).__dict__


def test_exactly_once_across_a_restore_with_spilled_epochs(tmp_path):
    """Checkpoint 1 pre-commits a spilled epoch; the task dies while the next epoch has
    spilled too; the restored operator commits epoch 1 once and the replayed records of
    epoch 2 once. The checkpoint never holds staged records."""
    from flowray.operators.base import (OperatorContext, ProcessingTimeService,
                                        StateInitializationContext, StateSnapshotContext)
    from flowray.operators.two_phase_commit import TwoPhaseCommitSinkOperator
    from flowray.common.clock import ManualClock
    from flowray.state.key_groups import KeyGroupRange
    from flowray.state.operator_state import OperatorStateStore

    out, spill = tmp_path / "table", tmp_path / "spill"
    config = {"flowray.sink.spill-threshold": "2 kb"}

    def operator(attempt):
        op = TwoPhaseCommitSinkOperator(ParquetFilesSink(str(out), SCHEMA, sink_id="s1",
                                                         spill_dir=str(spill)))
        op.setup(OperatorContext("sink", 0, 1, 128, KeyGroupRange(0, 127),
                                 ProcessingTimeService(ManualClock()), attempt_number=attempt,
                                 config=config), None)
        return op

    epoch1, epoch2 = _batches(0, 40), _batches(40, 40)
    op = operator(0)
    store = OperatorStateStore()
    op.initialize_state(StateInitializationContext(store))
    op.open()
    for b in epoch1:
        op.process_batch(b, None)
    assert op._current.records.spilled
    op.snapshot_state(StateSnapshotContext(checkpoint_id=1, checkpoint_timestamp=0))
    checkpoint_1 = store.snapshot()
    assert sum(e.size() for e in checkpoint_1.values()) < 2000   # no records inside
    for b in epoch2:
        op.process_batch(b, None)
    assert op._current.records.spilled
    # the task dies here: no commit, no close

    recovered = operator(1)
    recovered.initialize_state(StateInitializationContext(
        OperatorStateStore.restore(checkpoint_1), restored_checkpoint_id=1))
    recovered.open()
    assert _rows_in_file_order(out) == [r for b in epoch1 for r in b]
    for b in epoch2:                                      # the source replays epoch 2
        recovered.process_batch(b, None)
    recovered.commit_on_end_of_input()
    recovered.close()
    rows = _rows(out)
    assert rows == sorted(r for b in epoch1 + epoch2 for r in b)
    assert len(rows) == len(set(rows)) == 8000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("threshold,spills", [("1 kb", True), (None, False)])
def test_a_job_without_checkpoints_spills_by_the_configured_threshold(tmp_path, threshold,
                                                                     spills):
    """The whole run is one epoch (no checkpointing): past ``flowray.sink.spill-threshold``
    the staged records spill and are written piece by piece (several row groups), every
    record once."""
    from tests.support.environments import local_env

    settings = {} if threshold is None else {"flowray.sink.spill-threshold": threshold}
    env = local_env(1, **settings)
    out = tmp_path / "table"
    records = [(f"u{i % 7}", i) for i in range(5000)]
    env.from_collection(records).sink_to(
        ParquetFilesSink(str(out), SCHEMA, sink_id="job", spill_dir=str(tmp_path / "spill")))
    env.execute("spilling sink")
    [name] = [n for n in os.listdir(out) if n.endswith(".parquet")]
    assert (pq.ParquetFile(str(out / name)).metadata.num_row_groups > 1) == spills
    assert _rows_in_file_order(out) == records
