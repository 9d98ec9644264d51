"""The two-phase-commit FileSink, driven by hand through TwoPhaseCommitSinkOperator (no Ray):
checkpoints, completion notifications, crashes and restores, as the task would drive it."""

import os
import re

import cloudpickle
import pytest

from flowray.common.serialization import Encoder
from flowray.datastream.connectors.file_system import (
    FileSink,
    OutputFileConfig,
    RollingPolicy,
)
from flowray.operators.base import (
    CollectingOutput,
    OperatorContext,
    ProcessingTimeService,
    StateInitializationContext,
    StateSnapshotContext,
    UserFunctionError,
)
from flowray.operators.two_phase_commit import TWO_PHASE_COMMIT_STATE, TwoPhaseCommitSinkOperator
from flowray.common.clock import ManualClock
from flowray.state.key_groups import KeyGroupRange
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state


def make_sink(path, policy=None, prefix="part", suffix=".txt"):
    builder = (FileSink.for_row_format(str(path), Encoder.simple_string_encoder())
               .with_output_file_config(OutputFileConfig.builder().with_part_prefix(prefix)
                                        .with_part_suffix(suffix).build()))
    if policy is not None:
        builder = builder.with_rolling_policy(policy)
    return builder.build()


class Harness:
    """One subtask's sink operator, as a task sets it up (the definition is unpickled)."""

    def __init__(self, sink, restored=None, restored_checkpoint_id=None, subtask=0,
                 parallelism=1, attempt=0):
        self.op = TwoPhaseCommitSinkOperator(cloudpickle.loads(cloudpickle.dumps(sink)))
        ctx = OperatorContext("sink", subtask, parallelism, 128, KeyGroupRange(0, 127),
                              ProcessingTimeService(ManualClock()), attempt)
        self.op.setup(ctx, CollectingOutput())
        self.store = (OperatorStateStore.restore(restored) if restored is not None
                      else OperatorStateStore())
        self.op.initialize_state(StateInitializationContext(
            self.store, None, restored_checkpoint_id if restored is not None else None))
        self.op.open()

    def write(self, *records):
        self.op.process_batch(list(records), None)

    def checkpoint(self, checkpoint_id):
        self.op.snapshot_state(StateSnapshotContext(checkpoint_id, 0))
        return self.store.snapshot()

    def complete(self, checkpoint_id):
        self.op.notify_checkpoint_complete(checkpoint_id)


def visible(folder):
    """Every line of every visible file (sorted by file name, lines in file order)."""
    lines = []
    for name in sorted(os.listdir(folder)):
        if not name.startswith("."):
            with open(os.path.join(folder, name)) as f:
                lines.extend(f.read().splitlines())
    return lines


