"""Channel state of unaligned checkpoints given to the consumers of the restored job:
each channel to its consumer at the same parallelism (input side, then output side);
after a rescale, by key group for keyed exchanges and round-robin for the others."""

import pytest

from flowray.runtime.checkpoint.channel_state import (
    ChannelStateAssignmentError,
    Exchange,
    RecoveredInput,
    assign_in_flight,
)
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import INPUT_SIDE, OUTPUT_SIDE, InFlightData, TaskStateSnapshot

NAME = ("map", "sum", 0)


def _in(p, c, *frames, side=INPUT_SIDE, name=NAME):
    return InFlightData(name, p, c, side, list(frames))


def _ex(new, old, keyed=True, name=NAME):
    return Exchange(name, "v9", consumer_parallelism=new, old_consumer_parallelism=old,
                    max_parallelism=128, keyed=keyed)


def _snapshots():
    """Two producers, two consumers: consumers hold input sides, producers output sides."""
    return [
        TaskStateSnapshot(in_flight=[_in(0, 0, b"i00"), _in(1, 0, b"i10")]),   # consumer 0
        TaskStateSnapshot(in_flight=[_in(0, 1, b"i01")]),                      # consumer 1
        TaskStateSnapshot(in_flight=[_in(0, 0, b"o00", side=OUTPUT_SIDE),
                                     _in(0, 1, b"o01", side=OUTPUT_SIDE)]),    # producer 0
        TaskStateSnapshot(in_flight=[_in(1, 1, b"o11", side=OUTPUT_SIDE)]),    # producer 1
    ]


def test_at_the_same_parallelism_each_channel_goes_to_its_consumer_input_side_first():
    got = assign_in_flight(_snapshots(), [_ex(2, 2)])
    assert got == {
        "v9:0": [RecoveredInput(0, [b"i00", b"o00"], None, NAME, 0),
                 RecoveredInput(0, [b"i10"], None, NAME, 1)],
        "v9:1": [RecoveredInput(0, [b"i01", b"o01"], None, NAME, 0),
                 RecoveredInput(0, [b"o11"], None, NAME, 1)],
    }


def test_a_keyed_rescale_gives_each_new_consumer_the_old_channels_of_its_key_groups():
    got = assign_in_flight(_snapshots(), [_ex(3, 2)])
    # old consumers own [0, 63] and [64, 127]; new ones [0, 42], [43, 85], [86, 127]
    ranges = {k: {r.key_groups for r in v} for k, v in got.items()}
    assert ranges == {"v9:0": {KeyGroupRange(0, 42)}, "v9:1": {KeyGroupRange(43, 85)},
                      "v9:2": {KeyGroupRange(86, 127)}}
    frames = {k: [r.frames for r in v] for k, v in got.items()}
    assert frames["v9:0"] == [[b"i00", b"o00"], [b"i10"]]          # old consumer 0's
    assert frames["v9:1"] == [[b"i00", b"o00"], [b"i10"], [b"i01", b"o01"], [b"o11"]]
    assert frames["v9:2"] == [[b"i01", b"o01"], [b"o11"]]          # old consumer 1's


def test_another_exchange_is_dealt_round_robin_after_a_rescale():
    got = assign_in_flight(_snapshots(), [_ex(3, 2, keyed=False)])
    assert {k: [r.frames for r in v] for k, v in got.items()} == {
        "v9:0": [[b"i00", b"o00"], [b"o11"]], "v9:1": [[b"i10"]], "v9:2": [[b"i01", b"o01"]]}
    assert all(r.key_groups is None for v in got.values() for r in v)
    # each keeps its old channel's exchange and producer (where a checkpoint taken during
    # the replay files the rest)
    assert {(r.exchange, r.producer, r.frames[0]) for v in got.values() for r in v} == {
        (NAME, 0, b"i00"), (NAME, 1, b"o11"), (NAME, 1, b"i10"), (NAME, 0, b"i01")}


def test_the_input_index_is_the_exchanges():
    second = ("rules", "sum", 1)
    snaps = [TaskStateSnapshot(in_flight=[_in(0, 0, b"r", name=second)])]
    got = assign_in_flight(snaps, [_ex(1, 1, name=second)])
    assert got == {"v9:0": [RecoveredInput(1, [b"r"], None, second, 0)]}


def test_records_of_an_exchange_the_job_lost_are_refused_or_dropped_on_request():
    gone = ("old-map", "sum", 0)
    snaps = [TaskStateSnapshot(in_flight=[_in(0, 0, b"x", name=gone)])]
    with pytest.raises(ChannelStateAssignmentError, match="'old-map' to input 0 of 'sum'"):
        assign_in_flight(snaps, [_ex(1, 1)])
    assert assign_in_flight(snaps, [_ex(1, 1)], allow_non_restored_state=True) == {}


def test_nothing_in_flight_assigns_nothing_also_for_older_snapshots():
    old = TaskStateSnapshot()
    del old.in_flight          # pickled before channel state existed
    empty = TaskStateSnapshot(in_flight=[_in(0, 0)])
    assert assign_in_flight([old, empty], [_ex(1, 1)]) == {}
    assert old.state_size() == 0
