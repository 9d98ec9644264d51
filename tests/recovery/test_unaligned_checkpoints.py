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

from flowray import StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.testing import FaultInjector, TestingSource, TransactionalTestingSink, wait_until

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
            "state.checkpoints.dir": str(tmp_path / "chk"),
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
    persisted = [m.get("persisted_data", 0)
                 for h in unaligned.outcome.checkpoint_stats["history"]
                 for m in h.get("tasks", {}).values()]
    assert max(persisted) > 0, "no record was in flight at any unaligned checkpoint"
    # killed mid-stream, restored from an unaligned checkpoint: exactly once
    assert len(injector.killed) == 1 and unaligned.outcome.restarts >= 1
    assert Counter(sink.committed()) == Counter(range(N))
