"""Checkpoint file checksums: recorded on write, verified on read, kept for the files of
recent snapshots (pure, no Ray)."""

import pytest

from flowray.state.checksums import (
    ChecksumRecorder,
    CorruptedStateError,
    file_checksum,
    referenced_paths,
    verifying_reader,
)
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import (
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)


def _store():
    files = {}

    def write(path, data):
        files[path] = bytes(data)
        return len(data)
    return files, write


def test_recorded_checksums_verify_and_a_changed_or_truncated_file_is_named():
    files, write = _store()
    rec = ChecksumRecorder()
    recording = rec.recording(write)
    assert recording("a", b"hello") == 5
    recording("b", b"world")
    read = verifying_reader(files.__getitem__, rec.for_paths(["a", "b"]))
    assert read("a") == b"hello"
    files["a"] = b"hell"
    with pytest.raises(CorruptedStateError, match=r"checkpoint file a is damaged: expected 5 "
                                                  r"bytes .* read 4 bytes"):
        read("a")
    files["b"] = b"worle"
    with pytest.raises(CorruptedStateError, match="checkpoint file b"):
        read("b")


def test_files_without_a_recorded_checksum_are_read_as_they_are():
    files, _ = _store()
    files["old"] = b"from a checkpoint taken before checksums"
    assert verifying_reader(files.__getitem__, {})("old") == files["old"]


def test_learn_and_forget_all_but():
    rec = ChecksumRecorder()
    rec.learn({"x": (1, 2), "y": (3, 4)})
    rec.forget_all_but(["y", "z"])
    assert rec.known == {"y": (3, 4)}
    assert rec.for_paths(["x", "y"]) == {"y": (3, 4)}
    assert file_checksum(b"") == 0


def test_referenced_paths_cover_full_incremental_and_operator_state_files():
    kgr = KeyGroupRange(0, 127)
    incremental = IncrementalKeyedStateHandle(
        path="chk-2/v1-0.keyed.private", key_group_range=kgr, size=10,
        shared={"1.sst": "shared/v1-0-1.sst"},
        private={"MANIFEST": "chk-2/v1-0.keyed.private/MANIFEST"})
    with_file = OperatorSubtaskState(operator_state_file=OperatorStateHandle("chk-2/v1-0.op0", 9))
    snap = TaskStateSnapshot({
        "full": OperatorSubtaskState(keyed=KeyedStateHandle("chk-2/v2-0.keyed", kgr, 5)),
        "inc": OperatorSubtaskState(keyed=incremental),
        "ops": with_file,
        "inline": OperatorSubtaskState()})
    assert sorted(referenced_paths(snap)) == sorted([
        "chk-2/v2-0.keyed", "shared/v1-0-1.sst", "chk-2/v1-0.keyed.private/MANIFEST",
        "chk-2/v1-0.op0"])
