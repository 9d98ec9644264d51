"""State TTL in a keyed process function through the operator harness: the task's manual
processing-time clock drives expiry, and expiry goes on after a restore."""

import pytest

from flowray.common.time import Time
from flowray.datastream.state import StateTtlConfig, ValueStateDescriptor
from flowray.operators.functions import KeyedProcessFunction
from flowray.operators.keyed import KeyedProcessOperator
from tests.support.operator_harness import BACKENDS, Harnesses


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path):
    h = Harnesses(request.param, tmp_path)
    yield h
    h.close()


class Sum(KeyedProcessFunction):
    """PyFlink's state_access example: a running sum per key in a value state with a 1 s
    TTL refreshed on read and write."""

    def open(self, runtime_context):
        descriptor = ValueStateDescriptor("state")
        descriptor.enable_time_to_live(
            StateTtlConfig.new_builder(Time.seconds(1))
            .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
            .disable_cleanup_in_background().build())
        self.state = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        current = (self.state.value() or 0) + value[1]
        self.state.update(current)
        yield value[0], current


def test_sum_restarts_after_the_ttl_and_across_a_restore(make):
    h = make(KeyedProcessOperator(Sum(), lambda r: r[0]))
    h.process([("a", 1), ("b", 10), ("a", 2)])
    h.advance_clock(999)
    h.process([("a", 3)])          # read and written: refreshed
    h.advance_clock(500)
    h.process([("a", 4), ("b", 20)])  # b expired after 1499 ms
    assert h.records == [("a", 1), ("b", 10), ("a", 3), ("a", 6), ("a", 10), ("b", 20)]
    handles = h.snapshot()
    r = make.restore(h, handles)   # the clock goes on at the same time
    r.advance_clock(999)
    r.process([("a", 5), ("b", 30)])
    r.advance_clock(1000)
    r.process([("a", 6)])
    assert r.records == [("a", 15), ("b", 50), ("a", 6)]
