"""Task-local recovery of RocksDB keyed state: the local copy store, and restores that open
the local copy (full and incremental checkpoints) or fall back to checkpoint storage. No
Ray."""

import os

import pytest

from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.rocksdb.local_recovery import MANIFEST, TaskLocalStateStore, materialize
from flowray.state.state_backend import create_keyed_backend, discard_local_state
from tests.support.keyed_state import read_values
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
ROOT = "mem://job-1"


def keyed_path(cid):
    return f"{ROOT}/chk-{cid}/map-0.keyed"


def never_read(path):
    raise AssertionError(f"checkpoint storage was read: {path}")


# -- the store ---------------------------------------------------------------------------
def native_dir(tmp_path, name, files):
    d = tmp_path / name
    d.mkdir()
    for fname, data in files.items():
        (d / fname).write_bytes(data)
    return str(d)


def test_store_find_confirm_abort(tmp_path):
    store = TaskLocalStateStore(str(tmp_path / "local"))
    a = store.store(3, native_dir(tmp_path, "a", {"1.sst": b"x", "CURRENT": b"c"}), (0, 9),
                    {"v": "value"})
    b = store.store(4, native_dir(tmp_path, "b", {"2.sst": b"yy"}), (0, 9))
    assert not os.path.exists(tmp_path / "a")  # moved, not copied
    copy = store.find(a)
    assert copy.checkpoint_id == 3 and copy.files == {"1.sst": 1, "CURRENT": 1}
    assert copy.kinds == {"v": "value"} and copy.key_group_range == (0, 9)
    assert store.find("nope") is None and store.find("") is None
    store.abort(4)
    assert store.find(b) is None and store.find(a) is not None
    store.confirm(3)  # keeps the confirmed one itself
    assert store.checkpoint_ids() == [3]
    store.confirm(5)
    assert store.checkpoint_ids() == [] and store.find(a) is None


def test_a_copy_without_manifest_or_with_changed_files_is_not_found(tmp_path):
    store = TaskLocalStateStore(str(tmp_path / "local"))
    cid = store.store(1, native_dir(tmp_path, "a", {"1.sst": b"abc"}), (0, 9))
    folder = store.find(cid).directory
    with open(os.path.join(folder, "1.sst"), "ab") as f:
        f.write(b"more")                      # a size the manifest does not know
    assert store.find(cid) is None
    cid2 = store.store(2, native_dir(tmp_path, "b", {"1.sst": b"abc"}), (0, 9))
    folder2 = store.find(cid2).directory
    os.remove(os.path.join(folder2, MANIFEST))  # as if the task died while storing it
    assert store.find(cid2) is None
    os.remove(os.path.join(folder, "1.sst"))
    assert store.find(cid) is None


def test_retain_only_and_discard_all(tmp_path):
    store = TaskLocalStateStore(str(tmp_path / "local"))
    keep = store.store(1, native_dir(tmp_path, "a", {"x": b"1"}), (0, 9))
    store.store(2, native_dir(tmp_path, "b", {"x": b"2"}), (0, 9))
    store.retain_only(keep)
    assert store.checkpoint_ids() == [1]
    store.discard_all()
    assert not os.path.exists(store.directory)
    store.discard_all()  # idempotent


def test_materialize_links_sst_files_and_copies_the_rest(tmp_path):
    store = TaskLocalStateStore(str(tmp_path / "local"))
    cid = store.store(1, native_dir(tmp_path, "a", {"7.sst": b"s", "MANIFEST-1": b"m"}), (0, 9))
    copy = store.find(cid)
    target = str(tmp_path / "db")
    materialize(copy, target)
    sst, manifest = os.path.join(target, "7.sst"), os.path.join(target, "MANIFEST-1")
    assert os.path.samefile(sst, os.path.join(copy.directory, "7.sst"))
    assert not os.path.samefile(manifest, os.path.join(copy.directory, "MANIFEST-1"))
    assert open(manifest, "rb").read() == b"m"


# -- the backend ---------------------------------------------------------------------------
@pytest.fixture
def make(tmp_path):
    created = []
    local_dir = str(tmp_path / "local-state" / "map-0")

    def factory(incremental, local=True, rng=FULL):
        b = RocksDBKeyedStateBackend(
            rng, MAXP, str(tmp_path / f"b{len(created)}"), incremental=incremental,
            local_store=TaskLocalStateStore(local_dir) if local else None)
        created.append(b)
        return b

    yield factory
    for b in created:
        b.dispose()


def fill(backend, items, name="v"):
    st = backend.get_partitioned_state(ValueStateDescriptor(name))
    for k, v in items.items():
        backend.set_current_key(k)
        st.update(v)


def checkpoint(backend, storage, cid, savepoint=False):
    handle = backend.snapshot(cid, savepoint=savepoint).write(storage.write_file, keyed_path(cid))
    if not savepoint:
        backend.notify_checkpoint_complete(cid)
    return handle


