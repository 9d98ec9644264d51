"""Namespaced keyed state (per key and per window): every view kind, merging, kind checks,
and that it is ordinary keyed state (snapshot, restore, redistribution) on either backend."""

import pytest

from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flowray.state.keyed_backend import StateAccessError
from flowray.state.key_groups import assign_to_key_group
from flowray.state.namespaced import NamespacedKeyedStateStore, NamespacedStates
from tests.support.functions import Average
from tests.support.operator_harness import (
    FULL,
    LOWER,
    MAXP,
    UPPER,
    BackendFactory,
    FileStorage,
    keys_in,
)

BACKENDS = ["heap", "rocksdb"]


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    f = BackendFactory(request.param, tmp_path)
    yield f
    f.close()


@pytest.fixture
def backend(make):
    return make()


@pytest.fixture
def states(backend):
    return NamespacedStates(backend, "trigger/")


class MergeableAverage(Average):
    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


SUM = ReducingStateDescriptor("sum", lambda a, b: a + b)
AVG = AggregatingStateDescriptor("avg", MergeableAverage())


# ---------------------------------------------------------------------------------------
# views
# ---------------------------------------------------------------------------------------

def test_value_view_per_key_and_namespace(backend, states):
    d = ValueStateDescriptor("v")
    backend.set_current_key("a")
    states.get(d, "w1").update(1)
    states.get(d, "w2").update(2)
    backend.set_current_key("b")
    assert states.get(d, "w1").value() is None
    states.get(d, "w1").update(10)
    backend.set_current_key("a")
    assert (states.get(d, "w1").value(), states.get(d, "w2").value()) == (1, 2)
    states.get(d, "w1").update(0)  # a falsy value is a value
    assert states.get(d, "w1").value() == 0
    states.get(d, "w1").update(None)  # None clears
    assert states.get(d, "w1").value() is None
    states.get(d, "w2").clear()
    assert states.get(d, "w2").value() is None
    backend.set_current_key("b")
    assert states.get(d, "w1").value() == 10
    # one map state per descriptor under the prefix; emptied keys leave nothing behind
    assert list(backend.get_keys("trigger/v")) == ["b"]


def test_list_view(backend, states):
    d = ListStateDescriptor("l")
    backend.set_current_key("a")
    view = states.get(d, "w")
    assert view.get() == []
    view.add(1)
    view.add_all([2, 3])
    view.add_all([])
    got = view.get()
    got.append(99)  # a copy
    assert view.get() == [1, 2, 3] and list(view) == [1, 2, 3]
    assert states.get(d, "other").get() == []
    with pytest.raises(ValueError, match="'l'"):
        view.add(None)
    with pytest.raises(ValueError, match="'l'"):
        view.add_all([4, None])
    assert view.get() == [1, 2, 3]
    view.update([7, 8])
    assert view.get() == [7, 8]
    view.update([])
    assert view.get() == [] and list(backend.get_keys("trigger/l")) == []


def test_map_view(backend, states):
    d = MapStateDescriptor("m")
    backend.set_current_key("a")
    view = states.get(d, "w")
    assert view.is_empty() and view.get("x") is None and not view.contains("x")
    view.put("x", 1)
    view.put_all({"y": 2, "z": 3})
    view.put_all({})
    assert states.get(d, "w2").is_empty()
    assert sorted(view.items()) == [("x", 1), ("y", 2), ("z", 3)]
    assert sorted(view.keys()) == ["x", "y", "z"] and sorted(view.values()) == [1, 2, 3]
    assert "y" in view and view.get("z") == 3
    view.remove("y")
    view.remove("absent")
    assert sorted(view.keys()) == ["x", "z"]
    view.remove("x")
    view.remove("z")
    assert view.is_empty() and list(backend.get_keys("trigger/m")) == []


def test_reducing_view(backend, states):
    backend.set_current_key("a")
    w1, w2 = states.get(SUM, "w1"), states.get(SUM, "w2")
    assert w1.get() is None
    for v in (1, 2, 3):
        w1.add(v)
    w2.add(10)
    assert (w1.get(), w2.get()) == (6, 10)
    w1.clear()
    assert (w1.get(), w2.get()) == (None, 10)


