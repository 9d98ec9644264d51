"""TransactionalTestingSink driven by hand through the two-phase-commit operator, as a
task would drive it across a failure."""

import pickle

import cloudpickle

from flowray.operators.base import StateInitializationContext, StateSnapshotContext
from flowray.testing.sinks import TransactionalTestingSink
from flowray.operators.two_phase_commit import TwoPhaseCommitSinkOperator
from flowray.state.operator_state import OperatorStateStore


def _attempt(sink_dir, restored=None, restored_id=None):
    """A fresh subtask (its own copy of the sink, as after unpickling in a new process)."""
    sink = pickle.loads(cloudpickle.dumps(TransactionalTestingSink(sink_dir)))
    op = TwoPhaseCommitSinkOperator(sink)
    store = OperatorStateStore.restore(restored) if restored is not None \
        else OperatorStateStore()
    op.initialize_state(StateInitializationContext(store, restored_checkpoint_id=restored_id))
    op.open()
    return op, store


def test_a_transaction_of_a_checkpoint_that_never_completed_does_not_linger(tmp_path):
    view = TransactionalTestingSink(str(tmp_path))
    op, store = _attempt(str(tmp_path))
    op.process_batch([1, 2], None)
    op.snapshot_state(StateSnapshotContext(1, 0))
    checkpoint_1 = store.snapshot()
    op.notify_checkpoint_complete(1)
    op.process_batch([3], None)
    op.snapshot_state(StateSnapshotContext(2, 0))   # checkpoint 2 is aborted
    op.notify_checkpoint_aborted(2)
    op.process_batch([4], None)
    op.snapshot_state(StateSnapshotContext(3, 0))   # checkpoint 3 never completes
    op.process_batch([5], None)
    assert view.committed() == [1, 2] and sorted(view.pending()) == [3, 4]
    # the process dies here (no close). Checkpoint 1 holds [3]'s transaction as its
    # current one (aborted on restore); [4]'s is in no checkpoint: it lingers

    again, _ = _attempt(str(tmp_path), checkpoint_1, 1)
    assert view.pending() == []                     # aborted before the first transaction
    again.process_batch([3, 4, 5], None)            # the replay
    again.commit_on_end_of_input()
    again.close()
    assert sorted(view.committed()) == [1, 2, 3, 4, 5] and view.pending() == []


def test_a_restart_without_a_completed_checkpoint_aborts_what_was_pre_committed(tmp_path):
    view = TransactionalTestingSink(str(tmp_path))
    op, _ = _attempt(str(tmp_path))
    op.process_batch(["x"], None)
    op.snapshot_state(StateSnapshotContext(1, 0))   # never completes
    assert view.pending() == ["x"]
    _attempt(str(tmp_path))                         # starts afresh: nothing restored
    assert view.pending() == [] and view.committed() == []


def test_the_restored_pending_transaction_is_committed_not_aborted(tmp_path):
    view = TransactionalTestingSink(str(tmp_path))
    op, store = _attempt(str(tmp_path))
    op.process_batch(["a"], None)
    op.snapshot_state(StateSnapshotContext(1, 0))
    checkpoint_1 = store.snapshot()
    # checkpoint 1 completed, but the subtask died before it was told: restore commits it
    _attempt(str(tmp_path), checkpoint_1, 1)
    assert view.committed() == ["a"] and view.pending() == []


def test_other_subtasks_files_are_left_alone(tmp_path):
    view = TransactionalTestingSink(str(tmp_path))
    other = TransactionalTestingSink(str(tmp_path))
    from flowray.operators.sinks import SinkWriterContext
    other.open(SinkWriterContext(1, 2))
    txn = other.begin_transaction()
    other.write(txn, ["theirs"])
    other.pre_commit(txn)
    _attempt(str(tmp_path))                         # subtask 0 starts
    assert view.pending() == ["theirs"]
