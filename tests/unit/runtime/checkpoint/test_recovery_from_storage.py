"""A restarted job master reads its retained checkpoints back from storage (and falls back
or fails when the newest cannot be read); a damaged checkpoint dropped; manual
checkpoints; finding a job's retained checkpoints in a checkpoints directory. Pure:
ManualClock, in-memory storage (a tmp_path file system for the directory scans)."""

import logging

import pytest
from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.coordinator import CheckpointRecoveryError
from flowray.runtime.checkpoint.recovery import LATE_UPLOAD_SWEEP_MS
from flowray.runtime.checkpoint.storage import (
    LATEST_COMPLETED_FILE,
    FsCheckpointStorage,
    MemoryCheckpointStorage,
    RetainedCheckpoint,
    find_retained_checkpoints,
    load_checkpoint,
)

from tests.support.coordinator import JOB, SRC0, Harness, R

GARBAGE = b"not a checkpoint"


def completed_three():
    """A coordinator that completed checkpoints 1, 2 and 3, retaining two."""
    h = Harness(num_retained=2)
    for _ in range(3):
        cid = h.trigger()
        h.ack(cid)
        assert h.coord.latest_completed().checkpoint_id == cid
        # every completion notes itself as the latest
        assert h.storage.latest_completed_record() == cid
    assert h.completed_on_storage() == [2, 3]
    return h


def successor(h):
    """A new coordinator over the same files, as a restarted job master builds it."""
    return Harness(num_retained=2, running=False,
                   storage=MemoryCheckpointStorage(JOB, h.storage.files))


def files_of(storage, cid):
    prefix = storage.checkpoint_dir(cid) + "/"
    return sorted(p for p in storage.files if p.startswith(prefix))


def ids(checkpoints):
    return [c.checkpoint_id for c in checkpoints]


# -----------------------------------------------------------------------------------------
# recover_from_storage
# -----------------------------------------------------------------------------------------

def test_a_successor_recovers_the_retained_checkpoints():
    h = completed_three()
    again = successor(h)
    latest = again.coord.recover_from_storage()
    assert latest.checkpoint_id == 3
    assert latest.task_states == h.coord.latest_completed().task_states
    assert ids(again.coord.store.all()) == [2, 3]
    assert again.coord.next_checkpoint_id == 4
    assert again.storage.latest_completed_record() == 3
    # without fallback too: nothing is damaged
    assert successor(h).coord.recover_from_storage(allow_fallback=False).checkpoint_id == 3


def test_a_fresh_job_recovers_nothing():
    h = Harness(num_retained=2)
    again = successor(h)
    assert again.coord.recover_from_storage() is None
    assert again.coord.recover_from_storage(allow_fallback=False) is None
    assert again.coord.store.all() == [] and again.coord.next_checkpoint_id == 1
    assert again.storage.latest_completed_record() is None


def test_an_unreadable_newest_metadata_falls_back_to_the_previous_checkpoint(caplog):
    h = completed_three()
    h.storage.write_file(h.storage.metadata_path(3), GARBAGE)
    again = successor(h)
    with caplog.at_level(logging.WARNING, logger="flowray.runtime.checkpoint.coordinator"):
        latest = again.coord.recover_from_storage(allow_fallback=True)
    assert latest.checkpoint_id == 2
    assert ids(again.coord.store.all()) == [2]
    # the unreadable folder is deleted, its id never reused
    assert files_of(again.storage, 3) == [] and again.storage.list_completed() == [2]
    assert again.coord.next_checkpoint_id == 4
    assert again.storage.latest_completed_record() == 2
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "checkpoint 3" in warning and "falling back to checkpoint 2" in warning
    assert h.storage.metadata_path(3) in warning


def test_an_unreadable_newest_metadata_fails_without_fallback():
    h = completed_three()
    h.storage.write_file(h.storage.metadata_path(3), GARBAGE)
    before = dict(h.storage.files)
    again = successor(h)
    with pytest.raises(CheckpointRecoveryError) as e:
        again.coord.recover_from_storage(allow_fallback=False)
    message = str(e.value)
    assert h.storage.metadata_path(3) in message  # memory://job/chk-3/_metadata
    assert "checkpoint 3" in message and "checkpoint 2" in message
    assert "twice" in message
    # nothing was deleted or loaded
    assert again.storage.files == before and again.coord.store.all() == []


