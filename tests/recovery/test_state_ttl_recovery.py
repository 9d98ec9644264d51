"""State with TTL on a real local Ray: a keyed running count kept in a TTL value state
survives the kill of a keyed task (restored from a checkpoint with its timestamps), on the
heap and the RocksDB backend (full and incremental checkpoints).

The TTL (one hour) is long enough that nothing expires during the job, so the output is
known whatever the timing: for each key ``k`` with ``n`` records exactly ``(k, 1) ... (k,
n)``. A state lost in the restore would restart a count (duplicates); expiry itself is
tested with a manual clock in tests/unit/state/test_state_ttl.py.
"""

import random
from collections import Counter

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import Time, WatermarkStrategy
from flowray.datastream import KeyedProcessFunction
from flowray.datastream.state import StateTtlConfig, ValueStateDescriptor
from flowray.testing import PAUSE, FaultInjector, TestingSource, TransactionalTestingSink, wait_until

N = 20_000
KEYS = 25
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}
BACKENDS = {"heap": {"state.backend.type": "hashmap"},
            "rocksdb": {"state.backend.type": "rocksdb"},
            "rocksdb-incremental": {"state.backend.type": "rocksdb",
                                    "execution.checkpointing.incremental": "true"}}


class CountWithTtl(KeyedProcessFunction):
    def open(self, runtime_context):
        descriptor = ValueStateDescriptor("count")
        descriptor.enable_time_to_live(
            StateTtlConfig.new_builder(Time.hours(1)).update_ttl_on_read_and_write()
            .cleanup_full_snapshot().build())  # plus the default background cleanup
        self.count = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield value[0], count


def _key_of(record):
    return record[0]


def _items():
    items = []
    for i in range(N):
        if i and i % 500 == 0:
            items.append(PAUSE(0.05))  # a few seconds of run time to be killed in
        items.append((f"k{i % KEYS}", i))
    return items


def _expected():
    per_key = Counter(f"k{i % KEYS}" for i in range(N))
    return Counter((k, c) for k, n in per_key.items() for c in range(1, n + 1))


def _completed_checkpoints(client):
    try:
        return client.get_checkpoint_stats()["counts"].get("completed", 0)
    except Exception:  # noqa: BLE001 - the job master is busy
        return 0


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_ttl_state_survives_a_kill(ray_session, tmp_path, backend):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, **BACKENDS[backend],
                       "execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb")}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(2)
    source = TestingSource(_items(), ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .key_by(_key_of).process(CountWithTtl()).name("count with ttl")
        .sink_to(sink))
    client = env.execute_async("ttl-count")
    injector = FaultInjector(client, random.Random(3))
    names = {}

    def reached():
        nonlocal names
        status = client.get_job_status()
        if status.is_globally_terminal_state():
            raise AssertionError("the job ended before the kill")
        if status is not JobStatus.RUNNING or not (
                len(sink.committed()) >= N // 5 and _completed_checkpoints(client)):
            return False
        names = injector.task_actor_names()
        return len({k.split(":")[0] for k in names}) == 2

    wait_until(reached, 180, "committed output and a checkpoint", poll_s=0.1)
    first_vertex = min(int(k.split(":")[0][1:]) for k in names)
    keyed = sorted(k for k in names if int(k.split(":")[0][1:]) != first_vertex)
    injector.kill(injector.rng.choice(keyed))
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 1 and result.outcome.restarts >= 1
    committed = Counter(sink.committed())
    assert committed == _expected(), sorted((committed - _expected()).items())[:10]
    assert sink.pending() == []
