"""Incremental RocksDB checkpoints: shared SST uploads, the confirmed base, restore in place
and by key-group copy (rescaling), and full snapshots still working. No Ray."""

import os

import pytest

from flowray.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.snapshot import IncrementalKeyedStateHandle, KeyedStateHandle
from tests.support.keyed_state import read_values
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
ROOT = "mem://job-1"


def keyed_path(cid, index=0):
    return f"{ROOT}/chk-{cid}/map-{index}.keyed"


@pytest.fixture
def make(tmp_path):
    created = []

    def factory(rng=FULL, incremental=True):
        b = RocksDBKeyedStateBackend(rng, MAXP, str(tmp_path / f"b{len(created)}"),
                                     incremental=incremental)
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


def checkpoint(backend, storage, cid, confirm=True):
    before = len(storage.shared_writes(ROOT))
    handle = backend.snapshot(cid).write(storage.write_file, keyed_path(cid))
    if confirm:
        backend.notify_checkpoint_complete(cid)
    return handle, len(storage.shared_writes(ROOT)) - before


def test_first_checkpoint_uploads_everything(make):
    b, storage = make(), DictStorage()
    fill(b, {f"k{i}": i for i in range(100)})
    h, n_shared = checkpoint(b, storage, 1)
    assert isinstance(h, IncrementalKeyedStateHandle) and isinstance(h, KeyedStateHandle)
    assert h.checkpoint_id == 1 and h.key_group_range == FULL
    assert n_shared == len(h.shared) >= 1
    assert all(p.startswith(f"{ROOT}/shared/map-0-") and name in p for name, p in h.shared.items())
    assert h.private and all(p.startswith(keyed_path(1) + ".private/") for p in h.private.values())
    assert any(n.startswith("MANIFEST-") for n in h.private) and "CURRENT" in h.private
    assert h.state_kinds == {"v": "value"}
    assert h.size == h.full_size == sum(len(d) for d in storage.files.values())
    assert not os.path.exists(os.path.join(b.working_dir, "snapshots", "chk-1"))
    assert b.confirmed_sst_files() == h.shared


def test_confirmed_checkpoint_is_referenced(make):
    b, storage = make(), DictStorage()
    fill(b, {f"k{i}": i for i in range(100)})
    h1, _ = checkpoint(b, storage, 1, confirm=True)
    fill(b, {"k1": -1, "new": 5})
    h2, n_shared = checkpoint(b, storage, 2)
    new = set(h2.shared) - set(h1.shared)
    assert new and n_shared == len(new)
    for name in set(h1.shared) & set(h2.shared):
        assert h2.shared[name] == h1.shared[name]          # referenced, not uploaded
    assert h2.size < h2.full_size
    assert set(h2.private.values()).isdisjoint(h1.private.values())


def test_unconfirmed_checkpoint_files_are_uploaded_again(make):
    b, storage = make(), DictStorage()
    fill(b, {f"k{i}": i for i in range(100)})
    h1, _ = checkpoint(b, storage, 1, confirm=False)
    fill(b, {"k1": -1})
    h2, n_shared = checkpoint(b, storage, 2, confirm=False)
    assert n_shared == len(h2.shared)
    common = set(h1.shared) & set(h2.shared)
    assert common
    for name in common:
        assert h1.shared[name] != h2.shared[name]           # a new unique name
    # confirming 2 makes its uploads the base; a late confirmation of 1 changes nothing
    b.notify_checkpoint_complete(2)
    b.notify_checkpoint_complete(1)
    assert b.confirmed_sst_files() == h2.shared
    h3, n_shared = checkpoint(b, storage, 3)
    assert n_shared == 0 and h3.shared == h2.shared


def test_restore_in_place_gives_checkpoint_state_and_references_restored_files(make):
    b, storage = make(), DictStorage()
    data = {f"k{i}": i for i in range(200)}
    fill(b, data)
    h1, _ = checkpoint(b, storage, 1)
    fill(b, {"k0": 0}, name="other")
    fill(b, {"later": 1, "k5": 55})
    h2, _ = checkpoint(b, storage, 2, confirm=False)
    fill(b, {"even-later": 1})

    r = make()
    r.restore([h1], storage.read)
    assert read_values(r) == data
    assert r.state_names() == ["v"]
    assert r.confirmed_sst_files() == h1.shared
    # the next checkpoint only references the restored SSTs (plus the new one)
    fill(r, {"after-restore": 7})
    h3, n_shared = checkpoint(r, storage, 3)
    assert set(h1.shared) <= set(h3.shared)
    assert all(h3.shared[n] == h1.shared[n] for n in h1.shared)
    assert n_shared == len(set(h3.shared) - set(h1.shared)) >= 1

    r2 = make()
    r2.restore([h2], storage.read)
    assert read_values(r2) == {**data, "later": 1, "k5": 55}
    assert sorted(r2.state_names()) == ["other", "v"]
    r3 = make()
    r3.restore([h3], storage.read)
    assert read_values(r3) == {**data, "after-restore": 7}


def test_restore_into_narrower_range_keeps_only_its_key_groups(make):
    b, storage = make(), DictStorage()
    data = {f"k{i}": i for i in range(300)}
    fill(b, data)
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    mp = b.get_partitioned_state(MapStateDescriptor("m"))
    for k in data:
        b.set_current_key(k)
        lst.add(k)
        mp.put("x", k)
    h, _ = checkpoint(b, storage, 1)
    halves = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]
    merged = {}
    for rng in halves:
        r = make(rng)
        r.restore([h], storage.read)
        got = read_values(r)
        expect = {k: v for k, v in data.items() if assign_to_key_group(k, MAXP) in rng}
        assert got == expect and expect
        lst_r = r.get_partitioned_state(ListStateDescriptor("l"))
        mp_r = r.get_partitioned_state(MapStateDescriptor("m"))
        for k in expect:
            r.set_current_key(k)
            assert lst_r.get() == [k] and mp_r.get("x") == k
        assert r.confirmed_sst_files() == {}
        merged.update(got)
    assert merged == data


