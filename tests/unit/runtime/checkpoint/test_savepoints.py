"""Savepoints: movable paths, their directory and _metadata, and the coordinator's
savepoints and stop-with-savepoint (pure: ManualClock, in-memory checkpoint storage, a
recording gateway; savepoints go to tmp_path)."""

import logging
import os
import shutil

import pytest
from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.savepoints import (
    SavepointStorage,
    savepoint_directory,
    write_savepoint_metadata,
)
from flowray.runtime.checkpoint.storage import (
    METADATA_FILE,
    decode_metadata,
    file_reader,
    load_checkpoint,
)
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import (
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)
from flowray.state.snapshot_paths import relativize_paths, resolve_relative_paths

from tests.support.coordinator import ALL, MAP0, SINK, SRC0, SRC1, Harness, R, snapshot
from tests.support.gateways import RecordingGateway


def file_snapshot(directory, tag="v-0"):
    """A snapshot whose keyed and operator state are files under ``directory``."""
    keyed, ops = f"{directory}/{tag}.keyed", f"{directory}/{tag}.op"
    return TaskStateSnapshot(
        {"op": OperatorSubtaskState(keyed=KeyedStateHandle(keyed, KeyGroupRange(0, 127), 3),
                                    operator_state_file=OperatorStateHandle(ops, 2))},
        file_checksums={keyed: (3, 11), ops: (2, 22)})


# ---------------------------------------------------------------------------------------
# relative paths
# ---------------------------------------------------------------------------------------

def test_relativize_and_resolve_round_trip():
    states = {"v:0": file_snapshot("/sp/savepoint-1"),
              "v:1": file_snapshot("/sp/savepoint-1", "sub/v-1")}
    relative = relativize_paths(states, "/sp/savepoint-1/")
    op = relative["v:0"].operators["op"]
    assert op.keyed.path == "v-0.keyed" and op.operator_state_file.path == "v-0.op"
    assert relative["v:0"].file_checksums == {"v-0.keyed": (3, 11), "v-0.op": (2, 22)}
    assert relative["v:1"].operators["op"].keyed.path == "sub/v-1.keyed"
    # copies: the originals keep their absolute paths
    assert states["v:0"].operators["op"].keyed.path == "/sp/savepoint-1/v-0.keyed"
    assert resolve_relative_paths(relative, "/sp/savepoint-1") == states
    moved = resolve_relative_paths(relative, "/elsewhere")
    assert moved == {"v:0": file_snapshot("/elsewhere"),
                     "v:1": file_snapshot("/elsewhere", "sub/v-1")}


def test_resolve_leaves_absolute_paths_and_states_without_files_alone():
    states = {"v:0": file_snapshot("/abs"), "v:1": TaskStateSnapshot.finished_task(),
              "v:2": snapshot("inline")}
    assert resolve_relative_paths(states, "/elsewhere") == states


@pytest.mark.parametrize("path", ["/sp/other/v-0.keyed", "/sp/savepoint-10/v-0.keyed",
                                  "relative.keyed"])
def test_relativize_refuses_a_path_outside_the_directory(path):
    snap = TaskStateSnapshot({"op": OperatorSubtaskState(
        keyed=KeyedStateHandle(path, KeyGroupRange(0, 1), 1))})
    with pytest.raises(ValueError, match="outside the savepoint directory /sp/savepoint-1"):
        relativize_paths({"v:0": snap}, "/sp/savepoint-1")


def test_relativize_refuses_a_checksum_path_outside_the_directory():
    snap = TaskStateSnapshot(file_checksums={"/elsewhere/x": (1, 2)})
    with pytest.raises(ValueError, match="/elsewhere/x is outside"):
        relativize_paths({"v:0": snap}, "/sp/savepoint-1")


def test_a_savepoint_cannot_hold_an_incremental_handle():
    handle = IncrementalKeyedStateHandle("/sp/s/v-0.keyed.private", KeyGroupRange(0, 1), 1,
                                         checkpoint_id=3)
    states = {"v:0": TaskStateSnapshot({"op": OperatorSubtaskState(keyed=handle)})}
    with pytest.raises(ValueError, match="incremental"):
        relativize_paths(states, "/sp/s")
    with pytest.raises(ValueError, match="incremental"):
        write_savepoint_metadata(CompletedCheckpoint("j", 3, 0, 0, states, is_savepoint=True),
                                 "/sp/s")


# ---------------------------------------------------------------------------------------
# the savepoint directory
# ---------------------------------------------------------------------------------------

