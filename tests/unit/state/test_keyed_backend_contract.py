"""The keyed-state backend contract, run against every backend (heap and RocksDB):
state semantics, key-group bookkeeping, snapshots, restore and rescaling, and moving state
between backends through the shared full-snapshot format."""

import os
import threading

import pytest

from flowray.state.keyed_backend import StateAccessError
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.key_types import identity_form
from flowray.state.rocksdb.layout import decode_key, encode_key
from flowray.state.snapshot import KeyedStateHandle
from tests.support.functions import Average, Max
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
KEYS = ["alice", "bob", ("carol", 3), 17, None, b"raw", 2.5, -(10 ** 30), "é\u2603", ()]
#: "heap-namespace-first": the heap with its map states kept namespace first (the window
#: operator's panes), map keys being the namespaces: the same contract
BACKENDS = ["heap", "heap-namespace-first", "rocksdb"]


class NamespaceFirstMaps(HeapKeyedStateBackend):
    """The heap backend with every map state in a ``NamespaceFirstTable``."""

    def get_state_table(self, name, kind):
        if kind is StateKind.MAP and name not in self._tables:
            return self.namespace_first_table(name)
        return super().get_state_table(name, kind)


class Factory:
    """Creates backends of one kind and disposes them at the end of the test."""

    def __init__(self, kind, tmp_path):
        self.kind = kind
        self.tmp_path = tmp_path
        self.created = []

    def __call__(self, key_group_range=FULL, kind=None):
        kind = kind or self.kind
        if kind == "heap":
            b = HeapKeyedStateBackend(key_group_range, MAXP)
        elif kind == "heap-namespace-first":
            b = NamespaceFirstMaps(key_group_range, MAXP)
        else:
            b = RocksDBKeyedStateBackend(key_group_range, MAXP,
                                         self.tmp_path / f"rocks-{len(self.created)}")
        self.created.append(b)
        return b

    def close(self):
        for b in self.created:
            b.dispose()


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    f = Factory(request.param, tmp_path)
    yield f
    f.close()


@pytest.fixture
def backend(make):
    return make()


def take(backend, storage, cid=1, name="keyed"):
    return backend.snapshot(cid).write(storage.write_file, f"chk-{cid}/{name}")


def keys_in(kgr, n, prefix="k"):
    out = []
    for i in range(100_000):
        k = f"{prefix}{i}"
        if assign_to_key_group(k, MAXP) in kgr:
            out.append(k)
            if len(out) == n:
                return out
    raise AssertionError("not enough keys")


def key_in_group(pred):
    for i in range(100_000):
        k = f"key-{i}"
        if pred(assign_to_key_group(k, MAXP)):
            return k
    raise AssertionError("no key found")


# ---------------------------------------------------------------------------------------
# state semantics
# ---------------------------------------------------------------------------------------

def test_value_state(backend):
    total = backend.get_partitioned_state(ValueStateDescriptor("total"))
    for i, k in enumerate(KEYS):
        backend.set_current_key(k)
        assert total.value() is None
        total.update(i * 10)
    for i, k in enumerate(KEYS):
        backend.set_current_key(k)
        assert backend.get_current_key() == k
        assert backend.get_current_key_group() == assign_to_key_group(k, MAXP)
        assert total.value() == i * 10
    backend.set_current_key("bob")
    total.clear()
    assert total.value() is None
    total.clear()  # clearing nothing is fine
    backend.set_current_key("alice")
    assert total.value() == 0  # a falsy value is a value
    total.update(None)  # None clears, as in Flink
    assert total.value() is None
    assert sorted(map(repr, backend.get_keys("total"))) == \
        sorted(repr(k) for k in KEYS if k not in ("alice", "bob"))


def test_value_state_holds_any_picklable_object(backend):
    v = backend.get_partitioned_state(ValueStateDescriptor("v"))
    backend.set_current_key("k")
    obj = {"nested": [1, (2, 3)], "s": {4}}
    v.update(obj)
    assert v.value() == obj
    v.update(Average())  # an instance of a class defined in the tests' own code
    assert isinstance(v.value(), Average)


