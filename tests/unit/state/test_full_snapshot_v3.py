"""``flowray-keyed-v3``: RocksDB writes full snapshots and savepoints with keys and values
as it stores them (no key or value decoded on the way out), both backends restore them at
any parallelism, and snapshots of the writer before (v2) still restore."""

import datetime
import decimal
import pickle

import pytest

import flowray.state.rocksdb.snapshot_writers as snapshot_writers
from flowray.state.checksums import CorruptedStateError
from flowray.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from flowray.state.full_snapshot import (
    FORMAT_V2,
    FORMAT_V3,
    RawSnapshotWriter,
    open_full_snapshot,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.rocksdb.layout import encode_key
from flowray.state.snapshot import KeyedStateHandle
from flowray.state.value_codec import decode_value, encode_value
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)


@pytest.fixture
def backends(tmp_path):
    made = []

    def make(kind, kgr=FULL, part_bytes=4096, maxp=MAXP):
        if kind == "heap":
            b = HeapKeyedStateBackend(kgr, maxp)
        else:
            b = RocksDBKeyedStateBackend(kgr, maxp, tmp_path / f"rocks-{len(made)}",
                                         snapshot_part_bytes=part_bytes)
        made.append(b)
        return b

    yield make
    for b in made:
        b.dispose()


#: keys of every kind a key can be, and strings around the 1-byte length boundary
KEYS = ["", "a", "é-ü-\u4e2d", "x" * 123, "x" * 124, "x" * 127, "x" * 128, "y" * 300,
        0, -1, 2 ** 70, 2.5, float("nan"), None, b"\x00\xff", ("t", 1, None, (b"z", 2.5)),
        datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 2, 3, 4, 5),
        decimal.Decimal("1.25")] + [f"user-{i}" for i in range(2000)]


def fill(b, keys=KEYS):
    """Value, list and map state of ``keys``; the expected contents (by encoded key, so
    NaN compares equal)."""
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    expected = {"v": {}, "l": {}, "m": {}}
    for i, key in enumerate(keys):
        b.set_current_key(key)
        v.update((i, str(key)))
        expected["v"][encode_key(key)] = (i, str(key))
        if i % 2:
            lst.add_all([i, "x" * (i % 40)])
            expected["l"][encode_key(key)] = [i, "x" * (i % 40)]
        if i % 3 == 0:
            m.put("n", i)
            expected["m"][encode_key(key)] = {"n": i}
    return expected


def contents(b):
    """Every state's ``{encoded key: value}`` (a NaN key is the same encoded key)."""
    out = {}
    for name in b.state_names():
        d = {}
        for kg in b.key_group_range:
            d.update((encode_key(k), v) for k, v in b.iter_key_group(name, kg))
        out[name] = d
    return out


def only(expected, kgr, maxp=MAXP):
    return {name: {k: v for k, v in entries.items()
                   if assign_to_key_group(_decoded(k), maxp) in kgr}
            for name, entries in expected.items()}


def _decoded(encoded):
    from flowray.state.rocksdb.layout import decode_key
    return decode_key(encoded)


def savepoint(b, storage, path="sp/op-0.keyed", version=None):
    writer = b.snapshot(1, savepoint=True)
    if version is not None:
        writer.format_version = version
    return writer.write(storage.write_file, path), writer


def records(storage, handle):
    """Every v3 record of the snapshot as stored: (kg, state, keys, values)."""
    reader = open_full_snapshot(handle.path, storage.read)
    return list(reader.raw_records(range(1 << 15)))


# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------

def test_rocksdb_writes_v3_with_keys_and_values_as_stored(backends):
    b = backends("rocksdb")
    fill(b)
    storage = DictStorage()
    handle, writer = savepoint(b, storage)
    index = pickle.loads(storage.files[handle.path])
    assert index["format"] == FORMAT_V3
    stored = {}
    for kg, state, keys, values in records(storage, handle):
        assert all(k[:2] == kg.to_bytes(2, "big") for k in keys)
        stored.setdefault(state, {}).update(zip(keys, values))
    for state in ("v", "l", "m"):
        cf = b._cfs[state]
        assert stored[state] == dict(cf.items())    # byte for byte what RocksDB holds
    assert writer.stats.entries == sum(len(d) for d in stored.values())


