"""Unaligned checkpoints on a real local Ray (issue 32, part 1).

Behind a slow map with buffer debloating off, an aligned barrier waits behind every
record in flight: seconds here. An unaligned one overtakes them, and they are stored with
the checkpoint. The test asserts the order of magnitude between the two, not times. The
unaligned job is also killed mid-stream, and its committed output must be exactly once.
"""

import random
import statistics
import time
from collections import Counter

import pytest

from flowray import JobExecutionError, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.testing import (
    HOLD,
    PAUSE,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

N = 8_000
SLOW_S = 0.001   # per record: the map is the bottleneck (2 subtasks, ~2,000 records/s)


def _slow(x):
    time.sleep(SLOW_S)
    return x


def _key(x):
    return x % 16


def _run(tmp_path, unaligned, kill=False):
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in {
            "execution.checkpointing.unaligned.enabled": str(unaligned).lower(),
            "flowray.channel.debloat.enabled": "false",
            "flowray.channel.batch-size": "500",
            "flowray.channel.credits": "4",
            "execution.checkpointing.dir": str(tmp_path / "chk"),
            "execution.checkpointing.timeout": "2 min",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "5",
            "restart-strategy.fixed-delay.delay": "100 ms"}.items():
        env.get_configuration().set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(2)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(TestingSource(list(range(N)), ledger_dir=str(tmp_path / "faults")),
                     WatermarkStrategy.no_watermarks(), "numbers")
        .key_by(_key).map(_slow).name("slow map")
        .sink_to(sink))
    client = env.execute_async("unaligned" if unaligned else "aligned")
    injector = None
    if kill:
        wait_until(lambda: len(sink.committed()) >= N // 3, 120, "a third committed",
                   poll_s=0.1)
        injector = FaultInjector(client, random.Random(32))
        injector.kill_random_task()
    result = client.wait(timeout_s=300)
    return result, sink, injector


def _durations(result):
    return [h["duration_ms"] for h in result.outcome.checkpoint_stats["history"]
            if h["status"] == "COMPLETED" and not h["is_savepoint"]]


def test_unaligned_checkpoints_overtake_the_backlog_that_aligned_ones_wait_behind(
        ray_session, tmp_path):
    aligned, _, _ = _run(tmp_path / "a", unaligned=False)
    unaligned, sink, injector = _run(tmp_path / "u", unaligned=True, kill=True)
    a, u = _durations(aligned), _durations(unaligned)
    print("checkpoint durations (ms), aligned:", a, "unaligned:", u)
    assert len(a) >= 1 and len(u) >= 3, (a, u)
    # 4 credits x 500 records x 1 ms are in flight on each channel into the slow map
    assert statistics.median(u) * 5 < statistics.median(a), (a, u)
    # none waits for a backlog: not after the restore (the restored channel state is
    # replayed with checkpoints going on), not at the sources' end (a source waiting for
    # its consumers to take its last frames still takes checkpoints)
    assert max(u) < statistics.median(a), (a, u)
    persisted = [m.get("persisted_data", 0)
                 for h in unaligned.outcome.checkpoint_stats["history"]
                 for m in h.get("tasks", {}).values()]
    assert max(persisted) > 0, "no record was in flight at any unaligned checkpoint"
    # killed mid-stream, restored from an unaligned checkpoint: exactly once
    assert len(injector.killed) == 1 and unaligned.outcome.restarts >= 1
    assert Counter(sink.committed()) == Counter(range(N))


def _completed_with_records_in_flight(client):
    try:
        history = client.get_checkpoint_stats()["history"]
    except Exception:  # noqa: BLE001 - the job master is being restarted
        return []
    return [h for h in history if h["status"] == "COMPLETED" and not h["is_savepoint"]
            and any(m.get("persisted_data", 0) > 0 for m in h.get("tasks", {}).values())]


