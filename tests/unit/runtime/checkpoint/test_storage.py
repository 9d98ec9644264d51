"""Checkpoint storage contract, run against the pyarrow.fs and the in-memory storage."""

import os

import cloudpickle
import pytest

from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.storage import (
    DEFAULT_CHECKPOINTS_DIR,
    METADATA_FILE,
    METADATA_MAGIC,
    CheckpointStorage,
    FsCheckpointStorage,
    InvalidCheckpointMetadataError,
    MemoryCheckpointStorage,
    checkpoint_storage_from_config,
    load_checkpoint,
)
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import (
    SPLIT_DISTRIBUTE,
    KeyedStateHandle,
    OperatorStateEntry,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

JOB = "job-42"


@pytest.fixture(params=["fs", "memory"])
def make_storage(request, tmp_path):
    """A factory: ``make_storage(job_id)``; every instance of one test shares one store."""
    if request.param == "fs":
        return lambda job_id=JOB: FsCheckpointStorage(str(tmp_path / "checkpoints"), job_id)
    files = {}
    return lambda job_id=JOB: MemoryCheckpointStorage(job_id, files=files)


@pytest.fixture
def storage(make_storage):
    return make_storage()


def checkpoint(n, job=JOB, savepoint=False):
    state = TaskStateSnapshot({
        "op": OperatorSubtaskState(
            {"positions": OperatorStateEntry(SPLIT_DISTRIBUTE, [b"p1", b"p2"])},
            KeyedStateHandle(f"/somewhere/{n}.keyed", KeyGroupRange(0, 63), 100)),
    })
    return CompletedCheckpoint(job, n, trigger_ms=1000 * n, completed_ms=1000 * n + 50,
                               task_states={"src:0": state,
                                            "sink:0": TaskStateSnapshot.finished_task()},
                               is_savepoint=savepoint)


def _exists(storage: CheckpointStorage, path: str) -> bool:
    try:
        storage.read_file(path)
        return True
    except FileNotFoundError:
        return False


# -- layout --------------------------------------------------------------------------------

def test_layout(storage):
    d = storage.checkpoint_dir(7)
    assert d.endswith(f"/{JOB}/chk-7")
    assert storage.metadata_path(7) == f"{d}/{METADATA_FILE}"
    assert storage.task_state_path(7, SubtaskId("map", 3), "keyed") == f"{d}/map-3.keyed"


def test_task_state_path_is_safe_and_distinct_for_any_vertex_id(storage):
    names = ["a/b", "a_b", "a b:c", "../x", "ü", ""]
    paths = [storage.task_state_path(1, SubtaskId(v, 0), "keyed") for v in names]
    assert len(set(paths)) == len(paths)
    d = storage.checkpoint_dir(1)
    for p in paths:
        assert p.startswith(d + "/")
        name = p[len(d) + 1:]
        assert "/" not in name and ":" not in name and " " not in name
        assert not name.startswith(".")
        storage.write_file(p, b"x")  # and it can be written
    assert storage.task_state_path(1, SubtaskId("m", 1), "k") != \
        storage.task_state_path(1, SubtaskId("m", 2), "k")


# -- files ---------------------------------------------------------------------------------

def test_write_and_read_file_creates_parents(storage):
    p = storage.task_state_path(3, SubtaskId("src", 0), "keyed")
    assert storage.write_file(p, b"hello") == 5
    assert storage.read_file(p) == b"hello"
    assert storage.write_file(p, b"") == 0  # overwrite
    assert storage.read_file(p) == b""


def test_read_missing_file_names_path(storage):
    p = storage.checkpoint_dir(9) + "/nothing"
    with pytest.raises(FileNotFoundError, match="nothing"):
        storage.read_file(p)


# -- metadata ------------------------------------------------------------------------------

def test_metadata_round_trip(storage):
    cp = checkpoint(3)
    path = storage.write_metadata(cp)
    assert path == storage.metadata_path(3)
    assert cp.external_path == path
    back = storage.read_metadata(storage.checkpoint_dir(3))
    assert back.checkpoint_id == 3 and back.job_id == JOB
    assert back.task_states == cp.task_states
    assert back.external_path == path
    assert back.state_size() == cp.state_size() > 0
    assert storage.read_metadata(path).checkpoint_id == 3  # the file itself works too
    assert storage.list_completed() == [3]


def test_metadata_is_atomic_no_metadata_until_renamed(storage, monkeypatch):
    def broken_rename(src, dst):
        assert ".inprogress-" in src and dst.endswith("/" + METADATA_FILE)
        assert not _exists(storage, dst)  # nothing visible under the final name yet
        assert _exists(storage, src)
        raise OSError("disk gone")

    monkeypatch.setattr(storage, "_rename", broken_rename)
    with pytest.raises(OSError, match="disk gone"):
        storage.write_metadata(checkpoint(5))
    assert storage.list_completed() == []
    assert not _exists(storage, storage.metadata_path(5))


def test_inprogress_file_left_behind_is_not_completed(storage):
    storage.write_metadata(checkpoint(1))
    storage.write_file(storage.metadata_path(2) + ".inprogress-deadbeef", b"partial")
    storage.write_file(storage.task_state_path(3, SubtaskId("a", 0), "keyed"), b"state")
    assert storage.list_completed() == [1]
    with pytest.raises(FileNotFoundError):
        storage.read_metadata(storage.checkpoint_dir(2))


def test_list_completed_sorted_numerically_and_ignores_other_dirs(storage):
    for n in (10, 2, 1):
        storage.write_metadata(checkpoint(n))
    storage.write_file(f"{storage.job_root}/shared/file", b"x")
    storage.write_file(f"{storage.job_root}/chk-x/{METADATA_FILE}", b"x")
    assert storage.list_completed() == [1, 2, 10]


def test_list_completed_of_empty_or_missing_job(storage):
    assert storage.list_completed() == []


@pytest.mark.parametrize("data,match", [
    (b"", "bad magic"),
    (b"not a checkpoint at all", "bad magic"),
    (METADATA_MAGIC + b"\x00\x63" + b"whatever", "unsupported checkpoint metadata version 99"),
    (METADATA_MAGIC + b"\x00\x01" + b"\x80\x05garbage", "corrupt checkpoint metadata"),
])
def test_bad_metadata_error_names_path(storage, data, match):
    path = storage.metadata_path(4)
    storage.write_file(path, data)
    with pytest.raises(InvalidCheckpointMetadataError, match=match) as info:
        storage.read_metadata(storage.checkpoint_dir(4))
    assert path in str(info.value)


# -- discard -------------------------------------------------------------------------------

def test_discard_checkpoint_is_idempotent_and_leaves_others(storage):
    storage.write_metadata(checkpoint(1))
    storage.write_metadata(checkpoint(2))
    state = storage.task_state_path(1, SubtaskId("map", 0), "keyed")
    storage.write_file(state, b"s")
    storage.discard_checkpoint(1)
    storage.discard_checkpoint(1)
    storage.discard_checkpoint(77)  # never existed
    assert storage.list_completed() == [2]
    assert not _exists(storage, state)
    assert storage.read_metadata(storage.checkpoint_dir(2)).checkpoint_id == 2


def test_discard_checkpoint_does_not_touch_prefix_siblings(storage):
    storage.write_metadata(checkpoint(1))
    storage.write_metadata(checkpoint(10))
    storage.discard_checkpoint(1)
    assert storage.list_completed() == [10]


def test_discard_job(make_storage):
    mine, other = make_storage(JOB), make_storage("other-job")
    mine.write_metadata(checkpoint(1))
    other.write_metadata(checkpoint(1, job="other-job"))
    mine.discard_job()
    mine.discard_job()
    assert mine.list_completed() == []
    assert other.list_completed() == [1]


# -- sharing -------------------------------------------------------------------------------

def test_instances_over_the_same_root_share_files(make_storage):
    writer, reader = make_storage(), make_storage()
    p = writer.task_state_path(1, SubtaskId("src", 0), "keyed")
    writer.write_file(p, b"abc")
    writer.write_metadata(checkpoint(1))
    assert reader.read_file(p) == b"abc"
    assert reader.list_completed() == [1]
    assert make_storage("another").list_completed() == []


def test_storage_survives_pickling(storage):
    storage.write_metadata(checkpoint(1))
    copy = cloudpickle.loads(cloudpickle.dumps(storage))
    assert copy.job_id == JOB
    assert copy.checkpoint_dir(1) == storage.checkpoint_dir(1)
    assert copy.read_metadata(copy.checkpoint_dir(1)).checkpoint_id == 1


# -- pyarrow.fs specifics ------------------------------------------------------------------

def test_fs_relative_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = FsCheckpointStorage("rel/cps", JOB)
    assert s.job_root == f"{tmp_path}/rel/cps/{JOB}"
    s.write_metadata(checkpoint(1))
    assert (tmp_path / "rel" / "cps" / JOB / "chk-1" / METADATA_FILE).is_file()
    assert not [f for f in os.listdir(tmp_path / "rel" / "cps" / JOB / "chk-1")
                if "inprogress" in f]


def test_fs_file_uri(tmp_path):
    s = FsCheckpointStorage(f"file://{tmp_path}/cps", JOB)
    s.write_metadata(checkpoint(2))
    assert (tmp_path / "cps" / JOB / "chk-2" / METADATA_FILE).is_file()
    assert FsCheckpointStorage(str(tmp_path / "cps"), JOB).list_completed() == [2]


def test_load_checkpoint_by_path_or_uri(tmp_path):
    s = FsCheckpointStorage(str(tmp_path), JOB)
    path = s.write_metadata(checkpoint(3, savepoint=True))
    for where in (s.checkpoint_dir(3), path, f"file://{s.checkpoint_dir(3)}"):
        cp = load_checkpoint(where)
        assert cp.checkpoint_id == 3 and cp.is_savepoint
    assert s.read_metadata(f"file://{s.checkpoint_dir(3)}").checkpoint_id == 3
    with pytest.raises(FileNotFoundError, match="chk-4"):
        load_checkpoint(s.checkpoint_dir(4))


def test_storage_from_config_default_is_under_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = checkpoint_storage_from_config(Configuration(), JOB)
    assert isinstance(s, FsCheckpointStorage)
    assert s.job_root == f"{tmp_path}/{DEFAULT_CHECKPOINTS_DIR}/{JOB}"


def test_storage_from_config_dir(tmp_path):
    s = checkpoint_storage_from_config(
        Configuration({"execution.checkpointing.dir": str(tmp_path / "x")}), JOB)
    assert s.checkpoint_dir(1) == f"{tmp_path}/x/{JOB}/chk-1"
    s2 = checkpoint_storage_from_config({"execution.checkpointing.dir": f"file://{tmp_path}/y"},
                                        JOB)
    assert s2.checkpoint_dir(1) == f"{tmp_path}/y/{JOB}/chk-1"
