"""InternalTimerService: timers as keyed state with an in-memory queue as a cache.

Registration is deduplicated per (key, timestamp, namespace); event-time timers fire in
timestamp order as the watermark passes them, processing-time ones from the
ProcessingTimeService as the (manual) clock passes them; both are in every snapshot of
either backend, move with their key group, and fire after a restore."""

import pytest

from flowray.common.clock import ManualClock
from flowray.operators.base import ProcessingTimeService
from flowray.operators.functions import TimeDomain
from flowray.operators.timers import InternalTimerService, timer_state_name
from flowray.state.key_groups import assign_to_key_group
from tests.support.operator_harness import (
    BACKENDS,
    FULL,
    LOWER,
    MAXP,
    UPPER,
    BackendFactory,
    FileStorage,
    keys_in,
)

EVENT, PROC = TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME


class Timers:
    """One timer service over its own backend and manual clock; ``fired`` lists
    ``(domain, key, timestamp, namespace)`` with the key current on the backend."""

    def __init__(self, backend, clock_ms=0, name="op", on_fire=None):
        self.backend = backend
        self.clock = ManualClock(clock_ms)
        self.pts = ProcessingTimeService(self.clock)
        self.fired = []
        self._on_fire = on_fire
        self.service = InternalTimerService(name, backend, self.pts,
                                            lambda ts, ns: self._fire("e", ts, ns),
                                            lambda ts, ns: self._fire("p", ts, ns))

    def _fire(self, domain, ts, ns):
        key = self.backend.get_current_key()
        self.fired.append((domain, key, ts, ns))
        if self._on_fire is not None:
            self._on_fire(self, domain, key, ts, ns)

    def event(self, key, ts, ns=None):
        self.backend.set_current_key(key)
        self.service.register_event_time_timer(ns, ts)

    def proc(self, key, ts, ns=None):
        self.backend.set_current_key(key)
        self.service.register_processing_time_timer(ns, ts)

    def advance_clock(self, ms):
        self.clock.advance(ms)
        return self.pts.fire_due()


@pytest.fixture(params=BACKENDS)
def backends(request, tmp_path):
    f = BackendFactory(request.param, tmp_path)
    yield f
    f.close()


@pytest.fixture
def timers(backends):
    return Timers(backends())


def restore(backends, handles, storage, key_group_range=FULL, clock_ms=0):
    b = backends(key_group_range)
    b.restore(handles, storage.read)
    t = Timers(b, clock_ms)
    restored = t.service.restore()
    return t, restored


# ---------------------------------------------------------------------------------------
# registering and deleting
# ---------------------------------------------------------------------------------------

def test_one_timer_per_key_timestamp_and_namespace(timers):
    for _ in range(3):
        timers.event("a", 10)
    timers.event("a", 10, "w1")   # another namespace: another timer
    timers.event("b", 10)         # another key: another timer
    timers.event("a", 11)         # another timestamp: another timer
    assert timers.service.num_timers(EVENT) == 4
    by_key = timers.service.timers_by_key(EVENT)
    assert sorted(by_key["a"], key=repr) == sorted([(10, None), (10, "w1"), (11, None)], key=repr)
    assert by_key["b"] == [(10, None)] and set(by_key) == {"a", "b"}
    timers.service.advance_watermark(11)
    assert sorted(timers.fired, key=repr) == sorted(
        [("e", "a", 10, None), ("e", "a", 10, "w1"), ("e", "b", 10, None),
         ("e", "a", 11, None)], key=repr)
    assert timers.service.num_timers(EVENT) == 0