def test_list_state(backend):
    events = backend.get_partitioned_state(ListStateDescriptor("events"))
    backend.set_current_key("a")
    assert list(events.get()) == []
    events.add(1)
    events.add_all([2, 3])
    events.add_all([])
    backend.set_current_key("b")
    events.add("x")
    backend.set_current_key("a")
    got = events.get()
    assert list(got) == [1, 2, 3] and list(events) == [1, 2, 3]
    got.append(99)  # a copy: mutating it does not change the state
    assert list(events.get()) == [1, 2, 3]
    with pytest.raises(ValueError, match="events"):
        events.add(None)
    events.update([7])
    assert list(events.get()) == [7]
    events.update([])
    assert list(events.get()) == []
    assert list(backend.get_keys("events")) == ["b"]
    backend.set_current_key("b")
    assert list(events.get()) == ["x"]
    events.clear()
    assert list(events.get()) == []


def test_map_state(backend):
    m = backend.get_partitioned_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    assert m.is_empty() and m.get("x") is None and not m.contains("x")
    assert m.items() == [] and m.keys() == [] and m.values() == []
    m.put("x", 1)
    m.put_all({"y": 2, "z": 3})
    m.put_all({})
    backend.set_current_key("b")
    assert m.is_empty()
    m.put("x", 100)
    backend.set_current_key("a")
    assert m.get("x") == 1 and "y" in m and m.contains("z") and "w" not in m
    assert sorted(m.keys()) == ["x", "y", "z"] and sorted(m) == ["x", "y", "z"]
    assert sorted(m.values()) == [1, 2, 3]
    assert sorted(m.items()) == [("x", 1), ("y", 2), ("z", 3)]
    m.put("x", 10)  # overwrite
    assert m.get("x") == 10
    m.remove("y")
    m.remove("not there")
    assert sorted(m.keys()) == ["x", "z"]
    m.remove("x")
    m.remove("z")
    assert m.is_empty()
    assert list(backend.get_keys("m")) == ["b"]  # an emptied map leaves no key behind
    backend.set_current_key("b")
    assert m.items() == [("x", 100)]
    m.clear()
    assert m.is_empty() and list(backend.get_keys("m")) == []


@pytest.mark.parametrize("reduce_fn", [lambda a, b: a + b, Max()], ids=["lambda", "object"])
def test_reducing_state(backend, reduce_fn):
    r = backend.get_partitioned_state(ReducingStateDescriptor("r", reduce_fn))
    values = {"a": [5, 1, 7], "b": [2, 9]}
    for k, vs in values.items():
        backend.set_current_key(k)
        assert r.get() is None
        for v in vs:
            r.add(v)
    expected = {"a": 13, "b": 11} if not isinstance(reduce_fn, Max) else {"a": 7, "b": 9}
    for k, want in expected.items():
        backend.set_current_key(k)
        assert r.get() == want
    r.clear()
    assert r.get() is None
    backend.set_current_key("a")
    assert r.get() == expected["a"]


def test_aggregating_state(backend):
    avg = backend.get_partitioned_state(AggregatingStateDescriptor("avg", Average()))
    backend.set_current_key("a")
    assert avg.get() is None
    for v in (1, 2, 3, 6):
        avg.add(v)
    backend.set_current_key("b")
    avg.add(10)
    backend.set_current_key("a")
    assert avg.get() == 3.0
    backend.set_current_key("b")
    assert avg.get() == 10.0
    avg.clear()
    assert avg.get() is None
    # the stored value is the accumulator
    assert dict(backend.iter_key_group("avg", assign_to_key_group("a", MAXP)))["a"] == (12, 4)


def test_same_name_returns_same_state_object(backend):
    s1 = backend.get_partitioned_state(ValueStateDescriptor("v"))
    s2 = backend.get_partitioned_state(ValueStateDescriptor("v"))
    assert s1 is s2
    assert backend.state_names() == ["v"]


def test_states_are_independent(backend):
    a = backend.get_partitioned_state(ValueStateDescriptor("a"))
    b = backend.get_partitioned_state(ValueStateDescriptor("b"))
    backend.set_current_key("k")
    a.update(1)
    assert b.value() is None
    b.update(2)
    assert (a.value(), b.value()) == (1, 2)
    assert sorted(backend.state_names()) == ["a", "b"]


