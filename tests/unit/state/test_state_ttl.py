"""State TTL on both keyed backends with a manual clock: expiry of every state kind, both
update types, both visibilities, every cleanup strategy, and across snapshot/restore."""

import pytest

from flowray.common.clock import ManualClock
from flowray.common.time import Duration, Time
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.ttl import IncompatibleStateError, TtlState, ttl_table_name
from flowray.state.ttl_config import StateTtlConfig
from tests.support.functions import Average, Max
from tests.support.storage import DictStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
TTL = 1000


class Backends:
    def __init__(self, kind, tmp_path):
        self.kind, self.tmp_path, self.created = kind, tmp_path, []
        self.clock = ManualClock(10_000)

    def __call__(self, kind=None):
        kind = kind or self.kind
        if kind == "heap":
            b = HeapKeyedStateBackend(FULL, MAXP, clock=self.clock)
        else:
            b = RocksDBKeyedStateBackend(FULL, MAXP, self.tmp_path / f"r{len(self.created)}",
                                         clock=self.clock)
        self.created.append(b)
        return b


@pytest.fixture(params=["heap", "rocksdb"])
def make(request, tmp_path):
    f = Backends(request.param, tmp_path)
    yield f
    for b in f.created:
        b.dispose()


def config(update=None, visibility=None, **cleanup):
    b = StateTtlConfig.new_builder(Time.milliseconds(TTL)).disable_cleanup_in_background()
    if update is not None:
        b.set_update_type(update)
    if visibility is not None:
        b.set_state_visibility(visibility)
    if cleanup.get("full"):
        b.cleanup_full_snapshot()
    if "incremental" in cleanup:
        b.cleanup_incrementally(*cleanup["incremental"])
    if "compaction" in cleanup:
        b.cleanup_in_rocksdb_compact_filter(cleanup["compaction"])
    return b.build()


def with_ttl(descriptor, cfg=None):
    descriptor.enable_time_to_live(cfg or config())
    return descriptor


def take(backend, storage, cid=1):
    return backend.snapshot(cid).write(storage.write_file, f"chk-{cid}/keyed")


RW = StateTtlConfig.UpdateType.OnReadAndWrite
CW = StateTtlConfig.UpdateType.OnCreateAndWrite
NEVER = StateTtlConfig.StateVisibility.NeverReturnExpired
RETURN = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


# -- the config ---------------------------------------------------------------------------

def test_config_builder_defaults_and_getters():
    c = StateTtlConfig.new_builder(Time.seconds(1)).build()
    assert c.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert c.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert c.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert c.get_ttl() == Time.seconds(1) and c.get_ttl_ms() == 1000 and c.is_enabled()
    s = c.get_cleanup_strategies()
    assert s.is_cleanup_in_background() and not s.in_full_snapshot()
    assert s.get_incremental_cleanup_strategy().get_cleanup_size() == 5
    assert s.get_rocksdb_compact_filter_cleanup_strategy().get_query_time_after_num_entries() \
        == 1000


def test_config_builder_methods_and_enum_values():
    c = (StateTtlConfig.new_builder(Duration.of_seconds(5))
         .update_ttl_on_read_and_write().return_expired_if_not_cleaned_up()
         .use_processing_time().cleanup_full_snapshot().cleanup_incrementally(10, True)
         .cleanup_in_rocksdb_compact_filter(7, Duration.of_days(1))
         .disable_cleanup_in_background().set_ttl(Time.seconds(2)).build())
    assert c.get_ttl_ms() == 2000 and c.get_update_type() is RW
    assert c.get_state_visibility() is RETURN
    s = c.get_cleanup_strategies()
    assert s.in_full_snapshot() and not s.is_cleanup_in_background()
    inc = s.get_incremental_cleanup_strategy()
    assert (inc.get_cleanup_size(), inc.run_cleanup_for_every_record()) == (10, True)
    rf = s.get_rocksdb_compact_filter_cleanup_strategy()
    assert rf.get_query_time_after_num_entries() == 7
    assert rf.get_periodic_compaction_time() == Duration.of_days(1)
    assert [u.value for u in StateTtlConfig.UpdateType] == [0, 1, 2]
    assert StateTtlConfig.StateVisibility.NeverReturnExpired.value == 1
    assert StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER.value == 2
    off = StateTtlConfig.new_builder(Time.seconds(1)).disable_cleanup_in_background().build()
    assert off.get_cleanup_strategies().get_incremental_cleanup_strategy() is None


