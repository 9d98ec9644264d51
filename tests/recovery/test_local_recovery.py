"""Task-local recovery on a real local Ray: a keyed task killed after a checkpoint restores
its RocksDB state from the copy kept on its node, not from checkpoint storage.

Checkpoints are triggered by hand (the periodic interval is an hour), so the test knows
which checkpoint a restore must use. Before the kill, every keyed state file of the
completed checkpoints is deleted from checkpoint storage: a restore that read storage
would fail (and fall back, or fail the job), so exactly-once output with no fallback and
the expected checkpoint restored proves the local copies were used.
"""

from collections import Counter

import pytest

from flowray import JobStatus
from flowray.runtime.checkpoint.storage import FsCheckpointStorage
from flowray.state.checksums import referenced_paths
from flowray.state.snapshot import IncrementalKeyedStateHandle
from flowray.testing import HOLD, FaultInjector, TestingSource, wait_until
from tests.recovery.test_incremental_recovery import (
    N,
    _diff,
    _expected,
    _leftover_files,
    _records,
    _submit,
)

LOCAL = {"execution.checkpointing.local-backup.enabled": "true"}
HOUR_MS = 3_600_000


def _keyed_files(storage, checkpoint_id):
    cp = storage.read_metadata(storage.checkpoint_dir(checkpoint_id))
    return [p for snapshot in cp.task_states.values() for p in referenced_paths(snapshot)
            if any(s.keyed is not None for s in snapshot.operators.values())
            and p not in _operator_files(snapshot)]


def _operator_files(snapshot):
    return {s.operator_state_file.path for s in snapshot.operators.values()
            if s.operator_state_file is not None}


@pytest.mark.parametrize("incremental", ["false", "true"])
def test_a_killed_task_restores_rocksdb_from_its_local_copy(ray_session, tmp_path, incremental):
    records = _records(n=N, pause_every=N)  # no pauses: the HOLD() is the only wait
    hold_at = N // 2
    items = records[:hold_at] + [HOLD()] + records[hold_at:]
    client, sink = _submit(tmp_path, items,
                           {**LOCAL, "execution.checkpointing.incremental": incremental},
                           interval_ms=HOUR_MS)  # checkpoints only when the test asks
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    wait_until(lambda: hold_at in source.fired_markers(), 120, "the source to hold")
    paths = [client.trigger_checkpoint(timeout_s=60) for _ in range(2)]
    last = int(paths[-1].rstrip("/").rsplit("chk-", 1)[1])

    storage = FsCheckpointStorage(str(tmp_path / "checkpoints"), client.get_job_id())
    assert last in storage.list_completed()
    keyed = [p for cid in storage.list_completed() for p in _keyed_files(storage, cid)]
    assert keyed, "the checkpoints hold keyed state"
    if incremental == "true":
        cp = storage.read_metadata(storage.checkpoint_dir(last))
        assert any(isinstance(s.keyed, IncrementalKeyedStateHandle)
                   for snap in cp.task_states.values() for s in snap.operators.values())
    for path in keyed:  # from now on, a restore that reads storage fails
        storage.delete_file(path)

    injector = FaultInjector(client)
    victim = injector.subtasks("running sum")[0]
    injector.kill(victim)
    result = client.wait(timeout_s=300)

    assert result.outcome.status is JobStatus.FINISHED
    committed = Counter(sink.committed())
    assert committed == _expected(), _diff(committed, _expected())
    assert sink.pending() == []
    stats = result.outcome.checkpoint_stats
    assert result.outcome.restarts >= 1
    assert stats["latest_restore"]["checkpoint_id"] == last
    assert stats["fallbacks"] == []
    # the finished tasks and the job master removed the local copies
    assert _leftover_files(tmp_path / "rocksdb") == []
