"""The pure parts of a loop: the feedback queue is a FIFO in bounded memory that spills to
disk and gives every record back in order (checked against a plain list over random pushes
and pops); the back-edge log keeps exactly the records between a checkpoint's start at the
head and the barrier's return on each back-edge channel; and the job master's termination
detection never ends a loop that still holds a record, in simulated loops of every shape
with every order of events."""

from __future__ import annotations

import random

import pytest

from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.jobmaster.loop_termination import LoopTerminationDetector, WaveResult
from flowray.runtime.messages import LoopCounters
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


# -- termination detection (the job master's double collect) ------------------------------
class _Loop:
    """A simulated cycle: ``k`` heads and ``k`` body tasks, heads feeding body tasks and
    body tasks feeding heads back (``forward``: task ``i`` to task ``i``; else to every
    one), FIFO channels, every action in a random order, and the job master's waves
    reading each task's counters at random moments in between. A record ``(key, ttl)``
    goes round until its ttl is 0."""

    def __init__(self, k, records, rng, down_forward, back_forward):
        self.k, self.rng = k, rng
        self.down = {h: [h] if down_forward else list(range(k)) for h in range(k)}
        self.back = {b: [b] if back_forward else list(range(k)) for b in range(k)}
        self.channels = {}
        for h in range(k):
            for b in self.down[h]:
                self.channels[(f"h{h}", f"b{b}")] = []
        for b in range(k):
            for h in self.back[b]:
                self.channels[(f"b{b}", f"h{h}")] = []
        self.queues = {h: [] for h in range(k)}
        self.inputs = {h: [] for h in range(k)}   # the regular input, read one by one
        for i, r in enumerate(records):
            self.inputs[i % k].append(r)
        self.sent = {t: 0 for t in self.tasks()}
        self.received = {t: 0 for t in self.tasks()}
        self.visits = 0
        heads = [SubtaskId("h", h) for h in range(k)]
        self.detector = LoopTerminationDetector("h", [self.sid(t) for t in self.tasks()],
                                                heads)
        self.wave = None          # (wave id, tasks not read yet)
        self.ended = False

    def tasks(self):
        return [f"h{i}" for i in range(self.k)] + [f"b{i}" for i in range(self.k)]

    @staticmethod
    def sid(task):
        return SubtaskId(task[0], int(task[1:]))

    def idle(self, h):
        return not self.queues[h] and not self.inputs[h]

    def send(self, src, dst, record):
        self.channels[(src, dst)].append(record)
        self.sent[src] += 1

    def step(self):
        choices = [("ch", c) for c, q in self.channels.items() if q]
        choices += [("emit", h) for h in range(self.k) if self.queues[h] or self.inputs[h]]
        if not self.ended:
            choices.append(("wave", None))
        if not choices:
            return False
        kind, what = self.rng.choice(choices)
        if kind == "emit":
            source = self.queues[what] if self.queues[what] else self.inputs[what]
            key, ttl = source.pop(0)
            targets = self.down[what]
            self.send(f"h{what}", f"b{targets[key % len(targets)]}", (key, ttl))
        elif kind == "ch":
            src, dst = what
            record = self.channels[what].pop(0)
            self.received[dst] += 1
            if dst.startswith("b"):
                b = int(dst[1:])
                self.visits += 1
                key, ttl = record
                if ttl > 0:   # around again, to the head of another key
                    targets = self.back[b]
                    self.send(dst, f"h{targets[(key * 7 + ttl) % len(targets)]}",
                              (key * 7 + 3, ttl - 1))
            else:
                assert not self.ended, "a record came back after the loop was found empty"
                self.queues[int(dst[1:])].append(record)
        else:
            self._wave_step()
        return True

    def _wave_step(self):
        if self.wave is None:
            if self.detector.in_flight:
                return
            self.wave = (self.detector.start_wave(), self.tasks())
            self.rng.shuffle(self.wave[1])
            return
        wave, todo = self.wave
        task = todo.pop()     # one task read, between two of its actions
        h = int(task[1:])
        counters = LoopCounters(self.sent[task], self.received[task],
                                self.idle(h) if task.startswith("h") else True)
        result = self.detector.on_counters(wave, self.sid(task), counters)
        if not todo:
            self.wave = None
        if result is WaveResult.TERMINATED:
            self.ended = True
            assert all(not q for q in self.channels.values())
            assert all(self.idle(h) for h in range(self.k))


@pytest.mark.parametrize("seed", range(80))
def test_a_loop_is_found_ended_only_when_no_record_is_left_whatever_the_interleaving(seed):
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3])
    records = [(i, rng.randrange(0, 12)) for i in range(rng.randrange(1, 25))]
    loop = _Loop(k, records, rng, down_forward=rng.random() < 0.5,
                 back_forward=rng.random() < 0.5)
    for _ in range(500_000):
        if not loop.step():
            break
    else:
        pytest.fail("the simulated loop never ended")
    assert loop.ended
    assert loop.visits == sum(ttl + 1 for _, ttl in records)   # every record went round


def test_a_wave_needs_every_task_and_a_second_quiet_wave_to_end_the_loop():
    head, body = SubtaskId("v2", 0), SubtaskId("v3", 0)
    d = LoopTerminationDetector("v2", [head, body], [head])
    w = d.start_wave()
    with pytest.raises(RuntimeError, match="under way"):
        d.start_wave()
    assert d.on_counters(w, head, LoopCounters(3, 3, True)) is None
    assert d.on_counters(w + 7, body, LoopCounters(3, 3, True)) is None     # another wave
    assert d.on_counters(w, body, LoopCounters(3, 3, True)) is WaveResult.QUIET
    assert d.wanted
    w = d.start_wave()
    d.on_counters(w, head, LoopCounters(4, 4, True))         # it moved meanwhile
    assert d.on_counters(w, body, LoopCounters(4, 4, True)) is WaveResult.QUIET
    w = d.start_wave()
    d.on_counters(w, head, LoopCounters(4, 4, False))        # a head is busy
    assert d.on_counters(w, body, LoopCounters(4, 4, True)) is WaveResult.BUSY
    assert not d.wanted and not d.terminated
    for _ in range(2):
        w = d.start_wave()
        d.on_counters(w, head, LoopCounters(5, 4, True))     # a record on its way
        assert d.on_counters(w, body, LoopCounters(4, 4, True)) is WaveResult.BUSY
    assert not d.terminated
    for expected in (WaveResult.QUIET, WaveResult.TERMINATED):
        w = d.start_wave()
        d.on_counters(w, head, LoopCounters(5, 5, True))
        assert d.on_counters(w, body, LoopCounters(5, 5, True)) is expected
    d.reset()
    assert not d.terminated and not d.in_flight