def test_aggregating_view(backend, states):
    backend.set_current_key("a")
    view = states.get(AVG, ("win", 1))  # any hashable namespace
    assert view.get() is None
    for v in (1, 2, 6):
        view.add(v)
    assert view.get() == 3
    backend.set_current_key("b")
    assert states.get(AVG, ("win", 1)).get() is None


def test_keyed_state_store_is_bound_to_its_namespace(backend, states):
    backend.set_current_key("a")
    store = NamespacedKeyedStateStore(states, "w1")
    store.get_state(ValueStateDescriptor("v")).update("one")
    store.get_list_state(ListStateDescriptor("l")).add(1)
    store.get_map_state(MapStateDescriptor("m")).put("k", 2)
    store.get_reducing_state(SUM).add(5)
    store.get_aggregating_state(AVG).add(4)
    store.namespace = "w2"
    assert store.get_state(ValueStateDescriptor("v")).value() is None
    assert store.get_reducing_state(SUM).get() is None
    store.namespace = "w1"
    assert store.get_state(ValueStateDescriptor("v")).value() == "one"
    assert store.get_list_state(ListStateDescriptor("l")).get() == [1]
    assert store.get_map_state(MapStateDescriptor("m")).items() == [("k", 2)]
    assert store.get_reducing_state(SUM).get() == 5
    assert store.get_aggregating_state(AVG).get() == 4


def test_prefixes_keep_users_apart(backend):
    a, b = NamespacedStates(backend, "trigger/"), NamespacedStates(backend, "window/")
    backend.set_current_key("k")
    a.get(SUM, "w").add(1)
    b.get(SUM, "w").add(100)
    assert (a.get(SUM, "w").get(), b.get(SUM, "w").get()) == (1, 100)
    assert {"trigger/sum", "window/sum"} <= set(backend.state_names())


# ---------------------------------------------------------------------------------------
# merging
# ---------------------------------------------------------------------------------------

def test_merge_reducing(backend, states):
    backend.set_current_key("k")
    for ns, v in [("t", 1), ("s1", 2), ("s2", 4)]:
        states.get(SUM, ns).add(v)
    states.merge(SUM, "t", ["s1", "t", "s2", "empty"])
    assert [states.get(SUM, ns).get() for ns in ("t", "s1", "s2", "empty")] == [7, None, None,
                                                                               None]


def test_merge_into_empty_target_moves_the_value(backend, states):
    backend.set_current_key("k")
    states.get(SUM, "s").add(3)
    states.merge(SUM, "t", ["s"])
    assert (states.get(SUM, "t").get(), states.get(SUM, "s").get()) == (3, None)
    states.merge(SUM, "nothing", ["none-either"])
    assert states.get(SUM, "nothing").get() is None
    assert sorted(backend.get_keys("trigger/sum")) == ["k"]


def test_merge_aggregating_merges_accumulators(backend, states):
    backend.set_current_key("k")
    for v in (1, 3):
        states.get(AVG, "a").add(v)
    states.get(AVG, "b").add(8)
    states.merge(AVG, "a", ["b"])
    assert states.get(AVG, "a").get() == 4  # (1 + 3 + 8) / 3
    assert states.get(AVG, "b").get() is None


def test_merge_list_concatenates_in_source_order(backend, states):
    d = ListStateDescriptor("l")
    backend.set_current_key("k")
    states.get(d, "t").add_all([1, 2])
    states.get(d, "s1").add(3)
    states.get(d, "s2").add_all([4, 5])
    states.merge(d, "t", ["s1", "s2"])
    assert states.get(d, "t").get() == [1, 2, 3, 4, 5]
    assert states.get(d, "s1").get() == [] and states.get(d, "s2").get() == []


