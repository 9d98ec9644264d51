"""Incremental RocksDB checkpoints end to end without Ray: a real RocksDB backend writes
to in-memory checkpoint storage, the real coordinator completes, subsumes and aborts, and
the shared state registry deletes exactly the files nothing references any more."""

import random

import pytest

from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.common.clock import ManualClock
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.checkpoint.shared_files import shared_files
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.snapshot import (IncrementalKeyedStateHandle, OperatorSubtaskState,
                                    TaskStateSnapshot)
from tests.support.gateways import RecordingGateway
from tests.support.keyed_state import read_values

JOB = "job"
SRC, SUM = SubtaskId("src", 0), SubtaskId("sum", 0)
TOPOLOGY = {SRC: set(), SUM: {SRC}}
MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)


class Job:
    def __init__(self, tmp_path, retained=2, files=None, name="b"):
        self.tmp_path = tmp_path
        self.storage = MemoryCheckpointStorage(JOB, files)
        self.gateway = RecordingGateway()
        self.failures = []
        self.coord = CheckpointCoordinator(
            JOB, CheckpointSettings(interval_ms=1000, num_retained=retained,
                                    max_concurrent=2),
            TOPOLOGY, self.storage, self.gateway, ManualClock(0), self.failures.append)
        self.backend = RocksDBKeyedStateBackend(FULL, MAXP, str(tmp_path / name),
                                                incremental=True)
        self.gateway.backends[SUM] = self.backend
        self.state = self.backend.get_partitioned_state(ValueStateDescriptor("v"))
        self.expected = {}

    def start(self):
        self.coord.tasks_running(TOPOLOGY)

    def put(self, items):
        for k, v in items.items():
            self.backend.set_current_key(k)
            self.state.update(v)
            self.expected[k] = v

    def trigger(self, savepoint=False):
        result = self.coord.trigger_checkpoint(is_savepoint=savepoint)
        assert result.failure is None, result
        return result.checkpoint_id

    def snapshot(self, cid, savepoint=False):
        """The task's synchronous part; returns a function doing the asynchronous part."""
        writer = self.backend.snapshot(cid, savepoint=savepoint)

        def finish():
            handle = writer.write(self.storage.write_file,
                                  self.storage.task_state_path(cid, SUM, "keyed"))
            return TaskStateSnapshot({"sum": OperatorSubtaskState(keyed=handle)})
        return finish

    def ack(self, cid, state):
        self.coord.receive_acknowledge(SRC, cid, TaskStateSnapshot(), {})
        return self.coord.receive_acknowledge(SUM, cid, state, {})

    def checkpoint(self, savepoint=False):
        cid = self.trigger(savepoint)
        self.ack(cid, self.snapshot(cid, savepoint)())
        return cid

    def shared_on_storage(self):
        return set(self.storage.list_shared_files())

    def referenced_by_retained(self):
        """Shared paths named by the retained checkpoints' metadata, read back."""
        paths = set()
        for cid in self.storage.list_completed():
            cp = self.storage.read_metadata(self.storage.checkpoint_dir(cid))
            if not cp.is_savepoint:
                paths.update(h.path for h in shared_files(cp.task_states).values())
        return paths

    def check_no_orphans(self):
        live = {h.path for h in self.coord.registry.handles()}
        assert self.shared_on_storage() == live == self.referenced_by_retained()


def restore_latest(job, tmp_path, name):
    cp = job.storage.read_metadata(job.storage.checkpoint_dir(job.storage.list_completed()[-1]))
    handle = cp.task_states["sum:0"].operators["sum"].keyed
    backend = RocksDBKeyedStateBackend(FULL, MAXP, str(tmp_path / name), incremental=True)
    backend.restore([handle], job.storage.read_file)
    return backend, handle


@pytest.fixture
def job(tmp_path):
    j = Job(tmp_path)
    j.start()
    yield j
    j.backend.dispose()


