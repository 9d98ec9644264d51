"""RocksDBValueAccessor details of the batched path: a batch's keys kept as canonical keys
(NaNs one key; key groups checked first; what is not a key refused by name) with the
database keys ``db_key`` gives (the str fast path and every other key type), immutable
values cached as objects and mutable ones as bytes (reads of those are copies), and
flushes that store what a per-record write would."""

import datetime
import math

import pytest

from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.keyed_backend import StateAccessError
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.key_types import CANONICAL_NAN, UnsupportedKeyError
from flowray.state.rocksdb.layout import encode_key
from flowray.state.rocksdb.value_accessor import _ABSENT, _Absent, _Stored
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


def _groups(b, keys):
    return [b.assign_key_group(k) for k in keys]


@pytest.mark.parametrize("keys", KEY_BATCHES, ids=repr)
@pytest.mark.parametrize("cache", [0, 2, 1 << 16])
def test_loaded_keys_get_the_database_keys_of_db_key(make, keys, cache):
    b = make(value_cache_entries=cache)
    acc = b.value_accessor(NAME)
    kgs = _groups(b, keys)
    expected = {}
    for k, kg in zip(keys, kgs):
        expected.setdefault(k if k == k else CANONICAL_NAN, acc.db_key(k, kg))
    for rnd in range(3):  # again: from the cache
        kept, values = acc.load(keys, kgs)
        assert values == dict.fromkeys(expected, rnd or None)
        assert len(kept) == len(keys) and set(kept) == set(values)
        known = {**acc._db_keys, **acc._uncached}
        assert {k: known[k] for k in values} == expected
        assert len(acc._cache) <= cache
        acc.store(dict.fromkeys(values, rnd + 1))
    b.get_keys(NAME)  # flushes
    for dk in expected.values():
        assert acc._cf.get(dk) == encode_value(3)


def test_nan_keys_are_one_key(make):
    b = make()
    acc = b.value_accessor(NAME)
    nans = [float("nan"), -float("nan"), math.nan]
    kept, values = acc.load(nans, _groups(b, nans))
    assert all(k is CANONICAL_NAN for k in kept) and len(values) == 1


def test_load_checks_every_key_group_before_reading(make):
    b = make(key_group_range=UPPER)
    acc = b.value_accessor(NAME)
    own = keys_in(UPPER, 2)
    with pytest.raises(StateAccessError, match=r"key group 3, outside .*\[64, 127\]"):
        acc.load(own + ["foreign"], _groups(b, own) + [3])
    assert acc._cache == {}


def test_a_key_that_is_not_a_key_type_is_refused_by_name(make):
    b = make()
    acc = b.value_accessor(NAME)
    with pytest.raises(UnsupportedKeyError, match="list"):
        acc.load(["a", ["not", "a", "key"]], [0, 1])
    with pytest.raises(ValueError, match="cache_entries"):
        type(acc)(b, acc._cf, NAME, cache_entries=-1)


def test_immutable_values_are_cached_as_objects_mutable_ones_as_bytes(make):
    b = make()
    acc = b.value_accessor(NAME)
    keys = ["t", "s", "l", "d", "f", "nested"]
    values = [("k", 1), 2.5, [1, 2], {"a": (1,)}, ("x", None, 2.5), ("k", (1, 2))]
    acc.load(keys, _groups(b, keys))
    acc.store(dict(zip(keys, values)))
    kinds = {k: type(acc._cache[k]) for k in keys}
    assert kinds == {"t": tuple, "s": float, "l": _Stored, "d": _Stored,
                     "f": tuple, "nested": _Stored}
    got = acc.load(keys, _groups(b, keys))[1]
    assert list(got.values()) == values
    got["l"].append(3)
    got["d"]["b"] = 2
    assert list(acc.load(keys, _groups(b, keys))[1].values()) == values  # copies
    b.get_keys(NAME)  # flushes: RocksDB holds what a per-record write stores
    for k, v in zip(keys, values):
        assert acc._cf.get(acc.db_key(k, b.assign_key_group(k))) == encode_value(v)
    assert _values(b, keys) == dict(zip(keys, values))


@pytest.mark.parametrize("values", [
    [1, 2], [("a", 1), ("b", 2)], [("a", 1), 2], [("a", [1]), ("b", 2)], [[1], 2],
], ids=repr)
def test_every_mix_of_value_kinds_is_cached_by_kind(make, values):
    b = make()
    acc = b.value_accessor(NAME)
    keys = [f"k{i}" for i in range(len(values))]
    acc.load(keys, _groups(b, keys))
    acc.store(dict(zip(keys, values)))
    for k, v in zip(keys, values):
        immutable = not isinstance(v, list) and not (isinstance(v, tuple)
                                                     and any(isinstance(x, list) for x in v))
        assert (acc._cache[k] is v) == immutable
        assert (type(acc._cache[k]) is _Stored) == (not immutable)
    assert acc.load(keys, _groups(b, keys))[1] == dict(zip(keys, values))


