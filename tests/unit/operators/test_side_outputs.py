"""Side outputs: OutputTag, the ResultCollector that sorts results into main and side
outputs, and the process operators that yield ``(OutputTag, value)``."""

import pickle

import pytest

from flowray.operators.base import CollectingOutput, UserFunctionError
from flowray.operators.basic import CoProcessOperator, MapOperator, ProcessOperator
from flowray.operators.functions import CoProcessFunction, ProcessFunction
from flowray.operators.output_tag import OutputTag, ResultCollector
from tests.support.operator_harness import OperatorHarness

EVEN, ODD = OutputTag("even"), OutputTag("odd")


# ---------------------------------------------------------------------------------------
# OutputTag
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", None, 3, b"tag"])
def test_output_tag_needs_a_non_empty_name(bad):
    with pytest.raises(ValueError, match="non-empty name"):
        OutputTag(bad)


def test_output_tags_are_equal_by_name():
    a, b = OutputTag("late", type_info="ignored"), OutputTag("late")
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != OutputTag("other") and a != "late"
    assert repr(a) == "OutputTag('late')" and a.type_info == "ignored"
    assert pickle.loads(pickle.dumps(a)) == a


# ---------------------------------------------------------------------------------------
# ResultCollector
# ---------------------------------------------------------------------------------------

def collector(*tags):
    main = CollectingOutput()
    sides = {t.tag_id: CollectingOutput() for t in tags}
    return main, sides, ResultCollector(main, sides)


def test_collector_sorts_by_tag_and_keeps_timestamps():
    main, sides, c = collector(EVEN, ODD)
    c.collect([1, (ODD, 1), (EVEN, 2), 3], 10)
    c.collect(iter([(OutputTag("even"), 4)]), None)  # an equal tag is the same output
    c.collect(None, 5)
    assert main.records == [] and sides["even"].records == []  # nothing until flush
    c.flush()
    assert (main.records, main.timestamps) == ([1, 3], [10, 10])
    assert (sides["odd"].records, sides["odd"].timestamps) == ([1], [10])
    assert (sides["even"].records, sides["even"].timestamps) == ([2, 4], [10, None])
    c.flush()  # nothing buffered: nothing emitted
    assert len(main.records) == 2 and len(sides["even"].records) == 2


def test_collector_omits_timestamps_when_no_result_has_one():
    main, sides, c = collector(EVEN)
    calls = []
    main.emit = lambda records, timestamps=None: calls.append(("main", records, timestamps))
    sides["even"].emit = lambda records, timestamps=None: calls.append(
        ("even", records, timestamps))
    c.collect(["a", (EVEN, "b")], None)
    c.flush()
    c.collect(["c"], 3)
    c.collect(["d"], None)
    c.flush()
    assert calls == [("main", ["a"], None), ("even", ["b"], None),
                     ("main", ["c", "d"], [3, None])]


def test_collector_drops_unknown_tags_and_keeps_other_tuples_in_the_main_output():
    main, sides, c = collector(EVEN)
    c.collect([(ODD, 1), ("even", 2), (EVEN, 3, "x"), [EVEN, 4], (EVEN, 5)], 1)
    c.collect_side(ODD, 6, 2)
    c.collect_side(EVEN, 7, 2)
    c.flush()
    assert main.records == [("even", 2), (EVEN, 3, "x"), [EVEN, 4]]
    assert (sides["even"].records, sides["even"].timestamps) == ([5, 7], [1, 2])


# ---------------------------------------------------------------------------------------
# operators
# ---------------------------------------------------------------------------------------

class Split(ProcessFunction):
    def process_element(self, value, ctx):
        yield (EVEN if value % 2 == 0 else ODD), value
        yield value * 10, ctx.timestamp()


def test_process_operator_routes_to_side_outputs_with_timestamps():
    h = OperatorHarness(ProcessOperator(Split()), side_tags=[EVEN, ODD])
    h.process([1, 2, 3], timestamps=[100, None, 300])
    assert h.stamped() == [((10, 100), 100), ((20, None), None), ((30, 300), 300)]
    assert list(zip(h.side(ODD).records, h.side(ODD).timestamps)) == [(1, 100), (3, 300)]
    assert (h.side(EVEN).records, h.side(EVEN).timestamps) == ([2], [None])
    h.process([4, 6])
    assert h.records[3:] == [(40, None), (60, None)] and h.timestamps[3:] == [None, None]
    assert h.side(EVEN).records == [2, 4, 6]


def test_process_operator_drops_tags_nobody_reads():
    h = OperatorHarness(ProcessOperator(Split()), side_tags=[EVEN])
    h.process([1, 2], timestamps=[5, 6])
    assert h.records == [(10, 5), (20, 6)]
    assert h.side(EVEN).records == [2] and set(h.side_outputs) == {"even"}


def test_process_operator_with_a_plain_function_and_timers_refused():
    h = OperatorHarness(ProcessOperator(lambda v, ctx: [(ODD, v)] if v < 0 else [v]),
                        side_tags=[ODD])
    h.process([1, -1, 2])
    assert h.records == [1, 2] and h.side(ODD).records == [-1]

    def with_timer(value, ctx):
        ctx.timer_service().register_event_time_timer(10)

    t = OperatorHarness(ProcessOperator(with_timer, name="p"))
    with pytest.raises(UserFunctionError, match="'p'.*timers are only supported on keyed"):
        t.process([1])


def test_co_process_operator_routes_both_inputs():
    class Route(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield EVEN, ("left", value, ctx.timestamp())
            yield "l", value

        def process_element2(self, value, ctx):
            yield ODD, ("right", value, ctx.timestamp())

    h = OperatorHarness(CoProcessOperator(Route()), side_tags=[EVEN, ODD])
    h.process([1, 2], timestamps=[10, 20])
    h.process2([3])
    h.process2([4], timestamps=[40])
    assert h.stamped() == [(("l", 1), 10), (("l", 2), 20)]
    assert h.side(EVEN).records == [("left", 1, 10), ("left", 2, 20)]
    assert h.side(EVEN).timestamps == [10, 20]
    assert h.side(ODD).records == [("right", 3, None), ("right", 4, 40)]
    assert h.side(ODD).timestamps == [None, 40]


def test_side_outputs_of_a_chained_operator_and_timestamps_through_the_chain():
    h = OperatorHarness([ProcessOperator(Split()), MapOperator(lambda r: r[0] + 1)],
                        side_tags=[ODD])
    h.process([1, 2], timestamps=[7, 8])
    h.watermark(8)
    assert h.stamped() == [(11, 7), (21, 8)]
    assert h.side(ODD).records == [1] and h.watermarks == [8]
    assert h.side(ODD, at=1).records == []  # the map sends nothing to it


def test_watermarks_and_idleness_reach_the_side_outputs_too():
    h = OperatorHarness(ProcessOperator(Split()), side_tags=[EVEN, ODD])
    h.process([1], timestamps=[5])
    h.watermark(5)
    h.watermark(5)  # no advance: nothing
    h.watermark_status(True)
    h.watermark_status(False)
    for out in (h.output, h.side(EVEN), h.side(ODD)):
        assert out.watermarks == [5] and out.statuses == [True, False]
    assert h.side(ODD).events == [("records", [1], [5]), ("watermark", 5), ("status", True),
                                  ("status", False)]
    assert h.side(EVEN).events == [("watermark", 5), ("status", True), ("status", False)]
