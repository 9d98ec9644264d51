"""Unaligned checkpoints end to end on the in-process LocalExecutor: records in flight are
kept as channel state, restored before live input, and the committed output stays exactly
once across failures, on the heap and on RocksDB."""

import collections

import pytest

from flowray import WatermarkStrategy
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
        "state.checkpoints.dir": str(tmp_path / "chk"),
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