def test_timers_of_several_keys_registered_at_once_are_the_one_by_one_timers(backends):
    """``register_event_time_timers`` (the window operator's batch path) equals
    registering each timer with its key current: deduplicated, in keyed state, fired in
    timestamp then registration order with its key current."""
    batch = [("a", 10, "w1"), ("b", 5, None), ("a", 10, "w1"), ("c", 10, "w1"),
             ("a", 10, None), ("b", 5, None)]
    one_by_one, at_once = Timers(backends()), Timers(backends())
    for key, ts, ns in batch:
        one_by_one.event(key, ts, ns)
    at_once.event("b", 5)  # registered before: not again
    at_once.service.register_event_time_timers(
        [(k, assign_to_key_group(k, MAXP), ns, ts) for k, ts, ns in batch])
    for t in (one_by_one, at_once):
        assert t.service.num_timers(EVENT) == 4
    assert at_once.service.timers_by_key(EVENT) == one_by_one.service.timers_by_key(EVENT)
    name = timer_state_name("op", EVENT)
    for key in "abc":
        kg = assign_to_key_group(key, MAXP)
        assert dict(at_once.backend.iter_key_group(name, kg)) == \
            dict(one_by_one.backend.iter_key_group(name, kg))
    for t in (one_by_one, at_once):
        t.service.advance_watermark(10)
    assert at_once.fired == one_by_one.fired == [
        ("e", "b", 5, None), ("e", "a", 10, "w1"), ("e", "c", 10, "w1"), ("e", "a", 10, None)]


def test_same_timestamp_in_both_domains_are_two_timers(timers):
    timers.event("a", 10)
    timers.proc("a", 10)
    assert (timers.service.num_timers(EVENT), timers.service.num_timers(PROC)) == (1, 1)
    timers.service.advance_watermark(10)
    assert timers.fired == [("e", "a", 10, None)]
    timers.advance_clock(10)
    assert timers.fired == [("e", "a", 10, None), ("p", "a", 10, None)]


def test_timers_live_in_keyed_state(timers):
    timers.event("a", 10, "w")
    timers.event("b", 20)
    timers.proc("a", 30)
    b = timers.backend
    assert sorted(b.get_keys(timer_state_name("op", EVENT))) == ["a", "b"]
    assert list(b.get_keys(timer_state_name("op", PROC))) == ["a"]
    kg = assign_to_key_group("a", MAXP)
    assert dict(b.iter_key_group(timer_state_name("op", EVENT), kg)) == {"a": {(10, "w"): None}}
    timers.service.advance_watermark(20)
    assert list(b.get_keys(timer_state_name("op", EVENT))) == []  # fired timers are gone


def test_delete(timers):
    timers.event("a", 10)
    timers.event("a", 20)
    timers.event("b", 10)
    timers.proc("a", 5)
    timers.backend.set_current_key("a")
    timers.service.delete_event_time_timer(None, 10)
    timers.service.delete_event_time_timer(None, 999)      # not there: nothing happens
    timers.service.delete_event_time_timer("other-ns", 20)  # not there either
    timers.service.delete_processing_time_timer(None, 5)
    assert timers.service.timers_by_key(EVENT) == {"a": [(20, None)], "b": [(10, None)]}
    assert timers.service.num_timers(PROC) == 0
    assert list(timers.backend.get_keys(timer_state_name("op", PROC))) == []
    timers.service.advance_watermark(100)
    assert timers.advance_clock(100) == 1  # the clock callback still runs, fires nothing
    assert timers.fired == [("e", "b", 10, None), ("e", "a", 20, None)]


def test_deleted_then_registered_again_fires_once(timers):
    timers.event("a", 10)
    timers.backend.set_current_key("a")
    timers.service.delete_event_time_timer(None, 10)
    timers.event("a", 10)
    timers.proc("a", 7)
    timers.backend.set_current_key("a")
    timers.service.delete_processing_time_timer(None, 7)
    timers.proc("a", 7)
    timers.service.advance_watermark(10)
    timers.advance_clock(50)
    assert timers.fired == [("e", "a", 10, None), ("p", "a", 7, None)]


