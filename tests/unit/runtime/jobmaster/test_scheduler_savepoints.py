"""The job master and savepoints, pure: starting from a savepoint (TaskRestores that do
not claim its files), savepoints and stop-with-savepoint on a real ExecutionGraph, a
ManualClock, in-memory checkpoint storage and a recording deployer."""

import dataclasses
import logging

import pytest
from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.savepoints import (
    SavepointStorage,
    write_savepoint_metadata,
)
from flowray.runtime.checkpoint.state_assignment import vertex_layouts
from flowray.runtime.checkpoint.storage import (
    MemoryCheckpointStorage,
    file_reader,
    load_checkpoint,
)
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.messages import JobStatus, TaskState
from flowray.runtime.network.elements import STOP_DRAIN, STOP_NO_DRAIN
from flowray.state.key_groups import compute_key_group_range_for_operator_index
from flowray.state.snapshot import (
    KeyedStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

from flowray.common.clock import ManualClock
from flowray.testing.jobmaster import RecordingDeployer
from tests.support.scheduler import JOB, scheduler_config
from tests.support.scheduler_jobs import ALL, EG, SRC, SUM0, SUM1
from tests.support.scheduler_jobs import Harness as JobsHarness

LAYOUTS = vertex_layouts(EG.job_graph)
SUM_VERTEX = SUM0.vertex_id
SUM_UID = LAYOUTS[SUM_VERTEX].operator_uids[0]  # the keyed aggregation
SRC_UID = LAYOUTS[SRC.vertex_id].operator_uids[0]
MAX = LAYOUTS[SUM_VERTEX].max_parallelism
SAVEPOINT_DIR = "/savepoints/savepoint-abc-1"
SAVEPOINT_ID = 41


class Deployer(RecordingDeployer):
    """Also records source stops and the location of each trigger."""

    def __init__(self):
        super().__init__()
        self.stops = []      # ([subtask, ...], stop mode)
        self.locations = {}  # checkpoint id -> locations

    def stop_sources(self, subtasks, stop_mode):
        self.stops.append((sorted(subtasks), stop_mode))

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint, location=None):
        super().trigger(subtask, checkpoint_id, timestamp_ms, is_savepoint, location)
        self.locations.setdefault(checkpoint_id, set()).add(location)


class Harness(JobsHarness):
    """The collection source -> keyed sum -> sink job of scheduler_jobs, started from
    ``initial_checkpoint`` if given."""

    def __init__(self, config=None, initial_checkpoint=None):  # not JobsHarness.__init__
        self.clock = ManualClock(0)
        self.deployer = Deployer()
        self.eg = EG
        self.storage = MemoryCheckpointStorage(JOB)
        self.sched = JobScheduler(JOB, "sched-test", EG,
                                  {v: f"plan-{v}".encode() for v in EG.vertices},
                                  self.deployer, self.clock,
                                  scheduler_config() if config is None else config,
                                  storage=self.storage,
                                  initial_checkpoint=initial_checkpoint)
        self._initialize_on_deploy()
        self.sched.start()

    def end_inputs(self):
        for s in ALL:
            self.sched.on_ended_input(self.sched.attempt, s)


def savepoint_of(sum_parallelism, cid=SAVEPOINT_ID):
    """A savepoint of this job taken with the sum at ``sum_parallelism``: keyed state of
    each old sum subtask, the source's operator state."""
    old = dict(LAYOUTS)
    old[SUM_VERTEX] = dataclasses.replace(LAYOUTS[SUM_VERTEX], parallelism=sum_parallelism)
    states = {f"{SRC.vertex_id}:0": TaskStateSnapshot({SRC_UID: OperatorSubtaskState()})}
    for i in range(sum_parallelism):
        kgr = compute_key_group_range_for_operator_index(MAX, sum_parallelism, i)
        path = f"{SAVEPOINT_DIR}/{SUM_VERTEX}-{i}.keyed"
        states[f"{SUM_VERTEX}:{i}"] = TaskStateSnapshot(
            {SUM_UID: OperatorSubtaskState(keyed=KeyedStateHandle(path, kgr, 5))},
            file_checksums={path: (5, i)})
    return CompletedCheckpoint("old-job", cid, 0, 0, states, is_savepoint=True,
                               external_path=f"{SAVEPOINT_DIR}/_metadata", vertices=old)


def keyed_paths(descriptor):
    return [h.path for h in descriptor.restore.keyed_handles()]


class Done:
    def __init__(self):
        self.calls = []

    def __call__(self, location, error):
        self.calls.append((location, error))


# ---------------------------------------------------------------------------------------
# starting from a savepoint
# ---------------------------------------------------------------------------------------

