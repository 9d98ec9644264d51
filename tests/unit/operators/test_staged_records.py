"""Staged records of a sink's transaction: in memory up to the spill threshold, then in an
anonymous spill file, read back in order, in bounded pieces, exactly once."""

import os
import pickle

import pytest

from flowray.operators.staged_records import StagedRecords, spill_threshold_of


def _writes(n_writes, per_write=100):
    return [[(f"user-{w}", w * per_write + i) for i in range(per_write)]
            for w in range(n_writes)]


def _pickled(records):
    return len(pickle.dumps(records, protocol=5))


def test_below_the_threshold_nothing_spills_and_one_batch_comes_back(tmp_path):
    staged = StagedRecords(1 << 20, str(tmp_path))
    writes = _writes(5)
    for w in writes:
        staged.append(w)
    assert not staged.spilled and staged.spilled_records == 0
    assert list(staged.batches()) == [[r for w in writes for r in w]]


def test_past_the_threshold_records_spill_and_memory_stays_under_it(tmp_path):
    writes = _writes(200)
    threshold = 4 * _pickled(writes[0])                 # about 4 writes' worth
    staged = StagedRecords(threshold, str(tmp_path))
    peak = 0
    for w in writes:
        staged.append(w)
        peak = max(peak, staged.held_bytes)
        assert staged.held_bytes <= threshold
    assert staged.spilled and len(staged) == 20_000
    assert staged.spilled_records > 19_000
    assert staged.spilled_bytes > 10 * threshold
    assert peak <= threshold
    # the spill file has no name: nothing in the folder, nothing left by a killed task
    assert os.listdir(tmp_path) == []


def test_batches_give_every_record_once_in_order_in_bounded_pieces(tmp_path):
    writes = _writes(200)
    threshold = 4 * _pickled(writes[0])
    staged = StagedRecords(threshold, str(tmp_path))
    for w in writes:
        staged.append(w)
    batches = list(staged.batches())
    assert [r for b in batches for r in b] == [r for w in writes for r in w]
    assert len(batches) > 10
    assert max(_pickled(b) for b in batches) <= 2 * threshold
    # read again (e.g. a retried pre-commit): the same records
    assert [r for b in staged.batches() for r in b] == [r for w in writes for r in w]


def test_records_after_a_spill_come_after_the_spilled_ones(tmp_path):
    staged = StagedRecords(200, str(tmp_path))
    staged.append(list(range(100)))                     # spills
    assert staged.spilled
    staged.append([100, 101])                           # held in memory
    assert not staged.held_bytes > 200
    assert [r for b in staged.batches() for r in b] == list(range(102))


def test_a_zero_threshold_spills_every_write(tmp_path):
    staged = StagedRecords(0, str(tmp_path))
    staged.append(["a"])
    staged.append(["b", "c"])
    assert staged.spilled_records == 3 and staged.held_bytes == 0
    assert list(staged.batches()) == [["a"], ["b", "c"]]


def test_discard_frees_everything_and_the_buffer_can_be_used_again(tmp_path):
    staged = StagedRecords(100, str(tmp_path))
    staged.append(list(range(1000)))
    assert staged.spilled
    staged.discard()
    staged.discard()                                    # idempotent
    assert len(staged) == 0 and not staged.spilled and list(staged.batches()) == []
    staged.append(["again"])
    assert list(staged.batches()) == [["again"]]


def test_the_estimate_is_close_to_the_pickled_size():
    staged = StagedRecords(1 << 30)
    records = [("user", i, "x" * (i % 20)) for i in range(10_000)]
    staged.append(records)
    assert 0.5 < staged.held_bytes / _pickled(records) < 2


def test_staged_records_are_never_pickled():
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(StagedRecords(10))


def test_the_threshold_comes_from_the_jobs_configuration():
    assert spill_threshold_of({"flowray.sink.spill-threshold": "2 kb"}) == 2048
    assert spill_threshold_of({"parallelism.default": 2}) == 64 << 20
    with pytest.raises(ValueError, match="flowray.sink.spill-threshold"):
        spill_threshold_of({"flowray.sink.spill-threshold": "lots"})
    with pytest.raises(ValueError, match="must not be negative"):
        StagedRecords(-1)