def test_read_values_are_cached_by_kind_and_absent_keys_remembered(make):
    b = make()
    acc = b.value_accessor(NAME)
    for k, v in [("a", ("x", 1)), ("b", [1])]:
        acc.put(k, b.assign_key_group(k), v)
    keys = ["a", "b", "c"]
    assert acc.load(keys, _groups(b, keys))[1] == {"a": ("x", 1), "b": [1], "c": None}
    assert [acc._cache[k] for k in ("a", "c")] == [("x", 1), _ABSENT]
    assert type(acc._cache["b"]) is _Stored
    assert acc.get("c", b.assign_key_group("c"), default=0) == 0


def test_a_none_value_clears_the_key(make):
    b = make()
    acc = b.value_accessor(NAME)
    keys = ["a", "b"]
    acc.load(keys, _groups(b, keys))
    acc.store({"a": 1, "b": 2})
    b.get_keys(NAME)
    acc.load(keys, _groups(b, keys))
    acc.store({"a": None, "b": 3})
    assert acc._cache["a"] is _ABSENT
    assert list(b.get_keys(NAME)) == ["b"]


def test_a_partly_full_cache_writes_the_rest_at_once(make):
    b = make(value_cache_entries=3)
    acc = b.value_accessor(NAME)
    keys = [f"k{i}" for i in range(6)]
    acc.load(keys[:1], _groups(b, keys[:1]))
    acc.store({keys[0]: 0})
    acc.load(keys, _groups(b, keys))
    acc.store({k: i for i, k in enumerate(keys)})
    assert len(acc._cache) == 3 and acc.pending_writes == 3
    assert _values(b, keys[3:]) == {k: i + 3 for i, k in enumerate(keys[3:])}  # at once
    acc.load(keys, _groups(b, keys))
    acc.store(dict.fromkeys(keys))  # cached: marked absent; the others deleted now
    assert _values(b, keys[3:]) == {k: None for k in keys[3:]}
    assert acc.load(keys, _groups(b, keys))[1] == dict.fromkeys(keys)
    assert list(b.get_keys(NAME)) == []


@pytest.mark.parametrize("cache", [0, 1, 5, 40, 1 << 16])
@pytest.mark.parametrize("seed", range(4))
def test_random_batches_match_a_dict(make, cache, seed):
    """Batches of random keys (repeats, NaN, ints equal to floats) and random new values
    (scalars, tuples, lists, None = clear) against a plain dict, through full and
    partly full caches, flushes, snapshots' releases and per-record reads and writes."""
    import random

    rng = random.Random(seed)
    b = make(value_cache_entries=cache)
    acc = b.value_accessor(NAME)
    pool = [f"k{i}" for i in range(30)] + [7, 7.0, 7.5, float("nan"), ("t", 1)]
    model = {}
    for step in range(60):
        keys = [rng.choice(pool) for _ in range(rng.randint(1, 25))]
        kept, values = acc.load(keys, _groups(b, keys))
        assert values == {k: model.get(k if k == k else "nan") for k in values}
        for k in values:
            v = rng.choice([None, step, ("s", step), [step], 2.5, "x" * step])
            values[k] = v
            if v is None:
                model.pop(k if k == k else "nan", None)
            else:
                model[k if k == k else "nan"] = v
        acc.store(values)
        if step % 7 == 3:
            acc.flush(release_if_full=True)
        if step % 11 == 5:  # a per-record write beside the cache
            k = rng.choice(pool[:30])
            acc.put(k, b.assign_key_group(k), ("p", step))
            model[k] = ("p", step)
    assert sorted(map(encode_key, b.get_keys(NAME))) == sorted(
        encode_key(float("nan") if k == "nan" else k) for k in model)
    for k, v in model.items():
        key = float("nan") if k == "nan" else k
        assert acc.get(key, b.assign_key_group(key)) == v


def _fold_batch(acc, b, records, reduce):
    """One batch through the accessor as KeyedReduceOperator does: folded in the cache when
    it can, else loaded, folded and stored; the new values."""
    groups = _groups(b, [r[0] for r in records])
    keys, out = acc.fold_cached(records, groups, lambda r: r[0], reduce)
    if out is not None:
        return out, True
    keys, current = acc.load(keys, groups)
    out = []
    for r, k in zip(records, keys):
        cur = current[k]
        current[k] = r = r if cur is None else reduce(cur, r)
        out.append(r)
    acc.store(current)
    return out, False