def hidden(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


def test_only_completed_checkpoints_are_visible(tmp_path):
    h = Harness(make_sink(tmp_path))
    assert h.op.name == "Sink: FileSink" and h.op.requires_final_checkpoint
    h.write("a", "b")
    h.checkpoint(1)
    h.write("c")
    assert visible(tmp_path) == []
    h.complete(1)
    assert visible(tmp_path) == ["a", "b"]
    assert len(hidden(tmp_path)) == 1          # "c" is in flight
    h.checkpoint(2)
    h.complete(2)
    assert visible(tmp_path) == ["a", "b", "c"]
    assert hidden(tmp_path) == []
    h.op.close()
    assert sorted(visible(tmp_path)) == ["a", "b", "c"] and hidden(tmp_path) == []


def test_file_names(tmp_path):
    sink = make_sink(tmp_path, prefix="out", suffix=".log")
    h = Harness(sink, subtask=3, parallelism=4)
    h.write(1)
    [in_progress] = hidden(tmp_path)
    assert re.fullmatch(r"\.out-[0-9a-f]{32}-3-0\.log\.inprogress\.[0-9a-f]+", in_progress)
    assert in_progress.endswith(".inprogress." + sink.sink_id)
    h.checkpoint(1)
    h.write(2)
    h.checkpoint(2)
    h.complete(2)
    names = sorted(os.listdir(tmp_path))
    assert all(re.fullmatch(r"out-[0-9a-f]{32}-3-[01]\.log", n) for n in names), names
    assert {n.rsplit("-", 1)[1] for n in names} == {"0.log", "1.log"}
    assert visible(tmp_path) == ["1", "2"]


@pytest.mark.parametrize("notified_before_crash", [True, False])
def test_crash_and_restore_is_exactly_once(tmp_path, notified_before_crash):
    sink = make_sink(tmp_path)
    source = ["r1", "r2", "r3", "r4", "r5"]
    h = Harness(sink)
    h.write(*source[:2])
    snap = h.checkpoint(1)
    h.write(*source[2:4])                      # after the snapshot: in flight
    if notified_before_crash:
        h.complete(1)
    assert len(hidden(tmp_path)) == (1 if notified_before_crash else 2)
    del h                                      # crash: no close, no abort

    r = Harness(sink, restored=snap, restored_checkpoint_id=1, attempt=1)
    assert visible(tmp_path) == source[:2]     # the pending transaction is committed
    assert hidden(tmp_path) == []              # the in-flight file of the dead attempt is gone
    r.write(*source[2:])                       # the source replays from checkpoint 1
    r.checkpoint(2)
    r.complete(2)
    r.op.close()
    assert sorted(visible(tmp_path)) == source  # exactly once (files of two attempts)
    assert hidden(tmp_path) == []


def test_restore_twice_from_the_same_checkpoint(tmp_path):
    """An attempt that fails before any checkpoint completes leaves nothing behind."""
    sink = make_sink(tmp_path)
    h = Harness(sink)
    h.write("a")
    snap = h.checkpoint(1)
    h.write("lost-1")
    second = Harness(sink, restored=snap, restored_checkpoint_id=1, attempt=1)
    second.write("b")
    second.checkpoint(2)                       # never completes
    second.write("c")
    assert len(hidden(tmp_path)) == 2
    third = Harness(sink, restored=snap, restored_checkpoint_id=1, attempt=2)
    assert visible(tmp_path) == ["a"] and hidden(tmp_path) == []
    third.write("b", "c")
    third.op.commit_on_end_of_input()
    assert sorted(visible(tmp_path)) == ["a", "b", "c"]


def test_a_restart_with_nothing_to_restore_deletes_earlier_attempts_files(tmp_path):
    """No checkpoint completed: the restarted subtask starts afresh, and the in-progress
    files its earlier attempt left (one pre-committed, one open) can never be committed."""
    sink, other = make_sink(tmp_path), make_sink(tmp_path)
    first = Harness(sink)
    first.write("a")
    first.checkpoint(1)                        # never completes
    first.write("b")
    Harness(sink, subtask=1, parallelism=2).write("subtask 1's")
    Harness(other).write("another sink's")
    assert len(hidden(tmp_path)) == 4
    again = Harness(sink, attempt=1)           # restored=None: starts over
    left = hidden(tmp_path)
    assert len(left) == 2 and all("-0-" not in n or n.endswith(other.sink_id) for n in left)
    again.write("a", "b")
    again.op.commit_on_end_of_input()
    assert sorted(visible(tmp_path)) == ["a", "b"]


def test_the_first_attempt_leaves_other_files_of_its_sink_alone(tmp_path):
    sink = make_sink(tmp_path)
    Harness(sink).write("earlier run, same sink id")
    Harness(sink).write("first attempt of another job")   # attempt 0: no clean-up
    assert len(hidden(tmp_path)) == 2


def test_other_sinks_files_in_the_same_folder_are_left_alone(tmp_path):
    mine, other = make_sink(tmp_path), make_sink(tmp_path)
    assert mine.sink_id != other.sink_id
    h = Harness(mine)
    snap = h.checkpoint(1)
    h.write("lost")
    o = Harness(other)                         # another sink, same folder, same subtask
    o.write("theirs")
    Harness(mine, restored=snap, restored_checkpoint_id=1, attempt=1)
    [left] = hidden(tmp_path)
    assert left.endswith(other.sink_id)
    o.checkpoint(1)
    o.complete(1)
    assert visible(tmp_path) == ["theirs"]


def test_commit_is_idempotent(tmp_path):
    h = Harness(make_sink(tmp_path))
    h.write("x")
    h.checkpoint(1)
    h.complete(1)
    h.complete(1)                              # a repeated notification
    sink = h.op.sink
    [txn] = [t for t in h.store.get_list_state(TWO_PHASE_COMMIT_STATE).get()[0]["pending"]]
    sink.commit(txn[1])                        # and a direct commit again
    sink.recover_and_commit(txn[1])
    assert visible(tmp_path) == ["x"]


def test_commit_with_both_files_gone_fails_naming_the_operator(tmp_path):
    h = Harness(make_sink(tmp_path))
    h.write("x")
    h.checkpoint(1)
    [name] = hidden(tmp_path)
    os.remove(tmp_path / name)
    with pytest.raises(UserFunctionError, match="Sink: FileSink") as info:
        h.complete(1)
    assert "neither it nor its in-progress file" in str(info.value)


def test_aborted_checkpoint_is_committed_by_the_next(tmp_path):
    h = Harness(make_sink(tmp_path))
    h.write("a")
    h.checkpoint(1)
    h.op.notify_checkpoint_aborted(1)
    h.write("b")
    h.checkpoint(2)
    assert visible(tmp_path) == []
    h.complete(2)
    assert visible(tmp_path) == ["a", "b"]


def test_empty_transactions_create_no_files(tmp_path):
    h = Harness(make_sink(tmp_path))
    h.checkpoint(1)
    h.complete(1)
    h.checkpoint(2)
    h.op.commit_on_end_of_input()
    h.op.close()
    assert os.listdir(tmp_path) == []


def test_bounded_run_without_checkpoints(tmp_path):
    h = Harness(make_sink(tmp_path))
    records = [("k", i) for i in range(100)]
    h.write(*records[:60])
    h.write(*records[60:])
    assert visible(tmp_path) == []
    h.op.commit_on_end_of_input()
    h.op.close()
    assert visible(tmp_path) == [str(r) for r in records]
    assert hidden(tmp_path) == []
    with pytest.raises(RuntimeError, match="no open transaction"):
        h.write("late")


def test_close_aborts_the_current_transaction(tmp_path):
    h = Harness(make_sink(tmp_path))
    h.write("a")
    h.checkpoint(1)
    h.write("b")
    h.op.close()                               # e.g. the task failed
    assert visible(tmp_path) == []
    assert len(hidden(tmp_path)) == 1          # the pre-committed "a" waits for recovery


def test_rescale_down_recovers_every_old_subtask(tmp_path):
    sink = make_sink(tmp_path)
    old = [Harness(sink, subtask=i, parallelism=2) for i in range(2)]
    old[0].write("a0")
    old[1].write("a1")
    snaps = [h.checkpoint(1) for h in old]
    old[0].write("lost0")
    old[1].write("lost1")
    parts = redistribute_operator_state(snaps, 1)
    new = Harness(sink, restored=parts[0], restored_checkpoint_id=1, parallelism=1, attempt=1)
    assert sorted(visible(tmp_path)) == ["a0", "a1"] and hidden(tmp_path) == []
    new.write("b")
    new.op.commit_on_end_of_input()
    assert sorted(visible(tmp_path)) == ["a0", "a1", "b"]


def test_rescale_up_does_not_touch_files_recovered_elsewhere(tmp_path):
    sink = make_sink(tmp_path)
    old = Harness(sink, subtask=0, parallelism=1)
    old.write("a")
    snap = old.checkpoint(1)
    old.write("lost")
    parts = redistribute_operator_state([snap], 2)
    assert len(parts[0][TWO_PHASE_COMMIT_STATE].items) == 1
    assert parts[1][TWO_PHASE_COMMIT_STATE].items == []
    # subtask 1 (nothing restored) comes up first: it must not delete subtask 0's files
    Harness(sink, restored=parts[1], restored_checkpoint_id=1, subtask=1, parallelism=2)
    assert len(hidden(tmp_path)) == 2
    Harness(sink, restored=parts[0], restored_checkpoint_id=1, subtask=0, parallelism=2)
    assert visible(tmp_path) == ["a"] and hidden(tmp_path) == []


def test_rolling_policy_part_size(tmp_path):
    h = Harness(make_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=4)))
    h.write("aaaa", "b", "c")                  # 5 bytes: roll; then "b\n" + "c\n" = 4
    h.write("d")
    assert len(hidden(tmp_path)) == 3
    h.checkpoint(1)
    h.complete(1)
    assert visible(tmp_path) == ["aaaa", "b", "c", "d"]
    assert len(os.listdir(tmp_path)) == 3


