"""A duplicate upload of a shared file, replaced by the registered copy when its checkpoint
completes, hands its checksum to that copy (issue 32: deduplicated files restored
unverified before)."""

from flowray.runtime.checkpoint.shared_files import register_shared_state
from flowray.runtime.checkpoint.shared_registry import SharedStateRegistry
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import (IncrementalKeyedStateHandle, OperatorSubtaskState,
                                    TaskStateSnapshot)


def _states(checkpoint_id, path, crc):
    handle = IncrementalKeyedStateHandle(
        path=f"chk-{checkpoint_id}/v1-0.keyed.private", key_group_range=KeyGroupRange(0, 127),
        size=10, checkpoint_id=checkpoint_id, shared={"000007.sst": path},
        file_sizes={path: 10}, db_uid="d1")
    snap = TaskStateSnapshot({"sum": OperatorSubtaskState(keyed=handle)})
    snap.file_checksums[path] = (10, crc)
    return {"v1:0": snap}


def test_the_registered_copy_of_a_duplicate_upload_keeps_the_checksum():
    deleted = []
    registry = SharedStateRegistry(discard=lambda h: deleted.append(h.path))
    register_shared_state(registry, 1, _states(1, "shared/a", 0xABC))
    again = _states(2, "shared/b", 0xABC)   # the same SST uploaded again
    register_shared_state(registry, 2, again)
    snap = again["v1:0"]
    assert deleted == ["shared/b"]
    assert snap.operators["sum"].keyed.shared == {"000007.sst": "shared/a"}
    assert snap.file_checksums == {"shared/a": (10, 0xABC)}   # verified on restore
