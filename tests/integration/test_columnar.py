"""The columnar path on real Ray tasks: record batches cross socket channels as Arrow IPC,
a columnar keyed running sum keeps its state across a failure (restored from a checkpoint)
and an exactly-once Parquet sink gets every row once; map_batches on rows."""

import os

import pyarrow as pa
import pyarrow.parquet as pq

from flowray import RestartStrategies
from flowray.common import Row
from flowray.operators.parquet_sink import ParquetFilesSink

N, USERS = 100_000, 50


class FailAfterCheckpoint:
    """Raises once (the marker file says it did), at its first batch after a checkpoint
    completed, so the job restarts from that checkpoint's state."""

    def __init__(self, marker):
        self.marker, self.checkpointed = marker, False

    def notify_checkpoint_complete(self, checkpoint_id):
        self.checkpointed = True

    def __call__(self, table):
        if self.checkpointed and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("injected failure")
        return {"user": table.column("user"), "i": table.column("i"),
                "total": table.column("amount")}


def test_columnar_running_sum_recovers_and_writes_each_row_once(env, tmp_path):
    env.set_parallelism(2)
    env.enable_checkpointing(30)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    users = [f"u{i % USERS}" for i in range(N)]
    amounts = [(i * 7) % 11 + 1 for i in range(N)]
    source = pa.table({"user": users, "i": list(range(N)), "amount": amounts})
    out = str(tmp_path / "out")
    (env.from_arrow([source.slice(0, N // 2), source.slice(N // 2)], batch_rows=200)
        .key_by("user").sum("amount")
        .map_batches(FailAfterCheckpoint(str(tmp_path / "failed")), batch_format="pyarrow",
                     batch_size=None)
        .sink_to(ParquetFilesSink(out, pa.schema([("user", pa.string()), ("i", pa.int64()),
                                                  ("total", pa.int64())]))))
    result = env.execute("columnar-on-ray")
    assert os.path.exists(tmp_path / "failed")
    assert result.outcome.restarts == 1
    rows = pq.read_table(out).to_pylist()
    assert sorted(r["i"] for r in rows) == list(range(N))  # every row exactly once
    want = {}
    for u, a in zip(users, amounts):
        want[u] = want.get(u, 0) + a
    per_user = {}
    for r in rows:
        per_user.setdefault(r["user"], []).append(r["total"])
    assert {u: max(t) for u, t in per_user.items()} == want
    for u, totals in per_user.items():  # running totals: all distinct (amounts > 0)
        assert len(set(totals)) == len(totals) == N // USERS


def test_map_batches_on_rows_across_tasks(env):
    env.set_parallelism(2)
    out = list(env.from_collection([(f"k{i % 3}", i) for i in range(300)])
               .rebalance()
               .map_batches(lambda b: {"k": b["f0"], "twice": b["f1"] * 2},
                            batch_format="numpy", batch_size=32)
               .key_by(lambda r: r.k)
               .map(lambda r: (r.k, r.twice, isinstance(r, Row)))
               .execute_and_collect("map-batches-on-ray"))
    assert sorted(t for _, t, _ in out) == [2 * i for i in range(300)]
    assert all(is_row for *_, is_row in out)
