"""Operator list state: the store, snapshots, restore and redistribution on rescale
(Flink's RoundRobinOperatorStateRepartitioner)."""

import pickle

import cloudpickle
import pytest

from flowray.state.keyed_backend import ListState, StateAccessError
from flowray.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state
from flowray.state.snapshot import SPLIT_DISTRIBUTE, UNION, OperatorStateEntry


def entry(mode, *values):
    return OperatorStateEntry(mode, [cloudpickle.dumps(v) for v in values])


def values(e):
    return [pickle.loads(b) for b in e.items]


def split_values(parts, name):
    return [values(p[name]) if name in p else None for p in parts]


# -- the store -------------------------------------------------------------------------

def test_list_state_operations():
    store = OperatorStateStore()
    s = store.get_list_state(ListStateDescriptor("s"))
    assert isinstance(s, ListState)
    assert s.get() == [] and list(s) == []
    s.add(1)
    s.add_all([2, 3])
    assert s.get() == [1, 2, 3] and list(s) == [1, 2, 3]
    got = s.get()
    got.append(99)                      # get() is a copy
    assert s.get() == [1, 2, 3]
    s.update([7])
    assert s.get() == [7]
    s.update([])
    assert s.get() == []
    s.add("x")
    s.clear()
    assert s.get() == []
    with pytest.raises(ValueError):
        s.add(None)
    with pytest.raises(ValueError):
        s.add_all([1, None])
    assert s.get() == []                # add_all with a None adds nothing
    assert store.get_list_state(ListStateDescriptor("s")) is s


def test_union_state_and_mode_clash():
    store = OperatorStateStore()
    u = store.get_union_list_state(ListStateDescriptor("u"))
    u.add("a")
    assert store.get_union_list_state(ListStateDescriptor("u")) is u
    with pytest.raises(StateAccessError, match="'u'"):
        store.get_list_state(ListStateDescriptor("u"))
    store.get_list_state(ListStateDescriptor("s"))
    with pytest.raises(StateAccessError, match="'s'.*SPLIT_DISTRIBUTE"):
        store.get_union_list_state(ListStateDescriptor("s"))
    snap = store.snapshot()
    assert snap["u"].mode == UNION and snap["s"].mode == SPLIT_DISTRIBUTE


def test_mode_clash_with_restored_state():
    restored = OperatorStateStore.restore({"u": entry(UNION, 1)})
    with pytest.raises(StateAccessError, match="'u' is restored as UNION"):
        restored.get_list_state(ListStateDescriptor("u"))
    assert restored.get_union_list_state(ListStateDescriptor("u")).get() == [1]


def test_only_list_state_descriptors():
    store = OperatorStateStore()
    with pytest.raises(TypeError, match="ListStateDescriptor"):
        store.get_list_state(ValueStateDescriptor("v"))
    assert store.get_list_state("by-name").get() == []


def test_snapshot_is_isolated_from_later_changes():
    store = OperatorStateStore()
    s = store.get_list_state(ListStateDescriptor("s"))
    element = {"n": 1}
    s.add(element)
    snap = store.snapshot()
    element["n"] = 2                    # mutate an element after the snapshot
    s.add("later")
    assert values(snap["s"]) == [{"n": 1}]
    assert all(isinstance(b, bytes) for b in snap["s"].items)


def test_empty_store_and_empty_state_snapshot():
    assert OperatorStateStore().snapshot() == {}
    store = OperatorStateStore()
    store.get_list_state(ListStateDescriptor("empty"))
    snap = store.snapshot()
    assert snap == {"empty": OperatorStateEntry(SPLIT_DISTRIBUTE, [])}
    restored = OperatorStateStore.restore(snap)
    assert restored.restored_names() == ["empty"]
    assert restored.get_list_state(ListStateDescriptor("empty")).get() == []


def test_restore_is_lazy_and_keeps_unrequested_states():
    class Boom:
        def __reduce__(self):
            return (_explode, ())

    snap = {"ok": entry(SPLIT_DISTRIBUTE, 1, 2), "bad": entry(UNION, Boom()),
            "kept": entry(UNION, "k")}
    store = OperatorStateStore.restore(snap)   # nothing deserialized yet
    assert sorted(store.restored_names()) == ["bad", "kept", "ok"]
    assert store.get_list_state(ListStateDescriptor("ok")).get() == [1, 2]
    with pytest.raises(StateAccessError, match="'bad'"):
        store.get_union_list_state(ListStateDescriptor("bad"))
    again = store.snapshot()                   # unrequested states are carried over as bytes
    assert again["kept"].items == snap["kept"].items and again["kept"].mode == UNION
    assert values(again["ok"]) == [1, 2]
    assert OperatorStateStore(snap).restored_names() == store.restored_names()


