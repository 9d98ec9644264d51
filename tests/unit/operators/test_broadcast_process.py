"""Broadcast state pattern operators on the harness: rules arriving on the broadcast input
while records flow, read-only enforcement, apply_to_keyed_state, timers, snapshot/restore
and redistribution to more and fewer subtasks."""

import pytest

from flowray.common.constants import MIN_WATERMARK
from flowray.operators.base import StateInitializationContext, StateSnapshotContext
from flowray.operators.base import UserFunctionError
from flowray.operators.broadcast import (
    BroadcastProcessFunction,
    BroadcastProcessOperator,
    KeyedBroadcastProcessFunction,
    KeyedBroadcastProcessOperator,
)
from flowray.operators.functions import TimeDomain
from flowray.operators.output_tag import OutputTag
from flowray.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state
from flowray.state.key_groups import assign_to_key_group
from tests.support.operator_harness import (
    BACKENDS,
    FULL,
    LOWER,
    MAXP,
    UPPER,
    Harnesses,
    keys_in,
)

RULES = MapStateDescriptor("rules")
LIMITS = MapStateDescriptor("limits")
COUNT = ValueStateDescriptor("count")
REJECTED = OutputTag("rejected")


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    h = Harnesses(request.param, tmp_path)
    yield h
    h.close()


# -- non-keyed ------------------------------------------------------------------------

class Multiply(BroadcastProcessFunction):
    """Records are multiplied by rule "factor" (none yet: to the side output)."""

    def process_element(self, value, ctx):
        factor = ctx.get_broadcast_state(RULES).get("factor")
        if factor is None:
            ctx.output(REJECTED, value)
            return
        yield value * factor

    def process_broadcast_element(self, value, ctx):
        name, factor = value
        ctx.get_broadcast_state(RULES).put(name, factor)
        yield f"rule {name}={factor} at {ctx.timestamp()}"


def test_rules_change_while_records_flow(make):
    h = make(BroadcastProcessOperator(Multiply(), [RULES]), side_tags=[REJECTED])
    h.process([1, 2], timestamps=[1, 2])
    h.process2([("factor", 10)], timestamps=[3])
    h.process([3])
    h.process2([("factor", 100)])
    h.process([4], timestamps=[9])
    assert h.records == ["rule factor=10 at 3", 30, "rule factor=100 at None", 400]
    assert h.timestamps == [3, None, None, 9]
    assert h.side(REJECTED).records == [1, 2]
    assert h.side(REJECTED).timestamps == [1, 2]
    assert dict(h.operator.broadcast_state("rules").items()) == {"factor": 100}