def _pairs(n, hold):
    """(k, 1) records in two halves (one per source subtask at p=2), each with a HOLD at
    nine tenths, so the first run cannot end before it is cancelled. ``hold=False`` puts
    PAUSE(0) in their places (same positions, nothing held) for the resumed run."""
    items = [(i % 16, 1) for i in range(n)]
    for at in (n * 19 // 20, n * 9 // 20):
        items.insert(at, HOLD() if hold else PAUSE(0))
    return items


def _keyed_sum_job(tmp_path, parallelism, items, extra=None):
    """(k, 1) records -> slow keyed map -> keyed running sum on incremental RocksDB ->
    transactional sink. Its committed output is known exactly: (k, 1) .. (k, count_k)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in {
            "execution.checkpointing.unaligned.enabled": "true",
            "execution.checkpointing.externalized-checkpoint-retention":
                "RETAIN_ON_CANCELLATION",
            "flowray.channel.debloat.enabled": "false",
            "flowray.channel.batch-size": "500",
            "flowray.channel.credits": "4",
            "state.backend.type": "rocksdb",
            "execution.checkpointing.incremental": "true",
            "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
            "execution.checkpointing.dir": str(tmp_path / "chk"),
            "execution.checkpointing.num-retained": "1000",   # the test picks one to resume from
            "execution.checkpointing.timeout": "2 min",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "5",
            "restart-strategy.fixed-delay.delay": "100 ms", **(extra or {})}.items():
        env.get_configuration().set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(parallelism)
    (env.from_source(TestingSource(items, ledger_dir=str(tmp_path / "faults")),
                     WatermarkStrategy.no_watermarks(), "pairs").uid("pairs")
        .key_by(lambda t: t[0]).map(_slow).uid("slow map").name("slow map")
        .key_by(lambda t: t[0]).sum(1).uid("running sum").name("running sum")
        .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))
    return env


def test_unaligned_rocksdb_job_survives_task_and_master_kills_and_rescales_2_to_3(
        ray_session, tmp_path):
    """On RocksDB with unaligned checkpoints: a running-sum task is killed, then the job
    master; the job is cancelled once a later checkpoint holds records in flight, and
    resumed from that checkpoint at parallelism 3. Both runs together commit every
    running-sum step exactly once."""
    n = 16_000
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    first = _keyed_sum_job(tmp_path, 2, _pairs(n, hold=True))
    client = first.execute_async("unaligned-rocksdb")
    injector = FaultInjector(client, random.Random(32))
    wait_until(lambda: len(sink.committed()) >= n // 8 and _completed_with_records_in_flight(
        client), 120, "records committed and an unaligned checkpoint", poll_s=0.1)
    sums = injector.subtasks("running sum")
    injector.kill(sums[0])
    seen = len(_completed_with_records_in_flight(client))
    wait_until(lambda: len(_completed_with_records_in_flight(client)) > seen, 120,
               "an unaligned checkpoint after the restore", poll_s=0.1)
    before_master_kill = max(h["checkpoint_id"]
                             for h in _completed_with_records_in_flight(client))
    injector.kill_job_master()
    wait_until(lambda: any(h["checkpoint_id"] > before_master_kill
                           for h in _completed_with_records_in_flight(client))
               and len(sink.committed()) >= n // 3, 120,
               "an unaligned checkpoint by the restarted master", poll_s=0.1)
    client.cancel()
    with pytest.raises(JobExecutionError, match="CANCELED"):
        client.wait(timeout_s=120)
    latest = _completed_with_records_in_flight(client)[-1]
    assert all(m.get("unaligned") for m in latest["tasks"].values()), latest["tasks"]
    assert len(sink.committed()) < n

    rescaled = _keyed_sum_job(tmp_path, 3, _pairs(n, hold=False), {
        "execution.savepoint.path": latest["external_path"].rsplit("/", 1)[0]})
    rescaled.execute("unaligned-rocksdb-rescaled")
    per_key = Counter(i % 16 for i in range(n))
    want = Counter((k, c) for k, count in per_key.items() for c in range(1, count + 1))
    got = Counter(sink.committed())
    assert got == want, (f"{sum((want - got).values())} missing, "
                         f"{sum((got - want).values())} extra")
