"""The streamed full-snapshot format (``flowray-keyed-v2``): RocksDB writes it key group by
key group in bounded memory, both backends restore it (all key groups or a subset, reading
only the parts that hold them), and the earlier ``flowray-heap-v1`` files still restore."""

import pickle

import pytest

from flowray.state.checksums import ChecksumRecorder, CorruptedStateError, verifying_reader
from flowray.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from flowray.state.full_snapshot import (
    FORMAT_V1,
    FORMAT_V3,
    PICKLED_VALUES,
    ROCKSDB_KEYS,
    StreamedSnapshotWriter,
    open_full_snapshot,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.snapshot import KeyedStateHandle
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
PART_BYTES = 4096
N_KEYS = 3000


class ReadLog(DictStorage):
    """DictStorage that remembers which paths were read."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def read(self, path):
        self.reads.append(path)
        return super().read(path)


@pytest.fixture
def backends(tmp_path):
    made = []

    def make(kind, kgr=FULL, part_bytes=PART_BYTES):
        if kind == "heap":
            b = HeapKeyedStateBackend(kgr, MAXP)
        else:
            b = RocksDBKeyedStateBackend(kgr, MAXP, tmp_path / f"rocks-{len(made)}",
                                         snapshot_part_bytes=part_bytes)
        made.append(b)
        return b

    yield make
    for b in made:
        b.dispose()


def fill(b, n=N_KEYS):
    """Value, list and map state for ``n`` keys (all key groups); the expected contents."""
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    expected = {"v": {}, "l": {}, "m": {}}
    for i in range(n):
        key = f"user-{i}" if i % 3 else ("t", i)
        b.set_current_key(key)
        v.update(i * 7)
        expected["v"][key] = i * 7
        if i % 2:
            lst.add_all([i, "x" * (i % 50)])
            expected["l"][key] = [i, "x" * (i % 50)]
        if i % 5 == 0:
            m.put("n", i)
            expected["m"][key] = {"n": i}
    return expected


def contents(b, kgr=None):
    out = {}
    for name in b.state_names():
        d = {}
        for kg in (kgr or b.key_group_range):
            d.update(b.iter_key_group(name, kg))
        out[name] = d
    return out


def only(expected, kgr):
    return {name: {k: v for k, v in entries.items() if assign_to_key_group(k, MAXP) in kgr}
            for name, entries in expected.items()}


def savepoint(b, storage, path="sp/op-0.keyed"):
    writer = b.snapshot(1, savepoint=True)
    handle = writer.write(storage.write_file, path)
    return handle, writer


# ---------------------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["rocksdb", "heap"])
def test_many_keys_over_many_key_groups_restore_identically(backends, target):
    b = backends("rocksdb")
    expected = fill(b)
    storage = ReadLog()
    handle, writer = savepoint(b, storage)
    parts = [p for p in storage.files if ".parts/" in p]
    assert len(parts) > 10                          # the state went out in many parts
    assert handle.size == sum(len(d) for d in storage.files.values())
    index = pickle.loads(storage.files[handle.path])
    assert index["format"] == FORMAT_V3 and index["values"] == PICKLED_VALUES
    assert index["keys"] == ROCKSDB_KEYS
    assert sorted(index["groups"]) == list(FULL)    # every key group has entries
    r = backends(target)
    r.restore([handle], storage.read)
    assert contents(r) == contents(b) == expected


def test_restored_state_snapshots_and_restores_again(backends):
    b = backends("rocksdb")
    expected = fill(b, 500)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    r = backends("rocksdb")
    r.restore([handle], storage.read)
    r.set_current_key("user-1")
    r.get_partitioned_state(ValueStateDescriptor("v")).update("changed")
    expected["v"]["user-1"] = "changed"
    h2, _ = savepoint(r, storage, "sp2/op-0.keyed")
    r2 = backends("heap")
    r2.restore([h2], storage.read)
    assert contents(r2) == expected


def test_restoring_a_subset_of_key_groups_reads_only_their_parts(backends):
    b = backends("rocksdb")
    expected = fill(b)
    storage = ReadLog()
    handle, _ = savepoint(b, storage)
    index = pickle.loads(storage.files[handle.path])
    n_parts = len(index["parts"])
    for kgr in (KeyGroupRange(0, 20), KeyGroupRange(60, 70), KeyGroupRange(120, 127)):
        for kind in ("rocksdb", "heap"):
            storage.reads.clear()
            r = backends(kind, kgr)
            r.restore([handle], storage.read)
            got = contents(r)
            assert got == {n: e for n, e in only(expected, kgr).items() if e}
            needed = {part for kg in kgr for part, _, _ in index["groups"].get(kg, ())}
            read_parts = [p for p in storage.reads if ".parts/" in p]
            assert storage.reads[0] == handle.path
            assert len(read_parts) == len([n for n in needed if n < n_parts])
            assert len(read_parts) < n_parts / 2     # the rest of the file is never read


def test_two_halves_restore_into_one_backend(backends):
    """Scale in: the savepoints of two subtasks restored into one backend."""
    storage = DictStorage()
    handles, expected = [], {}
    for i, kgr in enumerate([KeyGroupRange(0, 63), KeyGroupRange(64, 127)]):
        b = backends("rocksdb", kgr)
        v = b.get_partitioned_state(ValueStateDescriptor("v"))
        for n in range(4000):
            key = f"k{n}"
            if assign_to_key_group(key, MAXP) in kgr:
                b.set_current_key(key)
                v.update(n)
                expected[key] = n
        handles.append(savepoint(b, storage, f"sp/op-{i}.keyed")[0])
    for kind in ("rocksdb", "heap"):
        r = backends(kind)
        r.restore(handles, storage.read)
        assert contents(r) == {"v": expected}


def test_a_small_snapshot_is_one_file(backends):
    b = backends("rocksdb", part_bytes=16 << 20)
    expected = fill(b, 50)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    assert list(storage.files) == [handle.path]
    r = backends("heap")
    r.restore([handle], storage.read)
    assert contents(r) == expected


def test_a_moved_savepoint_finds_its_parts(backends):
    b = backends("rocksdb")
    expected = fill(b, 1000)
    storage = DictStorage()
    handle, _ = savepoint(b, storage, "/old/place/savepoint-1/op-0.keyed")
    moved = DictStorage()
    for path, data in storage.files.items():
        moved.files[path.replace("/old/place/", "/new/")] = data
    r = backends("rocksdb")
    r.restore([KeyedStateHandle("/new/savepoint-1/op-0.keyed", FULL, handle.size)], moved.read)
    assert contents(r) == expected


def test_checksums_of_the_task_cover_the_index_and_the_index_covers_the_parts(backends):
    """As a task writes and restores: the recorder checks the handle's file; the parts
    are checked against the sizes and CRC-32s in the index."""
    b = backends("rocksdb")
    expected = fill(b, 1000)
    storage = DictStorage()
    recorder = ChecksumRecorder()
    handle = b.snapshot(1, savepoint=True).write(recorder.recording(storage.write_file),
                                                 "chk-1/op-0.keyed")
    expected_sums = recorder.for_paths([handle.path])
    r = backends("heap")
    r.restore([handle], verifying_reader(storage.read, expected_sums))
    assert contents(r) == expected
    part = next(p for p in storage.files if ".parts/" in p)
    damaged = bytearray(storage.files[part])
    damaged[len(damaged) // 2] ^= 0xFF
    storage.files[part] = bytes(damaged)
    with pytest.raises(CorruptedStateError, match=part.replace(".", r"\.")):
        backends("rocksdb").restore([handle], verifying_reader(storage.read, expected_sums))


def test_a_missing_part_fails_naming_it(backends):
    b = backends("rocksdb")
    fill(b, 1000)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    part = sorted(p for p in storage.files if ".parts/" in p)[0]
    del storage.files[part]
    with pytest.raises(KeyError, match=part):
        backends("heap").restore([handle], storage.read)


# ---------------------------------------------------------------------------------------
# the earlier format
# ---------------------------------------------------------------------------------------

def v1_file(pickled_values):
    """A ``flowray-heap-v1`` file as the RocksDB writer (values as their pickles) or the
    heap backend wrote it before v2."""
    groups = {}
    expected = {"v": {}, "l": {}}
    for i in range(400):
        key = f"old-{i}"
        kg = assign_to_key_group(key, MAXP)
        expected["v"][key] = i
        value = pickle.dumps(i, protocol=5) if pickled_values else i
        groups.setdefault(kg, {}).setdefault("v", {})[key] = value
        if i % 4 == 0:
            expected["l"][key] = [i, i]
            lst = pickle.dumps([i, i], protocol=5) if pickled_values else [i, i]
            groups[kg].setdefault("l", {})[key] = lst
    data = {"format": FORMAT_V1, "kinds": {"v": "value", "l": "list"}, "groups": groups}
    if pickled_values:
        data["values"] = PICKLED_VALUES
    return pickle.dumps(data, protocol=5), expected


@pytest.mark.parametrize("pickled_values", [True, False], ids=["from-rocksdb", "from-heap"])
@pytest.mark.parametrize("target", ["rocksdb", "heap"])
def test_the_v1_format_still_restores(backends, pickled_values, target):
    data, expected = v1_file(pickled_values)
    storage = DictStorage()
    storage.files["chk-3/op-0.keyed"] = data
    handle = KeyedStateHandle("chk-3/op-0.keyed", FULL, len(data))
    r = backends(target)
    r.restore([handle], storage.read)
    assert contents(r) == expected
    half = KeyGroupRange(0, 63)
    r2 = backends(target, half)
    r2.restore([handle], storage.read)
    assert contents(r2) == only(expected, half)


def test_the_heap_still_writes_v1_and_rocksdb_reads_it(backends):
    b = backends("heap")
    expected = fill(b, 300)
    storage = DictStorage()
    handle = b.snapshot(1).write(storage.write_file, "chk-1/op-0.keyed")
    assert pickle.loads(storage.files[handle.path])["format"] == FORMAT_V1
    r = backends("rocksdb")
    r.restore([handle], storage.read)
    assert contents(r) == expected


def test_an_unknown_format_is_named(backends):
    storage = DictStorage()
    storage.files["x.keyed"] = pickle.dumps({"format": "flowray-keyed-v9"})
    for kind in ("rocksdb", "heap"):
        with pytest.raises(ValueError, match="x.keyed.*flowray-keyed-v9"):
            backends(kind).restore([KeyedStateHandle("x.keyed", FULL, 1)], storage.read)


# ---------------------------------------------------------------------------------------
# bounded memory
# ---------------------------------------------------------------------------------------

class CountingFeed:
    """Entries ``(key group, state, key, value, size)`` handed out one at a time, counted;
    ``per_group`` entries in each of ``groups`` key groups."""

    def __init__(self, groups, per_group, value_bytes=100):
        self.groups, self.per_group, self.value_bytes = groups, per_group, value_bytes
        self.handed_out = 0

    def __iter__(self):
        for kg in range(self.groups):
            for i in range(self.per_group):
                self.handed_out += 1
                value = bytes([i % 256]) * self.value_bytes
                yield kg, "v", f"k{kg}-{i}", value, self.value_bytes + 8


class PartCounter:
    """``write_file`` that checks, at every part written, how many entries the writer
    holds (handed out by the feed and not yet in a written part)."""

    def __init__(self, feed):
        self.feed = feed
        self.files = {}
        self.entries_written = 0
        self.held_at_writes = []

    def __call__(self, path, data):
        self.files[path] = bytes(data)
        if ".parts/" in path:
            self.entries_written += sum(len(flat) // 2 for _, _, flat in _records(data))
            self.held_at_writes.append(self.feed.handed_out - self.entries_written)
        return len(data)


def _records(data):
    pos = 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 8], "big")
        yield pickle.loads(data[pos + 8:pos + 8 + n])
        pos += 8 + n


def test_the_writer_holds_at_most_one_key_group_when_parts_are_small():
    """Parts smaller than a key group: each key group goes out on its own, the writer
    never holds more than one key group's entries."""
    feed = CountingFeed(groups=50, per_group=40)
    out = PartCounter(feed)
    w = StreamedSnapshotWriter(out, "chk-1/op.keyed", {"v": "value"}, pickled_values=True,
                               part_bytes=1, record_bytes=1 << 20)
    for entry in feed:
        w.add(*entry)
    assert w.finish() == sum(len(d) for d in out.files.values())
    assert w.stats.entries == 2000
    assert w.stats.peak_buffered_entries <= feed.per_group
    assert w.stats.parts_written == 50               # one per key group; the tail is empty
    assert max(out.held_at_writes) <= feed.per_group


def test_the_writer_holds_at_most_a_fixed_buffer_whatever_the_state_size():
    """A key group much larger than a part: the writer holds one part and one record."""
    record_bytes, part_bytes = 2048, 8192
    for groups, per_group in ((4, 500), (4, 5000)):        # 10x the state, same bound
        feed = CountingFeed(groups, per_group)
        out = PartCounter(feed)
        w = StreamedSnapshotWriter(out, "chk-1/op.keyed", {"v": "value"},
                                   pickled_values=True, part_bytes=part_bytes,
                                   record_bytes=record_bytes)
        for entry in feed:
            w.add(*entry)
        w.finish()
        entry_bytes = feed.value_bytes + 8
        bound = (part_bytes + record_bytes) // entry_bytes + 2
        assert w.stats.peak_buffered_entries <= bound
        assert max(out.held_at_writes) <= bound
        assert w.stats.peak_buffered_bytes <= part_bytes + 2 * record_bytes
        reader = open_full_snapshot("chk-1/op.keyed", out.files.__getitem__)
        got = [(kg, k) for kg, _, entries in reader.records(range(groups)) for k, _ in entries]
        assert got == [(kg, f"k{kg}-{i}") for kg in range(groups) for i in range(per_group)]


def test_the_rocksdb_writer_streams_in_bounded_memory(backends):
    b = backends("rocksdb", part_bytes=PART_BYTES)
    fill(b)
    storage = DictStorage()
    _, writer = savepoint(b, storage)
    stats = writer.stats
    assert stats.entries == sum(1 for n in ("v", "l", "m") for _ in b.get_keys(n))
    assert stats.parts_written > 10
    assert stats.peak_buffered_bytes <= PART_BYTES + 2 * writer.record_bytes
    assert stats.peak_buffered_entries < stats.entries / 10


def test_key_groups_must_ascend():
    w = StreamedSnapshotWriter(lambda p, d: len(d), "x", {"v": "value"}, pickled_values=False)
    w.add(5, "v", "a", 1, 10)
    with pytest.raises(ValueError, match="key group 4 after key group 5"):
        w.add(4, "v", "b", 1, 10)


def test_an_empty_snapshot_writes_nothing():
    files = {}
    w = StreamedSnapshotWriter(lambda p, d: files.setdefault(p, d) and len(d), "x",
                               {"v": "value"}, pickled_values=True)
    assert w.finish() is None and files == {}


def test_a_failed_write_removes_the_local_checkpoint_and_the_backend_goes_on(backends, tmp_path):
    b = backends("rocksdb")
    expected = fill(b, 1000)
    writes = []

    def failing(path, data):
        writes.append(path)
        if len(writes) == 3:
            raise OSError("storage is gone")
        return len(data)

    writer = b.snapshot(1)
    with pytest.raises(OSError, match="storage is gone"):
        writer.write(failing, "chk-1/op-0.keyed")
    assert list((tmp_path / "rocks-0" / "snapshots").iterdir()) == []
    storage = DictStorage()
    handle = b.snapshot(2).write(storage.write_file, "chk-2/op-0.keyed")
    r = backends("heap")
    r.restore([handle], storage.read)
    assert contents(r) == expected