def test_writing_decodes_no_key_and_no_value(backends, monkeypatch):
    b = backends("rocksdb")
    expected = fill(b)

    def refuse(*args):
        raise AssertionError("decoded while writing a v3 snapshot")

    monkeypatch.setattr(snapshot_writers, "decode_key", refuse)
    monkeypatch.setattr(snapshot_writers, "decode_value", refuse)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    monkeypatch.undo()
    r = backends("heap")
    r.restore([handle], storage.read)
    assert contents(r) == expected


def test_records_come_key_group_by_key_group_and_hold_about_record_bytes(backends):
    b = backends("rocksdb", part_bytes=1 << 20)
    fill(b)
    storage = DictStorage()
    writer = b.snapshot(1, savepoint=True)
    writer.record_bytes = 2048
    handle = writer.write(storage.write_file, "sp/op-0.keyed")
    recs = records(storage, handle)
    groups = [kg for kg, _, _, _ in recs]
    assert groups == sorted(groups)
    # a key group's records are consecutive, states in registration order within it
    for kg in set(groups):
        states = [s for g, s, _, _ in recs if g == kg]
        assert states == sorted(states, key=["v", "l", "m"].index)
    sizes = [sum(map(len, keys)) + sum(map(len, values)) for _, _, keys, values in recs]
    assert max(sizes) <= 2 * 2048
    index = pickle.loads(storage.files[handle.path])
    assert all(len(spans) == 1 for spans in index["groups"].values())


def test_large_values_are_read_a_few_at_a_time(backends):
    b = backends("rocksdb", part_bytes=4096)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for i in range(200):
        b.set_current_key(i)
        v.update(bytes([i]) * 20_000)
    storage = DictStorage()
    handle, writer = savepoint(b, storage)
    assert all(len(keys) == 1 for _, _, keys, _ in records(storage, handle))
    assert writer.stats.peak_buffered_bytes <= 4096 + 20_100
    r = backends("heap")
    r.restore([handle], storage.read)
    assert sorted(k for k, _ in r.iter_key_group("v", assign_to_key_group(7, MAXP))) \
        == sorted(i for i in range(200) if assign_to_key_group(i, MAXP)
                  == assign_to_key_group(7, MAXP))


def test_an_empty_v3_snapshot_writes_nothing(backends):
    files = {}
    w = RawSnapshotWriter(lambda p, d: files.setdefault(p, d) and len(d), "x", {"v": "value"})
    w.add_run(3, "v", [], [], 0)
    assert w.finish() is None and files == {}
    b = backends("rocksdb")
    b.get_partitioned_state(ValueStateDescriptor("v"))     # registered, no entry
    assert savepoint(b, DictStorage())[0] is None


def test_key_groups_must_ascend_in_v3():
    w = RawSnapshotWriter(lambda p, d: len(d), "x", {"v": "value"})
    w.add_run(5, "v", [b"\x00\x05k"], [b"v"], 4)
    with pytest.raises(ValueError, match="key group 4 after key group 5"):
        w.add_run(4, "v", [b"\x00\x04k"], [b"v"], 4)


# ---------------------------------------------------------------------------------------
# restoring
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["rocksdb", "heap"])
def test_every_key_type_restores_into_either_backend_at_any_parallelism(backends, target):
    b = backends("rocksdb")
    expected = fill(b)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    r = backends(target)
    r.restore([handle], storage.read)
    assert contents(r) == expected
    for kgr in (KeyGroupRange(0, 42), KeyGroupRange(43, 127)):
        part = backends(target, kgr)
        part.restore([handle], storage.read)
        assert contents(part) == {n: e for n, e in only(expected, kgr).items() if e}


@pytest.mark.parametrize("odd", ["\ud800-lone-surrogate", "z" * 127, "z" * 128, ""])
def test_records_of_strings_only_restore_into_the_heap(backends, odd):
    """The heap decodes a record of short strings at once; one odd string (a lone
    surrogate, 127/128 bytes, empty) among them still restores exactly."""
    b = backends("rocksdb")
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    keys = [f"s{i}" for i in range(3000)] + [odd]
    for i, key in enumerate(keys):
        b.set_current_key(key)
        v.update(i)
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    r = backends("heap")
    r.restore([handle], storage.read)
    assert {k: x for kg in FULL for k, x in r.iter_key_group("v", kg)} == {
        k: i for i, k in enumerate(keys)}