def test_every_metadata_unreadable_fails_instead_of_starting_over():
    h = completed_three()
    for cid in h.completed_on_storage():
        h.storage.write_file(h.storage.metadata_path(cid), GARBAGE)
    for allow_fallback in (True, False):
        again = successor(h)
        with pytest.raises(CheckpointRecoveryError) as e:
            again.coord.recover_from_storage(allow_fallback=allow_fallback)
        assert "instead of starting over" in str(e.value)
        assert "checkpoint 3" in str(e.value)
        assert h.storage.metadata_path(3) in str(e.value)


def test_a_deleted_newest_folder_known_from_the_record_falls_back():
    h = completed_three()
    h.storage.discard_checkpoint(3)
    assert h.storage.list_completed() == [2] and h.storage.latest_completed_record() == 3
    again = successor(h)
    latest = again.coord.recover_from_storage(allow_fallback=True)
    assert latest.checkpoint_id == 2 and ids(again.coord.store.all()) == [2]
    assert again.coord.next_checkpoint_id == 4
    assert again.storage.latest_completed_record() == 2


def test_a_deleted_newest_folder_fails_without_fallback_naming_the_missing_metadata():
    h = completed_three()
    h.storage.discard_checkpoint(3)
    again = successor(h)
    with pytest.raises(CheckpointRecoveryError) as e:
        again.coord.recover_from_storage(allow_fallback=False)
    assert f"{h.storage.metadata_path(3)} is missing" in str(e.value)
    assert "twice" in str(e.value)


def test_every_folder_deleted_but_the_record_fails_instead_of_starting_over():
    h = completed_three()
    for cid in h.completed_on_storage():
        h.storage.discard_checkpoint(cid)
    again = successor(h)
    with pytest.raises(CheckpointRecoveryError) as e:
        again.coord.recover_from_storage()
    assert "instead of starting over" in str(e.value)
    assert f"{h.storage.metadata_path(3)} is missing" in str(e.value)


def test_an_unreadable_record_is_no_newer_checkpoint():
    h = completed_three()
    h.storage.write_file(f"{h.storage.job_root}/{LATEST_COMPLETED_FILE}", b"\xff\xfe")
    assert h.storage.latest_completed_record() is None
    assert successor(h).coord.recover_from_storage(allow_fallback=False).checkpoint_id == 3


def test_the_next_id_is_above_an_unreadable_older_one_and_the_record():
    h = completed_three()
    h.storage.record_latest_completed(9)  # e.g. newer folders lost with their record kept
    again = successor(h)
    assert again.coord.recover_from_storage().checkpoint_id == 3
    assert again.coord.next_checkpoint_id == 10


def test_a_savepoint_in_checkpoint_storage_is_not_mistaken_for_an_unreadable_checkpoint():
    h = completed_three()
    sp = h.trigger(is_savepoint=True)
    h.ack(sp)
    assert h.completed_on_storage() == [2, 3, sp]
    again = successor(h)
    assert again.coord.recover_from_storage(allow_fallback=False).checkpoint_id == 3


# -----------------------------------------------------------------------------------------
# drop_damaged
# -----------------------------------------------------------------------------------------

def test_a_successor_starts_past_every_id_its_predecessor_handed_out():
    """Checkpoint 4 was triggered but none of its tasks had written a file when the master
    died (no chk-4 folder): the successor still does not reuse 4, where a late upload of
    the dead master's tasks could land in the successor's checkpoint."""
    h = completed_three()
    assert h.trigger() == 4 and h.storage.list_incomplete() == []
    again = successor(h)
    assert again.coord.recover_from_storage().checkpoint_id == 3
    assert again.coord.next_checkpoint_id == 5


def _late_upload(storage, cid, name="v1-0.keyed"):
    path = f"{storage.checkpoint_dir(cid)}/{name}"
    storage.write_file(path, b"late")
    return path