@pytest.mark.parametrize("first,second", [
    (ValueStateDescriptor("count"), ListStateDescriptor("count")),
    (ListStateDescriptor("count"), MapStateDescriptor("count")),
    (MapStateDescriptor("count"), ValueStateDescriptor("count")),
    (ReducingStateDescriptor("count", lambda a, b: a), AggregatingStateDescriptor("count", Average())),
    (AggregatingStateDescriptor("count", Average()), ValueStateDescriptor("count")),
])
def test_wrong_state_kind_for_existing_name_raises(backend, first, second):
    backend.get_partitioned_state(first)
    with pytest.raises(StateAccessError) as info:
        backend.get_partitioned_state(second)
    text = str(info.value)
    assert "'count'" in text
    assert first.kind.value in text and second.kind.value in text


def test_not_a_descriptor_raises_type_error(backend):
    with pytest.raises(TypeError):
        backend.get_partitioned_state("count")


def test_key_outside_key_group_range_raises(make):
    b = make(KeyGroupRange(0, 63))
    inside = key_in_group(lambda kg: kg <= 63)
    outside = key_in_group(lambda kg: kg >= 64)
    b.set_current_key(inside)
    state = b.get_partitioned_state(ValueStateDescriptor("v"))
    state.update(1)
    with pytest.raises(StateAccessError) as info:
        b.set_current_key(outside)
    text = str(info.value)
    assert repr(outside) in text and str(assign_to_key_group(outside, MAXP)) in text
    assert "[0, 63]" in text
    with pytest.raises(StateAccessError):
        b.set_current_key(inside, 64)
    with pytest.raises(StateAccessError):
        b.set_current_key(inside, -1)
    # the failed calls did not change the current key
    assert b.get_current_key() == inside and state.value() == 1


def test_explicit_key_group_is_used_as_given(make):
    b = make(KeyGroupRange(10, 20))
    s = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key("k", 15)
    assert b.get_current_key_group() == 15
    s.update("x")
    assert list(b.iter_key_group("v", 15)) == [("k", "x")]
    b.set_current_key("k", 16)  # same key, other group: another entry
    assert s.value() is None


def test_iter_key_group_and_get_keys(make):
    kgr = KeyGroupRange(32, 95)
    b = make(kgr)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    keys = keys_in(kgr, 300)
    for i, k in enumerate(keys):
        b.set_current_key(k)
        v.update(i)
        if i % 2:
            lst.add(i)
    by_group = {}
    for i, k in enumerate(keys):
        by_group.setdefault(assign_to_key_group(k, MAXP), {})[k] = i
    for kg in kgr:
        assert dict(b.iter_key_group("v", kg)) == by_group.get(kg, {})
    assert sorted(b.get_keys("v")) == sorted(keys)
    assert sorted(b.get_keys("l")) == sorted(keys[1::2])
    kg1 = assign_to_key_group(keys[1], MAXP)
    assert (keys[1], [1]) in list(b.iter_key_group("l", kg1))
    assert list(b.iter_key_group("v", 0)) == []     # outside the range
    assert list(b.iter_key_group("nope", 40)) == []  # unknown state
    assert list(b.get_keys("nope")) == []
    assert sorted(b.state_names()) == ["l", "v"]
    # iter_key_group is a snapshot: changing state while iterating is safe
    kg = assign_to_key_group(keys[0], MAXP)
    for k, _ in b.iter_key_group("v", kg):
        b.set_current_key(k)
        v.clear()
    assert list(b.iter_key_group("v", kg)) == []


def test_dispose_drops_all_state(backend):
    backend.set_current_key("a")
    backend.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    backend.dispose()
    assert backend.state_names() == []
    assert list(backend.get_keys("v")) == []
    backend.dispose()  # idempotent


# ---------------------------------------------------------------------------------------
# snapshots and restore
# ---------------------------------------------------------------------------------------