def test_on_checkpoint_rolling_policy_one_file_per_checkpoint(tmp_path):
    h = Harness(make_sink(tmp_path, RollingPolicy.on_checkpoint_rolling_policy()))
    for i in range(10):
        h.write(i)
    h.checkpoint(1)
    h.write(10)
    h.checkpoint(2)
    h.complete(2)
    assert len(os.listdir(tmp_path)) == 2
    assert visible(tmp_path) == [str(i) for i in range(11)]


def test_file_uri_and_missing_folder(tmp_path):
    target = tmp_path / "deep" / "out"
    sink = make_sink("file://" + str(target))
    assert sink.base_path == str(target)
    h = Harness(sink)
    h.write("x")
    h.op.commit_on_end_of_input()
    assert visible(target) == ["x"]
    with pytest.raises(ValueError, match="only local paths"):
        make_sink("s3://bucket/out")


def test_definition_is_small_and_picklable(tmp_path):
    sink = make_sink(tmp_path)
    assert len(cloudpickle.dumps(sink)) < 2000
    h = Harness(sink)
    h.write("x")                               # an open file must not break pickling
    copy = cloudpickle.loads(cloudpickle.dumps(h.op.sink))
    assert copy.sink_id == sink.sink_id and not hasattr(copy, "_writers")
    op = TwoPhaseCommitSinkOperator(sink)
    assert cloudpickle.loads(cloudpickle.dumps(op)).sink.base_path == str(tmp_path)


def test_builder_validation(tmp_path):
    with pytest.raises(TypeError):
        FileSink.for_row_format(str(tmp_path), object()).build()
    with pytest.raises(ValueError):
        OutputFileConfig.builder().with_part_prefix("a/b").build()
    with pytest.raises(ValueError):
        OutputFileConfig.builder().with_part_prefix(".hidden").build()
    with pytest.raises(TypeError):
        TwoPhaseCommitSinkOperator(object())
    with pytest.raises(ValueError):
        RollingPolicy.default_rolling_policy(part_size=0)
