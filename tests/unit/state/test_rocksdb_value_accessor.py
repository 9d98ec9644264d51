"""RocksDBValueAccessor details of the batched path: database keys of a whole batch (the str
fast path and every other key type give what ``db_key`` gives; key groups checked first;
the remembered keys are bounded), immutable values cached as objects and mutable ones as
bytes (reads of those are copies), and flushes that store what a per-record write would."""

import datetime
import math

import pytest

from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.keyed_backend import StateAccessError
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.rocksdb.value_accessor import _ABSENT, _Stored
from flowray.state.value_codec import encode_value
from tests.support.operator_harness import FULL, MAXP, UPPER, keys_in

NAME = "v"


@pytest.fixture
def make(tmp_path):
    made = []

    def make_backend(key_group_range=FULL, **kwargs):
        b = RocksDBKeyedStateBackend(key_group_range, MAXP, tmp_path / f"r{len(made)}", **kwargs)
        made.append(b)
        return b

    yield make_backend
    for b in made:
        b.dispose()


def _values(backend, keys):
    state = backend.get_partitioned_state(ValueStateDescriptor(NAME))
    out = {}
    for k in keys:
        backend.set_current_key(k)
        out[k] = state.value()
    return out


KEY_BATCHES = [
    ["a", "b", "a", "é€𝄞", "", "x" * 127],  # str, one-byte length
    ["x" * 128, "short"],  # a length of two varint bytes: the general path
    [1, 1.0, True, -7, 2 ** 70, 2.5, float("nan")],
    [None, b"raw", ("t", 1, (2.0, None)), datetime.date(2024, 5, 1)],
    ["mixed", 3, ("x",)],
    ["lone \ud800 surrogate", "ok"],
]


@pytest.mark.parametrize("keys", KEY_BATCHES, ids=repr)
@pytest.mark.parametrize("memo", [0, 2, 1 << 16])
def test_db_keys_of_a_batch_are_those_of_db_key(make, keys, memo):
    b = make()
    acc = b.value_accessor(NAME)
    acc.key_memo_entries = memo
    kgs = [b.assign_key_group(k) for k in keys]
    expected = [acc.db_key(k, kg) for k, kg in zip(keys, kgs)]
    for _ in range(3):  # again: from the remembered keys
        assert acc.db_keys(keys, kgs) == expected
        assert len(acc._memo) <= memo


def test_nan_keys_are_one_key(make):
    b = make()
    acc = b.value_accessor(NAME)
    nans = [float("nan"), -float("nan"), math.nan]
    kgs = [b.assign_key_group(k) for k in nans]
    assert len(set(acc.db_keys(nans, kgs))) == 1


def test_db_keys_checks_every_key_group_before_encoding(make):
    b = make(key_group_range=UPPER)
    acc = b.value_accessor(NAME)
    own = keys_in(UPPER, 2)
    with pytest.raises(StateAccessError, match=r"key group 3, outside .*\[64, 127\]"):
        acc.db_keys(own + ["foreign"], [b.assign_key_group(k) for k in own] + [3])
    assert acc._memo == {}


def test_an_unhashable_key_is_refused_by_name(make):
    b = make()
    acc = b.value_accessor(NAME)
    with pytest.raises(Exception, match="list"):
        acc.db_keys(["a", ["not", "a", "key"]], [0, 1])


def test_the_remembered_keys_are_bounded(make):
    b = make()
    acc = b.value_accessor(NAME)
    acc.key_memo_entries = 10
    for start in range(0, 100, 4):
        keys = [f"k{i}" for i in range(start, start + 4)]
        acc.db_keys(keys, [b.assign_key_group(k) for k in keys])
        assert len(acc._memo) <= 10
    with pytest.raises(ValueError, match="key_memo_entries"):
        type(acc)(b, acc._cf, NAME, key_memo_entries=-1)


def test_immutable_values_are_cached_as_objects_mutable_ones_as_bytes(make):
    b = make()
    acc = b.value_accessor(NAME)
    keys = ["t", "s", "l", "d", "n", "nested"]
    dks = acc.db_keys(keys, [b.assign_key_group(k) for k in keys])
    values = [("k", 1), 2.5, [1, 2], {"a": (1,)}, None, ("k", (1, 2))]
    acc.write_many(list(zip(dks, values)))
    kinds = {k: type(acc._cache[dk]) for k, dk in zip(keys, dks)}
    assert kinds == {"t": tuple, "s": float, "l": _Stored, "d": _Stored,
                     "n": type(None), "nested": _Stored}
    got = acc.get_many(dks)
    assert got == values
    got[2].append(3)
    got[3]["b"] = 2
    assert acc.get_many(dks) == values  # reads of mutable values are copies
    b.get_keys(NAME)  # flushes: RocksDB holds what a per-record write stores
    for dk, v in zip(dks, values):
        assert acc._cf.get(dk) == encode_value(v)
    assert _values(b, keys) == dict(zip(keys, values))


def test_read_values_are_cached_by_kind_and_absent_keys_remembered(make):
    b = make()
    acc = b.value_accessor(NAME)
    for k, v in [("a", ("x", 1)), ("b", [1])]:
        acc.put(k, b.assign_key_group(k), v)
    keys = ["a", "b", "c"]
    dks = acc.db_keys(keys, [b.assign_key_group(k) for k in keys])
    assert acc.get_many(dks, default="none") == [("x", 1), [1], "none"]
    assert [acc._cache[dk] for dk in dks[::2]] == [("x", 1), _ABSENT]
    assert type(acc._cache[dks[1]]) is _Stored
    assert acc.get_many(dks, default=0) == [("x", 1), [1], 0]


def test_a_partly_full_cache_writes_the_rest_through(make):
    b = make(value_cache_entries=3)
    acc = b.value_accessor(NAME)
    keys = [f"k{i}" for i in range(6)]
    dks = acc.db_keys(keys, [b.assign_key_group(k) for k in keys])
    acc.write_many([(dks[0], 0)])
    acc.write_many([(dk, i) for i, dk in enumerate(dks)], deletes=[])
    assert len(acc._cache) == 3 and acc.pending_writes == 3
    assert _values(b, keys[3:]) == {k: i + 3 for i, k in enumerate(keys[3:])}  # through
    acc.write_many([], deletes=dks)  # cached: marked absent; the others deleted now
    assert _values(b, keys[3:]) == {k: None for k in keys[3:]}
    assert acc.get_many(dks) == [None] * 6
    assert list(b.get_keys(NAME)) == []