def test_timers_fired_in_batches_are_the_one_by_one_timers(backends):
    """``fire_event_time_in_batches`` (the window operator's aligned windows): the same
    live timers, in the same order, a timestamp's at a time and out of the keyed state
    before the callback; deleted timers are not among them; processing time unchanged."""
    plan = [("a", 10, "w1"), ("b", 5, None), ("c", 10, "w1"), ("a", 10, None),
            ("d", 20, None), ("b", 20, "w2"), ("e", 10, None)]
    one_by_one, batched = Timers(backends()), Timers(backends())
    batches = []

    def on_batch(ts, due):
        for key, kg, ns in due:
            assert kg == assign_to_key_group(key, MAXP)
            assert (ts, ns) not in dict(batched.backend.iter_key_group(
                timer_state_name("op", EVENT), kg)).get(key, {})
        batches.append((ts, [(key, ns) for key, _, ns in due]))

    batched.service.fire_event_time_in_batches(on_batch)
    for t in (one_by_one, batched):
        for key, ts, ns in plan[:3]:
            t.event(key, ts, ns)
        t.service.register_event_time_timers(
            [(k, assign_to_key_group(k, MAXP), ns, ts) for k, ts, ns in plan[3:]])
        t.backend.set_current_key("e")
        t.service.delete_event_time_timer(None, 10)
        t.proc("a", 7)
        t.service.advance_watermark(10)
    assert batches == [(5, [("b", None)]), (10, [("a", "w1"), ("c", "w1"), ("a", None)])]
    assert [(k, ts, ns) for _, k, ts, ns in one_by_one.fired] == \
        [(k, ts, ns) for ts, due in batches for k, ns in due]
    for t in (one_by_one, batched):
        t.service.advance_watermark(20)
        t.advance_clock(10)
    assert batches[2:] == [(20, [("d", None), ("b", "w2")])]
    assert batched.fired == [("p", "a", 7, None)]
    for t in (one_by_one, batched):
        assert t.service.num_timers(EVENT) == 0
        assert list(t.backend.get_keys(timer_state_name("op", EVENT))) == []


def test_timers_registered_and_fired_in_batches_while_a_snapshot_is_pending(backends,
                                                                           tmp_path):
    """The batch paths write the heap's timer dicts directly: a snapshot pending while
    they register and fire still holds the timers of its moment."""
    t = Timers(backends())
    t.service.fire_event_time_in_batches(lambda ts, due: t.fired.extend(
        ("e", k, ts, ns) for k, _, ns in due))
    many = [(f"k{i}", assign_to_key_group(f"k{i}", MAXP), None, 10 + i % 3)
            for i in range(40)]
    t.service.register_event_time_timers(many[:20])
    writer = t.backend.snapshot(1)        # held, not yet written
    t.service.register_event_time_timers(many[20:])
    t.service.advance_watermark(11)       # fires some of the snapshot's timers
    assert {k for _, k, _, _ in t.fired} == {k for k, _, _, ts in many if ts <= 11}
    storage = FileStorage(tmp_path / "chk")
    handles = [writer.write(storage.write_file, "chk-1/keyed")]
    r, restored = restore(backends, handles, storage)
    assert restored == 20
    assert r.service.timers_by_key(EVENT) == {k: [(ts, None)] for k, _, _, ts in many[:20]}
    assert t.service.timers_by_key(EVENT) == {k: [(ts, None)] for k, _, _, ts in many
                                              if ts > 11}


@pytest.mark.parametrize("bad", [10.0, 10.5, True, False, "10", None])
def test_bad_timestamp_type_raises(timers, bad):
    timers.backend.set_current_key("a")
    with pytest.raises(TypeError, match="int"):
        timers.service.register_event_time_timer(None, bad)
    with pytest.raises(TypeError, match=repr(bad).replace(".", r"\.")):
        timers.service.register_processing_time_timer(None, bad)
    assert timers.service.num_timers(EVENT) == timers.service.num_timers(PROC) == 0
    assert timers.pts.next_deadline() is None


class Millis(int):
    """An int subclass (as IntEnum or a library's int type)."""


def test_int_subclass_timestamps_become_ints(timers):
    timers.event("a", Millis(10))
    timers.event("a", 10)  # the same timer
    timers.proc("a", Millis(7))
    timers.service.advance_watermark(10)
    timers.advance_clock(7)
    assert timers.fired == [("e", "a", 10, None), ("p", "a", 7, None)]
    assert all(type(f[2]) is int for f in timers.fired)