@pytest.mark.parametrize("incremental", [False, True])
def test_restore_opens_the_local_copy_without_reading_storage(make, incremental):
    first, storage = make(incremental), DictStorage()
    expected = {f"k{i}": i for i in range(500)}
    fill(first, expected)
    handle = checkpoint(first, storage, 1)
    assert handle.local_copy_id
    fill(first, {"k1": -1})  # after the checkpoint: not restored
    again = make(incremental)
    again.restore([handle], never_read)
    assert again.restored_from == "local"
    assert read_values(again) == expected
    fill(again, {"k2": 22})
    assert read_values(again)["k2"] == 22


def test_incremental_after_a_local_restore_builds_on_the_restored_files(make):
    first, storage = make(True), DictStorage()
    fill(first, {f"k{i}": i for i in range(300)})
    h1 = checkpoint(first, storage, 1)
    again = make(True)
    again.restore([h1], never_read)
    fill(again, {"k0": 100, "new": 1})
    h2 = checkpoint(again, storage, 2)
    for name in set(h1.shared) & set(h2.shared):
        assert h2.shared[name] == h1.shared[name]  # referenced, not uploaded again
    assert h2.size < h2.full_size
    elsewhere = make(True, local=False)  # another node: no local copy
    elsewhere.restore([h2], storage.read)
    assert elsewhere.restored_from == "storage"
    want = {f"k{i}": i for i in range(300)}
    want.update({"k0": 100, "new": 1})
    assert read_values(elsewhere) == want


@pytest.mark.parametrize("incremental", [False, True])
def test_a_damaged_or_missing_local_copy_falls_back_to_storage(make, incremental):
    first, storage = make(incremental), DictStorage()
    expected = {f"k{i}": i for i in range(200)}
    fill(first, expected)
    handle = checkpoint(first, storage, 1)
    copy = first.local_store.find(handle.local_copy_id)
    victim = next(n for n in copy.files if n.endswith(".sst"))
    with open(os.path.join(copy.directory, victim), "r+b") as f:
        f.truncate(3)
    again = make(incremental)
    again.restore([handle], storage.read)
    assert again.restored_from == "storage" and read_values(again) == expected
    first.local_store.discard_all()
    third = make(incremental)
    third.restore([handle], storage.read)
    assert third.restored_from == "storage" and read_values(third) == expected


def test_savepoints_keep_no_local_copy_and_aborts_delete_theirs(make):
    b, storage = make(False), DictStorage()
    fill(b, {"a": 1})
    sp = checkpoint(b, storage, 1, savepoint=True)
    assert sp.local_copy_id == "" and b.local_store.checkpoint_ids() == []
    h2 = b.snapshot(2).write(storage.write_file, keyed_path(2))
    assert b.local_store.find(h2.local_copy_id) is not None
    b.notify_checkpoint_aborted(2)
    assert b.local_store.checkpoint_ids() == []


def test_restoring_one_checkpoint_removes_copies_of_others(make):
    b, storage = make(True), DictStorage()
    fill(b, {"a": 1})
    h1 = checkpoint(b, storage, 1)
    fill(b, {"a": 2})
    b.snapshot(2).write(storage.write_file, keyed_path(2))  # never completed
    assert b.local_store.checkpoint_ids() == [1, 2]
    again = make(True)
    again.restore([h1], never_read)
    assert again.local_store.checkpoint_ids() == [1]
    assert read_values(again) == {"a": 1}


def test_a_rescaled_restore_reads_storage(make):
    b, storage = make(False), DictStorage()
    fill(b, {f"k{i}": i for i in range(100)})
    handle = checkpoint(b, storage, 1)
    half = make(False, rng=KeyGroupRange(0, 63))
    half.restore([handle], storage.read)
    assert half.restored_from == "storage"
    assert half.local_store.checkpoint_ids() == []


def test_disposing_a_finished_task_discards_local_state(make):
    b, storage = make(False), DictStorage()
    fill(b, {"a": 1})
    checkpoint(b, storage, 1)
    directory = b.local_store.directory
    b.dispose()  # a failed or cancelled task: the copy stays for the next attempt
    assert os.listdir(directory)
    again = make(False)
    again.dispose(discard_local_state=True)
    assert not os.path.exists(directory)


def test_configuration_turns_it_on_and_discard_removes_the_jobs_copies(tmp_path):
    conf = {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(tmp_path)}
    off = create_keyed_backend(conf, FULL, MAXP, "job-a", "v1:0", 0)
    assert off.local_store is None
    off.dispose()
    # the key, and its Flink 1.x name
    for key in ("execution.checkpointing.local-backup.enabled", "state.backend.local-recovery"):
        on = create_keyed_backend({**conf, key: "true"}, FULL, MAXP, "job-a", "v1:0", 1)
        assert on.local_store is not None
        assert on.local_store.directory.startswith(str(tmp_path))
        fill(on, {"a": 1})
        on.snapshot(1).write(DictStorage().write_file, keyed_path(1))
        on.dispose()
        assert os.listdir(on.local_store.directory)
        discard_local_state(conf, "job-a")
        assert not os.path.exists(on.local_store.directory)