class Writer(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("x", value)

    def process_broadcast_element(self, value, ctx):
        pass


def test_process_element_cannot_write_broadcast_state(make):
    h = make(BroadcastProcessOperator(Writer(), [RULES]))
    with pytest.raises(UserFunctionError, match="'rules' is read-only") as e:
        h.process([1])
    assert e.value.cause_type == "StateAccessError"
    assert h.operator.broadcast_state("rules").is_empty()


class Undeclared(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(MapStateDescriptor("typo"))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MapStateDescriptor("typo"))


def test_undeclared_broadcast_state_is_named(make):
    h = make(BroadcastProcessOperator(Undeclared(), [RULES, LIMITS]))
    with pytest.raises(UserFunctionError, match=r"'typo' was not declared.*\['limits', 'rules'\]"):
        h.process2(["r"])
    with pytest.raises(UserFunctionError, match="'typo' was not declared"):
        h.process([1])


def test_descriptors_are_checked():
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        BroadcastProcessOperator(Multiply(), [ValueStateDescriptor("v")])
    with pytest.raises(ValueError, match="declared twice"):
        BroadcastProcessOperator(Multiply(), [RULES, MapStateDescriptor("rules")])
    with pytest.raises(ValueError, match="at least one"):
        BroadcastProcessOperator(Multiply(), [])
    with pytest.raises(TypeError, match="process_broadcast_element"):
        BroadcastProcessOperator(object(), [RULES])


# -- keyed ----------------------------------------------------------------------------

def key_of(record):
    return record[0]


class Thresholds(KeyedBroadcastProcessFunction):
    """Counts per key; emits when a key's count reaches the rule "limit"; a "reset" rule
    resets every key's count (apply_to_keyed_state); a timer at the record's timestamp+10
    reports the count with the limit then in force."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        limit = ctx.get_broadcast_state(RULES).get("limit")
        if limit is not None and n >= limit:
            yield (ctx.get_current_key(), n, limit)
        if ctx.timestamp() is not None:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def process_broadcast_element(self, value, ctx):
        kind, arg = value
        if kind == "limit":
            ctx.get_broadcast_state(RULES).put("limit", arg)
        elif kind == "reset":
            def reset(key, state):
                yield ("reset", key, state.value())
                state.update(arg)
            ctx.apply_to_keyed_state(COUNT, reset)
        elif kind == "drop":
            ctx.apply_to_keyed_state(COUNT, lambda key, state: state.clear())

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() is TimeDomain.EVENT_TIME
        yield ("timer", ctx.get_current_key(), timestamp, self.count.value(),
               ctx.get_broadcast_state(RULES).get("limit"))


def keyed_op():
    return KeyedBroadcastProcessOperator(Thresholds(), key_of, [RULES])


def test_keyed_rules_and_apply_to_keyed_state(make):
    h = make(keyed_op())
    h.process([("a", 1), ("b", 1), ("a", 2)])
    assert h.records == []
    h.process2([("limit", 2)])
    h.process([("a", 3), ("b", 2)])
    assert h.records == [("a", 3, 2), ("b", 2, 2)]
    h.clear_output()
    h.process2([("reset", 0)])
    assert sorted(h.records) == [("reset", "a", 3), ("reset", "b", 2)]
    h.clear_output()
    h.process([("b", 3)])
    assert h.records == []  # count 1 < limit 2
    h.process2([("drop", None)])
    h.process2([("reset", 5)])
    assert h.records == []  # no key has a count after drop


def test_keyed_timers_see_broadcast_state(make):
    h = make(keyed_op())
    h.process([("a", 1)], timestamps=[5])
    h.process2([("limit", 7)])
    h.watermark(14, input_index=0)
    h.watermark(20, input_index=1)
    assert h.records == []  # the broadcast input's watermark was behind
    h.watermark(15, input_index=0)
    assert h.records == [("timer", "a", 15, 1, 7)]
    assert h.timestamps == [15]


class TimerWriter(Thresholds):
    def on_timer(self, timestamp, ctx):
        ctx.get_broadcast_state(RULES).remove("limit")


def test_on_timer_cannot_write_broadcast_state(make):
    h = make(KeyedBroadcastProcessOperator(TimerWriter(), key_of, [RULES]))
    h.process([("a", 1)], timestamps=[0])
    h.process2([("limit", 1)])
    h.watermark(10)
    with pytest.raises(UserFunctionError, match="'rules' is read-only here \\(remove\\)"):
        h.watermark(10, input_index=1)


# -- snapshot, restore, redistribution ----------------------------------------------------

def _with_store(op, entries=None, checkpoint_id=None):
    """``op`` initialized as a task would: with an operator state store (restored)."""
    store = OperatorStateStore.restore(entries)
    op.initialize_state(StateInitializationContext(store, None, checkpoint_id))
    return op, store


def _snapshot(h, store):
    h.operator.snapshot_state(StateSnapshotContext(1, 0))
    return store.snapshot(), (h.snapshot() if h.backend is not None else None)


def test_snapshot_and_restore(make):
    op, store = _with_store(keyed_op())
    h = make(op)
    h.process2([("limit", 2)])
    h.process([("a", 1), ("b", 1)])
    op_state, keyed = _snapshot(h, store)
    h.process2([("limit", 99)])           # after the snapshot: lost on restore
    restored_op, _ = _with_store(keyed_op(), redistribute_operator_state([op_state], 1)[0], 1)
    r = make(restored_op, restore_from=keyed)
    assert dict(restored_op.broadcast_state("rules").items()) == {"limit": 2}
    r.process([("a", 2), ("c", 3)])
    assert r.records == [("a", 2, 2)]


@pytest.mark.parametrize("old_ranges,new_ranges", [([FULL], [LOWER, UPPER]),
                                                   ([LOWER, UPPER], [FULL])])
def test_redistribution_to_more_and_fewer_subtasks(make, old_ranges, new_ranges):
    """Every subtask had the same rules; after the rescale every subtask has them, and
    the keyed counts moved with their key groups."""
    low, high = keys_in(LOWER, 2, "l"), keys_in(UPPER, 2, "h")
    op_states, handles = [], []
    for kgr in old_ranges:
        op, store = _with_store(keyed_op())
        h = make(op, key_group_range=kgr)
        h.process2([("limit", 3)])  # broadcast: every old subtask sees it
        h.process([(k, 0) for k in low + high if assign_to_key_group(k, MAXP) in kgr])
        s, k = _snapshot(h, store)
        op_states.append(s)
        handles.extend(k)
    parts = redistribute_operator_state(op_states, len(new_ranges))
    seen = []
    for kgr, part in zip(new_ranges, parts):
        op, _ = _with_store(keyed_op(), part, 1)
        r = make(op, key_group_range=kgr, restore_from=handles)
        assert dict(op.broadcast_state("rules").items()) == {"limit": 3}
        mine = [k for k in low + high if assign_to_key_group(k, MAXP) in kgr]
        r.process([(k, 1) for k in mine])   # count 2: below the limit
        r.process([(k, 2) for k in mine])   # count 3: at the limit
        seen.extend(r.records)
    assert sorted(seen) == sorted((k, 3, 3) for k in low + high)


def test_user_checkpointed_hooks_still_run(make):
    calls = []

    class Hooks(Multiply):
        def initialize_state(self, context):
            calls.append(("init", context.is_restored()))

        def snapshot_state(self, context):
            calls.append(("snap", context.get_checkpoint_id()))

    op, store = _with_store(BroadcastProcessOperator(Hooks(), [RULES]))
    h = make(op)
    _snapshot(h, store)
    assert calls == [("init", False), ("snap", 1)]


class ProcessingTimeAlerts(KeyedBroadcastProcessFunction):
    """A processing-time timer per record (now + rule "delay"); on_timer sends an alert to
    a side output with ctx.output."""

    def process_element(self, value, ctx):
        delay = ctx.get_broadcast_state(RULES).get("delay") or 0
        ctx.timer_service().register_processing_time_timer(ctx.current_processing_time()
                                                           + delay)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("delay", value)
        ctx.output(REJECTED, ("delay set", value, ctx.current_watermark()))

    def on_timer(self, timestamp, ctx):
        ctx.output(REJECTED, (ctx.get_current_key(), timestamp, ctx.time_domain().name))


def test_processing_time_timers_and_side_outputs(make):
    h = make(KeyedBroadcastProcessOperator(ProcessingTimeAlerts(), key_of, [RULES]),
             side_tags=[REJECTED], clock_ms=1_000)
    h.process2([50])
    h.process([("a", 1)])
    h.advance_clock(49)
    assert h.side(REJECTED).records == [("delay set", 50, MIN_WATERMARK)]
    h.advance_clock(1)
    assert h.side(REJECTED).records[1:] == [("a", 1_050, "PROCESSING_TIME")]
    assert h.records == []


class ResetTtlCounts(KeyedBroadcastProcessFunction):
    """Counts per key in a state with TTL; a broadcast "reset" visits every key's count."""

    def __init__(self, descriptor):
        self.descriptor = descriptor

    def open(self, runtime_context):
        self.count = runtime_context.get_state(self.descriptor)

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)

    def process_broadcast_element(self, value, ctx):
        def report(key, state):
            yield ("count", key, state.value())
        ctx.apply_to_keyed_state(self.descriptor, report)


def test_apply_to_keyed_state_visits_state_with_ttl(make):
    from flowray.common.time import Time
    from flowray.state.ttl_config import StateTtlConfig

    descriptor = ValueStateDescriptor("ttl-count")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
    h = make(KeyedBroadcastProcessOperator(ResetTtlCounts(descriptor), key_of, [RULES]))
    h.process([("a", 1), ("b", 1), ("a", 2)])
    h.process2([("report", None)])
    assert sorted(h.records) == [("count", "a", 2), ("count", "b", 1)]