def test_config_rejects_bad_input():
    with pytest.raises(TypeError, match="Time or a Duration"):
        StateTtlConfig.new_builder(1000)
    with pytest.raises(ValueError, match="positive"):
        StateTtlConfig.new_builder(Time.seconds(0))
    with pytest.raises(ValueError, match="cleanup_size"):
        StateTtlConfig.new_builder(Time.seconds(1)).cleanup_incrementally(0, False)
    with pytest.raises(TypeError, match="StateTtlConfig"):
        ValueStateDescriptor("v").enable_time_to_live("1s")


def test_exported_where_pyflink_has_it():
    from flowray.datastream.state import StateTtlConfig as exported
    assert exported is StateTtlConfig


# -- expiry of every kind -------------------------------------------------------------------

def test_value_state_expires(make):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    assert isinstance(s, TtlState)
    b.set_current_key("a")
    s.update(1)
    make.clock.advance(TTL - 1)
    assert s.value() == 1
    make.clock.advance(1)
    assert s.value() is None
    s.update(2)
    assert s.value() == 2


@pytest.mark.parametrize("update", [CW, RW])
def test_update_types(make, update):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"), config(update)))
    b.set_current_key("a")
    s.update(1)
    make.clock.advance(600)
    assert s.value() == 1  # refreshes the timestamp only with OnReadAndWrite
    make.clock.advance(600)
    assert s.value() == (1 if update is RW else None)


@pytest.mark.parametrize("visibility", [NEVER, RETURN])
def test_visibility_and_cleanup_on_read(make, visibility):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"), config(CW, visibility)))
    b.set_current_key("a")
    s.update("x")
    make.clock.advance(TTL)
    assert s.value() == ("x" if visibility is RETURN else None)
    assert s.value() is None  # read once: cleaned up
    assert list(b.get_keys(ttl_table_name("v"))) == []


@pytest.mark.parametrize("visibility", [NEVER, RETURN])
@pytest.mark.parametrize("update", [CW, RW])
def test_list_state_elements_expire_one_by_one(make, update, visibility):
    b = make()
    s = b.get_partitioned_state(with_ttl(ListStateDescriptor("l"), config(update, visibility)))
    b.set_current_key("a")
    s.add(1)
    make.clock.advance(500)
    s.add_all([2, 3])
    make.clock.advance(500)  # 1 expired, 2 and 3 not
    assert s.get() == ([1, 2, 3] if visibility is RETURN else [2, 3])
    assert s.get() == [2, 3]
    make.clock.advance(600)  # with OnReadAndWrite the reads refreshed 2 and 3
    assert s.get() == ([2, 3] if update is RW else ([2, 3] if visibility is RETURN else []))
    s.update([7])
    make.clock.advance(TTL - 1)
    assert list(s) == [7]
    with pytest.raises(ValueError, match="None"):
        s.add(None)


@pytest.mark.parametrize("visibility", [NEVER, RETURN])
@pytest.mark.parametrize("update", [CW, RW])
def test_map_state_entries_expire_one_by_one(make, update, visibility):
    b = make()
    s = b.get_partitioned_state(with_ttl(MapStateDescriptor("m"), config(update, visibility)))
    b.set_current_key("a")
    s.put("x", 1)
    make.clock.advance(500)
    s.put_all({"y": 2, "z": 3})
    make.clock.advance(500)  # x expired
    assert s.contains("y") and s["z"] == 3
    expired_seen = visibility is RETURN
    assert sorted(s.items()) == ([("x", 1), ("y", 2), ("z", 3)] if expired_seen
                                 else [("y", 2), ("z", 3)])
    assert s.get("x") is None and "x" not in s
    make.clock.advance(600)  # y, z written at 500 (+ read at 1000 with OnReadAndWrite)
    assert sorted(s.keys()) == (["y", "z"] if update is RW or expired_seen else [])
    s.remove("y")
    s.put("w", 4)
    assert "w" in s.keys() and not s.is_empty()
    make.clock.advance(5 * TTL)
    assert s.get("w") == (4 if visibility is RETURN else None)
    assert s.is_empty() is (visibility is NEVER or update is CW)  # z, refreshed, expired
    assert s.is_empty()