def test_start_from_a_rescaled_savepoint_restores_without_claiming_its_files():
    h = Harness(initial_checkpoint=savepoint_of(3))
    (attempt, descriptors), = h.deployer.deploys
    assert attempt == 0
    by = {d.subtask: d for d in descriptors}
    assert sorted(by) == sorted(ALL)
    for d in descriptors:
        assert d.restore_checkpoint_id == SAVEPOINT_ID
        assert d.restore.claimed is False and d.restore.location == SAVEPOINT_DIR
    # 3 -> 2: [0, 42] [43, 85] [86, 127] onto [0, 63] [64, 127]
    assert keyed_paths(by[SUM0]) == [f"{SAVEPOINT_DIR}/{SUM_VERTEX}-{i}.keyed" for i in (0, 1)]
    assert keyed_paths(by[SUM1]) == [f"{SAVEPOINT_DIR}/{SUM_VERTEX}-{i}.keyed" for i in (1, 2)]
    assert by[SUM0].restore.operators[SUM_UID].old_parallelism == 3
    assert by[SUM0].restore.file_checksums == {
        f"{SAVEPOINT_DIR}/{SUM_VERTEX}-{i}.keyed": (5, i) for i in range(3)}


def test_start_from_a_savepoint_of_the_same_layout_restores_subtask_by_subtask():
    h = Harness(initial_checkpoint=savepoint_of(2))
    by = h.deployer.last_descriptors
    assert keyed_paths(by[SUM0]) == [f"{SAVEPOINT_DIR}/{SUM_VERTEX}-0.keyed"]
    assert keyed_paths(by[SUM1]) == [f"{SAVEPOINT_DIR}/{SUM_VERTEX}-1.keyed"]
    assert all(not d.restore.claimed and d.restore.location == SAVEPOINT_DIR
               for d in by.values())


def test_a_failover_before_a_checkpoint_of_its_own_restores_the_savepoint_again():
    h = Harness(initial_checkpoint=savepoint_of(3))
    h.fail_and_restart(SUM1)
    assert h.sched.attempt == 1
    for d in h.deployer.last_descriptors.values():
        assert d.attempt == 1 and d.restore_checkpoint_id == SAVEPOINT_ID
        assert not d.restore.claimed and d.restore.location == SAVEPOINT_DIR


def test_checkpoint_ids_go_on_after_the_savepoint_and_its_own_checkpoint_is_claimed():
    h = Harness(initial_checkpoint=savepoint_of(3))
    cid = h.trigger_checkpoint()
    assert cid == SAVEPOINT_ID + 1
    h.ack_all(cid)
    assert h.sched.coordinator.latest_completed().checkpoint_id == cid
    h.fail_and_restart(SUM0)
    for d in h.deployer.last_descriptors.values():
        assert d.restore_checkpoint_id == cid
        assert d.restore.claimed and d.restore.location is None
        assert d.restore.keyed_handles() == []  # its own (empty) snapshots, not the savepoint
    assert h.trigger_checkpoint() == cid + 1


# ---------------------------------------------------------------------------------------
# savepoints
# ---------------------------------------------------------------------------------------

def test_trigger_savepoint_without_a_directory_names_the_option():
    h = Harness()
    done = Done()
    h.sched.trigger_savepoint(None, done)
    assert len(done.calls) == 1 and done.calls[0][0] is None
    assert "execution.checkpointing.savepoint-dir" in done.calls[0][1]
    assert h.deployer.triggers == []


def test_trigger_savepoint_goes_under_state_savepoints_dir(tmp_path):
    h = Harness(config=scheduler_config(**{"execution.checkpointing.savepoint-dir": str(tmp_path)}))
    done = Done()
    h.sched.trigger_savepoint(None, done)
    (cid,) = h.sched.coordinator.pending_ids()
    (location,) = h.deployer.locations[cid]
    assert location.startswith(f"{tmp_path}/savepoint-{JOB[:6]}-")
    assert all(t[3] for t in h.deployer.triggers)  # is_savepoint
    h.ack_all(cid)
    assert done.calls == [(location, None)]
    assert h.deployer.completes == []  # a savepoint commits nothing
    assert (tmp_path / location.rsplit("/", 1)[1] / "_metadata").is_file()


def test_trigger_savepoint_when_the_job_is_not_running():
    h = Harness()
    h.fail(SUM0)
    assert h.sched.status is JobStatus.RESTARTING
    done = Done()
    h.sched.trigger_savepoint("/sp", done)
    assert done.calls and done.calls[0][0] is None and "RESTARTING" in done.calls[0][1]