def test_merge_only_touches_the_current_key(backend, states):
    backend.set_current_key("other")
    states.get(SUM, "s").add(100)
    backend.set_current_key("k")
    states.get(SUM, "t").add(1)
    states.get(SUM, "s").add(2)
    states.merge(SUM, "t", ["s"])
    backend.set_current_key("other")
    assert states.get(SUM, "s").get() == 100 and states.get(SUM, "t").get() is None


@pytest.mark.parametrize("descriptor, fill", [
    (ValueStateDescriptor("v"), lambda s: s.update(1)),
    (MapStateDescriptor("m"), lambda s: s.put("x", 1)),
], ids=["value", "map"])
def test_merge_of_value_or_map_state_raises(backend, states, descriptor, fill):
    backend.set_current_key("k")
    fill(states.get(descriptor, "t"))
    fill(states.get(descriptor, "s"))
    with pytest.raises(StateAccessError, match=f"'{descriptor.name}'.*cannot be merged"):
        states.merge(descriptor, "t", ["s"])


def test_merge_of_value_state_raises_even_into_an_empty_target(backend, states):
    d = ValueStateDescriptor("v")
    backend.set_current_key("k")
    states.get(d, "s").update(1)
    with pytest.raises(StateAccessError, match="cannot be merged"):
        states.merge(d, "t", ["s"])
    with pytest.raises(StateAccessError, match="cannot be merged"):
        states.merge(d, "t", [])  # the kind alone decides
    assert (states.get(d, "t").value(), states.get(d, "s").value()) == (None, 1)


def test_failed_merge_leaves_the_sources_in_place(backend, states):
    d = ValueStateDescriptor("v")
    backend.set_current_key("k")
    states.get(d, "t").update(1)
    states.get(d, "s").update(2)
    with pytest.raises(StateAccessError):
        states.merge(d, "t", ["s"])
    assert (states.get(d, "t").value(), states.get(d, "s").value()) == (1, 2)


# ---------------------------------------------------------------------------------------
# kind checks
# ---------------------------------------------------------------------------------------

def test_kind_mismatch_for_a_name_raises(backend, states):
    backend.set_current_key("k")
    states.get(ValueStateDescriptor("x"), "w").update(1)
    with pytest.raises(StateAccessError, match="'x'.*value.*list"):
        states.get(ListStateDescriptor("x"), "w")
    with pytest.raises(StateAccessError, match="'x'"):
        states.merge(ReducingStateDescriptor("x", max), "w", ["v"])
    with pytest.raises(TypeError, match="StateDescriptor"):
        states.get("x", "w")
    assert states.get(ValueStateDescriptor("x"), "w").value() == 1


# ---------------------------------------------------------------------------------------
# it is keyed state: snapshots, restore and redistribution
# ---------------------------------------------------------------------------------------

def test_snapshot_restore_and_redistribution(make, tmp_path):
    b = make()
    s = NamespacedStates(b, "trigger/")
    keys = keys_in(FULL, 40)
    for i, k in enumerate(keys):
        b.set_current_key(k)
        s.get(SUM, ("w", i % 3)).add(i)
        s.get(ListStateDescriptor("l"), "w").add_all([i, -i])
    storage = FileStorage(tmp_path / "chk")
    handle = b.snapshot(1).write(storage.write_file, "chk-1/keyed")
    seen = {}
    for kgr in (LOWER, UPPER):
        r = make(kgr)
        r.restore([handle], storage.read)
        rs = NamespacedStates(r, "trigger/")
        owned = sorted(r.get_keys("trigger/sum"))
        assert owned == sorted(k for k in keys if assign_to_key_group(k, MAXP) in kgr)
        assert owned  # each half gets some keys
        for k in owned:
            r.set_current_key(k)
            i = keys.index(k)
            seen[k] = (rs.get(SUM, ("w", i % 3)).get(),
                       rs.get(SUM, ("w", (i + 1) % 3)).get(),
                       rs.get(ListStateDescriptor("l"), "w").get())
    assert seen == {k: (i, None, [i, -i]) for i, k in enumerate(keys)}
