"""A job on a cluster of several nodes must keep its storage where every node reaches it
(issue 14): plain paths fail at submission unless declared shared."""

import pytest

from flowray.common.configuration import Configuration
from flowray.runtime.execution.storage_reach import (
    StorageNotSharedError,
    StorageNotWritableError,
    check_storage_reachable,
    node_local_paths,
)

CHK = {"execution.checkpointing.interval": "1 s", "execution.checkpointing.dir": "/data/chk"}


def test_one_node_accepts_any_path():
    check_storage_reachable(Configuration(CHK), node_count=1)


def test_a_plain_checkpoint_path_on_several_nodes_fails_naming_key_and_path():
    with pytest.raises(StorageNotSharedError) as e:
        check_storage_reachable(Configuration(CHK), node_count=3)
    text = str(e.value)
    assert "execution.checkpointing.dir" in text and "/data/chk" in text and "3 nodes" in text
    assert "flowray.storage.local-paths-shared" in text


@pytest.mark.parametrize("path", ["s3://bucket/chk", "gs://b/c", "hdfs://nn/chk"])
def test_uris_every_node_reaches_pass(path):
    check_storage_reachable(Configuration({**CHK, "execution.checkpointing.dir": path}), 3)


def test_file_uris_are_local():
    conf = Configuration({**CHK, "execution.checkpointing.dir": "file:///data/chk"})
    with pytest.raises(StorageNotSharedError):
        check_storage_reachable(conf, 2)


def test_a_declared_shared_mount_passes():
    check_storage_reachable(
        Configuration({**CHK, "flowray.storage.local-paths-shared": "true"}), 3)


def test_without_checkpointing_the_checkpoint_dir_does_not_matter():
    conf = Configuration({"execution.checkpointing.dir": "/data/chk"})
    assert node_local_paths(conf) == []
    check_storage_reachable(conf, 3)


def test_savepoint_and_blocking_partition_folders_count_too():
    conf = Configuration({"execution.checkpointing.savepoint-dir": "/sp",
                          "execution.runtime-mode": "BATCH",
                          "flowray.blocking-partitions.dir": "/parts"})
    assert node_local_paths(conf) == [("execution.checkpointing.savepoint-dir", "/sp"),
                                      ("flowray.blocking-partitions.dir", "/parts")]


# -- written at submission (issue 32: storage checked early) ------------------------------
def _checkpointing_job(tmp_path, **settings):
    from tests.support.environments import local_env
    env = local_env(1, **{"execution.checkpointing.interval": "1 s", **settings})
    env.from_collection([1, 2, 3]).map(lambda n: n + 1).print()
    return env


def test_a_checkpoint_folder_under_a_file_fails_at_submission_naming_key_and_path(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    env = _checkpointing_job(tmp_path, **{"execution.checkpointing.dir": str(blocker / "chk")})
    with pytest.raises(StorageNotWritableError) as e:
        env.execute("blocked")
    assert str(e.value) == (f"execution.checkpointing.dir is {str(blocker / 'chk')!r}: "
                            f"{str(blocker)!r} is a file, not a folder")


def test_a_savepoint_folder_that_is_a_file_fails_at_submission(tmp_path):
    blocker = tmp_path / "savepoints"
    blocker.write_text("x")
    env = _checkpointing_job(tmp_path, **{
        "execution.checkpointing.dir": str(tmp_path / "chk"),
        "execution.checkpointing.savepoint-dir": f"file://{blocker}"})
    with pytest.raises(StorageNotWritableError,
                       match=r"^execution\.checkpointing\.savepoint-dir is "
                       r"'file://.*savepoints': '.*savepoints' is a file, not a folder$"):
        env.execute("blocked")


def test_a_folder_nobody_can_write_fails_at_submission(tmp_path):
    # /proc takes no new folder, whoever runs this (root included)
    env = _checkpointing_job(tmp_path, **{"execution.checkpointing.dir": "/proc/flowray-chk"})
    with pytest.raises(StorageNotWritableError,
                       match=r"^execution\.checkpointing\.dir is '/proc/flowray-chk': cannot write "
                             r"there \("):
        env.execute("unwritable")


def test_a_writable_folder_is_created_at_submission_and_left_clean(tmp_path):
    folder = tmp_path / "deep" / "chk"
    env = _checkpointing_job(tmp_path, **{"execution.checkpointing.dir": str(folder)})
    env.execute("fine")
    assert folder.is_dir()
    assert not [p for p in folder.rglob("*") if p.name.startswith(".flowray-write-probe")]
