"""Queryable state of one subtask without Ray: live reads, the committed view following
completed checkpoints (never an aborted one alone, never rolled back), every state kind as
plain data, the registry's errors, the read-only queried state, and the
as_queryable_state operator."""

from __future__ import annotations

import pytest

from flowray.state.queryable import QueriedState
from flowray.state.descriptors import (ListStateDescriptor, MapStateDescriptor,
                                       ReducingStateDescriptor, StateKind,
                                       ValueStateDescriptor)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange
from flowray.state.queryable import (QueryableStates, UnknownKvStateLocation,
                                     UnknownQueryableStateError)

MAXP = 128


def _backend():
    return HeapKeyedStateBackend(KeyGroupRange(0, MAXP - 1), MAXP)


def _value_state(backend, states, name="total", queryable="totals"):
    d = ValueStateDescriptor(name).set_queryable(queryable)
    return states.register(d, backend.get_partitioned_state(d))


def test_committed_reads_follow_completed_checkpoints_only():
    backend = _backend()
    states = QueryableStates(backend)
    total = _value_state(backend, states)
    backend.set_current_key("a")
    total.update(1)
    states.on_checkpoint(1)
    total.update(2)
    states.on_checkpoint(2)           # checkpoint 2 will be aborted
    total.update(3)
    backend.set_current_key("b")
    total.update(10)
    assert states.live_value("totals", "a") == 3
    assert states.committed_value("totals", "a") == (0, None)    # nothing completed yet
    states.on_complete(1)
    assert states.committed_value("totals", "a") == (1, 1)
    states.on_checkpoint(3)
    states.on_complete(3)             # 2 was aborted: 3 saw what it saw, and more
    assert states.committed_value("totals", "a") == (3, 3)
    assert states.committed_value("totals", "b") == (3, 10)
    assert backend.get_current_key() == "b"   # reads put the current key back
    total.clear()                     # b's value removed ...
    states.on_checkpoint(4)
    assert states.committed_value("totals", "b") == (3, 10)      # ... once 4 completes
    states.on_complete(4)
    assert states.committed_value("totals", "b") == (4, None)


def test_a_restored_backend_is_the_committed_view_of_its_checkpoint():
    backend = _backend()
    plain = ValueStateDescriptor("total")
    state = backend.get_partitioned_state(plain)
    for key, value in [("a", 5), ("b", 7)]:
        backend.set_current_key(key)
        state.update(value)
    states = QueryableStates(backend, restored_checkpoint_id=12)   # as after a restore
    _value_state(backend, states)
    assert states.committed_value("totals", "a") == (12, 5)
    assert states.committed_value("totals", "b") == (12, 7)
    assert states.info() == {"totals": ("value", ["str"])}


def test_every_kind_is_read_as_plain_data():
    backend = _backend()
    states = QueryableStates(backend)
    lists = states.register(
        d := ListStateDescriptor("l").set_queryable("lists"), backend.get_partitioned_state(d))
    maps = states.register(
        d := MapStateDescriptor("m").set_queryable("maps"), backend.get_partitioned_state(d))
    sums = states.register(d := ReducingStateDescriptor("r", lambda a, b: a + b)
                           .set_queryable("sums"), backend.get_partitioned_state(d))
    backend.set_current_key(1)
    lists.add("x")
    lists.add_all(["y"])
    maps["k"] = 1
    maps.put("j", 2)
    sums.add(3)
    sums.add(4)
    assert states.live_value("lists", 1) == ["x", "y"]
    assert states.live_value("maps", 1) == {"k": 1, "j": 2}
    assert states.live_value("sums", 1) == 7
    assert states.live_value("sums", 2) is None and states.live_value("lists", 2) is None
    states.on_checkpoint(1)
    states.on_complete(1)
    assert states.committed_value("maps", 1) == (1, {"k": 1, "j": 2})
    assert states.names() == ["lists", "maps", "sums"]
    assert states.info()["sums"] == ("reducing", ["int"])


