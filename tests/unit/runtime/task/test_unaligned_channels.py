"""A task's unaligned side (UnalignedChannels), pure: a stand-in task, no channels, a
manual clock (and a fake perf_counter for the operators' speed).

- Restored channel state is replayed with checkpoints going on: a checkpoint taken in the
  middle of the replay keeps what is not replayed yet as its own channel state, filed
  under the old channel, ahead of anything else; the replay then goes on, so every record
  is processed once and is in at most one place.
- Batches are processed in slices of about 10 ms of work, the first one small while the
  operators' speed is unknown, so a barrier never waits for a slow batch."""

from types import SimpleNamespace

import pytest

import flowray.runtime.task.unaligned_channels as unaligned_channels

from flowray.common.clock import ManualClock
from flowray.runtime.checkpoint.channel_state import RecoveredInput
from flowray.runtime.network.elements import CheckpointBarrier, RecordBatch
from flowray.runtime.network.frame_codec import encode_frame
from flowray.runtime.task.barrier_handler import TriggerCheckpoint
from flowray.runtime.task.unaligned import recovered_batches
from flowray.runtime.task.unaligned_channels import UnalignedChannels, replay_in_flight
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import INPUT_SIDE

NAME = ("map", "sum", 0)


class _Task:
    """What UnalignedChannels uses of a task; the mailbox runs in _housekeeping."""

    def __init__(self):
        self.tdd = SimpleNamespace(subtask=SimpleNamespace(index=1), inputs=[], outputs=[])
        self.record_writers, self.readers = {}, {}
        self.barrier_handler = None
        self.clock = ManualClock()
        self._input_ended = False
        self.records_in = 0
        self.mailbox = []
        self.snapshots = []

    def _check_cancel(self):
        pass

    def _housekeeping(self):
        while self.mailbox:
            self.mailbox.pop(0)()
        return 1.0

    def _apply(self, actions):
        raise AssertionError(f"no barrier handler here: {actions}")

    def _snapshot(self, barrier, alignment_ms, in_flight=None):
        self.snapshots.append((barrier.checkpoint_id, in_flight))


def _frames(*batches, key_groups=False):
    return [encode_frame(RecordBatch(list(b), list(b) if key_groups else None), 0)
            for b in batches]


def _records(in_flight):
    out = []
    for d in in_flight:
        for batch in recovered_batches(d.frames, None):
            out.extend(batch.records)
    return out


def test_a_checkpoint_during_the_replay_keeps_the_rest_and_the_replay_goes_on():
    task = _Task()
    channels = UnalignedChannels(task)
    recovered = [RecoveredInput(0, _frames([1, 2], [3, 4]), None, NAME, 0),
                 RecoveredInput(1, _frames([5], [6, 7]), None, NAME[:2] + (1,), 2)]
    processed = []

    def process(index):
        def run(records, key_groups, timestamps):
            processed.extend((index, r) for r in records)
            if records == [3, 4]:   # a checkpoint is triggered while [3, 4] is processed
                barrier = CheckpointBarrier(9, 0)
                task.mailbox.append(lambda: channels.perform_checkpoint(
                    TriggerCheckpoint(barrier, 0.0, True)))
        return run

    replayed = channels.replay(recovered, {0: process(0), 1: process(1)}, [])

    assert replayed == 7 and task.records_in == 7
    assert processed == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (1, 6), (1, 7)]
    [(checkpoint_id, future)] = task.snapshots
    assert checkpoint_id == 9
    state = future.result(timeout=0)
    # what was not replayed when the checkpoint was taken, in order, under its channel
    # (exchange, old producer, this consumer), on the input side
    assert [(d.exchange, d.producer, d.consumer, d.side) for d in state] == [
        (NAME[:2] + (1,), 2, 1, INPUT_SIDE), (NAME[:2] + (1,), 2, 1, INPUT_SIDE)]
    assert _records(state) == [5, 6, 7]


def test_the_rest_is_kept_after_the_key_group_filter_of_a_rescale():
    """After a rescale the rest is filed as already filtered: a later restore cannot give
    this subtask's records of other key groups back to it."""
    task = _Task()
    channels = UnalignedChannels(task)
    mine = KeyGroupRange(0, 9)
    recovered = [RecoveredInput(0, _frames([1, 2], [3, 40, 5], key_groups=True), mine,
                                NAME, 0)]
    done = []

    def process(records, key_groups, timestamps):
        done.extend(records)
        if not task.snapshots and not task.mailbox:
            task.mailbox.append(lambda: channels.perform_checkpoint(
                TriggerCheckpoint(CheckpointBarrier(3, 0), 0.0, True)))

    channels.replay(recovered, {0: process}, [])
    assert done == [1, 2, 3, 5]
    assert _records(task.snapshots[0][1].result(timeout=0)) == [3, 5]


def test_without_unaligned_checkpoints_the_replay_is_all_at_once():
    got = []
    n = replay_in_flight([RecoveredInput(0, _frames([1], [2, 3]))],
                         {0: lambda records, kgs, ts: got.extend(records)})
    assert n == 3 and got == [1, 2, 3]


class _FakeTime:
    """perf_counter for the slices: the operators advance it by their cost."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


@pytest.mark.parametrize("ms_per_record, first_batch, second_batch", [
    # 5 ms a record: a few records first, then 2 a slice (10 ms), never the whole batch
    (5.0, [4] + [2] * 498, [2] * 500),
    # fast operators: a few records to learn that, then the rest at once, then whole
    (0.001, [4, 996], [1000]),
])
def test_batches_are_sliced_by_the_operators_speed_from_the_first_batch_on(
        monkeypatch, ms_per_record, first_batch, second_batch):
    fake = _FakeTime()
    monkeypatch.setattr(unaligned_channels, "time", fake)
    channels = UnalignedChannels(_Task())
    channels._in_specs["c"] = (NAME, 0, 1)
    slices = []

    def process(records, key_groups, timestamps):
        slices.append(len(records))
        fake.now += len(records) * ms_per_record / 1000.0

    channels.process_in_slices(process, RecordBatch(list(range(1000))), "c", [])
    assert slices == first_batch
    slices.clear()
    channels.process_in_slices(process, RecordBatch(list(range(1000))), "c", [])
    assert slices == second_batch