# ---------------------------------------------------------------------------------------
# firing
# ---------------------------------------------------------------------------------------

def test_event_time_fires_in_timestamp_order_as_the_watermark_passes(timers):
    for key, ts in [("a", 30), ("b", 10), ("c", 20), ("a", 5), ("b", 25)]:
        timers.event(key, ts)
    timers.service.advance_watermark(4)
    assert timers.fired == []
    timers.service.advance_watermark(20)  # inclusive
    assert timers.fired == [("e", "a", 5, None), ("e", "b", 10, None), ("e", "c", 20, None)]
    assert timers.service.current_watermark == 20
    timers.service.advance_watermark(100)
    assert [f[2] for f in timers.fired] == [5, 10, 20, 25, 30]
    assert timers.service.num_timers(EVENT) == 0


def test_timer_registered_while_firing_at_a_due_time_fires_in_the_same_advance(backends):
    def chain(t, domain, key, ts, ns):
        if domain == "e" and ts < 30:
            t.service.register_event_time_timer(ns, ts + 10)  # still <= the watermark
        if domain == "e" and ts == 30:
            t.service.register_event_time_timer(ns, 50)       # beyond it: waits
        if domain == "p" and ts == 100:
            t.service.register_processing_time_timer(ns, 150)  # due at the clock's 200

    t = Timers(backends(), on_fire=chain)
    t.event("k", 10)
    t.service.advance_watermark(35)
    assert t.fired == [("e", "k", 10, None), ("e", "k", 20, None), ("e", "k", 30, None)]
    assert t.service.timers_by_key(EVENT) == {"k": [(50, None)]}
    t.proc("k", 100)
    t.advance_clock(200)
    assert t.fired[3:] == [("p", "k", 100, None), ("p", "k", 150, None)]


def test_a_timer_registered_while_firing_before_the_rest_of_its_timestamp_fires_next(backends):
    """Timers fire in (timestamp, registration) order even when a callback registers one
    earlier than the timers still due (a deleted one is skipped, never fired)."""
    def earlier(t, domain, key, ts, ns):
        if (key, ts) == ("a", 20):
            t.event("late", 15)          # due, and before b's and c's timers at 20
            t.backend.set_current_key("c")
            t.service.delete_event_time_timer(None, 20)

    t = Timers(backends(), on_fire=earlier)
    for key in "abc":
        t.event(key, 20)
    t.event("d", 30)
    t.service.advance_watermark(30)
    assert [(f[1], f[2]) for f in t.fired] == [("a", 20), ("late", 15), ("b", 20), ("d", 30)]
    assert t.service.num_timers(EVENT) == 0


def test_timer_fires_with_its_key_current(backends):
    t = Timers(backends())
    t.event("a", 10)
    t.event("b", 20)
    t.backend.set_current_key("zzz")
    t.service.advance_watermark(20)
    assert [f[1] for f in t.fired] == ["a", "b"]
    assert t.backend.get_current_key() == "b"


def test_processing_time_timers_fire_via_the_clock(timers):
    timers.proc("a", 100)
    timers.proc("b", 50)
    timers.proc("a", 100)  # deduplicated: one callback
    assert timers.pts.next_deadline() == 50
    assert timers.service.current_processing_time() == 0
    assert timers.advance_clock(49) == 0 and timers.fired == []
    timers.advance_clock(1)
    assert timers.fired == [("p", "b", 50, None)]
    timers.advance_clock(1000)
    assert timers.fired == [("p", "b", 50, None), ("p", "a", 100, None)]
    assert timers.pts.next_deadline() is None
    # a timer in the past fires on the next pass of the task loop
    timers.proc("c", 10)
    assert timers.fired[-1][1] != "c"
    timers.advance_clock(0)
    assert timers.fired[-1] == ("p", "c", 10, None)


def test_watermark_does_not_fire_processing_timers_nor_the_clock_event_timers(timers):
    timers.event("a", 10)
    timers.proc("a", 10)
    timers.advance_clock(1000)
    assert timers.fired == [("p", "a", 10, None)]
    timers.service.advance_watermark(10)
    assert timers.fired == [("p", "a", 10, None), ("e", "a", 10, None)]


