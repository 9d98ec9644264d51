"""The heap keyed-state backend: every state kind, per-key isolation, key-group bookkeeping."""

import pytest

from flowray.datastream.functions import RuntimeContext
from flowray.state.keyed_backend import StateAccessError
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from tests.support.functions import Average, Max

MAXP = 128
KEYS = ["alice", "bob", ("carol", 3), 17, None, b"raw"]


@pytest.fixture
def backend():
    b = HeapKeyedStateBackend(KeyGroupRange(0, MAXP - 1), MAXP)
    yield b
    b.dispose()


def test_value_state_is_per_key(backend):
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
    backend.set_current_key("alice")
    assert total.value() == 0  # a falsy value is a value
    total.update(None)  # None clears, as in Flink
    assert total.value() is None
    assert sorted(map(repr, backend.get_keys("total"))) == \
        sorted(repr(k) for k in KEYS if k not in ("alice", "bob"))


def test_list_state_is_per_key(backend):
    events = backend.get_partitioned_state(ListStateDescriptor("events"))
    backend.set_current_key("a")
    assert list(events.get()) == []
    events.add(1)
    events.add_all([2, 3])
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


def test_map_state_is_per_key(backend):
    m = backend.get_partitioned_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    assert m.is_empty() and m.get("x") is None and not m.contains("x")
    m.put("x", 1)
    m.put_all({"y": 2, "z": 3})
    backend.set_current_key("b")
    assert m.is_empty()
    m.put("x", 100)
    backend.set_current_key("a")
    assert m.get("x") == 1 and "y" in m and m.contains("z") and "w" not in m
    assert sorted(m.keys()) == ["x", "y", "z"] and sorted(m) == ["x", "y", "z"]
    assert sorted(m.values()) == [1, 2, 3]
    assert sorted(m.items()) == [("x", 1), ("y", 2), ("z", 3)]
    m.remove("y")
    m.remove("not there")
    assert sorted(m.keys()) == ["x", "z"]
    m.remove("x")
    m.remove("z")
    assert m.is_empty()
    assert list(backend.get_keys("m")) == ["b"]  # an emptied map leaves no key behind
    backend.set_current_key("b")
    assert m.items() == [("x", 100)]


@pytest.mark.parametrize("reduce_fn", [lambda a, b: a + b, Max()], ids=["lambda", "object"])
def test_reducing_state_is_per_key(backend, reduce_fn):
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


def test_aggregating_state_is_per_key(backend):
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


def test_same_name_returns_same_state_object(backend):
    s1 = backend.get_partitioned_state(ValueStateDescriptor("v"))
    s2 = backend.get_partitioned_state(ValueStateDescriptor("v"))
    assert s1 is s2
    assert backend.state_names() == ["v"]


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


def _key_in_group(pred):
    for i in range(100_000):
        k = f"key-{i}"
        if pred(assign_to_key_group(k, MAXP)):
            return k
    raise AssertionError("no key found")


def test_key_outside_key_group_range_raises():
    b = HeapKeyedStateBackend(KeyGroupRange(0, 63), MAXP)
    inside = _key_in_group(lambda kg: kg <= 63)
    outside = _key_in_group(lambda kg: kg >= 64)
    b.set_current_key(inside)
    state = b.get_partitioned_state(ValueStateDescriptor("v"))
    state.update(1)
    with pytest.raises(StateAccessError) as info:
        b.set_current_key(outside)
    text = str(info.value)
    assert repr(outside) in text and str(assign_to_key_group(outside, MAXP)) in text
    assert "[0, 63]" in text
    # an explicit key group outside the range is rejected too
    with pytest.raises(StateAccessError):
        b.set_current_key(inside, 64)
    with pytest.raises(StateAccessError):
        b.set_current_key(inside, -1)
    # the failed calls did not change the current key
    assert b.get_current_key() == inside and state.value() == 1


def test_explicit_key_group_is_used_as_given():
    b = HeapKeyedStateBackend(KeyGroupRange(10, 20), MAXP)
    s = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key("k", 15)
    assert b.get_current_key_group() == 15
    s.update("x")
    assert list(b.iter_key_group("v", 15)) == [("k", "x")]


def test_iter_key_group_and_get_keys():
    kgr = KeyGroupRange(32, 95)
    b = HeapKeyedStateBackend(kgr, MAXP)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    keys = [k for k in (f"k{i}" for i in range(2000))
            if assign_to_key_group(k, MAXP) in kgr][:300]
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
# descriptors and RuntimeContext
# ---------------------------------------------------------------------------------------

def test_descriptor_validation():
    with pytest.raises(ValueError):
        ValueStateDescriptor("")
    with pytest.raises(TypeError, match="get_result"):
        class NoResult:
            def create_accumulator(self):
                return 0

            def add(self, v, acc):
                return acc

        AggregatingStateDescriptor("agg", NoResult())
    with pytest.raises(TypeError, match="'r'"):
        ReducingStateDescriptor("r", 42)


def test_runtime_context_without_backend_mentions_key_by():
    ctx = RuntimeContext("Source -> My Map", 0, 1, 128, operator_name="My Map")
    for getter, desc in [(ctx.get_state, ValueStateDescriptor("seen")),
                         (ctx.get_list_state, ListStateDescriptor("seen")),
                         (ctx.get_map_state, MapStateDescriptor("seen")),
                         (ctx.get_reducing_state, ReducingStateDescriptor("seen", max)),
                         (ctx.get_aggregating_state, AggregatingStateDescriptor("seen", Average()))]:
        with pytest.raises(StateAccessError) as info:
            getter(desc)
        text = str(info.value)
        assert "key_by" in text and "'My Map'" in text and "'seen'" in text


def test_runtime_context_with_backend_checks_descriptor_type(backend):
    ctx = RuntimeContext("t", 1, 2, MAXP, keyed_backend=backend, operator_name="op")
    assert ctx.get_index_of_this_subtask() == 1
    assert ctx.get_number_of_parallel_subtasks() == 2
    assert ctx.get_task_name_with_subtasks() == "t (2/2)"
    state = ctx.get_state(ValueStateDescriptor("v"))
    backend.set_current_key("k")
    state.update(5)
    assert ctx.get_state(ValueStateDescriptor("v")).value() == 5
    with pytest.raises(StateAccessError, match="ValueStateDescriptor"):
        ctx.get_list_state(ValueStateDescriptor("v"))