def test_scale_in_merges_two_incremental_handles(make):
    storage = DictStorage()
    halves = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]
    data = {f"k{i}": i for i in range(300)}
    handles = []
    for i, rng in enumerate(halves):
        b = make(rng)
        fill(b, {k: v for k, v in data.items() if assign_to_key_group(k, MAXP) in rng})
        handles.append(b.snapshot(1).write(storage.write_file, keyed_path(1, i)))
    r = make()
    r.restore(handles, storage.read)
    assert read_values(r) == data
    # a later incremental checkpoint of the merged backend restores too
    h, _ = checkpoint(r, storage, 2)
    r2 = make()
    r2.restore([h], storage.read)
    assert read_values(r2) == data


def test_empty_backend_writes_nothing(make):
    b, storage = make(), DictStorage()
    assert b.snapshot(1).write(storage.write_file, keyed_path(1)) is None
    assert storage.files == {}


def test_savepoints_and_native_full_checkpoints_restore_into_either_mode(make):
    storage = DictStorage()
    b = make(incremental=False)
    data = {f"k{i}": i for i in range(50)}
    fill(b, data)
    savepoint = b.snapshot(1, savepoint=True).write(storage.write_file, keyed_path(1))
    assert type(savepoint) is KeyedStateHandle  # canonical
    full = b.snapshot(5).write(storage.write_file, keyed_path(5))
    # a full checkpoint: RocksDB's files, every one of them private to this checkpoint
    assert type(full) is IncrementalKeyedStateHandle and full.shared == {}
    assert any(name.endswith(".sst") for name in full.private)
    assert all(p.startswith(full.path + "/") for p in full.private.values())
    assert full.size == full.full_size == sum(full.file_sizes.values())
    fill(b, {"later": 1})
    for h in (savepoint, full):
        for incremental in (False, True):
            r = make(incremental=incremental)
            r.restore([h], storage.read)
            assert read_values(r) == data
    b.notify_checkpoint_complete(5)
    assert b.confirmed_sst_files() == {}  # a full checkpoint is no base
    # an incremental handle restores into a non-incremental backend as well
    bi = make()
    fill(bi, data)
    hi, _ = checkpoint(bi, storage, 2)
    r = make(incremental=False)
    r.restore([hi], storage.read)
    assert read_values(r) == data


def test_the_heap_backend_restores_incremental_and_full_checkpoints_split_in_two(make):
    """A job that ran on RocksDB restored on the heap backend from a checkpoint, rescaled
    1 -> 2: an incremental one (its SST files shared with an earlier checkpoint) and a full
    one; keys deleted after the base checkpoint stay deleted."""
    from flowray.state.heap_backend import HeapKeyedStateBackend

    storage = DictStorage()
    data = {f"k{i}": i for i in range(300)}
    for incremental in (True, False):
        b = make(incremental=incremental)
        fill(b, data)
        base, _ = checkpoint(b, storage, 10 if incremental else 20)
        later = {"k1": -1, "new": 5}
        fill(b, later)
        b.set_current_key("k2")
        b.get_partitioned_state(ValueStateDescriptor("v")).clear()
        h, _ = checkpoint(b, storage, 11 if incremental else 21)
        if incremental:
            assert set(base.shared.values()) & set(h.shared.values())  # references the base
        else:
            assert h.shared == {}
        expected = {**{k: v for k, v in data.items() if k != "k2"}, **later}
        seen = {}
        for rng in (KeyGroupRange(0, 63), KeyGroupRange(64, MAXP - 1)):
            heap = HeapKeyedStateBackend(rng, MAXP)
            heap.restore([h], storage.read)
            got = read_values(heap)
            assert all(assign_to_key_group(k, MAXP) in rng for k in got)
            seen.update(got)
        assert seen == expected, incremental


def test_a_checkpoint_of_states_that_hold_no_key_is_none(make):
    for incremental in (True, False):
        b = make(incremental=incremental)
        b.get_partitioned_state(ValueStateDescriptor("v"))  # registered, never written
        assert b.snapshot(1).write(DictStorage().write_file, keyed_path(1)) is None


def test_an_aborted_checkpoints_upload_stops_at_its_next_file(make):
    # as a heap write stops (issue 32: RocksDB uploads of aborted checkpoints ran on)
    from flowray.state.heap_table import SnapshotAbortedError
    b, storage = make(), DictStorage()
    fill(b, {f"k{i}": i for i in range(100)})
    writer = b.snapshot(1)
    written = []

    def write_file(path, data):
        written.append(path)
        if len(written) == 1:
            b.notify_checkpoint_aborted(1)   # aborted while its first file uploads
        return storage.write_file(path, data)

    with pytest.raises(SnapshotAbortedError, match="checkpoint 1 was aborted during its "
                                                   "upload"):
        writer.write(write_file, keyed_path(1))
    assert len(written) == 1 < len(writer.files)
    assert not os.path.exists(os.path.join(b.working_dir, "snapshots", "chk-1"))
    h, _ = checkpoint(b, storage, 2)          # the next checkpoint uploads as usual
    assert h.checkpoint_id == 2 and b.confirmed_sst_files() == h.shared