def test_counts_and_deletions_over_many_checkpoints_with_retention_2(job, tmp_path):
    rng = random.Random(7)
    job.put({i: i for i in range(2000)})
    uploads = []
    for round_ in range(8):  # each checkpoint flushes a new SST; L0 compaction replaces them
        job.put({rng.randrange(2000): round_ * 10_000 + i for i in range(300)})
        before = job.shared_on_storage()
        cid = job.checkpoint()
        assert job.coord.latest_completed().checkpoint_id == cid
        uploads.append(len(job.shared_on_storage() - before))
        job.check_no_orphans()
        assert job.storage.list_completed()[-2:] == job.coord.registry.checkpoint_ids()
        # every file of the latest checkpoint is counted once per retained checkpoint using it
        latest = shared_files(job.coord.latest_completed().task_states)
        for key in latest:
            holders = [c for c in job.coord.registry.checkpoint_ids()
                       if key in job.coord.registry.checkpoint_files(c)]
            assert job.coord.registry.count(key) == len(holders) >= 1
    # incremental: later checkpoints upload only what changed (one or two new files)
    assert uploads[0] >= 1 and max(uploads[1:]) <= 2
    backend, _ = restore_latest(job, tmp_path, "restored")
    try:
        assert read_values(backend) == job.expected
    finally:
        backend.dispose()


def test_compaction_releases_replaced_files_once_no_retained_checkpoint_uses_them(job):
    job.put({i: i for i in range(500)})
    job.checkpoint()
    job.put({i: -i for i in range(500)})
    c2 = job.checkpoint()  # two overlapping L0 files
    old = dict(job.coord.registry.checkpoint_files(c2))
    assert len(old) == 2
    job.backend._cfs["v"].compact_range(None, None)  # merged into one new file
    c3 = job.checkpoint()
    new = job.coord.registry.checkpoint_files(c3)
    assert not set(new) & set(old)
    # checkpoint 1 is subsumed; checkpoint 2 (retained) still holds the replaced files
    assert all(job.coord.registry.count(k) == 1 for k in old)
    assert {h.path for h in old.values()} <= job.shared_on_storage()
    job.checkpoint()  # subsumes checkpoint 2: the replaced files go
    assert all(job.coord.registry.count(k) == 0 for k in old)
    assert not {h.path for h in old.values()} & job.shared_on_storage()
    job.check_no_orphans()


def test_a_file_uploaded_again_before_confirmation_is_deduplicated(job):
    job.put({i: i for i in range(300)})
    c1 = job.trigger()
    finish1 = job.snapshot(c1)
    c2 = job.trigger()  # before checkpoint 1 completed: the same SSTs go up again
    finish2 = job.snapshot(c2)
    state1, state2 = finish1(), finish2()
    sst_paths_2 = dict(state2.operators["sum"].keyed.shared)
    assert set(state1.operators["sum"].keyed.shared.values()).isdisjoint(sst_paths_2.values())
    job.ack(c1, state1)
    job.ack(c2, state2)
    registered = {h.path for h in job.coord.registry.handles()}
    # checkpoint 2's metadata names checkpoint 1's copies; its own copies are deleted
    cp2 = job.storage.read_metadata(job.storage.checkpoint_dir(c2))
    assert set(cp2.task_states["sum:0"].operators["sum"].keyed.shared.values()) <= registered
    assert not set(sst_paths_2.values()) & job.shared_on_storage()
    job.check_no_orphans()
    # and the backend's next checkpoint references the registered copies, uploading nothing
    before = job.shared_on_storage()
    job.checkpoint()
    assert job.shared_on_storage() == before
    job.check_no_orphans()


def test_an_aborted_checkpoint_deletes_its_uploads_but_not_the_files_it_referenced(job):
    job.put({i: i for i in range(300)})
    job.checkpoint()
    base = job.shared_on_storage()
    job.put({i: -i for i in range(50)})
    cid = job.trigger()
    state = job.snapshot(cid)()
    job.coord.receive_acknowledge(SUM, cid, state, {})
    new = set(state.operators["sum"].keyed.shared.values()) - base
    assert new and new <= job.shared_on_storage()
    job.coord.receive_decline(SRC, cid, "DECLINED", "source could not")
    assert job.shared_on_storage() == base
    assert job.storage.list_incomplete() == []
    job.check_no_orphans()
    # the next checkpoint still works from the confirmed base and restores right
    job.checkpoint()
    job.check_no_orphans()


