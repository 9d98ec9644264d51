"""The iteration head's pure parts: the feedback queue is a FIFO in bounded memory that
spills to disk and gives every record back in order (checked against a plain list over
random pushes and pops), and the back-edge log keeps exactly the records between a
checkpoint's start at the head and the barrier's return on each back-edge channel."""

from __future__ import annotations

import random

import pytest

from flowray.runtime.network.elements import IterationProbe
from flowray.runtime.task.iteration import (BackEdgeLog, FeedbackQueue, HeadTermination,
                                            ProbeAligner, RoundOutcome)


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


# -- termination detection -------------------------------------------------------------
class _Loop:
    """A simulated cycle: ``k`` heads, ``k`` body tasks, every head feeding every body task
    (a keyed edge) and body task ``i`` feeding head ``i`` back; FIFO channels, frames
    delivered in a random order. A record ``(key, ttl)`` goes round until its ttl is 0."""

    def __init__(self, k, records, rng):
        self.k, self.rng = k, rng
        self.channels = {}   # (src, dst) -> deque of frames
        for h in range(k):
            for b in range(k):
                self.channels[(f"h{h}", f"b{b}")] = []
            self.channels[(f"b{h}", f"h{h}")] = []
        self.queues = {h: [] for h in range(k)}
        for i, r in enumerate(records):
            self.queues[i % k].append(r)
        self.terms = {h: HeadTermination("it", [f"b{h}->h{h}"]) for h in range(k)}
        self.aligners = {b: ProbeAligner([f"h{h}->b{b}" for h in range(k)]) for b in range(k)}
        self.ended_heads = set()
        self.ended_inputs = {b: set() for b in range(k)}
        self.outcomes = {}
        self.visits = 0

    def send(self, src, dst, frame):
        self.channels[(src, dst)].append(frame)

    def step(self):
        """One random action; False when nothing can happen any more."""
        choices = [("ch", c) for c, q in self.channels.items() if q]
        choices += [("emit", h) for h in range(self.k) if self.queues[h]]
        choices += [("idle", h) for h in range(self.k) if not self.queues[h]
                    and h not in self.ended_heads]
        if not choices:
            return False
        kind, what = self.rng.choice(choices)
        if kind == "emit":
            key, ttl = self.queues[what].pop(0)
            self.send(f"h{what}", f"b{key % self.k}", ("rec", (key, ttl)))
        elif kind == "idle":
            h, term = what, self.terms[what]
            outcome = self.outcomes.pop(h, None)
            if outcome is RoundOutcome.TERMINATE:
                self.ended_heads.add(h)
                for b in range(self.k):
                    self.send(f"h{h}", f"b{b}", ("eop", None))
            elif not term.in_round:
                probe = term.start_round()
                for b in range(self.k):
                    self.send(f"h{h}", f"b{b}", ("probe", probe))
        else:
            src, dst = what
            kind, payload = self.channels[what].pop(0)
            if dst.startswith("b"):
                self._at_body(int(dst[1:]), src, kind, payload)
            else:
                self._at_head(int(dst[1:]), kind, payload)
        return True

    def _at_body(self, b, src, kind, payload):
        cid = f"{src}->b{b}"
        if kind == "rec":
            self.visits += 1
            key, ttl = payload
            if ttl > 0:   # around again, to the head of another key
                self.send(f"b{b}", f"h{b}", ("rec", (key * 7 + 3, ttl - 1)))
        elif kind == "probe":
            for p in self.aligners[b].on_probe(cid, payload):
                self.send(f"b{b}", f"h{b}", ("probe", p))
        else:
            self.ended_inputs[b].add(src)
            for p in self.aligners[b].on_channel_ended(cid):
                self.send(f"b{b}", f"h{b}", ("probe", p))
            if len(self.ended_inputs[b]) == self.k:
                self.send(f"b{b}", f"h{b}", ("eop", None))

    def _at_head(self, h, kind, payload):
        term, cid = self.terms[h], f"b{h}->h{h}"
        if kind == "rec":
            assert h not in self.ended_heads, f"a record came back to ended head {h}"
            term.on_records()
            self.queues[h].append(payload)
            if self.outcomes.get(h) is RoundOutcome.TERMINATE:
                self.outcomes.pop(h)
        elif kind == "probe":
            outcome = term.on_probe(cid, payload)
            if outcome is not None:
                self.outcomes[h] = outcome
        else:
            term.on_channel_ended(cid)


@pytest.mark.parametrize("seed", range(60))
def test_heads_end_only_when_their_loop_is_empty_whatever_the_interleaving(seed):
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3])
    records = [(i, rng.randrange(0, 12)) for i in range(rng.randrange(1, 25))]
    loop = _Loop(k, records, rng)
    for _ in range(200_000):
        if not loop.step():
            break
    else:
        pytest.fail("the simulated loop never ended")
    assert loop.ended_heads == set(range(k))     # every head ended ...
    assert loop.visits == sum(ttl + 1 for _, ttl in records)   # ... after every record
    assert all(not q for q in loop.channels.values())


def test_a_round_is_dirty_while_records_come_back_and_two_clean_rounds_are_not_needed():
    t = HeadTermination("it", ["a", "b"])
    first = t.start_round()
    assert first.dirty and first.round == 1
    t.on_records()                                   # records during round 1
    assert t.on_probe("a", IterationProbe("it", 1, False)) is None   # "b" still out
    assert t.on_probe("b", IterationProbe("it", 1, False)) is RoundOutcome.CONTINUE
    second = t.start_round()
    assert second.dirty                               # round 1 saw records
    assert t.on_probe("a", IterationProbe("it", 2, True)) is None
    assert t.on_channel_ended("b") is RoundOutcome.CONTINUE   # a head upstream was dirty
    third = t.start_round()
    assert not third.dirty
    assert t.on_probe("a", IterationProbe("it", 3, False)) is RoundOutcome.TERMINATE
    with pytest.raises(RuntimeError, match="probe round 9 came back on a"):
        t.on_probe("a", IterationProbe("it", 9, False))


def test_a_body_task_forwards_a_round_once_every_loop_input_delivered_it_in_order():
    a = ProbeAligner(["h0", "h1"], outside=["src"])
    assert a.on_probe("h0", IterationProbe("it", 1, False)) == []
    assert a.on_probe("h0", IterationProbe("it", 2, True)) == []    # h0 runs ahead
    assert a.on_probe("h1", IterationProbe("it", 1, False)) == []   # src still open
    assert a.on_channel_ended("src") == [IterationProbe("it", 1, False)]
    assert a.on_channel_ended("h1") == [IterationProbe("it", 2, True)]   # ended: delivered