def test_values_read_back_with_the_value_codec(backends):
    b = backends("rocksdb")
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key("k")
    v.update({"nested": [1, 2.5, None]})
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    [(_, _, _, values)] = records(storage, handle)
    assert decode_value(values[0]) == {"nested": [1, 2.5, None]}
    assert values[0] == encode_value({"nested": [1, 2.5, None]})


def test_key_groups_past_255_keep_their_ranges(backends):
    """Both bytes of the key-group prefix matter (max parallelism 4096)."""
    maxp = 4096
    b = backends("rocksdb", KeyGroupRange(0, maxp - 1), maxp=maxp)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    expected = {}
    for i in range(3000):
        b.set_current_key(f"k{i}")
        v.update(i)
        expected[f"k{i}"] = i
    storage = DictStorage()
    handle, _ = savepoint(b, storage)
    assert max(kg for kg, _, _, _ in records(storage, handle)) > 3000
    for kgr in (KeyGroupRange(0, 299), KeyGroupRange(300, 2047), KeyGroupRange(2048, 4095)):
        for kind in ("rocksdb", "heap"):
            r = backends(kind, kgr, maxp=maxp)
            r.restore([handle], storage.read)
            got = {k: x for kg in kgr for k, x in r.iter_key_group("v", kg)}
            assert got == {k: x for k, x in expected.items()
                           if assign_to_key_group(k, maxp) in kgr}


def test_a_record_with_keys_of_another_key_group_fails_naming_the_file(backends):
    storage = DictStorage()
    w = RawSnapshotWriter(storage.write_file, "sp/op-0.keyed", {"v": "value"})
    w.add_run(3, "v", [b"\x00\x03" + encode_key("a"), b"\x00\x04" + encode_key("b")],
              [encode_value(1), encode_value(2)], 10)
    w.finish()
    handle = KeyedStateHandle("sp/op-0.keyed", FULL, 1)
    for kind in ("rocksdb", "heap"):
        with pytest.raises(CorruptedStateError, match="sp/op-0.keyed.*key group 3"):
            backends(kind).restore([handle], storage.read)


def test_a_v3_snapshot_with_unknown_keys_is_named(backends):
    storage = DictStorage()
    storage.files["x.keyed"] = pickle.dumps({"format": FORMAT_V3, "kinds": {}, "keys": "utf8",
                                             "parts": [], "tail": b"", "groups": {}})
    with pytest.raises(ValueError, match="x.keyed.*'utf8'"):
        backends("heap").restore([KeyedStateHandle("x.keyed", FULL, 1)], storage.read)


# ---------------------------------------------------------------------------------------
# the writer before v3
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["rocksdb", "heap"])
def test_v2_snapshots_of_the_writer_before_still_restore(backends, target):
    b = backends("rocksdb")
    expected = fill(b)
    storage = DictStorage()
    handle, _ = savepoint(b, storage, version=2)
    assert pickle.loads(storage.files[handle.path])["format"] == FORMAT_V2
    r = backends(target)
    r.restore([handle], storage.read)
    assert contents(r) == expected
    half = KeyGroupRange(64, 127)
    r2 = backends(target, half)
    r2.restore([handle], storage.read)
    assert contents(r2) == {n: e for n, e in only(expected, half).items() if e}


def test_v2_and_v3_halves_restore_into_one_backend(backends):
    """Scale in across the format change: one subtask's savepoint v2, the other's v3."""
    storage = DictStorage()
    handles, expected = [], {}
    for i, kgr in enumerate([KeyGroupRange(0, 63), KeyGroupRange(64, 127)]):
        b = backends("rocksdb", kgr)
        v = b.get_partitioned_state(ValueStateDescriptor("v"))
        for n in range(3000):
            key = (f"k{n}", n)
            if assign_to_key_group(key, MAXP) in kgr:
                b.set_current_key(key)
                v.update(n)
                expected[key] = n
        handles.append(savepoint(b, storage, f"sp/op-{i}.keyed", version=2 + i)[0])
    for kind in ("rocksdb", "heap"):
        r = backends(kind)
        r.restore(handles, storage.read)
        assert {k: x for kg in FULL for k, x in r.iter_key_group("v", kg)} == expected


def test_an_unknown_writer_version_is_refused(backends):
    with pytest.raises(ValueError, match="format_version must be 2 or 3, got 4"):
        snapshot_writers.RocksDBFullSnapshotWriter(None, {}, FULL, format_version=4)