def fill(b, keys):
    """One state of every kind for ``keys``; returns the expected contents by state."""
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("agg", Average()))
    for i, k in enumerate(keys):
        b.set_current_key(k)
        v.update(("v", i))
        lst.add_all([i, i + 1])
        m.put("i", i)
        m.put(("j", 2), -i)
        r.add(i)
        r.add(1)
        agg.add(i)
    return {
        "v": {k: ("v", i) for i, k in enumerate(keys)},
        "l": {k: [i, i + 1] for i, k in enumerate(keys)},
        "m": {k: {"i": i, ("j", 2): -i} for i, k in enumerate(keys)},
        "r": {k: i + 1 for i, k in enumerate(keys)},
        "agg": {k: (i, 1) for i, k in enumerate(keys)},
    }


def contents(b, kgr=None):
    """Every state as ``{name: {key: stored value}}`` (through iter_key_group)."""
    out = {}
    for name in b.state_names():
        d = {}
        for kg in (kgr or b.key_group_range):
            d.update(b.iter_key_group(name, kg))
        out[name] = d
    return out


def check_states(b, expected):
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c))
    agg = b.get_partitioned_state(AggregatingStateDescriptor("agg", Average()))
    for k in expected["v"]:
        b.set_current_key(k)
        assert v.value() == expected["v"][k]
        assert lst.get() == expected["l"][k]
        assert m.items() == list(expected["m"][k].items())
        assert r.get() == expected["r"][k]
        assert agg.get() == expected["agg"][k][0] / expected["agg"][k][1]


def test_snapshot_restore_round_trip(make):
    b = make()
    keys = keys_in(FULL, 200) + [k for k in KEYS if k is not None]
    expected = fill(b, keys)
    storage = DictStorage()
    handle = take(b, storage)
    assert isinstance(handle, KeyedStateHandle)
    # the handle's size is what it wrote: one file, or a folder of them (RocksDB's native
    # checkpoint)
    written = {p: d for p, d in storage.files.items()
               if p == handle.path or p.startswith(handle.path + "/")}
    assert handle.key_group_range == FULL and handle.size == sum(map(len, written.values()))
    r = make()
    r.restore([handle], storage.read)
    assert sorted(r.state_names()) == sorted(expected)
    assert contents(r) == contents(b) == expected
    check_states(r, expected)
    # the restored backend is live: it can change and snapshot again
    r.set_current_key(keys[0])
    r.get_partitioned_state(ValueStateDescriptor("v")).update("new")
    h2 = take(r, storage, cid=2)
    r2 = make()
    r2.restore([h2], storage.read)
    r2.set_current_key(keys[0])
    assert r2.get_partitioned_state(ValueStateDescriptor("v")).value() == "new"


def test_empty_backend_snapshot_is_none(make):
    b = make()
    storage = DictStorage()
    assert take(b, storage) is None
    b.get_partitioned_state(ValueStateDescriptor("v"))  # registered but empty
    assert take(b, storage, cid=2) is None
    assert storage.files == {}
    r = make()
    r.restore([None], storage.read)
    assert list(r.get_keys("v")) == []


def test_snapshot_is_isolated_from_later_changes(make):
    b = make()
    keys = keys_in(FULL, 50)
    expected = fill(b, keys)
    writer = b.snapshot(7)
    # change everything after the synchronous part
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    for k in keys[:25]:
        b.set_current_key(k)
        v.update("changed")
        lst.add("more")
        m.put("new", 1)
    for k in keys[25:]:
        b.set_current_key(k)
        v.clear()
    b.set_current_key("brand-new")
    v.update(1)
    b.get_partitioned_state(ValueStateDescriptor("late"))
    storage = DictStorage()
    result = {}
    # the asynchronous part runs in another thread, as in a task
    t = threading.Thread(target=lambda: result.update(h=writer.write(storage.write_file, "x")))
    t.start()
    t.join()
    r = make()
    r.restore([result["h"]], storage.read)
    assert contents(r) == expected
    assert "late" not in r.state_names()


def test_restore_into_narrower_range_keeps_only_its_key_groups(make):
    b = make()
    keys = keys_in(FULL, 300)
    expected = fill(b, keys)
    storage = DictStorage()
    handle = take(b, storage)
    halves = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]
    seen = {}
    for kgr in halves:
        r = make(kgr)
        r.restore([handle], storage.read)
        got = contents(r)
        for name, entries in got.items():
            assert all(assign_to_key_group(k, MAXP) in kgr for k in entries)
            assert sorted(r.get_keys(name)) == sorted(entries)
            seen.setdefault(name, {}).update(entries)
    assert seen == expected