def test_late_uploads_of_the_dead_master_are_swept_at_the_next_completions():
    h = completed_three()
    assert h.trigger() == 4
    _late_upload(h.storage, 4)    # before the recovery's sweep: swept by it
    again = successor(h)
    again.coord.recover_from_storage()
    assert h.storage.list_incomplete() == []
    # the dead master's tasks go on uploading: checkpoint 4's file, an SST for it
    _late_upload(again.storage, 4)
    shared = f"{again.storage.shared_dir}/v1-0-000009.sst-c4-0123abcd"
    again.storage.write_file(shared, b"sst")
    # the successor's own checkpoint is under way: its uploads are not touched
    again.coord.tasks_running(again.topology)
    cid = again.trigger()
    assert cid == 5
    own = _late_upload(again.storage, cid, "v2-0.keyed")
    own_shared = f"{again.storage.shared_dir}/v2-0-000010.sst-c5-4567abcd"
    again.storage.write_file(own_shared, b"sst")
    again.ack(cid)
    assert again.coord.latest_completed().checkpoint_id == 5
    assert files_of(again.storage, 4) == [] and shared not in again.storage.files
    assert own in again.storage.files
    # an unregistered file of this master's is the job end's to sweep, not this one's
    assert own_shared in again.storage.files
    # past LATE_UPLOAD_SWEEP_MS one last sweep, then none
    again.clock.advance(LATE_UPLOAD_SWEEP_MS)
    _late_upload(again.storage, 4)
    again.coord.tasks_running(again.topology)
    again.ack(again.trigger())
    assert files_of(again.storage, 4) == []
    _late_upload(again.storage, 4)
    again.ack(again.trigger())
    assert files_of(again.storage, 4) != []    # left for the job's end (discard_orphans)


def test_a_master_that_never_restarted_sweeps_nothing_at_completions():
    h = completed_three()
    _late_upload(h.storage, 2, "stray")
    assert h.coord.sweep_late_uploads() == 0


def test_drop_damaged_makes_the_previous_checkpoint_the_latest():
    h = completed_three()
    latest = h.coord.drop_damaged(3, "checkpoint 3 cannot be restored")
    assert latest.checkpoint_id == 2 and h.coord.latest_completed() is latest
    assert ids(h.coord.store.all()) == [2]
    assert files_of(h.storage, 3) == [] and h.storage.list_completed() == [2]
    assert h.storage.latest_completed_record() == 2
    assert 3 not in h.coord.registry.checkpoint_ids()
    # ids go on: 3 is not reused
    cid = h.trigger()
    assert cid == 4
    h.ack(cid)
    assert ids(h.coord.store.all()) == [2, 4]
    # a successor resumes from the newest checkpoint, without complaint
    assert successor(h).coord.recover_from_storage(allow_fallback=False).checkpoint_id == 4


def test_drop_damaged_of_a_checkpoint_not_retained_changes_nothing():
    h = completed_three()
    latest = h.coord.drop_damaged(1, "already subsumed")
    assert latest.checkpoint_id == 3 and ids(h.coord.store.all()) == [2, 3]
    assert h.storage.list_completed() == [2, 3]
    assert h.storage.latest_completed_record() == 3


def test_after_a_drop_a_successor_recovers_the_previous_checkpoint():
    h = completed_three()
    h.coord.drop_damaged(3, "damaged")
    again = successor(h)
    assert again.coord.recover_from_storage(allow_fallback=False).checkpoint_id == 2


# -----------------------------------------------------------------------------------------
# manual checkpoints
# -----------------------------------------------------------------------------------------

class Done:
    def __init__(self):
        self.calls = []

    def __call__(self, location, error):
        self.calls.append((location, error))


def test_a_manual_checkpoint_completes_and_reports_its_directory():
    h = Harness(num_retained=2, interval_ms=1000)
    done = Done()
    result = h.coord.trigger_manual_checkpoint(done)
    assert result.ok and result.checkpoint_id == 1
    assert h.gateway.triggered(1) == ["src:0", "src:1"]  # the sources, as any checkpoint
    assert done.calls == []
    h.ack(1)
    assert done.calls == [(h.storage.checkpoint_dir(1), None)]
    assert done.calls[0][0] == "memory://job/chk-1"
    # retained as a periodic one
    assert ids(h.coord.store.all()) == [1]
    assert h.storage.latest_completed_record() == 1


def test_a_manual_checkpoint_ignores_max_concurrent():
    h = Harness(num_retained=2, interval_ms=1000)
    h.advance(1000)
    assert h.coord.pending_ids() == [1]
    done = Done()
    assert h.coord.trigger_manual_checkpoint(done).checkpoint_id == 2
    h.ack(2)
    assert done.calls == [("memory://job/chk-2", None)]


def test_a_manual_checkpoint_fails_through_on_done_when_not_every_task_runs():
    h = Harness(running=False)
    done = Done()
    result = h.coord.trigger_manual_checkpoint(done)
    assert not result.ok and result.failure is R.NOT_ALL_TASKS_RUNNING
    assert done.calls == [(None, "checkpoint not triggered: "
                                 f"{R.NOT_ALL_TASKS_RUNNING.value}")]
    assert h.gateway.triggers == [] and h.coord.next_checkpoint_id == 1


