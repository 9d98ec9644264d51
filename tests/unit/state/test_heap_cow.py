"""Copy-on-write heap snapshots: the synchronous part only holds the key-group dicts; what
changes after it (values, lists, maps, accumulators changed in place, new, deleted and
cleared keys) never reaches the snapshot the asynchronous part writes; several snapshots
may be pending; each is released when its write ends, it is aborted or dropped."""

import copy
import gc
import threading

import pytest

from flowray.common.clock import ManualClock
from flowray.common.time import Time
from flowray.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from flowray.state.full_snapshot import dumps_state
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.heap_snapshot import dumps_in_frames
from flowray.state.heap_table import (
    SnapshotAbortedError,
    SnapshotRegistry,
    StateTable,
    private_copy,
)
from flowray.state.key_groups import KeyGroupRange
from flowray.state.namespaced import NamespacedStates
from flowray.state.ttl_config import StateTtlConfig
from tests.support.operator_harness import FileStorage

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
KEYS = [f"k{i}" for i in range(600)] + [("t", 1), 7, None]


class ListAgg:
    """An aggregate function that changes its accumulator in place (allowed, as in
    Flink's AggregateFunction)."""

    def create_accumulator(self):
        return []

    def add(self, value, acc):
        acc.append(value)
        return acc

    def get_result(self, acc):
        return list(acc)

    def merge(self, a, b):
        a.extend(b)
        return a


def extend_in_place(a, b):
    a.extend(b)
    return a


def descriptors():
    return {
        "value": ValueStateDescriptor("value"),
        "list": ListStateDescriptor("list"),
        "map": MapStateDescriptor("map"),
        "reducing": ReducingStateDescriptor("reducing", extend_in_place),
        "agg": AggregatingStateDescriptor("agg", ListAgg()),
        "panes": MapStateDescriptor("panes"),  # kept namespace first (as window panes)
    }


def make_backend(clock=None):
    return HeapKeyedStateBackend(FULL, MAXP, clock=clock)


def states_of(backend):
    out = {}
    for n, d in descriptors().items():
        if n == "panes":
            backend.namespace_first_table(n)
        out[n] = backend.get_partitioned_state(d)
    return out


def fill(backend):
    s = states_of(backend)
    for i, k in enumerate(KEYS):
        backend.set_current_key(k)
        s["value"].update({"n": i, "tags": [i]})
        s["list"].add_all([i, (i, "x"), [i]])
        s["map"].put_all({"a": i, "b": [i], "c": {"d": i}})
        s["reducing"].add([i])
        s["agg"].add(i)
        s["panes"].put_all({("w", i % 3): i, "list": [i], "dict": {"d": i}})


def mutate(backend, round_no):
    """Change every key in every way the states allow, in place where they can."""
    s = states_of(backend)
    for i, k in enumerate(KEYS):
        backend.set_current_key(k)
        r = i % 6
        if r == 0:
            s["value"].clear()
            s["list"].clear()
            s["map"].clear()
            s["panes"].clear()
        elif r == 1:
            v = s["value"].value()
            v["n"] += 1000  # mutate-then-update: the contract
            v["tags"].append(round_no)
            s["value"].update(v)
            s["list"].add(round_no)
            s["list"].update(s["list"].get() + [round_no])
        elif r == 2:
            s["map"].put("a", -1)
            s["map"].remove("c")
            s["map"].get("b").append(round_no)  # a map value changed in place
            s["panes"].get("list").append(round_no)
            s["panes"].remove(("w", i % 3))
            s["panes"].put(("w", 9), round_no)
        elif r == 3:
            s["map"].items()[0]  # reads copy too
            dict(s["panes"].items())["dict"]["d"] = round_no  # handed out by items()
            s["map"].put_all({"new": round_no})
            s["list"].add_all([round_no] * 3)
        s["reducing"].add([round_no])
        s["agg"].add(round_no)
    for j in range(50):  # new keys
        backend.set_current_key(f"new-{round_no}-{j}")
        s["value"].update(j)
        s["map"].put(j, [j])


def contents(backend):
    """Every state's entries, deep-copied: ``{state: {key: value}}``."""
    out = {}
    for name in backend.state_names():
        entries = {}
        for kg in range(FULL.start, FULL.end + 1):
            for k, v in backend.iter_key_group(name, kg):
                entries[repr(k)] = copy.deepcopy(v)
        out[name] = entries
    return out


def restored(storage, handle, clock=None):
    b = make_backend(clock)
    b.restore([handle], storage.read)
    return b


@pytest.fixture
def storage(tmp_path):
    return FileStorage(tmp_path)


