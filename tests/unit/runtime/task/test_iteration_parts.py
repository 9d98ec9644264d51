"""The iteration head's pure parts: the feedback queue is a FIFO in bounded memory that
spills to disk and gives every record back in order (checked against a plain list over
random pushes and pops), and the back-edge log keeps exactly the records between a
checkpoint's start at the head and the barrier's return on each back-edge channel."""

from __future__ import annotations

import random

import pytest

from flowray.runtime.task.iteration import BackEdgeLog, FeedbackQueue


@pytest.mark.parametrize("threshold", [1, 200, 10**9])
def test_the_feedback_queue_is_a_fifo_whatever_spills(threshold, tmp_path):
    rng = random.Random(threshold)
    q = FeedbackQueue(threshold, spill_dir=str(tmp_path))
    model, out, n, spilled = [], [], 0, False
    for _ in range(400):
        if rng.random() < 0.55:
            batch = [(n + i, "x" * rng.randrange(20)) for i in range(rng.randrange(1, 30))]
            n += len(batch)
            q.push(batch, [r[0] * 10 for r in batch])
            model.extend(batch)
        else:
            got = q.pop(rng.randrange(1, 40))
            if got is None:
                assert not model[len(out):]
                continue
            records, timestamps = got
            assert timestamps == [r[0] * 10 for r in records]
            out.extend(records)
        assert len(q) == len(model) - len(out)
        assert [r for b in q.batches() for r in b[0]] == model[len(out):]
        spilled = spilled or q.spilled
    while (got := q.pop(1000)) is not None:
        out.extend(got[0])
    assert out == model and len(q) == 0
    assert spilled == (threshold < 10**9)   # the small thresholds went through the disk
    q.discard()


def test_memory_stays_near_the_threshold_while_the_rest_waits_on_disk(tmp_path):
    q = FeedbackQueue(10_000, spill_dir=str(tmp_path))
    for i in range(200):
        q.push([("k", i, "payload" * 10)] * 50)
    assert q.spilled and len(q) == 10_000
    assert q._memory_bytes <= 10_000
    first = q.pop(10**6)[0]
    assert first[0][1] == 0
    total = len(first)
    while (got := q.pop(10**6)) is not None:
        total += len(got[0])
        assert q._memory_bytes <= 2 * 10_000   # read back about a threshold at a time
    assert total == 10_000 and not q.spilled


def test_the_log_keeps_each_channels_records_until_its_barrier_returns():
    log = BackEdgeLog(["a", "b", "c"])
    log.start(1)
    log.on_records("a", [1], [10])
    log.on_records("b", [2])
    assert log.on_barrier("a", 1) is None
    log.start(2)                      # a second checkpoint under way
    log.on_records("a", [3])          # after 1's barrier on a: only 2's log
    log.on_records("c", [4])          # both logs
    assert log.on_barrier("b", 1) is None
    assert log.on_barrier("c", 1) == [([1], [10]), ([2], None), ([4], None)]
    assert log.on_barrier("a", 2) is None and log.on_barrier("b", 2) is None
    log.abort(2)
    assert log.on_barrier("c", 2) is None and not log.logging   # aborted: forgotten
    with pytest.raises(ValueError, match="already started"):
        log.start(3)
        log.start(3)


def test_an_ended_back_edge_channel_brings_no_barrier_any_more():
    log = BackEdgeLog(["a", "b"])
    log.start(7)
    log.on_records("b", ["late"])
    assert log.on_barrier("a", 7) is None
    assert log.on_channel_ended("b") == [(7, [(["late"], None)])]
    assert not log.logging
