"""Unaligned checkpoints end to end on the in-process LocalExecutor: records in flight are
kept as channel state, restored before live input, and the committed output stays exactly
once across failures, on the heap and on RocksDB."""

import collections

import pytest

from flowray import JobExecutionError, WatermarkStrategy
from flowray.testing import FAIL, TestingSource, TransactionalTestingSink
from tests.support.environments import local_env

pytestmark = pytest.mark.timeout(120)

N = 120_000


def _busy(x):
    """Some work per record, so the keyed consumer is slower than the source and its
    inputs hold records when a barrier comes (no sleeping)."""
    s = 0
    for i in range(150):
        s += i
    return x


def _key(x):
    return x % 8


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_unaligned_checkpoints_keep_records_in_flight_and_stay_exactly_once(tmp_path,
                                                                             backend):
    items = list(range(N))
    items.insert(N // 3, FAIL())
    items.insert(2 * N // 3, FAIL())
    env = local_env(2, **{
        "execution.checkpointing.interval": "50 ms",
        "execution.checkpointing.unaligned.enabled": "true",
        "state.backend.type": backend,
        "execution.checkpointing.dir": str(tmp_path / "chk"),
        "flowray.channel.debloat.enabled": "false",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "5",
        "restart-strategy.fixed-delay.delay": "10 ms"})
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .key_by(_key).map(_busy).name("busy")
        .key_by(_key).reduce(lambda a, b: b).name("last")   # keyed state too
        .sink_to(sink))
    result = env.execute("unaligned-local")

    # both failures happened (in one failover when the two sources reach them together)
    assert source.fired_markers() == [N // 3, 2 * N // 3]
    assert result.outcome.restarts >= 1
    committed = collections.Counter(sink.committed())
    assert sum(committed.values()) - N == 0 and committed == collections.Counter(range(N))
    acks = [m for h in result.outcome.checkpoint_stats["history"]
            for m in h.get("tasks", {}).values() if m.get("unaligned")]
    assert acks, "no checkpoint was taken unaligned"
    assert any(m["persisted_data"] > 0 for m in acks), "no record was ever in flight"


def test_a_restore_at_another_parallelism_from_an_unaligned_checkpoint(tmp_path):
    """p=2 -> p=3: the records in flight at the checkpoint follow their key groups to the
    new subtasks (the source's splits and the keyed state are redistributed as ever), and
    the output of both runs together is exactly once."""
    from flowray.testing import wait_until

    def env_at(parallelism, **more):
        return local_env(parallelism, **{
            "execution.checkpointing.interval": "50 ms",
            "execution.checkpointing.unaligned.enabled": "true",
            "execution.checkpointing.externalized-checkpoint-retention":
                "RETAIN_ON_CANCELLATION",
            "execution.checkpointing.dir": str(tmp_path / "chk"),
            "flowray.channel.debloat.enabled": "false", **more})

    def job(env):
        (env.from_source(TestingSource(list(range(N)), ledger_dir=str(tmp_path / "f")),
                         WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
            .key_by(_key).map(_busy).uid("busy")
            .key_by(_key).reduce(lambda a, b: b).uid("last")
            .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))

    first = env_at(2)
    job(first)
    client = first.execute_async("before-rescale")

    def in_flight_checkpoint():
        history = client.get_checkpoint_stats()["history"]
        return [h for h in history if h["status"] == "COMPLETED" and any(
            m.get("persisted_data", 0) > 0 for m in h.get("tasks", {}).values())]
    wait_until(in_flight_checkpoint, 60, "a checkpoint with records in flight", poll_s=0.02)
    client.cancel()
    with pytest.raises(JobExecutionError, match="CANCELED"):
        client.wait(timeout_s=60)
    latest = [h["external_path"] for h in client.get_checkpoint_stats()["history"]
              if h["status"] == "COMPLETED"][-1]

    second = env_at(3, **{"execution.savepoint.path": latest.rsplit("/", 1)[0]})
    job(second)
    second.execute("after-rescale")
    committed = collections.Counter(TransactionalTestingSink(str(tmp_path / "out"))
                                    .committed())
    assert committed == collections.Counter(range(N)), sum(committed.values()) - N


@pytest.mark.parametrize("timeout, unaligned", [("1 h", False), ("1 ms", True)])
def test_the_aligned_checkpoint_timeout_decides_when_a_checkpoint_switches(
        tmp_path, timeout, unaligned):
    """Checkpoints start aligned: with an hour to align none switches, with a
    millisecond a barrier is already older than that when it reaches a task with two
    inputs, and the checkpoint switches to unaligned there."""
    env = local_env(2, **{
        "execution.checkpointing.interval": "50 ms",
        "execution.checkpointing.unaligned.enabled": "true",
        "execution.checkpointing.aligned-checkpoint-timeout": timeout,
        "execution.checkpointing.dir": str(tmp_path / "chk"),
        "flowray.channel.debloat.enabled": "false"})
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(TestingSource(list(range(N // 2))), WatermarkStrategy.no_watermarks(),
                     "numbers")
        .key_by(_key).map(_busy).sink_to(sink))
    result = env.execute("aligned-timeout")
    acks = [m for h in result.outcome.checkpoint_stats["history"]
            for key, m in h.get("tasks", {}).items()
            if h["status"] == "COMPLETED" and not m.get("finished")]
    assert acks
    switched = [m for m in acks if m.get("unaligned")]
    assert bool(switched) is unaligned, acks[:4]
    assert collections.Counter(sink.committed()) == collections.Counter(range(N // 2))
