"""Iterations on a real local Ray, exactly once across faults: the committed output of a
cyclic job is compared with what one failure-free run gives.

- Collatz steps per number, a loop closed inside its head's task (forward feedback): that
  task is killed twice mid-loop (``ray.kill``, as a crashed worker), then the job master;
  every number's steps are committed exactly once.
- Connected components by label propagation over a keyed feedback (a loop through
  channels), on the heap and on RocksDB: the head (which is also the tail, taking the
  feedback) and the body's task (which sends it) are killed. Each vertex's committed labels
  strictly decrease (an update committed twice would repeat one) and end at its
  component's smallest vertex (a lost one would leave a larger label).
- A stop-with-savepoint while records go round, and a resume at another parallelism: the
  records in the loop are in the savepoint (the head's queue and back-edge log) and go
  round again after the rescale; the output is what one run gives.

Every wait is on an event (committed output, a source marker, the job's end).
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.testing import HOLD, PAUSE, FaultInjector, TestingSource, \
    TransactionalTestingSink, wait_until
from tests.support.loops import (MinLabel, check_label_updates, collatz_step, collatz_steps,
                                 random_graph)

pytestmark = pytest.mark.timeout(300)

RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _env(tmp_path, parallelism, backend="hashmap", **settings):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, "execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "state.backend.type": backend,
                       "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
                       **settings}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(parallelism)
    return env


def _progress(client):
    try:
        return client._handle.progress()
    except Exception:   # noqa: BLE001 - the job master is restarting
        return None


def _kill_in_turn(client, sink, plan, total):
    """Kill, in turn, each of ``plan`` ((fraction of ``total`` committed, what)): ``what``
    is a vertex name part (the first matching subtask's actor) or "jobmaster". Each kill
    waits until the one before was recovered from, so none is merged into another."""
    injector = FaultInjector(client)
    restarts = 0
    for fraction, what in plan:
        def reached():
            if client.get_job_status().is_globally_terminal_state():
                raise AssertionError(f"the job ended before the kill of {what}")
            progress = _progress(client)
            return (progress is not None and progress.get("restarts", 0) >= restarts
                    and client.get_job_status() is JobStatus.RUNNING
                    and len(sink.committed()) >= fraction * total)
        wait_until(reached, 180, f"{fraction:.0%} of the output committed", poll_s=0.1)
        if what == "jobmaster":
            injector.kill_job_master()
            wait_until(lambda: _progress(client) is not None, 120, "a new job master")
            continue
        injector.kill(injector.subtasks(what)[0])
        restarts += 1
    return injector


# -- Collatz -----------------------------------------------------------------------
def _numbers(count, seed):
    rng = random.Random(seed)
    return [rng.randrange(10**4, 10**6) for _ in range(count)]


def _collatz_job(env, items, sink):
    source = TestingSource(items, ledger_dir=None)
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    it = numbers.uid("numbers").map(lambda n: (n, n, 0)).uid("start").iterate()
    it.uid("loop")
    step = it.map(collatz_step).name("step").uid("step")
    it.close_with(step.filter(lambda r: r[1] != 1).uid("not-at-1"))
    (step.filter(lambda r: r[1] == 1).uid("at-1").map(lambda r: (r[0], r[2])).uid("steps")
        .sink_to(sink).uid("sink"))
    return source


def test_collatz_is_exactly_once_across_kills_of_the_loop_and_the_job_master(ray_session,
                                                                          tmp_path):
    numbers = _numbers(2_000, seed=1)
    items = []
    for i, n in enumerate(numbers):
        if i and i % 40 == 0:
            items.append(PAUSE(0.05))   # keeps the job running long enough to be hit
        items.append(n)
    env = _env(tmp_path, 2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    _collatz_job(env, items, sink)
    client = env.execute_async("collatz-kills")
    _kill_in_turn(client, sink, [(0.2, "Iteration"), (0.45, "Iteration"), (0.7, "jobmaster")],
                  len(numbers))
    result = client.wait(240)
    assert result.outcome.status is JobStatus.FINISHED and result.outcome.restarts >= 2
    assert Counter(sink.committed()) == Counter((n, collatz_steps(n)) for n in numbers)


# -- connected components ------------------------------------------------------------
class CheckpointStampingSink(TransactionalTestingSink):
    """Commits ``(checkpoint id, position, record)`` (``None``: the end of input), so
    the committed output can be put back in the order it was made, per subtask."""

    def pre_commit_checkpoint(self, transaction, checkpoint_id):
        transaction["records"] = [(checkpoint_id, i, r)
                                  for i, r in enumerate(transaction["records"])]
        self.pre_commit(transaction)


def in_made_order(stamped):
    last = float("inf")
    return [r for _, _, r in sorted(stamped, key=lambda x: (last if x[0] is None else x[0],
                                                             x[1]))]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_connected_components_are_exactly_once_across_kills(ray_session, tmp_path, backend):
    adjacency = random_graph(3_000, 2_600, seed=3)
    order = list(adjacency)
    random.Random(4).shuffle(order)
    items = []
    for i, v in enumerate(order):
        if i and i % 60 == 0:
            items.append(PAUSE(0.05))
        items.append((v, v))
    env = _env(tmp_path, 2, backend)
    sink = CheckpointStampingSink(str(tmp_path / "out"))
    source = TestingSource(items, ledger_dir=None)
    it = (env.from_source(source, WatermarkStrategy.no_watermarks(), "vertices").uid("vertices")
          .map(tuple).uid("as-tuples").iterate())
    it.uid("loop")
    updates = it.key_by(lambda r: r[0]).process(MinLabel(adjacency)).name("min label")
    updates.uid("min-label")
    it.close_with(updates.filter(lambda r: r[0] == "loop").uid("to-neighbours")
                  .map(lambda r: (r[1], r[2])).uid("neighbour-label").key_by(lambda r: r[0]))
    (updates.filter(lambda r: r[0] == "out").uid("updates").map(lambda r: (r[1], r[2]))
        .uid("vertex-label").sink_to(sink).uid("sink"))
    client = env.execute_async("components-kills")
    _kill_in_turn(client, sink, [(0.3, "Iteration"), (0.6, "min label")], len(adjacency))
    result = client.wait(240)
    assert result.outcome.status is JobStatus.FINISHED and result.outcome.restarts >= 2
    check_label_updates(in_made_order(sink.committed()), adjacency)


# -- a savepoint with records in the loop, and a rescale ----------------------------
ROUNDS = 120


def slow_round(record):
    key, left = record
    time.sleep(0.002)   # a loop that is still busy when the savepoint is taken
    return key, left - 1


def _rounds_phase(tmp_path, parallelism, savepoint=None):
    settings = {"execution.savepoint.path": savepoint} if savepoint else {}
    env = _env(tmp_path, parallelism, "hashmap", **settings)
    items = [(k, ROUNDS) for k in range(24)] + [HOLD()]
    source = TestingSource(items, ledger_dir=str(tmp_path / "ledger"))
    it = (env.from_source(source, WatermarkStrategy.no_watermarks(), "keys").uid("keys")
          .map(tuple).uid("as-tuples").iterate())
    it.uid("loop")
    body = it.map(slow_round).uid("round")
    it.close_with(body.filter(lambda r: r[1] > 0).uid("again"))
    body.filter(lambda r: r[1] == 0).uid("done").sink_to(
        TransactionalTestingSink(str(tmp_path / "out"))).uid("sink")
    return env.execute_async(f"rounds-p{parallelism}"), source


def test_records_in_the_loop_are_in_a_savepoint_and_go_round_again_after_a_rescale(
        ray_session, tmp_path):
    client, source = _rounds_phase(tmp_path, 2)
    wait_until(lambda: 24 in source.fired_markers(), 120, "the source to reach its HOLD()")
    path = client.stop_with_savepoint(str(tmp_path / "savepoints"), timeout_s=120)
    assert client.get_job_status() is JobStatus.FINISHED
    moved = str(tmp_path / "moved")
    shutil.move(path, moved)
    stopped = TransactionalTestingSink(str(tmp_path / "out")).committed()
    assert len(stopped) < 24      # the loop was still busy: some keys had rounds left

    client, _ = _rounds_phase(tmp_path, 3, savepoint=moved)
    # the restored job holds at its source's HOLD too: it is stopped once every key is out
    wait_until(lambda: len(TransactionalTestingSink(str(tmp_path / "out")).committed()) >= 24
               or client.get_job_status().is_globally_terminal_state(), 180, "every key out")
    client.cancel()
    committed = TransactionalTestingSink(str(tmp_path / "out")).committed()
    assert Counter(committed) == Counter((k, 0) for k in range(24))