@pytest.mark.parametrize("update", [CW, RW])
def test_reducing_state_starts_over_after_expiry(make, update):
    b = make()
    s = b.get_partitioned_state(with_ttl(ReducingStateDescriptor("r", Max()), config(update)))
    b.set_current_key("a")
    s.add(5)
    s.add(3)
    make.clock.advance(TTL - 1)
    assert s.get() == 5
    make.clock.advance(TTL - 1)
    assert s.get() == (5 if update is RW else None)
    make.clock.advance(TTL)
    s.add(2)  # the expired 5 is not reduced in
    assert s.get() == 2


@pytest.mark.parametrize("update", [CW, RW])
def test_aggregating_state_starts_over_after_expiry(make, update):
    b = make()
    s = b.get_partitioned_state(
        with_ttl(AggregatingStateDescriptor("g", Average()), config(update)))
    b.set_current_key("a")
    s.add(2)
    s.add(4)
    make.clock.advance(TTL - 1)
    assert s.get() == 3
    make.clock.advance(TTL - 1)
    assert s.get() == (3 if update is RW else None)
    make.clock.advance(TTL)
    s.add(10)
    assert s.get() == 10
    s.clear()
    assert s.get() is None


def test_keys_expire_independently(make):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    b.set_current_key("a")
    s.update(1)
    make.clock.advance(600)
    b.set_current_key("b")
    s.update(2)
    make.clock.advance(600)
    assert s.value() == 2
    b.set_current_key("a")
    assert s.value() is None


def test_same_object_and_kind_check(make):
    b = make()
    d = with_ttl(ValueStateDescriptor("v"))
    assert b.get_partitioned_state(d) is b.get_partitioned_state(d)
    with pytest.raises(Exception, match="registered as value state"):
        b.get_partitioned_state(with_ttl(ListStateDescriptor("v")))


def test_disabled_update_type_means_no_ttl(make):
    b = make()
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(config(StateTtlConfig.UpdateType.Disabled))
    s = b.get_partitioned_state(d)
    assert not isinstance(s, TtlState)
    b.set_current_key("a")
    s.update(1)
    make.clock.advance(10 * TTL)
    assert s.value() == 1


# -- cleanup strategies ---------------------------------------------------------------------

def fill(b, s, n, prefix="k"):
    for i in range(n):
        b.set_current_key(f"{prefix}{i}")
        s.update(i)


def stored_keys(b, name):
    return set(b.get_keys(ttl_table_name(name)))


def test_incremental_cleanup_on_access_heap(make):
    b = make("heap")
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"),
                                         config(incremental=(3, False))))
    fill(b, s, 10)  # each write is an access: the walk finds nothing expired yet
    make.clock.advance(TTL)
    b.set_current_key("fresh")
    s.update(1)  # one access: 3 more keys checked
    assert len(stored_keys(b, "v")) == 11 - 3
    for _ in range(3):
        s.value()
    assert stored_keys(b, "v") == {"fresh"}
    assert b.get_current_key() == "fresh" and s.value() == 1


def test_incremental_cleanup_for_every_record_heap(make):
    b = make("heap")
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"),
                                         config(incremental=(2, True))))
    fill(b, s, 6)
    make.clock.advance(TTL)
    for i in range(3):  # records whose function does not touch the state
        b.set_current_key(f"other{i}")
    assert stored_keys(b, "v") == set()
    assert b.get_current_key() == "other2"


def test_incremental_cleanup_has_no_effect_on_rocksdb(make):
    b = make("rocksdb")
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"),
                                         config(incremental=(100, True))))
    fill(b, s, 5)
    make.clock.advance(TTL)
    b.set_current_key("k0")
    s.clear()
    assert len(stored_keys(b, "v")) == 4