def test_a_manual_checkpoint_that_aborts_fails_through_on_done():
    h = Harness()
    done = Done()
    cid = h.coord.trigger_manual_checkpoint(done).checkpoint_id
    h.coord.receive_decline(SRC0, cid, R.DECLINED, "no")
    assert len(done.calls) == 1
    location, error = done.calls[0]
    assert location is None and error.startswith(f"checkpoint {cid} failed")


# -----------------------------------------------------------------------------------------
# find_retained_checkpoints
# -----------------------------------------------------------------------------------------

def write_checkpoint(root, job_id, cid, completed_ms, job_name):
    storage = FsCheckpointStorage(root, job_id)
    storage.write_metadata(CompletedCheckpoint(job_id, cid, completed_ms - 10, completed_ms,
                                               {}, job_name=job_name))
    return storage


@pytest.fixture
def two_jobs(tmp_path):
    """``job-a`` (named alpha) retained checkpoints 1 and 2, ``job-b`` (beta) checkpoint 5
    completed between them."""
    root = tmp_path / "checkpoints"
    a = write_checkpoint(str(root), "job-a", 1, 1_000, "alpha")
    write_checkpoint(str(root), "job-a", 2, 3_000, "alpha")
    b = write_checkpoint(str(root), "job-b", 5, 2_000, "beta")
    return root, a, b


def test_find_retained_checkpoints_returns_the_newest_of_each_job_newest_first(two_jobs):
    root, a, b = two_jobs
    found = find_retained_checkpoints(str(root))
    assert found == [
        RetainedCheckpoint("job-a", "alpha", 2, a.checkpoint_dir(2), 3_000),
        RetainedCheckpoint("job-b", "beta", 5, b.checkpoint_dir(5), 2_000),
    ]
    assert found[0].path == f"{root}/job-a/chk-2"
    # the path restores: it reads back as that checkpoint
    assert load_checkpoint(found[0].path).checkpoint_id == 2


def test_find_retained_checkpoints_filters_by_job_name(two_jobs):
    root, a, b = two_jobs
    assert [(c.job_id, c.checkpoint_id) for c in
            find_retained_checkpoints(str(root), job_name="beta")] == [("job-b", 5)]
    assert [(c.job_id, c.checkpoint_id) for c in
            find_retained_checkpoints(str(root), job_name="alpha")] == [("job-a", 2)]
    assert find_retained_checkpoints(str(root), job_name="gamma") == []


def test_find_retained_checkpoints_skips_a_damaged_newest_for_an_older_one(two_jobs):
    root, a, b = two_jobs
    a.write_file(a.metadata_path(2), GARBAGE)
    found = find_retained_checkpoints(str(root))
    assert [(c.job_id, c.checkpoint_id, c.completed_ms) for c in found] == \
        [("job-b", 5, 2_000), ("job-a", 1, 1_000)]
    assert [c.checkpoint_id for c in find_retained_checkpoints(str(root), "alpha")] == [1]
    # a folder with nothing readable is left out
    a.write_file(a.metadata_path(1), GARBAGE)
    assert [c.job_id for c in find_retained_checkpoints(str(root))] == ["job-b"]


def test_find_retained_checkpoints_ignores_folders_without_metadata(two_jobs):
    root, a, b = two_jobs
    a.write_file(a.task_state_path(3, SRC0, "keyed"), b"half")  # chk-3: never completed
    (root / "savepoints").mkdir()
    assert [(c.job_id, c.checkpoint_id) for c in find_retained_checkpoints(str(root))] == \
        [("job-a", 2), ("job-b", 5)]


def test_find_retained_checkpoints_in_a_missing_directory_is_empty(tmp_path):
    assert find_retained_checkpoints(str(tmp_path / "nothing-here")) == []
    assert find_retained_checkpoints(str(tmp_path)) == []


def test_find_retained_checkpoints_under_a_uri_keeps_its_scheme(two_jobs):
    root, a, b = two_jobs
    found = find_retained_checkpoints(f"file://{root}")
    assert [c.path for c in found] == [f"file://{root}/job-a/chk-2",
                                       f"file://{root}/job-b/chk-5"]
    # and so does the checkpoint loaded from there
    checkpoint = load_checkpoint(found[0].path)
    assert checkpoint.checkpoint_id == 2 and checkpoint.job_name == "alpha"
    assert checkpoint.external_path == f"file://{root}/job-a/chk-2/_metadata"
    assert load_checkpoint(f"file://{root}/job-a/chk-2/_metadata").external_path == \
        f"file://{root}/job-a/chk-2/_metadata"
    assert load_checkpoint(str(root / "job-a" / "chk-2")).external_path == \
        a.metadata_path(2)