def test_restore_merges_several_handles(make):
    """Scale in: two subtasks' snapshots restored into one backend."""
    storage = DictStorage()
    handles, expected = [], {}
    for i, kgr in enumerate([KeyGroupRange(0, 63), KeyGroupRange(64, 127)]):
        b = make(kgr)
        exp = fill(b, keys_in(kgr, 40, prefix=f"p{i}-"))
        for name, entries in exp.items():
            expected.setdefault(name, {}).update(entries)
        handles.append(take(b, storage, name=f"sub{i}"))
    r = make()
    r.restore(handles + [None], storage.read)
    assert contents(r) == expected


def test_restore_rejects_foreign_files(make):
    storage = DictStorage()
    storage.files["bad"] = b"not a pickle"
    with pytest.raises(ValueError, match="bad"):
        make().restore([KeyedStateHandle("bad", FULL, 12)], storage.read)


@pytest.mark.parametrize("target", BACKENDS)
def test_cross_backend_restore(make, target):
    """State moves between backends: the heap backend reads RocksDB's native checkpoints,
    RocksDB reads the heap's full snapshots."""
    b = make()
    keys = keys_in(FULL, 100) + [k for k in KEYS if k is not None]
    expected = fill(b, keys)
    storage = DictStorage()
    handle = take(b, storage)
    r = make(kind=target)
    r.restore([handle], storage.read)
    assert contents(r) == expected
    check_states(r, expected)
    # and back again, into a narrower range of the original kind
    back = make(KeyGroupRange(0, 63))
    back.restore([take(r, storage, cid=2)], storage.read)
    assert contents(back) == {n: {k: v for k, v in e.items()
                                  if assign_to_key_group(k, MAXP) <= 63}
                              for n, e in expected.items()}


def test_restore_keeps_kind_checks(make):
    b = make()
    b.set_current_key("a")
    b.get_partitioned_state(ListStateDescriptor("l")).add(1)
    storage = DictStorage()
    handle = take(b, storage)
    r = make()
    r.restore([handle], storage.read)
    with pytest.raises(StateAccessError, match="list"):
        r.get_partitioned_state(ValueStateDescriptor("l"))


# ---------------------------------------------------------------------------------------
# RocksDB specifics
# ---------------------------------------------------------------------------------------

def test_rocksdb_dispose_removes_working_dir(tmp_path):
    wd = tmp_path / "rocks"
    b = RocksDBKeyedStateBackend(FULL, MAXP, wd)
    b.set_current_key("a")
    b.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    b.snapshot(1)  # a checkpoint that is never written is deleted with the directory
    assert os.path.isdir(wd)
    b.dispose()
    assert not os.path.exists(wd)
    b.dispose()  # idempotent
    assert b.state_names() == [] and list(b.get_keys("v")) == []


def _rocksdb_values(b, keys):
    state = b.get_partitioned_state(ValueStateDescriptor("v"))
    out = {}
    for k in keys:
        b.set_current_key(k)
        out[k] = state.value()
    return out


@pytest.mark.parametrize("savepoint", [False, True])
def test_rocksdb_full_snapshot_holds_the_state_as_at_its_synchronous_part(tmp_path, savepoint):
    """What snapshot() captured is what write() writes, whatever is written, flushed or
    deleted in between (and the cached writes of the value accessor before it)."""
    b = RocksDBKeyedStateBackend(FULL, MAXP, tmp_path / "rocks")
    state = b.get_partitioned_state(ValueStateDescriptor("v"))
    keys = [f"k{i}" for i in range(2000)]
    for i, k in enumerate(keys):
        b.set_current_key(k)
        state.update(i)
    acc = b.value_accessor("v")
    acc.invalidate()
    loaded = acc.load(["cached"], [b.assign_key_group("cached")])[1]
    loaded["cached"] = 7
    acc.store(loaded)
    writer = b.snapshot(1, savepoint=savepoint)
    for i, k in enumerate(keys):  # after the barrier: overwrite, delete, add
        b.set_current_key(k)
        if i % 3:
            state.update(-i)
        else:
            state.clear()
    b.set_current_key("new")
    state.update(1)
    loaded = acc.load(["cached"], [b.assign_key_group("cached")])[1]
    loaded["cached"] = 8
    acc.store(loaded)
    acc.flush()
    b._cfs["v"].flush()
    storage = DictStorage()
    handle = writer.write(storage.write_file, "chk-1/op-0.keyed")
    restored = HeapKeyedStateBackend(FULL, MAXP)
    restored.restore([handle], storage.read)
    assert _rocksdb_values(restored, keys + ["new", "cached"]) == {
        **{k: i for i, k in enumerate(keys)}, "new": None, "cached": 7}
    b.dispose()