# ---------------------------------------------------------------------------------------
# stop-with-savepoint
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("drain, mode", [(False, STOP_NO_DRAIN), (True, STOP_DRAIN)])
def test_stop_with_savepoint_stops_only_the_sources(tmp_path, drain, mode):
    h = Harness()
    done = Done()
    h.sched.stop_with_savepoint(str(tmp_path), drain, done)
    assert h.deployer.stops == [([SRC], mode)]
    assert h.deployer.triggers == [] and done.calls == []
    h.end_inputs()
    (cid,) = h.sched.coordinator.pending_ids()
    (location,) = h.deployer.locations[cid]
    assert location.startswith(f"{tmp_path}/savepoint-")
    h.ack_all(cid, {s: TaskStateSnapshot(input_ended=True, drained=drain) for s in ALL})
    assert done.calls == [(location, None)]
    assert sorted(h.deployer.completes) == sorted((s, cid) for s in ALL)
    for s in ALL:
        h.result(s, TaskState.FINISHED)
    assert h.sched.status is JobStatus.FINISHED


def test_stop_with_savepoint_without_a_directory_names_the_option():
    h = Harness()
    done = Done()
    h.sched.stop_with_savepoint(None, False, done)
    assert len(done.calls) == 1 and "execution.checkpointing.savepoint-dir" in done.calls[0][1]
    assert h.deployer.stops == [] and not h.sched.coordinator.stopping


def test_a_second_stop_with_savepoint_is_refused():
    h = Harness()
    h.sched.stop_with_savepoint("/sp", False, Done())
    done = Done()
    h.sched.stop_with_savepoint("/sp", True, done)
    assert len(done.calls) == 1 and "already under way" in done.calls[0][1]
    assert len(h.deployer.stops) == 1


def test_a_failover_during_stop_with_savepoint_ends_the_stop():
    h = Harness()
    done = Done()
    h.sched.stop_with_savepoint("/sp", False, done)
    h.fail_and_restart(SUM0)
    assert h.sched.status is JobStatus.RUNNING
    assert len(done.calls) == 1 and done.calls[0][0] is None  # actual: []
    before = len(h.deployer.triggers)
    h.advance(1000)
    assert len(h.deployer.triggers) > before  # actual: no checkpoint is triggered


def test_a_task_failure_during_the_stop_savepoint_counts_one_restart():
    h = Harness()
    done = Done()
    h.sched.stop_with_savepoint("/sp", False, done)
    h.end_inputs()
    assert len(h.sched.coordinator.pending_ids()) == 1
    h.fail_and_restart(SUM0)
    assert h.sched.restarts == 1  # actual: 2
    assert [f.message for f in h.sched.failures] == ["boom"]
    assert len(done.calls) == 1 and done.calls[0][0] is None


# ---------------------------------------------------------------------------------------
# a savepoint in a remote file system
# ---------------------------------------------------------------------------------------

@pytest.fixture
def mock_remote_fs(monkeypatch):
    """``mock://<path>`` URIs resolve to one shared in-memory pyarrow file system, as
    ``s3://bucket/...`` resolves to S3 and the path ``bucket/...`` in it."""
    import pyarrow.fs as pafs
    from flowray.runtime.checkpoint import storage as storage_module

    fs = pafs._MockFileSystem()
    real = storage_module._filesystem

    def _filesystem(uri_or_path):
        if uri_or_path.startswith("mock://"):
            return fs, uri_or_path[len("mock://"):].rstrip("/") or "/"
        return real(uri_or_path)
    monkeypatch.setattr(storage_module, "_filesystem", _filesystem)
    return fs


def test_a_savepoint_in_a_remote_file_system_is_read_from_there(mock_remote_fs, caplog):
    caplog.set_level(logging.ERROR)
    uri = "mock://bucket/sps/savepoint-1"
    storage = SavepointStorage(uri)
    path = storage.task_state_path(SAVEPOINT_ID, SUM0, "keyed")
    storage.write_file(path, b"remote-bytes")
    cp = savepoint_of(2)
    cp.task_states[SUM0.key].operators[SUM_UID].keyed.path = path
    cp.task_states[SUM0.key].file_checksums = {path: (12, 0)}
    cp.task_states[SUM1.key] = TaskStateSnapshot()
    write_savepoint_metadata(cp, uri)
    h = Harness(initial_checkpoint=load_checkpoint(uri))
    restore = h.deployer.last_descriptors[SUM0].restore
    (handle,) = restore.keyed_handles()
    assert file_reader(restore.location)(handle.path) == b"remote-bytes"


def test_a_savepoint_directory_under_a_file_is_refused_before_any_source_stops(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    target = str(blocker / "sp")
    why = (f"the savepoint directory {target!r} cannot be created: {str(blocker)!r} is a "
           "file, not a folder")
    h = Harness()
    done = Done()
    h.sched.trigger_savepoint(target, done)
    assert done.calls == [(None, f"cannot take a savepoint: {why}")]
    done = Done()
    h.sched.stop_with_savepoint(target, False, done)
    assert done.calls == [(None, f"cannot stop with a savepoint: {why}")]
    assert h.deployer.triggers == [] and h.deployer.stops == []