@pytest.mark.parametrize("cache", [0, 4, 1 << 16])
@pytest.mark.parametrize("seed", range(3))
def test_folds_in_the_cache_match_a_dict(make, cache, seed):
    """Random batches folded by fold_cached where every key is cached and by load / store
    where not (new keys, a full cache, keys no plain key type), with results that are
    scalars, tuples, lists and None (clears), against a plain dict; flushes, snapshots'
    releases and per-record writes in between. Reads of a mutable value folded in the
    cache are copies, and RocksDB ends holding what the dict holds."""
    import random

    rng = random.Random(seed)
    b = make(value_cache_entries=cache)
    acc = b.value_accessor(NAME)
    pool = [f"k{i}" for i in range(12)] + [3, b"b", 2.5]

    def reduce(a, r):
        kind = r[1] % 5
        if kind == 0:
            return None
        if kind == 1:
            return [r[0], r[1]]  # mutable: cached as bytes
        return (r[0], r[1] + (a[1] if isinstance(a[1], int) else 0))
    model, folded = {}, 0
    for step in range(80):
        keys = pool[:3] if step % 2 else pool  # a few hot keys: they stay cached
        records = [(rng.choice(keys), rng.randrange(100)) for _ in range(rng.randint(1, 12))]
        expected = []
        for k, v in records:
            cur = model.get(k)
            new = (k, v) if cur is None else reduce(cur, (k, v))
            expected.append(new)
            if new is None:
                model.pop(k, None)
            else:
                model[k] = new
        out, in_cache = _fold_batch(acc, b, records, reduce)
        folded += in_cache
        assert out == expected
        for k, v in model.items():
            if type(v) is list:
                assert type(acc._cache.get(k, _ABSENT)) in (_Stored, _Absent)
        if step % 9 == 4:
            acc.flush(release_if_full=True)
        if step % 13 == 6:
            k = rng.choice(pool[:12])
            acc.put(k, b.assign_key_group(k), (k, 1000 + step))
            model[k] = (k, 1000 + step)
        if step % 17 == 8:  # a read of a mutable value is a copy
            for k, v in model.items():
                if type(v) is list:
                    acc.get(k, b.assign_key_group(k)).append("x")
    assert folded > 0 if cache else folded == 0
    assert sorted(map(encode_key, b.get_keys(NAME))) == sorted(map(encode_key, model))
    assert _values(b, list(model)) == model  # after get_keys' flush


def test_a_flush_writes_the_entries_that_are_not_those_rocksdb_holds(make):
    """The cache knows its unwritten writes by identity: an entry that is not the very
    object RocksDB was last given (or read) is written at the next flush, one that is (a
    reduce that kept its value) is not, and a write through leaves nothing pending."""
    b = make(value_cache_entries=16)
    acc = b.value_accessor(NAME)
    keys = ["a", "b", "c", "d"]
    groups = [b.assign_key_group(k) for k in keys]
    _, values = acc.load(keys, groups)   # none has a value: cached as absent
    assert acc.pending_writes == 0
    values.update({"a": 1000, "b": ("b", 2), "c": ["c"]})
    acc.store(values)
    assert acc.pending_writes == 3       # "d" stays absent: the same entry
    acc.flush()
    assert acc.pending_writes == 0
    assert _values(b, keys) == {"a": 1000, "b": ("b", 2), "c": ["c"], "d": None}

    def keep_b(cur, r):
        return cur if r[0] == "b" else cur + r[1]
    records = [("a", 1), ("b", 5), ("d", 7), ("a", 2)]
    _, out = acc.fold_cached(records, [b.assign_key_group(k) for k, _ in records],
                             lambda r: r[0], keep_b)
    assert out == [1001, ("b", 2), ("d", 7), 1003]
    assert acc.pending_writes == 2       # "a" and "d"; "b" kept its very value
    acc.put("a", b.assign_key_group("a"), 5)   # written through: no longer pending
    assert acc.pending_writes == 1
    acc.flush()
    assert acc.pending_writes == 0
    assert _values(b, keys) == {"a": 5, "b": ("b", 2), "c": ["c"], "d": ("d", 7)}
    acc.discard()                        # forgotten: every read is RocksDB's again
    _, values = acc.load(keys, groups)
    assert values == {"a": 5, "b": ("b", 2), "c": ["c"], "d": ("d", 7)}