def _explode():
    raise RuntimeError("cannot load")


def test_restored_state_round_trip_after_changes():
    store = OperatorStateStore()
    store.get_list_state(ListStateDescriptor("s")).add_all([("a", 1), ("b", 2)])
    restored = OperatorStateStore.restore(store.snapshot())
    s = restored.get_list_state(ListStateDescriptor("s"))
    s.add(("c", 3))
    assert values(restored.snapshot()["s"]) == [("a", 1), ("b", 2), ("c", 3)]


# -- redistribution --------------------------------------------------------------------

def three_subtasks():
    return [
        {"s": entry(SPLIT_DISTRIBUTE, 0, 1), "u": entry(UNION, "u0")},
        {"s": entry(SPLIT_DISTRIBUTE, 2), "u": entry(UNION, "u1a", "u1b")},
        {"s": entry(SPLIT_DISTRIBUTE, 3, 4, 5), "u": entry(UNION)},
    ]


def test_same_parallelism_keeps_split_state_and_unions_union_state():
    parts = redistribute_operator_state(three_subtasks(), 3)
    assert split_values(parts, "s") == [[0, 1], [2], [3, 4, 5]]
    assert split_values(parts, "u") == [["u0", "u1a", "u1b"]] * 3
    assert all(p["u"].mode == UNION and p["s"].mode == SPLIT_DISTRIBUTE for p in parts)


def test_same_parallelism_without_union_state_is_unchanged():
    prev = [{"s": entry(SPLIT_DISTRIBUTE, 1)}, {}, {"t": entry(SPLIT_DISTRIBUTE, 2, 3)}]
    parts = redistribute_operator_state(prev, 3)
    assert parts == prev
    assert parts[0]["s"] is not prev[0]["s"]        # copies, not the same objects


def test_scale_up_splits_evenly_first_parts_get_the_remainder():
    parts = redistribute_operator_state(three_subtasks(), 4)   # 6 elements over 4
    assert split_values(parts, "s") == [[0, 1], [2, 3], [4], [5]]
    assert split_values(parts, "u") == [["u0", "u1a", "u1b"]] * 4


def test_scale_up_beyond_the_number_of_elements():
    prev = [{"s": entry(SPLIT_DISTRIBUTE, "a", "b")}]
    parts = redistribute_operator_state(prev, 4)
    assert split_values(parts, "s") == [["a"], ["b"], [], []]
    assert all(p["s"].mode == SPLIT_DISTRIBUTE for p in parts)


def test_scale_down():
    parts = redistribute_operator_state(three_subtasks(), 2)
    assert split_values(parts, "s") == [[0, 1, 2], [3, 4, 5]]
    assert split_values(parts, "u") == [["u0", "u1a", "u1b"]] * 2
    one = redistribute_operator_state(three_subtasks(), 1)
    assert split_values(one, "s") == [[0, 1, 2, 3, 4, 5]]


def test_empty_states():
    assert redistribute_operator_state([{}, {}], 3) == [{}, {}, {}]
    assert redistribute_operator_state([None, {}], 2) == [{}, {}]
    assert redistribute_operator_state([], 2) == [{}, {}]
    prev = [{"s": entry(SPLIT_DISTRIBUTE)}, {"s": entry(SPLIT_DISTRIBUTE)}]
    parts = redistribute_operator_state(prev, 3)
    assert split_values(parts, "s") == [[], [], []]
    # a state only some old subtasks had
    prev = [{"s": entry(SPLIT_DISTRIBUTE, 1)}, {}, {"s": entry(SPLIT_DISTRIBUTE, 2)}]
    assert split_values(redistribute_operator_state(prev, 2), "s") == [[1], [2]]


def test_redistributed_state_restores():
    parts = redistribute_operator_state(three_subtasks(), 2)
    store = OperatorStateStore.restore(parts[1])
    assert store.get_list_state(ListStateDescriptor("s")).get() == [3, 4, 5]
    assert store.get_union_list_state(ListStateDescriptor("u")).get() == ["u0", "u1a", "u1b"]


def test_inconsistent_modes_and_bad_parallelism_are_rejected():
    prev = [{"x": entry(SPLIT_DISTRIBUTE, 1)}, {"x": entry(UNION, 2)}]
    with pytest.raises(ValueError, match="'x'"):
        redistribute_operator_state(prev, 2)
    with pytest.raises(ValueError):
        redistribute_operator_state([{}], 0)