def test_registry_errors_name_the_problem():
    backend = _backend()
    states = QueryableStates(backend)
    first = _value_state(backend, states)
    assert _value_state(backend, states) is first           # the same state again
    with pytest.raises(ValueError, match="'totals' is taken by state 'total'"):
        _value_state(backend, states, name="other")
    states.mark_opened()
    with pytest.raises(UnknownQueryableStateError, match="queryable: totals"):
        states.live_value("nope", "a")
    with pytest.raises(ValueError, match="already queryable as 'x'"):
        ValueStateDescriptor("v").set_queryable("x").set_queryable("y")
    with pytest.raises(ValueError, match="non-empty string"):
        ValueStateDescriptor("v").set_queryable("")
    # a state without a queryable name is not tracked
    plain = ValueStateDescriptor("p")
    state = backend.get_partitioned_state(plain)
    assert states.register(plain, state) is state


def test_an_unknown_name_is_retried_until_the_operators_have_opened():
    # a restarted subtask is queried before its operators asked for their state: that
    # is "retry", not "no such state" (seen in a full run after a failover)
    backend = _backend()
    states = QueryableStates(backend, restored_checkpoint_id=4)
    with pytest.raises(UnknownKvStateLocation, match="opening its operators.*'totals'"):
        states.committed_value("totals", "a")
    with pytest.raises(UnknownKvStateLocation):
        states.live_value("totals", "a")
    _value_state(backend, states)
    states.mark_opened()
    assert states.committed_value("totals", "a") == (4, None)
    with pytest.raises(UnknownQueryableStateError, match="queryable: totals"):
        states.committed_value("nope", "a")


def test_a_queried_state_is_read_only_and_has_its_kinds_methods():
    value = QueriedState(StateKind.VALUE, 3, 7)
    assert value.value() == 3 and value.checkpoint_id == 7
    with pytest.raises(TypeError, match="read-only"):
        value.update(4)
    with pytest.raises(TypeError, match="this is value state"):
        value.items()
    mapped = QueriedState(StateKind.MAP, {"a": 1}, -1)
    assert mapped.get("a") == 1 and mapped.contains("a") and list(mapped) == ["a"]
    assert QueriedState(StateKind.LIST, None, 1).get() == []
    assert "live" in repr(mapped)


def test_as_queryable_state_keeps_each_keys_latest_record_or_folds_them():
    from flowray.operators.keyed import QueryableStateSinkOperator
    from tests.support.operator_harness import OperatorHarness

    latest = OperatorHarness(QueryableStateSinkOperator(
        "latest", ValueStateDescriptor("latest"), lambda r: r[0]), keyed=True)
    folded = OperatorHarness(QueryableStateSinkOperator(
        "sums", ReducingStateDescriptor("sums", lambda a, b: (a[0], a[1] + b[1])),
        lambda r: r[0]), keyed=True)
    for h, name in ((latest, "latest"), (folded, "sums")):
        h.backend.queryable = QueryableStates(h.backend)
        h.operator.open()      # (opened again: now with the registry the task sets)
        h.process([("a", 1), ("b", 2), ("a", 3)])
        assert h.records == []
    assert latest.backend.queryable.live_value("latest", "a") == ("a", 3)
    assert folded.backend.queryable.live_value("sums", "a") == ("a", 4)
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        QueryableStateSinkOperator("m", MapStateDescriptor("m"), lambda r: r)


def test_a_restored_state_registers_before_any_record_set_a_key():
    from flowray.state.key_groups import assign_to_key_group

    upper = KeyGroupRange(64, MAXP - 1)   # subtask 2 of 2: key group 0 is not its own
    key = next(k for k in (f"k{i}" for i in range(1000)) if assign_to_key_group(k, MAXP) >= 64)
    backend = HeapKeyedStateBackend(upper, MAXP)
    backend.set_current_key(key)
    backend.get_partitioned_state(ValueStateDescriptor("total")).update(5)
    fresh = HeapKeyedStateBackend(upper, MAXP)   # as restored: state, no current key yet
    fresh._tables = backend._tables
    states = QueryableStates(fresh, restored_checkpoint_id=3)
    _value_state(fresh, states)
    assert states.committed_value("totals", key) == (3, 5)