def test_rocksdb_snapshot_directory_is_removed_after_write(tmp_path):
    b = RocksDBKeyedStateBackend(FULL, MAXP, tmp_path / "rocks")
    b.set_current_key("a")
    b.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    writer = b.snapshot(1)
    assert os.path.isdir(writer.checkpoint_path)
    writer.write(DictStorage().write_file, "p")
    assert not os.path.exists(writer.checkpoint_path)
    b.dispose()


def test_rocksdb_discards_previous_content_of_working_dir(tmp_path):
    wd = tmp_path / "rocks"
    (wd / "db").mkdir(parents=True)  # a crashed run left its files behind
    (wd / "db" / "000001.log").write_bytes(b"junk")
    (wd / "snapshots" / "chk-1-0").mkdir(parents=True)
    b2 = RocksDBKeyedStateBackend(FULL, MAXP, wd)
    assert not (wd / "snapshots").exists()
    assert list(b2.get_keys("v")) == [] and b2.state_names() == []
    b2.dispose()


def test_rocksdb_value_accessor(tmp_path):
    kgr = KeyGroupRange(0, 63)
    b = RocksDBKeyedStateBackend(kgr, MAXP, tmp_path / "rocks")
    acc = b.value_accessor("_reduce_value")
    k = keys_in(kgr, 1)[0]
    kg = b.assign_key_group(k)
    missing = object()
    assert acc.get(k, kg, missing) is missing
    acc.put(k, kg, 5)
    assert acc.get(k, kg) == 5
    b.set_current_key(k)  # the same entry as a value state
    assert b.get_partitioned_state(ValueStateDescriptor("_reduce_value")).value() == 5
    with pytest.raises(StateAccessError):
        acc.put(k, 64, 1)
    with pytest.raises(StateAccessError, match="value"):
        b.get_partitioned_state(ListStateDescriptor("_reduce_value"))
    b.get_partitioned_state(ListStateDescriptor("l"))
    with pytest.raises(StateAccessError):
        b.value_accessor("l")
    acc.remove(k, kg)
    assert acc.get(k, kg) is None
    assert b.state_kind("_reduce_value") is StateKind.VALUE
    b.dispose()


@pytest.mark.parametrize("key", KEYS + [
    0, -1, 255, 256, -256, 2 ** 64, True, False, 0.0, float("inf"), "", "x" * 300,
    ("nested", ("t", 1), b""), "\ud800",
])
def test_key_encoding_round_trips(key):
    data = encode_key(key)
    assert encode_key(key) == data  # deterministic
    # a key comes back as its identity form: equal to it (True as 1, 0.0 as 0)
    assert decode_key(data) == key
    assert type(decode_key(data)) is type(identity_form(key))


def test_key_encodings_are_equal_exactly_when_keys_are_equal():
    keys = [0, 1, -1, True, False, 1.0, 0.5, "1", b"1", "", b"", None, (), (1,), ((),),
            ("a", "b"), ("ab",), ("a", ("b",)), 2 ** 70, "x" * 200, (1,), (True,), (1.0,)]
    for a in keys:
        for b in keys:
            assert (encode_key(a) == encode_key(b)) == (a == b and type(a == b) is bool), (a, b)
    assert encode_key(-0.0) == encode_key(0.0)
    with pytest.raises(ValueError):
        decode_key(encode_key("a") + b"x")