def test_compaction_filter_sweep_rocksdb(tmp_path):
    make = Backends("rocksdb", tmp_path)
    b = make("rocksdb")
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"), config(compaction=4)))
    fill(b, s, 8)
    make.clock.advance(TTL)
    fill(b, s, 3, prefix="new")
    assert len(stored_keys(b, "v")) == 11  # 3 writes: no sweep yet
    b.set_current_key("new3")
    s.update(3)  # the 4th write: a sweep of 4 keys, in key-group order
    assert len(stored_keys(b, "v")) < 12
    b.set_current_key("hot")
    for i in range(4 * 12):  # 12 more sweeps of 4: the walk passes every key
        s.update(i)
    assert stored_keys(b, "v") == {"hot", "new0", "new1", "new2", "new3"}
    assert b.get_current_key() == "hot" and s.value() == 47
    b.dispose()


def test_compaction_filter_sweep_has_no_effect_on_heap(make):
    b = make("heap")
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"), config(compaction=1)))
    fill(b, s, 4)
    make.clock.advance(TTL)
    fill(b, s, 4, prefix="new")
    assert len(stored_keys(b, "v")) == 8


def test_default_background_cleanup(make):
    b = make()
    cfg = StateTtlConfig.new_builder(Time.milliseconds(TTL)).build()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v"), cfg))
    fill(b, s, 3)
    make.clock.advance(TTL)
    b.set_current_key("x")
    s.update(1)
    # heap: 5 keys per access; RocksDB: a sweep only after 1000 writes
    assert len(stored_keys(b, "v")) == (1 if make.kind == "heap" else 4)


@pytest.mark.parametrize("kind_of_state", ["value", "list", "map", "reducing", "aggregating"])
def test_full_snapshot_cleanup_leaves_expired_values_out(make, kind_of_state):
    b = make()
    cfg = config(full=True)
    d = {"value": ValueStateDescriptor("s"), "list": ListStateDescriptor("s"),
         "map": MapStateDescriptor("s"), "reducing": ReducingStateDescriptor("s", Max()),
         "aggregating": AggregatingStateDescriptor("s", Average())}[kind_of_state]
    s = b.get_partitioned_state(with_ttl(d, cfg))

    def write(v):
        if kind_of_state == "value":
            s.update(v)
        elif kind_of_state == "map":
            s.put(v, v)
        else:
            s.add(v)

    b.set_current_key("old")
    write(1)
    b.set_current_key("mixed")
    write(2)
    make.clock.advance(600)
    write(3)
    b.set_current_key("young")
    write(4)
    make.clock.advance(500)  # everything written at 0 expired
    storage = DictStorage()
    # savepoints of both backends, and the heap's checkpoints; a RocksDB checkpoint holds
    # RocksDB's files as they are (as in Flink: not for incremental checkpoints)
    savepoint_or_not = [True] if make.kind == "rocksdb" else [False, True]
    for cid, savepoint in enumerate(savepoint_or_not, 1):
        handle = b.snapshot(cid, savepoint=savepoint).write(storage.write_file,
                                                            f"chk-{cid}/keyed")
        assert len(stored_keys(b, "s")) == 3  # the live state is not changed
        r = make()
        r.restore([handle], storage.read)
        assert stored_keys(r, "s") == {"mixed", "young"}
        rs = r.get_partitioned_state(with_ttl(type(d)(*_args(d)), cfg))
        r.set_current_key("mixed")
        got = {"value": lambda: rs.value(), "list": lambda: rs.get(),
               "map": lambda: rs.keys(), "reducing": lambda: rs.get(),
               "aggregating": lambda: rs.get()}[kind_of_state]()
        # reducing and aggregating state are one value: 2 and 3 are folded, written at 600
        assert got == {"value": 3, "list": [3], "map": [3], "reducing": 3,
                       "aggregating": 2.5}[kind_of_state]


def _args(d):
    if isinstance(d, ReducingStateDescriptor):
        return (d.name, d.reduce_function)
    if isinstance(d, AggregatingStateDescriptor):
        return (d.name, d.agg_function)
    return (d.name,)