def test_a_late_acknowledgement_of_an_aborted_checkpoint_leaves_nothing(job):
    job.put({i: i for i in range(100)})
    job.checkpoint()
    base = job.shared_on_storage()
    job.put({7: 7000})
    cid = job.trigger()
    finish = job.snapshot(cid)
    # the upload got past its last file before the task learnt of the abort (an upload
    # told earlier stops: test_an_aborted_checkpoints_upload_stops_at_its_next_file)
    state = finish()
    job.coord.receive_decline(SRC, cid, "DECLINED")
    assert job.shared_on_storage() > base
    job.coord.receive_acknowledge(SUM, cid, state, {})
    assert job.shared_on_storage() == base
    job.check_no_orphans()


def test_savepoints_are_self_contained(job):
    job.put({i: i for i in range(100)})
    job.checkpoint()
    before = job.shared_on_storage()
    sp = job.checkpoint(savepoint=True)
    cp = job.storage.read_metadata(job.storage.checkpoint_dir(sp))
    handle = cp.task_states["sum:0"].operators["sum"].keyed
    assert not isinstance(handle, IncrementalKeyedStateHandle)
    assert sp not in job.coord.registry.checkpoint_ids()
    assert job.shared_on_storage() == before


def test_a_restarted_job_master_rebuilds_the_registry_and_drops_leftovers(job, tmp_path):
    job.put({i: i for i in range(400)})
    job.checkpoint()
    job.put({i: 2 * i for i in range(0, 400, 7)})
    c2 = job.checkpoint()
    counts = {k: job.coord.registry.count(k) for k in job.coord.registry.registered_keys()}
    # the master dies while checkpoint 3 is in progress: uploads without _metadata remain
    job.put({1: 111})
    c3 = job.trigger()
    job.snapshot(c3)()
    job.storage.write_file(job.storage.task_state_path(c3, SRC, "ops"), b"x")
    assert job.storage.list_incomplete() == [c3]

    again = Job(tmp_path, files=job.storage.files, name="b2")
    latest = again.coord.recover_from_storage()
    assert latest.checkpoint_id == c2
    assert {k: again.coord.registry.count(k)
            for k in again.coord.registry.registered_keys()} == counts
    assert again.storage.list_incomplete() == []
    again.check_no_orphans()  # checkpoint 3's uploads are gone
    assert again.coord.next_checkpoint_id > c3

    # tasks restore in place from the latest and keep referencing its files
    again.backend.dispose()
    again.backend, _ = restore_latest(again, tmp_path, "b3")
    again.gateway.backends[SUM] = again.backend
    again.state = again.backend.get_partitioned_state(ValueStateDescriptor("v"))
    assert read_values(again.backend) == {i: (2 * i if i % 7 == 0 else i) for i in range(400)}
    again.start()
    before = again.shared_on_storage()
    again.checkpoint()
    assert len(again.shared_on_storage() - before) == 0  # nothing changed: nothing uploaded
    again.put({5: 55})
    again.checkpoint()
    again.checkpoint()
    again.check_no_orphans()
    again.backend.dispose()


def test_job_end_sweeps_orphans_when_checkpoints_are_retained(job):
    job.put({i: i for i in range(100)})
    done = job.checkpoint()
    job.storage.write_file(f"{job.storage.shared_dir}/sum-0-000099.sst-deadbeef", b"lost")
    # a task whose attempt failed over wrote into an aborted checkpoint's folder after the
    # abort (its acknowledgement is dropped, so nobody deletes that upload)
    aborted = job.trigger()
    job.coord.receive_decline(SRC, aborted, CheckpointFailureReason.DECLINED, "test")
    assert aborted not in job.coord.pending_ids()
    job.storage.write_file(job.storage.task_state_path(aborted, SUM, "keyed"), b"late")
    pending = job.trigger()                     # in flight: its folder is left alone
    job.storage.write_file(job.storage.task_state_path(pending, SUM, "keyed"), b"uploading")
    assert job.storage.list_incomplete() == [aborted, pending] and done < aborted
    assert job.coord.discard_orphans() == 2
    assert job.storage.list_incomplete() == [pending]
    job.check_no_orphans()