def test_savepoint_directory_is_new_under_the_target():
    a = savepoint_directory("/sps/", "abcdef123456")
    b = savepoint_directory("/sps", "abcdef123456")
    assert a.startswith("/sps/savepoint-abcdef-") and b.startswith("/sps/savepoint-abcdef-")
    assert a != b and "//" not in a


def test_savepoint_storage_puts_every_file_directly_in_its_directory(tmp_path):
    location = str(tmp_path / "sp")
    storage = SavepointStorage(location)
    assert storage.checkpoint_dir(1) == storage.checkpoint_dir(99) == location
    assert storage.task_state_path(5, SubtaskId("v", 2), "keyed") == f"{location}/v-2.keyed"
    assert storage.metadata_path(5) == f"{location}/{METADATA_FILE}"


def _write_savepoint(location, data=b"keyed-bytes", cid=4):
    storage = SavepointStorage(location)
    path = storage.task_state_path(cid, SubtaskId("v", 0), "keyed")
    storage.write_file(path, data)
    snap = TaskStateSnapshot(
        {"op": OperatorSubtaskState(keyed=KeyedStateHandle(path, KeyGroupRange(0, 127),
                                                           len(data)))},
        file_checksums={path: (len(data), 1)})
    cp = CompletedCheckpoint("job", cid, 1, 2, {"v:0": snap, "w:0": snapshot("w")},
                             is_savepoint=True)
    return cp, write_savepoint_metadata(cp, location)


def test_a_moved_savepoint_restores_from_its_new_place(tmp_path):
    old_dir, new_dir = str(tmp_path / "old" / "sp"), str(tmp_path / "new-sp")
    cp, metadata = _write_savepoint(old_dir)
    assert metadata == f"{old_dir}/{METADATA_FILE}" == cp.external_path
    assert cp.task_states["v:0"].operators["op"].keyed.path == f"{old_dir}/v-0.keyed"
    # the file holds paths relative to the directory
    with open(metadata, "rb") as f:
        stored = decode_metadata(f.read(), metadata)
    assert stored.task_states["v:0"].operators["op"].keyed.path == "v-0.keyed"
    assert stored.task_states["v:0"].file_checksums == {"v-0.keyed": (11, 1)}

    shutil.move(old_dir, new_dir)
    assert not os.path.exists(old_dir)
    loaded = load_checkpoint(new_dir)
    assert loaded.is_savepoint and loaded.checkpoint_id == 4
    assert loaded.external_path == f"{new_dir}/{METADATA_FILE}"
    handle = loaded.task_states["v:0"].operators["op"].keyed
    assert handle.path == f"{new_dir}/v-0.keyed"
    assert loaded.task_states["v:0"].file_checksums == {f"{new_dir}/v-0.keyed": (11, 1)}
    assert file_reader(new_dir)(handle.path) == b"keyed-bytes"
    assert loaded.task_states["w:0"] == cp.task_states["w:0"]
    # the _metadata file itself, or a file:// URI, work as well
    assert load_checkpoint(f"{new_dir}/{METADATA_FILE}").task_states == loaded.task_states
    assert load_checkpoint(f"file://{new_dir}").task_states == loaded.task_states


def test_file_reader_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        file_reader(str(tmp_path))(str(tmp_path / "nope"))


# ---------------------------------------------------------------------------------------
# coordinator: savepoints
# ---------------------------------------------------------------------------------------

class LocationGateway(RecordingGateway):
    """Also records the location each trigger names."""

    def __init__(self):
        super().__init__()
        self.locations = []  # (key, id, location)

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint, location=None):
        super().trigger(subtask, checkpoint_id, timestamp_ms, is_savepoint, location)
        self.locations.append((subtask.key, checkpoint_id, location))

    def location_of(self, checkpoint_id):
        return {loc for _, c, loc in self.locations if c == checkpoint_id}


def harness(**settings):
    h = Harness(**settings)
    h.gateway = h.coord.gateway = LocationGateway()
    return h


