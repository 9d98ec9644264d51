"""Keyed operators with timers and state through the operator harness (manual clock):
KeyedProcessOperator, KeyedCoProcessOperator, and KeyedReduceOperator in BATCH."""

import pytest

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.base import UserFunctionError
from flowray.operators.functions import (
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    TimeDomain,
)
from flowray.operators.keyed import (
    KeyedCoProcessOperator,
    KeyedProcessOperator,
    KeyedReduceOperator,
)
from flowray.operators.output_tag import OutputTag
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.keyed_backend import StateAccessError
from tests.support.operator_harness import BACKENDS, LOWER, UPPER, Harnesses, keys_in

ALERTS = OutputTag("alerts")


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    h = Harnesses(request.param, tmp_path)
    yield h
    h.close()


def key_of(record):
    return record[0]


class CountWithTimers(KeyedProcessFunction):
    """Counts per key; each record sets an event-time timer 10 ms after its timestamp and a
    processing-time timer 100 ms from now; a negative value goes to the side output."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        timers = ctx.timer_service()
        timers.register_event_time_timer(ctx.timestamp() + 10)
        timers.register_processing_time_timer(timers.current_processing_time() + 100)
        if value[1] < 0:
            yield ALERTS, ("negative", ctx.get_current_key(), value[1])
        yield "element", ctx.get_current_key(), n, ctx.timestamp()

    def on_timer(self, timestamp, ctx):
        domain = ctx.time_domain()
        yield ("timer", ctx.get_current_key(), domain.name, timestamp, ctx.timestamp(),
               self.count.value())
        if domain is TimeDomain.EVENT_TIME and self.count.value() >= 2:
            yield ALERTS, ("busy", ctx.get_current_key(), timestamp)


def keyed_process(fn=None):
    return KeyedProcessOperator(fn or CountWithTimers(), key_of)


# ---------------------------------------------------------------------------------------
# KeyedProcessOperator
# ---------------------------------------------------------------------------------------

def test_elements_and_event_time_timers(make):
    h = make(keyed_process(), side_tags=[ALERTS])
    h.process([("a", 1), ("b", 2)], timestamps=[100, 105])
    h.process([("a", 3)], timestamps=[103])
    assert h.stamped() == [(("element", "a", 1, 100), 100), (("element", "b", 1, 105), 105),
                           (("element", "a", 2, 103), 103)]
    h.clear_output()
    h.watermark(112)
    # timers 110 and 113 for a, 115 for b: only 110 is due; output before the watermark
    assert h.stamped() == [(("timer", "a", "EVENT_TIME", 110, 110, 2), 110)]
    assert h.watermarks == [112]
    assert h.side(ALERTS).records == [("busy", "a", 110)]
    assert h.side(ALERTS).timestamps == [110]
    h.watermark(115)
    assert [r[1:4] for r in h.records[1:]] == [("a", "EVENT_TIME", 113), ("b", "EVENT_TIME", 115)]
    assert h.timestamps[1:] == [113, 115]
    assert h.watermarks == [112, 115]
    h.watermark(115)  # not an advance: nothing
    assert h.watermarks == [112, 115]


def test_processing_time_timers_output_without_timestamps(make):
    h = make(keyed_process(), side_tags=[ALERTS], clock_ms=1000)
    h.process([("a", 1)], timestamps=[5])
    h.advance_clock(50)
    h.process([("b", 1)], timestamps=[6])
    h.clear_output()
    assert h.advance_clock(49) == 0
    h.advance_clock(1)  # 1100: a's timer
    assert h.stamped() == [(("timer", "a", "PROCESSING_TIME", 1100, 1100, 1), None)]
    h.advance_clock(1000)
    assert h.stamped()[1] == (("timer", "b", "PROCESSING_TIME", 1150, 1150, 1), None)
    assert h.watermarks == [] and h.side(ALERTS).records == []


def test_side_outputs_keep_the_record_timestamp_and_unknown_tags_are_dropped(make):
    h = make(keyed_process(), side_tags=[ALERTS])
    h.process([("a", -5), ("b", 1)], timestamps=[50, 60])
    assert list(zip(h.side(ALERTS).records, h.side(ALERTS).timestamps)) == [
        (("negative", "a", -5), 50)]
    assert [r[0] for r in h.records] == ["element", "element"]
    nobody = make(keyed_process())  # nobody reads the tag: dropped, main output unchanged
    nobody.process([("a", -5)], timestamps=[50])
    assert nobody.records == [("element", "a", 1, 50)] and nobody.side_outputs == {}


def test_ctx_output_sends_to_the_side_output(make):
    class Splitter(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.output(ALERTS, value)
            return [value * 2]

    h = make(KeyedProcessOperator(Splitter(), lambda v: v % 2), side_tags=[ALERTS])
    h.process([1, 2, 3], timestamps=[7, None, 9])
    assert h.stamped() == [(2, 7), (4, None), (6, 9)]
    assert list(zip(h.side(ALERTS).records, h.side(ALERTS).timestamps)) == [
        (1, 7), (2, None), (3, 9)]


def test_time_domain_outside_on_timer_raises(make):
    class Asks(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.time_domain()

    h = make(keyed_process(Asks()))
    with pytest.raises(UserFunctionError, match="only defined inside on_timer"):
        h.process([("a", 1)])


def test_errors_in_on_timer_name_the_operator(make):
    class Fails(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(10)

        def on_timer(self, timestamp, ctx):
            raise ZeroDivisionError("boom")

    h = make(KeyedProcessOperator(Fails(), key_of, name="my-timers"))
    h.process([("a", 1)], timestamps=[1])
    with pytest.raises(UserFunctionError, match="'my-timers' raised ZeroDivisionError: boom"):
        h.watermark(10)


def test_deleting_timers_from_the_function(make):
    class Cancels(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ts = ctx.timer_service()
            if value[1] == "set":
                ts.register_event_time_timer(100)
                ts.register_processing_time_timer(100)
            else:
                ts.delete_event_time_timer(100)
                ts.delete_processing_time_timer(100)

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), ctx.time_domain().name

    h = make(keyed_process(Cancels()))
    h.process([("a", "set"), ("b", "set"), ("a", "cancel")])
    h.watermark(100)
    h.advance_clock(100)
    assert h.records == [("b", "EVENT_TIME"), ("b", "PROCESSING_TIME")]


def test_batch_fires_processing_timers_at_the_end_after_event_timers(make):
    h = make(keyed_process(), side_tags=[ALERTS], batch_execution=True, clock_ms=0)
    h.process([("a", 1), ("b", 2)], timestamps=[10, 20])
    h.clear_output()
    h.watermark(MAX_WATERMARK)  # the end of a bounded input: every event-time timer
    assert [r[1:4] for r in h.records] == [("a", "EVENT_TIME", 20), ("b", "EVENT_TIME", 30)]
    h.end_input()  # processing time ends with the input in BATCH
    assert [r[1:4] for r in h.records[2:]] == [("a", "PROCESSING_TIME", 100),
                                               ("b", "PROCESSING_TIME", 100)]
    assert h.timestamps == [20, 30, None, None] and h.watermarks == [MAX_WATERMARK]


INPUT = [  # (records, timestamps) batches, then a watermark, then a clock advance
    ([("a", 1), ("b", 2), ("c", -3)], [100, 101, 102], 100, 30),
    ([("a", 4), ("d", 5)], [111, 112], 111, 30),
    ([("b", 6), ("c", 7), ("e", -1)], [120, 121, 122], 121, 50),
    ([("a", 8)], [130], 125, 20),
    ([("d", 9), ("e", 10)], [140, 141], 150, 200),
]


def run(h, steps):
    for records, timestamps, wm, ms in steps:
        h.process(records, timestamps=timestamps)
        h.watermark(wm)
        h.advance_clock(ms)


def ties_sorted(stamped):
    """Timers of one domain due at the same time fire in no guaranteed key order (a restore
    rebuilds the queue in state order): sort each such run by key."""
    out, run_ = [], []
    for item in stamped + [(None, None)]:
        record = item[0]
        tie = record is not None and record[0] == "timer" and run_ and \
            run_[0][0][2:4] == record[2:4]
        if run_ and not tie:
            out.extend(sorted(run_, key=repr))
            run_ = []
        if record is not None:
            run_.append(item) if record[0] == "timer" else out.append(item)
    return out


def outputs(h):
    return h.stamped(), list(zip(h.side(ALERTS).records, h.side(ALERTS).timestamps))


@pytest.mark.parametrize("cut", [1, 2, 4])
def test_snapshot_restore_continues_like_the_run_without_failure(make, cut):
    full = make(keyed_process(), side_tags=[ALERTS], clock_ms=1000)
    run(full, INPUT)
    full.watermark(MAX_WATERMARK)
    expected = outputs(full)
    assert len(expected[0]) == 11 + 11 + 11  # every element, event and processing timer

    before = make(keyed_process(), side_tags=[ALERTS], clock_ms=1000)
    run(before, INPUT[:cut])
    handles = before.snapshot()
    got_before = outputs(before)
    run(before, INPUT[cut:cut + 1])  # work after the checkpoint is lost with the failure
    after = make.restore(before, handles, clock_ms=1000 + sum(s[3] for s in INPUT[:cut]))
    run(after, INPUT[cut:])
    after.watermark(MAX_WATERMARK)
    got_after = outputs(after)
    assert ties_sorted(got_before[0] + got_after[0]) == ties_sorted(expected[0])
    assert got_before[1] + got_after[1] == expected[1]


def test_processing_timers_due_while_down_fire_after_restore(make):
    h = make(keyed_process(), clock_ms=0)
    h.process([("a", 1), ("b", 2)], timestamps=[10, 20])
    handles = h.snapshot()
    r = make.restore(h, handles, clock_ms=500)
    assert r.records == []
    r.fire_due()
    assert sorted(r.records) == [("timer", "a", "PROCESSING_TIME", 100, 100, 1),
                                 ("timer", "b", "PROCESSING_TIME", 100, 100, 1)]


def test_redistributed_state_and_timers(make):
    low, high = keys_in(LOWER, 3, "lo"), keys_in(UPPER, 3, "hi")
    h = make(keyed_process())
    for i, k in enumerate(low + high):
        h.process([(k, i)], timestamps=[i])
        h.process([(k, i)], timestamps=[i])  # count 2, the same timers
    handles = h.snapshot()
    for kgr, keys in [(LOWER, low), (UPPER, high)]:
        r = make.restore(h, handles, key_group_range=kgr)
        r.watermark(1000)
        assert sorted(r.records) == sorted(
            ("timer", k, "EVENT_TIME", (low + high).index(k) + 10,
             (low + high).index(k) + 10, 2) for k in keys)
        r.clear_output()
        r.advance_clock(100)
        assert sorted(rec[1] for rec in r.records) == sorted(keys)


# ---------------------------------------------------------------------------------------
# KeyedCoProcessOperator
# ---------------------------------------------------------------------------------------

class Matcher(KeyedCoProcessFunction):
    """Orders (id, amount) on input 1, payments (amount, id) on input 2: per id one shared
    balance; an order sets an event-time timer at its timestamp + 5 to report it."""

    def open(self, runtime_context):
        self.balance = runtime_context.get_state(ValueStateDescriptor("balance"))

    def process_element1(self, value, ctx):
        self.balance.update((self.balance.value() or 0) - value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield "order", ctx.get_current_key(), self.balance.value()

    def process_element2(self, value, ctx):
        self.balance.update((self.balance.value() or 0) + value[0])
        yield "payment", ctx.get_current_key(), self.balance.value()

    def on_timer(self, timestamp, ctx):
        yield "due", ctx.get_current_key(), timestamp, self.balance.value()


def co_operator():
    return KeyedCoProcessOperator(Matcher(), lambda o: o[0], lambda p: p[1])


def test_keyed_co_process_shares_state_and_timers(make):
    h = make(co_operator())
    h.process([("x", 10), ("y", 3)], timestamps=[100, 101])
    h.process2([(4, "x"), (3, "y")], timestamps=[102, 103])
    h.process2([(6, "x")], timestamps=[104])
    assert h.stamped() == [(("order", "x", -10), 100), (("order", "y", -3), 101),
                           (("payment", "x", -6), 102), (("payment", "y", 0), 103),
                           (("payment", "x", 0), 104)]
    h.clear_output()
    h.watermark(200, input_index=0)
    assert h.records == [] and h.watermarks == []  # input 2 still at the minimum
    h.watermark(105, input_index=1)
    assert h.stamped() == [(("due", "x", 105, 0), 105)]
    assert h.watermarks == [105]
    h.watermark_status(True, input_index=1)  # idle: no longer holds the watermark back
    assert h.stamped()[1:] == [(("due", "y", 106, 0), 106)]
    assert h.watermarks == [105, 200] and h.statuses == []


def test_keyed_co_process_snapshot_and_restore(make):
    h = make(co_operator())
    h.process([("x", 10)], timestamps=[100])
    h.process2([(4, "x")], timestamps=[101])
    r = make.restore(h, h.snapshot())
    r.process2([(6, "x")], timestamps=[102])
    r.watermark(110, 0)
    r.watermark(110, 1)
    assert r.stamped() == [(("payment", "x", 0), 102), (("due", "x", 105, 0), 105)]


# ---------------------------------------------------------------------------------------
# KeyedReduceOperator
# ---------------------------------------------------------------------------------------

def add(a, b):
    return a[0], a[1] + b[1]


DATA = [("a", 1), ("b", 10), ("a", 2), ("c", 100), ("b", 20), ("a", 3)]


def test_streaming_reduce_emits_every_running_value_with_its_timestamp(make):
    h = make(KeyedReduceOperator(add, key_of))
    h.process(DATA[:3], timestamps=[1, 2, 3])
    h.process(DATA[3:])
    assert h.records == [("a", 1), ("b", 10), ("a", 3), ("c", 100), ("b", 30), ("a", 6)]
    assert h.timestamps == [1, 2, 3, None, None, None]
    h.end_input()
    assert len(h.records) == 6


def test_batch_reduce_emits_only_final_values_in_finish(make):
    h = make(KeyedReduceOperator(add, key_of), batch_execution=True)
    h.process(DATA[:4])
    h.process(DATA[4:])
    assert h.records == []
    h.end_input()
    assert sorted(h.records) == [("a", 6), ("b", 30), ("c", 100)]


def test_batch_reduce_on_a_restored_backend(make):
    h = make(KeyedReduceOperator(add, key_of), batch_execution=True)
    h.process(DATA[:3])
    r = make.restore(h, h.snapshot())
    r.process(DATA[3:])
    r.end_input()
    assert sorted(r.records) == [("a", 6), ("b", 30), ("c", 100)]


def test_reduce_rejects_a_key_outside_the_key_group_range(make):
    h = make(KeyedReduceOperator(add, key_of), key_group_range=UPPER)
    own, foreign = keys_in(UPPER, 1)[0], keys_in(LOWER, 1)[0]
    with pytest.raises((UserFunctionError, StateAccessError),
                       match=f"{foreign!r} belongs to key group .*outside this subtask's range"):
        h.process([(foreign, 1)])
    assert list(h.backend.get_keys(KeyedReduceOperator.STATE_NAME)) == []
    h.process([(own, 2)])
    assert h.records == [(own, 2)]
