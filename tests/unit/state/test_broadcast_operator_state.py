"""Broadcast state as operator state: the store, its snapshot, redistribution on rescale."""

import pytest

from flowray.state.broadcast_state import HeapBroadcastState
from flowray.state.descriptors import ListStateDescriptor, MapStateDescriptor
from flowray.state.keyed_backend import StateAccessError
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state
from flowray.state.snapshot import BROADCAST, SPLIT_DISTRIBUTE, OperatorStateEntry

RULES = MapStateDescriptor("rules")


def _rules_of(entries):
    return dict(OperatorStateStore.restore(entries).get_broadcast_state(RULES).items())


def _store_with(rules, extra_list=None):
    store = OperatorStateStore()
    store.get_broadcast_state(RULES).put_all(rules)
    if extra_list is not None:
        store.get_list_state(ListStateDescriptor("offsets")).add_all(extra_list)
    return store.snapshot()


def test_same_descriptor_same_state_and_snapshot_is_a_copy():
    store = OperatorStateStore()
    state = store.get_broadcast_state(RULES)
    assert store.get_broadcast_state(MapStateDescriptor("rules")) is state
    state.put("a", 1)
    state["b"] = [2]
    snap = store.snapshot()
    assert snap["rules"].mode == BROADCAST
    state.put("c", 3)           # after the snapshot: not in it
    state.get("b").append(99)   # neither is a change to a value
    assert _rules_of(snap) == {"a": 1, "b": [2]}
    assert store.state_names() == ["rules"]


def test_restored_state_never_requested_is_carried_into_later_snapshots():
    snap = _store_with({"a": 1})
    carried = OperatorStateStore.restore(snap).snapshot()
    assert carried["rules"].mode == BROADCAST
    assert _rules_of(carried) == {"a": 1}


def test_a_name_is_bound_to_one_kind():
    store = OperatorStateStore()
    store.get_broadcast_state(MapStateDescriptor("s"))
    with pytest.raises(StateAccessError, match="'s' is registered as BROADCAST"):
        store.get_list_state(ListStateDescriptor("s"))
    store.get_union_list_state(ListStateDescriptor("u"))
    with pytest.raises(StateAccessError, match="'u' is registered as UNION list"):
        store.get_broadcast_state(MapStateDescriptor("u"))
    restored = OperatorStateStore.restore(_store_with({"a": 1}, extra_list=[7]))
    with pytest.raises(StateAccessError, match="'rules' is restored as BROADCAST"):
        restored.get_list_state(ListStateDescriptor("rules"))
    with pytest.raises(StateAccessError, match="'offsets' is restored as SPLIT_DISTRIBUTE"):
        restored.get_broadcast_state(MapStateDescriptor("offsets"))


def test_broadcast_state_needs_a_map_state_descriptor():
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        OperatorStateStore().get_broadcast_state(ListStateDescriptor("rules"))


def test_unserializable_entry_fails_naming_the_state():
    store = OperatorStateStore()
    store.get_broadcast_state(RULES).put("lock", __import__("threading").Lock())
    with pytest.raises(StateAccessError, match="broadcast state 'rules': cannot serialize"):
        store.snapshot()


def test_read_only_view_refuses_every_write():
    state = HeapBroadcastState("rules", {"a": 1})
    view = state.read_only()
    assert view.get("a") == 1 and view["a"] == 1 and "a" in view and view.contains("a")
    assert list(view) == ["a"] and view.items() == [("a", 1)] and view.values() == [1]
    assert not view.is_empty() and len(view) == 1
    for write in (lambda: view.put("b", 2), lambda: view.put_all({"b": 2}),
                  lambda: view.remove("a"), view.clear,
                  lambda: view.__setitem__("b", 2), lambda: view.__delitem__("a")):
        with pytest.raises(StateAccessError, match="'rules' is read-only"):
            write()
    assert state.items() == [("a", 1)]
    state.put("b", 2)  # the view follows the state
    assert view.get("b") == 2


def test_same_parallelism_every_subtask_keeps_its_own_copy():
    old = [_store_with({"v": 0}, [1]), _store_with({"v": 1}, [2])]
    new = redistribute_operator_state(old, 2)
    assert [_rules_of(p) for p in new] == [{"v": 0}, {"v": 1}]
    assert [p["offsets"].mode for p in new] == [SPLIT_DISTRIBUTE, SPLIT_DISTRIBUTE]


@pytest.mark.parametrize("old_p,new_p", [(2, 3), (2, 5), (3, 1), (3, 2), (1, 4)])
def test_rescale_every_new_subtask_gets_one_old_copy(old_p, new_p):
    # the copies differ here only to show which old subtask each new one read
    old = [_store_with({"from": i, "shared": "x"}) for i in range(old_p)]
    new = redistribute_operator_state(old, new_p)
    assert len(new) == new_p
    assert [_rules_of(p) for p in new] == [{"from": i % old_p, "shared": "x"}
                                          for i in range(new_p)]


def test_rescale_skips_old_subtasks_without_a_copy():
    old = [None, _store_with({"a": 1}), {}]
    new = redistribute_operator_state(old, 4)
    assert [_rules_of(p) for p in new] == [{"a": 1}] * 4


def test_mixed_modes_across_subtasks_are_refused():
    old = [_store_with({"a": 1}), {"rules": OperatorStateEntry(SPLIT_DISTRIBUTE, [])}]
    with pytest.raises(ValueError, match="'rules' has mode BROADCAST"):
        redistribute_operator_state(old, 3)
