"""RocksDB batching: the value accessor's load / store of a batch and its write-behind cache,
and KeyedReduceOperator's batched RocksDB path -- same results as the heap backend, and
snapshots (full and incremental) hold every write made before them."""

import os

import pytest

from flowray.operators.keyed import KeyedReduceOperator, field_aggregator
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from tests.support.operator_harness import (
    FULL,
    LOWER,
    MAXP,
    UPPER,
    FileStorage,
    OperatorHarness,
    keys_in,
)

NAME = KeyedReduceOperator.STATE_NAME


@pytest.fixture
def backends(tmp_path):
    made = []

    def make(kind="rocksdb", key_group_range=FULL, **kwargs):
        if kind == "heap":
            b = HeapKeyedStateBackend(key_group_range, MAXP)
        else:
            b = RocksDBKeyedStateBackend(key_group_range, MAXP, tmp_path / f"r{len(made)}",
                                         **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        b.dispose()


def _load(backend, acc, keys):
    """The accessor's values of ``keys`` (one batch)."""
    return acc.load(keys, [backend.assign_key_group(k) for k in keys])[1]


def _write(backend, acc, values, deletes=()):
    """Store ``values`` (key -> value) and clear ``deletes`` as one batch."""
    loaded = _load(backend, acc, list(values) + list(deletes))
    loaded.update(values)
    loaded.update(dict.fromkeys(deletes))
    acc.store(loaded)


def _snapshot_and_restore(backend, storage, make, kind="rocksdb", cid=1, **kwargs):
    handle = backend.snapshot(cid).write(storage.write_file, f"chk-{cid}/keyed")
    restored = make(kind, **kwargs)
    restored.restore([handle], storage.read)
    return restored


def _values(backend, keys):
    state = backend.get_partitioned_state(ValueStateDescriptor(NAME))
    out = {}
    for k in keys:
        backend.set_current_key(k)
        out[k] = state.value()
    return out


# ---------------------------------------------------------------------------------------
# the accessor
# ---------------------------------------------------------------------------------------

def test_cached_writes_reach_rocksdb_on_flush_and_before_reads_of_the_state(backends):
    b = backends()
    acc = b.value_accessor(NAME)
    keys = ["a", "b", "c"]
    assert _load(b, acc, keys) == {"a": None, "b": None, "c": None}
    _write(b, acc, {"a": 1, "b": ("t", 2)})
    assert acc.pending_writes == 2
    assert _load(b, acc, keys) == {"a": 1, "b": ("t", 2), "c": None}
    assert _values(b, keys) == {"a": None, "b": None, "c": None}  # not flushed yet
    assert sorted(b.get_keys(NAME)) == ["a", "b"]  # get_keys flushes first
    assert acc.pending_writes == 0
    assert _values(b, keys) == {"a": 1, "b": ("t", 2), "c": None}
    _write(b, acc, {}, deletes=["a"])
    assert _load(b, acc, ["a"]) == {"a": None}
    assert [k for k, _ in b.iter_key_group(NAME, b.assign_key_group("a"))] == []


def test_reads_return_copies_even_from_the_cache(backends):
    b = backends()
    acc = b.value_accessor(NAME)
    _write(b, acc, {"a": [1, 2]})
    _load(b, acc, ["a"])["a"].append(3)
    assert _load(b, acc, ["a"]) == {"a": [1, 2]}


def test_a_full_cache_takes_no_new_keys_and_a_snapshot_empties_it(backends, tmp_path):
    b = backends(value_cache_entries=4)
    acc = b.value_accessor(NAME)
    keys = [f"k{i}" for i in range(30)]
    for rnd in range(2):
        for i in range(0, 30, 3):
            batch = keys[i:i + 3]
            expected = None if rnd == 0 else rnd - 1
            assert _load(b, acc, batch) == dict.fromkeys(batch, expected)
            _write(b, acc, dict.fromkeys(batch, rnd))
            assert acc.pending_writes <= 4 and len(acc._cache) <= 4
    assert acc.pending_writes == 4  # the first four keys: cached writes
    assert _values(b, keys[4:]) == {k: 1 for k in keys[4:]}  # the others written at once
    restored = _snapshot_and_restore(b, FileStorage(tmp_path / "chk"), backends)
    assert _values(restored, keys) == {k: 1 for k in keys}
    assert acc.pending_writes == 0 and len(acc._cache) == 0  # full: emptied by the snapshot
    _load(b, acc, keys[10:12])
    assert len(acc._cache) == 2


def test_no_cache_writes_through(backends):
    b = backends(value_cache_entries=0)
    acc = b.value_accessor(NAME)
    _write(b, acc, {"a": 1, "b": 2})
    assert acc.pending_writes == 0 and acc._cache == {}
    assert _values(b, ["a", "b"]) == {"a": 1, "b": 2}
    _write(b, acc, {}, deletes=["b"])
    assert _values(b, ["a", "b"]) == {"a": 1, "b": None}
    with pytest.raises(ValueError, match="cache_entries"):
        RocksDBKeyedStateBackend(FULL, MAXP, "never-created", value_cache_entries=-1)
    assert not os.path.exists("never-created")


def test_per_record_access_stays_coherent_with_the_cache(backends):
    b = backends()
    acc = b.value_accessor(NAME)
    assert b.value_accessor(NAME) is acc  # one accessor (one cache) per state
    kg = b.assign_key_group("a")
    _write(b, acc, {"a": 1})
    assert acc.get("a", kg) == 1
    acc.put("a", kg, 2)  # writes through and replaces the cached write
    assert acc.pending_writes == 0 and _load(b, acc, ["a"]) == {"a": 2}
    assert _values(b, ["a"]) == {"a": 2}
    acc.remove("a", kg)
    assert _load(b, acc, ["a"]) == {"a": None} and _values(b, ["a"]) == {"a": None}


def test_store_takes_the_keys_of_the_last_load_only(backends):
    b = backends()
    acc = b.value_accessor(NAME)
    loaded = _load(b, acc, ["a", "b"])
    with pytest.raises(ValueError, match="last load"):
        acc.store({"c": 1})
    acc.store({"a": 1})  # a part of what was loaded
    assert acc.pending_writes == 1 and _load(b, acc, ["a", "b"]) == {"a": 1, "b": None}
    _load(b, acc, ["a"])
    with pytest.raises(ValueError, match="last load"):
        acc.store(loaded)  # an older load's dict, with a key the last load did not read


@pytest.mark.parametrize("incremental", [False, True])
@pytest.mark.parametrize("into", ["rocksdb", "heap"])
def test_a_snapshot_holds_the_cached_writes(backends, tmp_path, incremental, into):
    if incremental and into == "heap":
        pytest.skip("incremental checkpoints restore into RocksDB only")
    b = backends(incremental=incremental)
    acc = b.value_accessor(NAME)
    keys = [f"k{i}" for i in range(50)]
    _write(b, acc, dict(zip(keys, range(50))))
    assert acc.pending_writes == 50
    restored = _snapshot_and_restore(b, FileStorage(tmp_path / "chk"), backends, into)
    assert acc.pending_writes == 0
    assert _values(restored, keys) == {k: i for i, k in enumerate(keys)}


# ---------------------------------------------------------------------------------------
# KeyedReduceOperator on RocksDB
# ---------------------------------------------------------------------------------------

def _sum_op():
    return KeyedReduceOperator(field_aggregator("sum", 1), lambda t: t[0])


def _stream(n, keys):
    return [(f"k{(i * 7) % keys}", i) for i in range(n)]


@pytest.mark.parametrize("cache", [0, 3, 1 << 16])
def test_batched_reduce_matches_the_heap_backend(tmp_path, cache):
    records = _stream(400, 13)  # many records of one key in each batch
    heap = OperatorHarness(_sum_op())
    rocks = OperatorHarness(_sum_op(), backend="rocksdb", working_dir=str(tmp_path / "r"))
    rocks.backend.value_cache_entries = cache
    rocks.backend._accessors.clear()
    rocks.operator.open()  # a fresh accessor with this cache size
    try:
        for i in range(0, len(records), 64):
            heap.process(records[i:i + 64], timestamps=list(range(i, i + 64))[:64])
            rocks.process(records[i:i + 64], timestamps=list(range(i, i + 64))[:64])
        assert rocks.records == heap.records
        assert rocks.timestamps == heap.timestamps
    finally:
        rocks.dispose()


def test_batched_reduce_snapshot_restore_continues_exactly_once(tmp_path):
    """Records before a snapshot counted once, after it once, across a restore (the
    operator-level form of the exactly-once recovery tests on RocksDB)."""
    records = _stream(3000, 101)
    storage = FileStorage(tmp_path / "chk")
    whole = OperatorHarness(_sum_op())
    whole.process(records)
    h = OperatorHarness(_sum_op(), backend="rocksdb", storage=storage,
                        working_dir=str(tmp_path / "a"))
    h.process(records[:1000])
    h.process(records[1000:1700])
    handles = h.snapshot()
    h.process(records[1700:2000])  # lost with the "failed" task
    h.dispose()
    r = h.restore_into_new_harness(handles, working_dir=str(tmp_path / "b"))
    try:
        r.process(records[1700:])
        assert r.records == whole.records[1700:]
    finally:
        r.dispose()


def test_batched_reduce_rescales(tmp_path):
    records = _stream(500, 40)
    storage = FileStorage(tmp_path / "chk")
    h = OperatorHarness(_sum_op(), backend="rocksdb", storage=storage,
                        working_dir=str(tmp_path / "a"))
    h.process(records)
    handles = h.snapshot()
    h.dispose()
    final = {}
    for rec in records:
        final[rec[0]] = final.get(rec[0], 0) + rec[1]
    for i, part in enumerate([LOWER, UPPER]):
        r = h.restore_into_new_harness(handles, key_group_range=part,
                                       working_dir=str(tmp_path / f"p{i}"))
        try:
            mine = keys_in(part, 3)
            r.process([(k, 0) for k in mine])
            assert r.records == [(k, final.get(k, 0)) for k in mine]
        finally:
            r.dispose()


def test_a_none_result_clears_the_key(tmp_path):
    op = KeyedReduceOperator(lambda a, b: None if b[1] < 0 else (a[0], a[1] + b[1]),
                             lambda t: t[0])
    h = OperatorHarness(op, backend="rocksdb", working_dir=str(tmp_path / "a"))
    try:
        h.process([("a", 1), ("a", 2), ("a", -1), ("a", 5)])
        h.process([("a", 1)])
        assert h.records == [("a", 1), ("a", 3), None, ("a", 5), ("a", 6)]
        h.process([("a", -1)])
        assert list(h.backend.get_keys(NAME)) == []
    finally:
        h.dispose()


def test_batch_execution_emits_final_values_from_the_cache(tmp_path):
    h = OperatorHarness(_sum_op(), backend="rocksdb", batch_execution=True,
                        working_dir=str(tmp_path / "a"))
    try:
        h.process(_stream(200, 9))
        assert h.records == []
        h.end_input()
        expected = {}
        for k, v in _stream(200, 9):
            expected[k] = expected.get(k, 0) + v
        assert sorted(h.records) == sorted(expected.items())
    finally:
        h.dispose()


def test_keys_of_the_batch_outside_the_range_are_refused_before_any_write(tmp_path):
    h = OperatorHarness(_sum_op(), backend="rocksdb", key_group_range=UPPER,
                        working_dir=str(tmp_path / "a"))
    try:
        own, foreign = keys_in(UPPER, 1)[0], keys_in(LOWER, 1)[0]
        with pytest.raises(Exception, match="outside this subtask's range"):
            h.process([(own, 1), (foreign, 1)])
        assert list(h.backend.get_keys(NAME)) == []
        assert h.backend.key_group_range == KeyGroupRange(64, 127)
    finally:
        h.dispose()


def test_cache_size_comes_from_configuration(tmp_path):
    from flowray.common.configuration import ConfigurationError
    from flowray.state.state_backend import create_keyed_backend

    conf = {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(tmp_path),
            "flowray.state.rocksdb.value-cache-entries": "0"}
    backend = create_keyed_backend(conf, FULL, MAXP, "job", "v1:0", 0)
    try:
        assert backend.value_cache_entries == 0
    finally:
        backend.dispose()
    conf["flowray.state.rocksdb.value-cache-entries"] = "-1"
    with pytest.raises(ConfigurationError, match="value-cache-entries"):
        create_keyed_backend(conf, FULL, MAXP, "job", "v1:0", 1)
