"""Incremental RocksDB checkpoints and job master recovery on a real local Ray.

The job is a keyed running sum of ``(key, 1)`` records on the RocksDB backend with
incremental checkpoints, so its committed output is known exactly: for each key ``k`` with
``n`` records, the records ``(k, 1) ... (k, n)`` once each. Tasks holding the keyed state
are killed, and the job master itself is killed; checkpoint storage is inspected after the
job ends for files no retained checkpoint references.
"""

import os
from collections import Counter

import pytest

from flowray import JobExecutionError, JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.runtime.checkpoint.storage import FsCheckpointStorage
from flowray.runtime.checkpoint.shared_files import shared_files
from flowray.testing import (
    PAUSE,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

N = 60_000
KEYS = 500
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _records(n=N, pause_every=500, pause_s=0.05):
    items = []
    for i in range(n):
        if i and i % pause_every == 0:
            items.append(PAUSE(pause_s))  # ~6 s of run time at the default sizes
        items.append((f"k{i % KEYS}", 1))
    return items


def _expected(n=N):
    per_key = Counter(f"k{i % KEYS}" for i in range(n))
    return Counter((k, c) for k, c_n in per_key.items() for c in range(1, c_n + 1))


def _submit(tmp_path, items, extra=None, interval_ms=200):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, "state.backend.type": "rocksdb",
                       "execution.checkpointing.incremental": "true",
                       "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
                       "execution.checkpointing.num-retained": "2",
                       "execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       **(extra or {})}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(interval_ms)
    env.set_parallelism(2)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda t: t[0]).sum(1).name("running sum")
        .sink_to(sink))
    return env.execute_async("incremental-running-sum"), sink


def _completed(client):
    try:
        return client.get_checkpoint_stats()["counts"].get("completed", 0)
    except Exception:  # noqa: BLE001 - the job master is being restarted
        return 0


def _wait_progress(client, sink, committed_at_least, checkpoints_after):
    def reached():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended too early")
        return (len(sink.committed()) >= committed_at_least
                and _completed(client) > checkpoints_after)
    wait_until(reached, 180, f"{committed_at_least} committed records and a checkpoint after "
                             f"#{checkpoints_after}", poll_s=0.2)


def _diff(got, want):
    extra, missing = got - want, want - got
    return (f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
            f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")


def _leftover_files(folder):
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_keyed_job_on_incremental_rocksdb_killed_three_times_is_exactly_once(ray_session,
                                                                               tmp_path):
    client, sink = _submit(tmp_path, _records())
    injector = FaultInjector(client)
    killed = []
    for fraction in (0.15, 0.4, 0.65):
        # at least one more checkpoint since the last restore, so each restore is from an
        # incremental checkpoint taken by a restored database
        _wait_progress(client, sink, int(fraction * N), 0)
        before = _completed(client)
        _wait_progress(client, sink, int(fraction * N), before)
        sums = injector.subtasks("running sum")
        victim = sums[len(killed) % len(sums)]
        injector.kill(victim)
        killed.append(victim)
    result = client.wait(timeout_s=300)

    committed = Counter(sink.committed())
    assert committed == _expected(), _diff(committed, _expected())
    assert sink.pending() == []
    assert result.outcome.restarts >= 3
    history = client.get_checkpoint_stats()["history"]
    assert len([h for h in history if h.get("status") == "COMPLETED"]) >= 4
    # a finished job deletes its checkpoints, shared files included; every task removed
    # its RocksDB working folder
    assert _leftover_files(tmp_path / "checkpoints") == []
    assert _leftover_files(tmp_path / "rocksdb") == []


def test_a_killed_job_master_is_restarted_and_the_output_stays_exactly_once(ray_session,
                                                                             tmp_path):
    client, sink = _submit(tmp_path, _records())
    _wait_progress(client, sink, N // 4, 1)
    FaultInjector(client).kill_job_master()
    result = client.wait(timeout_s=300)

    assert result.outcome.status is JobStatus.FINISHED
    assert result.outcome.job_master_restarts == 1
    assert "1 job master restarts" in result.summary()
    committed = Counter(sink.committed())
    assert committed == _expected(), _diff(committed, _expected())
    assert sink.pending() == []
    assert _leftover_files(tmp_path / "checkpoints") == []


def test_only_the_retained_checkpoints_files_remain_after_the_job_ends(ray_session, tmp_path):
    client, sink = _submit(tmp_path, _records(n=10 * N), {
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    injector = FaultInjector(client)
    _wait_progress(client, sink, N // 10, 1)
    injector.kill(injector.subtasks("running sum")[0])
    _wait_progress(client, sink, N // 10, _completed(client) + 2)
    client.cancel()
    with pytest.raises(JobExecutionError) as info:
        client.wait(timeout_s=120)
    assert info.value.outcome.status is JobStatus.CANCELED

    storage = FsCheckpointStorage(str(tmp_path / "checkpoints"), client.get_job_id())
    retained = storage.list_completed()
    assert len(retained) == 2 and storage.list_incomplete() == []
    referenced = set()
    for cid in retained:
        cp = storage.read_metadata(storage.checkpoint_dir(cid))
        files = shared_files(cp.task_states)
        assert files, "incremental checkpoints reference shared files"
        referenced.update(h.path for h in files.values())
    on_storage = set(storage.list_shared_files())
    assert on_storage == referenced, (f"orphans: {sorted(on_storage - referenced)[:5]}, "
                                      f"missing: {sorted(referenced - on_storage)[:5]}")
    # nothing but the retained checkpoints' folders and the shared files
    leftovers = _leftover_files(tmp_path / "checkpoints")
    assert leftovers
    for path in leftovers:
        rel = os.path.relpath(path, tmp_path / "checkpoints")
        parts = rel.split(os.sep)
        assert len(parts) > 2 and parts[1] in {f"chk-{c}" for c in retained} | {"shared"}, rel