def test_without_full_snapshot_cleanup_expired_values_are_written(make):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    fill(b, s, 2)
    make.clock.advance(TTL)
    storage = DictStorage()
    r = make()
    r.restore([take(b, storage)], storage.read)
    assert stored_keys(r, "v") == {"k0", "k1"}


# -- snapshot and restore -------------------------------------------------------------------

@pytest.mark.parametrize("target", ["heap", "rocksdb"])
def test_timestamps_survive_restore_and_expiry_continues(make, target):
    b = make()
    v = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    m = b.get_partitioned_state(with_ttl(MapStateDescriptor("m")))
    plain = b.get_partitioned_state(ValueStateDescriptor("plain"))
    b.set_current_key("a")
    v.update(1)
    m.put("x", 1)
    plain.update("p")
    make.clock.advance(600)
    m.put("y", 2)
    storage = DictStorage()
    handle = take(b, storage)
    r = make(target)
    r.restore([handle], storage.read)
    rv = r.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    rm = r.get_partitioned_state(with_ttl(MapStateDescriptor("m")))
    r.set_current_key("a")
    assert rv.value() == 1 and sorted(rm.keys()) == ["x", "y"]
    make.clock.advance(400)  # 1000 after the first writes
    assert rv.value() is None and rm.keys() == ["y"]
    assert r.get_partitioned_state(ValueStateDescriptor("plain")).value() == "p"


def test_restore_with_ttl_added_is_refused(make):
    b = make()
    s = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key("a")
    s.update(1)
    storage = DictStorage()
    r = make()
    r.restore([take(b, storage)], storage.read)
    with pytest.raises(IncompatibleStateError, match="without TTL.*now enables TTL"):
        r.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))


def test_restore_with_ttl_removed_is_refused(make):
    b = make()
    s = b.get_partitioned_state(with_ttl(ValueStateDescriptor("v")))
    b.set_current_key("a")
    s.update(1)
    storage = DictStorage()
    r = make()
    r.restore([take(b, storage)], storage.read)
    with pytest.raises(IncompatibleStateError, match="with TTL.*now has no TTL"):
        r.get_partitioned_state(ValueStateDescriptor("v"))


def test_rocksdb_incremental_checkpoint_keeps_timestamps(tmp_path):
    clock = ManualClock(0)
    b = RocksDBKeyedStateBackend(FULL, MAXP, tmp_path / "a", incremental=True, clock=clock)
    r = RocksDBKeyedStateBackend(FULL, MAXP, tmp_path / "b", incremental=True, clock=clock)
    try:
        s = b.get_partitioned_state(with_ttl(ListStateDescriptor("l")))
        b.set_current_key("a")
        s.add(1)
        clock.advance(500)
        s.add(2)
        storage = DictStorage()
        r.restore([take(b, storage)], storage.read)
        rs = r.get_partitioned_state(with_ttl(ListStateDescriptor("l")))
        r.set_current_key("a")
        assert rs.get() == [1, 2]
        clock.advance(500)
        assert rs.get() == [2]
    finally:
        b.dispose()
        r.dispose()


# -- the state class surface ----------------------------------------------------------------

def test_state_classes_are_generic_and_shaped_as_pyflink():
    from flowray.datastream import state as api

    assert api.ValueState[int] is not None and api.MapState[str, int] is not None
    assert api.ListState[int] is not None and api.ReducingState[int] is not None
    assert api.AggregatingState[int, float] is not None
    for cls in (api.ListState, api.ReducingState, api.AggregatingState):
        assert issubclass(cls, api.MergingState) and issubclass(cls, api.AppendingState)
    assert not issubclass(api.ValueState, api.AppendingState)
    assert api.OperatorStateStore is not None


@pytest.mark.parametrize("ttl", [False, True])
def test_map_state_put_all_and_item_access(make, ttl):
    b = make()
    d = MapStateDescriptor("m")
    s = b.get_partitioned_state(with_ttl(d) if ttl else d)
    b.set_current_key("a")
    s.put_all({"x": 1, "y": 2})
    s["z"] = 3
    del s["x"]
    assert s["y"] == 2 and "z" in s and "x" not in s
    assert sorted(s) == ["y", "z"] and sorted(s.items()) == [("y", 2), ("z", 3)]