class Done:
    """An ``on_done`` callback that records its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, location, error):
        self.calls.append((location, error))


def savepoint(h, location):
    done = Done()
    result = h.coord.trigger_savepoint(location, done)
    assert result.ok, result
    return result.checkpoint_id, done


def test_savepoint_completes_into_its_directory_without_notifying_tasks(tmp_path):
    h = harness()
    location = str(tmp_path / "sp")
    cid, done = savepoint(h, location)
    assert h.gateway.location_of(cid) == {location}
    assert [t[3] for t in h.gateway.triggers] == [True, True]  # the two sources
    h.ack(cid, [SRC0, SRC1, MAP0])
    assert done.calls == []
    h.ack(cid)
    assert done.calls == [(location, None)]
    assert os.path.isfile(os.path.join(location, METADATA_FILE))
    assert h.gateway.completes == []  # sinks do not commit on a savepoint
    assert h.coord.pending_ids() == [] and h.coord.latest_completed() is None
    (sp,) = h.coord.store.savepoints()
    assert sp.checkpoint_id == cid and sp.is_savepoint
    assert sp.external_path == f"{location}/{METADATA_FILE}"
    assert load_checkpoint(location).task_states == sp.task_states
    assert h.storage.list_completed() == []  # nothing in the job's checkpoint storage


def test_retention_never_deletes_a_savepoint(tmp_path):
    h = harness(num_retained=1)
    location = str(tmp_path / "sp")
    cid, done = savepoint(h, location)
    h.ack(cid)
    assert done.calls == [(location, None)]
    for _ in range(3):
        h.ack(h.trigger(periodic=False))
    assert h.storage.list_completed() == [cid + 3]  # subsumption did its work
    assert [c.checkpoint_id for c in h.coord.store.savepoints()] == [cid]
    assert os.path.isfile(os.path.join(location, METADATA_FILE))
    assert load_checkpoint(location).checkpoint_id == cid
    h.coord.discard_orphans()
    assert os.path.isfile(os.path.join(location, METADATA_FILE))


def test_a_declined_savepoint_tells_on_done_and_deletes_its_directory(tmp_path):
    h = harness(tolerable_failures=5)  # (a task's decline of a savepoint counts)
    location = str(tmp_path / "sp")
    cid, done = savepoint(h, location)
    # a task already wrote its files into the savepoint directory
    SavepointStorage(location).write_file(f"{location}/src-0.keyed", b"x")
    h.ack(cid, [SRC0])
    h.coord.receive_decline(MAP0, cid, R.DECLINED, "no room")
    assert len(done.calls) == 1
    where, error = done.calls[0]
    assert where is None and f"savepoint {cid} failed" in error and "no room" in error
    assert not os.path.exists(location)
    assert h.coord.store.savepoints() == [] and h.failures == []


def test_a_savepoint_that_cannot_start_tells_on_done(tmp_path):
    h = harness(running=False)
    done = Done()
    result = h.coord.trigger_savepoint(str(tmp_path / "sp"), done)
    assert not result.ok and result.failure is R.NOT_ALL_TASKS_RUNNING
    assert done.calls == [(None, f"savepoint not triggered: {R.NOT_ALL_TASKS_RUNNING.value}")]


def test_continue_after_numbers_the_next_checkpoint_after_it():
    h = harness()
    h.coord.continue_after(41)
    assert h.coord.next_checkpoint_id == 42
    h.coord.continue_after(3)  # never goes back
    assert h.trigger(periodic=False) == 42


def test_a_pending_savepoint_is_not_subsumed_by_a_later_checkpoint(tmp_path):
    h = harness(max_concurrent=2)
    location = str(tmp_path / "sp")
    cid, done = savepoint(h, location)
    later = h.trigger(periodic=False)
    h.ack(later)
    assert done.calls == []  # actual: [(None, 'savepoint 1 failed: Checkpoint has been subsumed.')]
    assert h.coord.pending_ids() == [cid]


# ---------------------------------------------------------------------------------------
# coordinator: stop-with-savepoint
# ---------------------------------------------------------------------------------------

def stop(h, location):
    done = Done()
    assert h.coord.request_stop(location, done) is None
    assert h.coord.stopping
    return done


def end_all_inputs(h):
    for t in ALL:
        h.coord.task_ended_input(t)


def test_stop_takes_the_final_savepoint_and_notifies_every_task(tmp_path):
    h = harness(interval_ms=1000)
    location = str(tmp_path / "sp")
    done = stop(h, location)
    h.advance(5000)
    assert h.gateway.triggers == []  # no periodic checkpoint while stopping
    for t in ALL[:-1]:
        h.coord.task_ended_input(t)
    assert h.gateway.triggers == [] and h.coord.pending_ids() == []
    h.coord.task_ended_input(ALL[-1])
    (cid,) = h.coord.pending_ids()
    p = h.coord.pending(cid)
    assert p.is_savepoint and p.is_final and p.terminate
    assert h.gateway.location_of(cid) == {location}
    assert all(t[3] for t in h.gateway.triggers)
    h.ack(cid, state=TaskStateSnapshot(input_ended=True, drained=False))
    assert done.calls == [(location, None)]
    assert h.gateway.completed(cid) == sorted(t.key for t in ALL)  # sinks commit
    assert os.path.isfile(os.path.join(location, METADATA_FILE))
    assert not h.coord.stopping and h.failures == []
    assert [c.checkpoint_id for c in h.coord.store.savepoints()] == [cid]
    assert load_checkpoint(location).task_states[SINK.key].input_ended


def test_stop_with_every_input_already_ended_triggers_at_once(tmp_path):
    h = harness()
    location = str(tmp_path / "sp")
    end_all_inputs(h)
    (final,) = h.coord.pending_ids()  # the ordinary final checkpoint
    done = stop(h, location)
    (cid,) = [c for c in h.coord.pending_ids() if c != final]
    assert h.coord.pending(cid).terminate and h.gateway.location_of(cid) == {location}
    h.ack(cid, state=TaskStateSnapshot(input_ended=True))
    assert done.calls == [(location, None)]


def test_an_aborted_stop_savepoint_fails_the_job(tmp_path):
    h = harness(tolerable_failures=5)
    location = str(tmp_path / "sp")
    done = stop(h, location)
    end_all_inputs(h)
    (cid,) = h.coord.pending_ids()
    h.ack(cid, [SRC0])
    h.coord.receive_decline(SINK, cid, R.DECLINED, "disk full")
    assert len(h.failures) == 1 and "stop-with-savepoint" in h.failures[0]
    assert f"savepoint {cid}" in h.failures[0]
    assert len(done.calls) == 1 and done.calls[0][0] is None
    assert "disk full" in done.calls[0][1]
    assert not h.coord.stopping
    assert not os.path.exists(location)
    assert h.gateway.completed(cid) == []


def test_a_second_stop_is_refused():
    h = harness()
    stop(h, "/sp/a")
    other = Done()
    error = h.coord.request_stop("/sp/b", other)
    assert error is not None and "already under way" in error
    assert other.calls == []


def test_a_stop_is_refused_while_tasks_restart_or_after_shutdown():
    h = harness()
    h.coord.tasks_not_running([MAP0])
    assert "not every task is running" in h.coord.request_stop("/sp/a", Done())
    h.coord.shutdown()
    assert "not running" in h.coord.request_stop("/sp/a", Done())
    assert not h.coord.stopping


def test_shutdown_before_the_stop_savepoint_tells_on_done():
    h = harness()
    done = stop(h, "/sp/never")
    h.coord.shutdown()
    assert len(done.calls) == 1 and done.calls[0][0] is None and done.calls[0][1]
    assert not h.coord.stopping and h.failures == []


def test_shutdown_during_the_stop_savepoint_tells_on_done_once_without_failing(tmp_path):
    h = harness()
    location = str(tmp_path / "sp")
    done = stop(h, location)
    end_all_inputs(h)
    assert len(h.coord.pending_ids()) == 1
    h.coord.shutdown()
    assert len(done.calls) == 1 and done.calls[0][0] is None
    assert h.failures == []  # COORDINATOR_SHUTDOWN: the job is ending anyway


class FailFirstSavepointTrigger(LocationGateway):
    """The first savepoint trigger cannot reach its task."""

    def __init__(self):
        super().__init__()
        self.failed = False

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint, location=None):
        if is_savepoint and not self.failed:
            self.failed = True
            raise ConnectionError("task unreachable")
        super().trigger(subtask, checkpoint_id, timestamp_ms, is_savepoint, location)


def test_a_stop_savepoint_that_cannot_be_triggered_tells_on_done(tmp_path, caplog):
    caplog.set_level(logging.CRITICAL + 1, logger="flowray.runtime.checkpoint.coordinator")
    h = harness()
    h.gateway = h.coord.gateway = FailFirstSavepointTrigger()
    done = stop(h, str(tmp_path / "sp"))
    end_all_inputs(h)
    assert len(h.failures) == 1 and "stop-with-savepoint" in h.failures[0]
    assert len(done.calls) == 1 and done.calls[0][0] is None  # actual: done.calls == []


def test_a_failover_during_a_stop_ends_it():
    h = harness(interval_ms=1000)
    done = stop(h, "/sp/never")
    h.coord.tasks_not_running([SRC0])
    h.coord.tasks_running([SRC0])
    h.advance(1000)
    assert len(done.calls) == 1 and done.calls[0][0] is None  # actual: []
    assert not h.coord.stopping
    assert h.gateway.triggers  # periodic checkpoints resume; actual: none, ever


def test_a_final_checkpoint_that_cannot_be_triggered_is_not_retriggered_without_end(caplog):
    caplog.set_level(logging.CRITICAL + 1, logger="flowray.runtime.checkpoint.coordinator")
    h = harness()
    h.gateway.fail_trigger_for = set(ALL)
    end_all_inputs(h)
    assert len(h.stats.history()) <= 2