def test_the_copy_on_write_snapshot_is_consistent_under_concurrent_updates(storage):
    backend = make_backend()
    fill(backend)
    expected = contents(backend)
    writer = backend.snapshot(1)
    mutate(backend, 1)  # between the synchronous and the asynchronous part
    changed = contents(backend)
    assert changed != expected

    # the write runs in another thread while this one keeps changing the state
    written = threading.Event()
    result = {}

    def write_file(path, data):
        n = storage.write_file(path, data)
        written.set()
        return n

    def run():
        try:
            result["handle"] = writer.write(write_file, "chk-1/keyed")
        finally:
            written.set()

    t = threading.Thread(target=run)
    t.start()
    round_no = 2
    while not written.is_set():
        mutate(backend, round_no)
        round_no += 1
    t.join()
    assert contents(restored(storage, result["handle"])) == expected
    assert backend.pending_snapshots() == 0


def test_several_pending_snapshots_each_keep_their_own_state(storage):
    backend = make_backend()
    fill(backend)
    states = [contents(backend)]
    writers = [backend.snapshot(1)]
    mutate(backend, 1)
    states.append(contents(backend))
    writers.append(backend.snapshot(2))  # the first one is still pending
    mutate(backend, 2)
    writers.append(backend.snapshot(3))  # nothing changed since: same dicts, held twice
    states.append(contents(backend))
    mutate(backend, 3)
    assert backend.pending_snapshots() == 3
    handles = {}
    for i in (1, 0, 2):  # out of order
        handles[i] = writers[i].write(storage.write_file, f"chk-{i + 1}/keyed")
        mutate(backend, 10 + i)
    assert backend.pending_snapshots() == 0
    for i in range(3):
        assert contents(restored(storage, handles[i])) == states[i]


def test_a_savepoint_takes_the_same_path(storage):
    backend = make_backend()
    fill(backend)
    expected = contents(backend)
    writer = backend.snapshot(5, savepoint=True)
    mutate(backend, 1)
    handle = writer.write(storage.write_file, "savepoint-1/keyed")
    assert contents(restored(storage, handle)) == expected


def test_the_file_is_the_old_format_byte_for_byte(storage):
    backend = make_backend()
    fill(backend)
    kinds = {n: d.kind.value for n, d in descriptors().items()}
    groups = {}
    for name in backend.state_names():
        for kg in range(MAXP):
            entries = dict(backend.iter_key_group(name, kg))
            if entries:
                groups.setdefault(kg, {})[name] = entries
    old = dumps_state({"format": "flowray-heap-v1", "kinds": kinds, "groups": groups})
    handle = backend.snapshot(1).write(storage.write_file, "chk-1/keyed")
    assert storage.read(handle.path) == old


def test_snapshots_are_released_when_written_aborted_or_dropped(storage):
    backend = make_backend()
    fill(backend)
    tables = list(backend._tables.values())

    def held():
        return sum(s is not None for t in tables for s in t.shared) + sum(
            t.holds for t in tables)

    assert held() == 0
    writer = backend.snapshot(1)
    assert held() > 0 and backend.pending_snapshots() == 1
    writer.write(storage.write_file, "chk-1/keyed")
    assert held() == 0 and backend.pending_snapshots() == 0

    aborted = backend.snapshot(2)
    backend.notify_checkpoint_aborted(2)
    assert held() == 0 and backend.pending_snapshots() == 0
    with pytest.raises(SnapshotAbortedError, match="checkpoint 2 was aborted"):
        aborted.write(storage.write_file, "chk-2/keyed")

    dropped = backend.snapshot(3)
    assert backend.pending_snapshots() == 1
    del dropped
    gc.collect()
    assert held() == 0 and backend.pending_snapshots() == 0


class AbortWhenPickled:
    """A value whose pickling aborts the checkpoint (the abort arrives mid-write)."""

    abort = None

    def __reduce__(self):
        AbortWhenPickled.abort()
        return int, (0,)


def test_an_abort_during_the_write_stops_it_and_releases(storage, tmp_path):
    backend = make_backend()
    fill(backend)
    backend.set_current_key(KEYS[0])
    backend.get_partitioned_state(ValueStateDescriptor("aborts")).update(AbortWhenPickled())
    writer = backend.snapshot(4)
    AbortWhenPickled.abort = lambda: backend.notify_checkpoint_aborted(4)
    assert backend.pending_snapshots() == 1
    with pytest.raises(SnapshotAbortedError, match="during its asynchronous part"):
        writer.write(storage.write_file, "chk-4/keyed")
    assert backend.pending_snapshots() == 0
    assert not (tmp_path / "chk-4").exists()


def test_an_empty_backend_writes_nothing(storage):
    backend = make_backend()
    backend.get_partitioned_state(ValueStateDescriptor("v"))
    assert backend.snapshot(1).write(storage.write_file, "chk-1/keyed") is None
    assert backend.pending_snapshots() == 0


