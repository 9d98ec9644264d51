"""Mistakes refused when the graph is built, naming the problem, not at run time: a
KeyedProcessFunction on a stream that is not keyed, a reduce function that cannot take
two values."""

import operator

import pytest

from flowray import GraphError, StreamExecutionEnvironment
from flowray.datastream.functions import KeyedProcessFunction, ProcessFunction, ReduceFunction


class Stateless(KeyedProcessFunction):
    """Uses no state: refused anyway (its context's current key would be missing)."""

    def process_element(self, value, ctx):
        yield ctx.get_current_key(), value


class Plain(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


def _numbers():
    return StreamExecutionEnvironment.get_execution_environment().from_collection([1, 2, 3])


def test_a_keyed_process_function_needs_a_keyed_stream():
    with pytest.raises(GraphError, match=r"process\(\): Stateless is a KeyedProcessFunction, "
                                         r"which needs a keyed stream.*key_by"):
        _numbers().process(Stateless())
    _numbers().key_by(lambda x: x % 2).process(Stateless())   # keyed: fine
    _numbers().process(Plain())


class TwoValues(ReduceFunction):
    def reduce(self, a, b):
        return a + b


class OneValue(ReduceFunction):
    def reduce(self, a):
        return a


@pytest.mark.parametrize("fn", [lambda a, b: a + b, TwoValues(), operator.add, max,
                                lambda *values: sum(values), lambda a, b, c=0: a + b + c])
def test_a_reduce_function_of_two_values_is_accepted(fn):
    _numbers().key_by(lambda x: x % 2).reduce(fn)


@pytest.mark.parametrize("fn, shown", [(lambda a: a, "(a)"), (OneValue(), "(a)"),
                                       (lambda a, b, c: a, "(a, b, c)")])
def test_a_reduce_function_that_cannot_take_two_values_is_refused(fn, shown):
    with pytest.raises(GraphError, match=r"reduce\(\): the function must take two values .*"
                                         + r"its signature is " + shown.replace("(", r"\(")
                                         .replace(")", r"\)")):
        _numbers().key_by(lambda x: x % 2).reduce(fn)
    with pytest.raises(GraphError, match="expected a ReduceFunction or a function"):
        _numbers().key_by(lambda x: x % 2).reduce(42)


def test_a_window_reduce_function_is_checked_too():
    from flowray.datastream.window import TumblingProcessingTimeWindows
    from flowray.common import Time
    windowed = _numbers().key_by(lambda x: x % 2).window(
        TumblingProcessingTimeWindows.of(Time.seconds(1)))
    with pytest.raises(GraphError, match="must take two values"):
        windowed.reduce(lambda a: a)