def test_fire_all_processing_time(timers):
    timers.proc("a", 10 ** 12)
    timers.proc("b", 5)
    timers.event("c", 1)
    timers.service.fire_all_processing_time()
    assert timers.fired == [("p", "b", 5, None), ("p", "a", 10 ** 12, None)]


# ---------------------------------------------------------------------------------------
# snapshots and restore
# ---------------------------------------------------------------------------------------

def test_timers_are_in_the_snapshot_and_fire_after_restore(backends, tmp_path):
    t = Timers(backends())
    t.event("a", 10, "w")
    t.event("b", 20)
    t.proc("a", 100)
    t.proc("c", 300)
    t.event("gone", 5)
    t.service.advance_watermark(5)  # fired before the snapshot: not in it
    storage = FileStorage(tmp_path / "chk")
    handles = [t.backend.snapshot(1).write(storage.write_file, "chk-1/keyed")]
    t.event("after", 1)  # after the snapshot: not in it
    # the task was down until 200: the processing-time timer due at 100 fires right away
    r, restored = restore(backends, handles, storage, clock_ms=200)
    assert restored == 4
    assert r.service.timers_by_key(EVENT) == {"a": [(10, "w")], "b": [(20, None)]}
    assert r.pts.next_deadline() == 100
    assert r.advance_clock(0) == 1
    assert r.fired == [("p", "a", 100, None)]
    r.service.advance_watermark(20)
    r.advance_clock(100)
    assert r.fired[1:] == [("e", "a", 10, "w"), ("e", "b", 20, None), ("p", "c", 300, None)]
    assert r.service.num_timers(EVENT) == r.service.num_timers(PROC) == 0


def test_restored_timers_dedupe_with_new_registrations(backends, tmp_path):
    t = Timers(backends())
    t.event("a", 10)
    t.proc("a", 100)
    storage = FileStorage(tmp_path / "chk")
    handles = [t.backend.snapshot(1).write(storage.write_file, "chk-1/keyed")]
    r, _ = restore(backends, handles, storage)
    r.event("a", 10)
    r.proc("a", 100)
    assert r.service.restore() == 0  # restoring again adds nothing
    r.service.advance_watermark(10)
    r.advance_clock(100)
    assert r.fired == [("e", "a", 10, None), ("p", "a", 100, None)]


def test_timer_services_of_two_operators_are_apart(backends, tmp_path):
    b = backends()
    first, second = Timers(b, name="first"), Timers(b, name="second")
    first.event("a", 10)
    second.event("a", 20)
    assert first.service.timers_by_key(EVENT) == {"a": [(10, None)]}
    storage = FileStorage(tmp_path / "chk")
    handles = [b.snapshot(1).write(storage.write_file, "chk-1/keyed")]
    rb = backends()
    rb.restore(handles, storage.read)
    r = Timers(rb, name="second")
    assert r.service.restore() == 1
    assert r.service.timers_by_key(EVENT) == {"a": [(20, None)]}


def test_redistribution_each_restored_half_fires_only_its_keys(backends, tmp_path):
    t = Timers(backends())
    low, high = keys_in(LOWER, 5, "lo"), keys_in(UPPER, 5, "hi")
    for i, k in enumerate(low + high):
        t.event(k, 10 + i)
        t.proc(k, 100 + i, ns=("w", i))
    storage = FileStorage(tmp_path / "chk")
    handles = [t.backend.snapshot(1).write(storage.write_file, "chk-1/keyed")]
    for kgr, keys in [(LOWER, low), (UPPER, high)]:
        r, restored = restore(backends, handles, storage, key_group_range=kgr, clock_ms=0)
        assert restored == 2 * len(keys)
        r.service.advance_watermark(1000)
        r.advance_clock(1000)
        offset = 0 if keys is low else len(low)
        assert r.fired == (
            [("e", k, 10 + offset + i, None) for i, k in enumerate(keys)]
            + [("p", k, 100 + offset + i, ("w", offset + i)) for i, k in enumerate(keys)])