def test_ttl_full_snapshot_cleanup_uses_the_time_of_the_synchronous_part(storage):
    clock = ManualClock(0)
    backend = make_backend(clock)
    d = ValueStateDescriptor("seen")
    d.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100))
                          .cleanup_full_snapshot().build())
    ld = ListStateDescriptor("events")
    ld.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100))
                           .cleanup_full_snapshot().build())
    seen, events = backend.get_partitioned_state(d), backend.get_partitioned_state(ld)
    backend.set_current_key("old")
    seen.update(1)
    events.add("old")
    clock.set(60)
    backend.set_current_key("young")
    seen.update(2)
    events.add("young")
    clock.set(120)  # "old" expired, "young" not
    writer = backend.snapshot(1)
    backend.set_current_key("young")
    events.add("later")  # changes the stored list in place (the TTL list state)
    clock.set(1000)  # everything expired by now: the write must not use this time
    handle = writer.write(storage.write_file, "chk-1/keyed")
    r = restored(storage, handle, clock=ManualClock(120))
    s, e = r.get_partitioned_state(d), r.get_partitioned_state(ld)
    r.set_current_key("old")
    assert s.value() is None and e.get() == []
    r.set_current_key("young")
    assert s.value() == 2 and e.get() == ["young"]


def test_namespaced_state_changes_after_the_snapshot_stay_out(storage):
    backend = make_backend()
    ns = NamespacedStates(backend, "trigger/")
    count = ReducingStateDescriptor("count", extend_in_place)
    lst = ListStateDescriptor("l")
    for k in KEYS[:100]:
        backend.set_current_key(k)
        ns.get(count, "w1").add([1])
        ns.get(lst, "w1").add(1)
    expected = contents(backend)
    writer = backend.snapshot(1)
    for k in KEYS[:100]:
        backend.set_current_key(k)
        ns.get(count, "w1").add([2])
        ns.get(count, "w2").add([3])
        ns.merge(count, "w1", ["w2"])
        ns.get(lst, "w1").add(2)
    handle = writer.write(storage.write_file, "chk-1/keyed")
    assert contents(restored(storage, handle)) == expected


def test_private_copy_shares_nothing_mutable():
    nested = {"a": [1, {"b": [2]}], "c": (1, [3]), "d": {4, 5}, "e": "s"}
    c = private_copy(nested)
    assert c == nested
    c["a"][1]["b"].append(9)
    c["c"][1].append(9)
    c["d"].add(6)
    assert nested == {"a": [1, {"b": [2]}], "c": (1, [3]), "d": {4, 5}, "e": "s"}
    flat = (1, "x", None)
    assert private_copy(flat) is flat
    lst = [1, (2, "y")]
    assert private_copy(lst) == lst and private_copy(lst) is not lst

    class Holder:
        def __init__(self):
            self.lock = threading.Lock()  # deepcopy fails; pickle cannot either
            self.items = [1]

    holder = Holder()  # cannot be copied: shared as it is (its snapshot fails anyway)
    assert private_copy(holder) is holder


def test_for_change_gives_a_held_dict_and_value_as_copies_and_others_as_they_are():
    table = StateTable("s", StateKind.MAP, KeyGroupRange(0, 1))
    table.writable(0)["k"] = {"w": [1]}
    held_dict, held_value = table.maps[0], table.maps[0]["k"]
    frozen = SnapshotRegistry().freeze([table], checkpoint_id=1)
    m, value = table.for_change(0, "k", held_value)
    m["new"] = {}
    value["w"].append(2)
    assert m is table.maps[0] and m is not held_dict and value is not held_value
    assert value is m["k"] and held_dict == {"k": {"w": [1]}}   # the snapshot's, untouched
    assert table.for_change(0, "k", value) == (m, value)        # private now: as it is
    assert table.for_change(0, "absent", None) == (m, None)
    frozen.release()
    assert table.for_change(1, "k", None) == (table.maps[1], None)


def test_dumps_in_frames_is_dumps_state():
    obj = {"groups": {kg: {"s": {f"k{i}": (i, [i]) for i in range(2000)}} for kg in range(8)}}
    assert dumps_in_frames(obj) == dumps_state(obj)


class CountsPickles:
    pickled = 0

    def __reduce__(self):
        CountsPickles.pickled += 1
        return CountsPickles, ()


def test_the_synchronous_part_serializes_nothing(storage):
    backend = make_backend()
    fill(backend)
    backend.set_current_key("p")
    backend.get_partitioned_state(ValueStateDescriptor("p")).update(CountsPickles())
    CountsPickles.pickled = 0
    writer = backend.snapshot(1)
    assert CountsPickles.pickled == 0
    writer.write(storage.write_file, "chk-1/keyed")
    assert CountsPickles.pickled == 1
