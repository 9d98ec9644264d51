import pickle

import cloudpickle
import pytest

from flowray.operators.functions import Function
from flowray.operators.windowing.functions import (
    AllWindowFunction,
    InternalIterableAllWindowFunction,
    InternalIterableProcessAllWindowFunction,
    InternalIterableProcessWindowFunction,
    InternalIterableWindowFunction,
    InternalSingleValueAllWindowFunction,
    InternalSingleValueProcessAllWindowFunction,
    InternalSingleValueProcessWindowFunction,
    InternalSingleValueWindowFunction,
    InternalWindowFunction,
    KeyedStateStore,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
    check_arity,
    internal_window_function,
)
from flowray.operators.windowing.windows import CountWindow, TimeWindow

from .fakes import FakeWindowContext

WIN = TimeWindow(0, 5)


class Describe(ProcessWindowFunction[int, tuple, str, TimeWindow]):
    def __init__(self):
        self.cleared = []
        self.lifecycle = []

    def open(self, runtime_context):
        self.lifecycle.append(("open", runtime_context))

    def close(self):
        self.lifecycle.append("close")

    def process(self, key, context, elements):
        yield (key, context.window(), context.current_processing_time(),
               context.current_watermark(), sum(elements))

    def clear(self, context):
        self.cleared.append((context.window(), context.window_state()))


class SumApply(WindowFunction[int, tuple, str, TimeWindow]):
    def apply(self, key, window, inputs):
        return [(key, window.start, sum(inputs))]


class CountAll(ProcessAllWindowFunction[int, int, TimeWindow]):
    def process(self, context, elements):
        return [(context.window(), len(list(elements)))]


class MaxAll(AllWindowFunction[int, int, TimeWindow]):
    def apply(self, window, inputs):
        return [max(inputs)]


def test_generic_subscripting_and_subclassing():
    assert ProcessWindowFunction[tuple, tuple, str, TimeWindow] is not None
    assert WindowFunction[tuple, tuple, str, TimeWindow] is not None
    assert AllWindowFunction[int, int, CountWindow] is not None
    assert ProcessAllWindowFunction[int, int, TimeWindow] is not None
    assert ProcessWindowFunction.Context[TimeWindow] is not None
    assert InternalWindowFunction[int, int, str, TimeWindow] is not None
    assert isinstance(Describe(), Function) and isinstance(SumApply(), WindowFunction)

    class Incomplete(ProcessWindowFunction[int, int, str, TimeWindow]):
        pass

    with pytest.raises(TypeError):
        Incomplete()


def test_iterable_process_adapter():
    fn = Describe()
    internal = internal_window_function(fn, style="process")
    assert isinstance(internal, InternalIterableProcessWindowFunction)
    ctx = FakeWindowContext(processing_time=3, watermark=7)
    assert list(internal.process("k", WIN, ctx, [1, 2, 3])) == [("k", WIN, 3, 7, 6)]
    internal.clear(WIN, ctx)
    assert fn.cleared == [(WIN, ctx.window_store)]
    internal.open("rc")
    internal.close()
    assert fn.lifecycle == [("open", "rc"), "close"]
    assert internal.wrapped_function is fn


def test_single_value_process_adapter_wraps_the_value():
    internal = internal_window_function(Describe(), single_value=True)
    assert isinstance(internal, InternalSingleValueProcessWindowFunction)
    assert list(internal.process("k", WIN, FakeWindowContext(), 10)) == \
        [("k", WIN, 0, FakeWindowContext().current_watermark(), 10)]


def test_apply_adapters():
    keyed = internal_window_function(SumApply(), style="apply")
    assert isinstance(keyed, InternalIterableWindowFunction)
    assert list(keyed.process("k", WIN, None, [1, 2])) == [("k", 0, 3)]
    single = internal_window_function(SumApply(), single_value=True)
    assert isinstance(single, InternalSingleValueWindowFunction)
    assert list(single.process("k", WIN, None, 9)) == [("k", 0, 9)]
    single.clear(WIN, None)  # no-op

    lam = internal_window_function(lambda key, window, inputs: [len(inputs)], style="apply")
    assert list(lam.process("k", WIN, None, [1, 2, 3])) == [3]


def test_all_window_adapters_ignore_the_key():
    ctx = FakeWindowContext()
    internal = internal_window_function(CountAll(), keyed=False)
    assert isinstance(internal, InternalIterableProcessAllWindowFunction)
    assert list(internal.process(None, WIN, ctx, iter([4, 5]))) == [(WIN, 2)]
    single = internal_window_function(CountAll(), keyed=False, single_value=True)
    assert isinstance(single, InternalSingleValueProcessAllWindowFunction)
    assert list(single.process(None, WIN, ctx, 4)) == [(WIN, 1)]
    apply_all = internal_window_function(MaxAll(), keyed=False)
    assert isinstance(apply_all, InternalIterableAllWindowFunction)
    assert list(apply_all.process("ignored", WIN, ctx, [3, 9, 2])) == [9]
    lam = internal_window_function(lambda window, inputs: [window.end], keyed=False,
                                   single_value=True)
    assert isinstance(lam, InternalSingleValueAllWindowFunction)
    assert list(lam.process(None, WIN, ctx, 1)) == [5]
    proc = internal_window_function(lambda context, elements: [context.window()],
                                    keyed=False, style="process")
    assert list(proc.process(None, WIN, ctx, [])) == [WIN]


def test_pass_through_when_there_is_no_window_function():
    for keyed in (True, False):
        internal = internal_window_function(None, keyed=keyed, single_value=True)
        assert list(internal.process("k", WIN, None, ("reduced", 1))) == [("reduced", 1)]
        assert internal.passes_through()   # the operator may collect the result itself


def test_only_the_pass_through_function_says_it_passes_through():
    class Subclass(PassThroughWindowFunction):
        def apply(self, key, window, inputs):
            return [(key, *inputs)]

    for keyed in (True, False):
        assert not internal_window_function(None, keyed=keyed,
                                            single_value=False).passes_through()
        assert not internal_window_function(lambda *a: [a], keyed=keyed,
                                            single_value=True).passes_through()
    assert not internal_window_function(Subclass(), keyed=True,
                                        single_value=True).passes_through()


def test_results_none_and_non_iterables():
    def nothing(key, window, inputs):
        return None

    def scalar(key, window, inputs):
        return 42

    def text(key, window, inputs):
        return "abc"

    assert list(internal_window_function(nothing, style="apply").process("k", WIN, None,
                                                                          [1])) == []
    with pytest.raises(TypeError, match=r"scalar .* returned int 42; return an iterable"):
        internal_window_function(scalar, style="apply").process("k", WIN, None, [1])
    with pytest.raises(TypeError, match=r"returned str 'abc'"):
        internal_window_function(text, style="apply").process("k", WIN, None, [1])


def test_arity_errors_name_the_function_and_the_expected_arguments():
    with pytest.raises(TypeError) as info:
        internal_window_function(lambda window, inputs: inputs, style="apply")
    message = str(info.value)
    assert message.startswith("apply() window function ")
    assert "<lambda> (" in message
    assert "test_functions.py" in message
    assert "takes 2 arguments (window, inputs) but must take 3: (key, window, inputs)" in message

    with pytest.raises(TypeError, match=r"must take 2: \(window, inputs\)"):
        internal_window_function(lambda k, w, xs: xs, keyed=False, style="apply")
    with pytest.raises(TypeError, match=r"must take 3: \(key, context, elements\)"):
        internal_window_function(lambda context, elements: elements, style="process")

    class BadApply(WindowFunction):
        def apply(self, key, inputs):
            return inputs

    with pytest.raises(TypeError, match=r"BadApply\.apply .* takes 2 arguments \(key, inputs\)"):
        InternalIterableWindowFunction(BadApply())


def test_arity_accepts_defaults_and_varargs():
    check_arity(lambda k, w, xs, extra=1: xs, ("key", "window", "inputs"), "apply()")
    check_arity(lambda *args: args, ("key", "window", "inputs"), "apply()")
    check_arity(max, ("a", "b"), "builtin")  # no signature to check
    with pytest.raises(TypeError, match="takes 1 argument "):
        check_arity(lambda only: only, ("a", "b"), "x")
    with pytest.raises(TypeError):
        check_arity(lambda a, b, *, c: a, ("a", "b"), "x")  # required keyword-only


def test_wrong_kind_of_function():
    with pytest.raises(TypeError, match=r"Describe is a process\(\) window function"):
        internal_window_function(Describe(), style="apply")
    with pytest.raises(TypeError, match=r"SumApply is a apply\(\) window function"):
        internal_window_function(SumApply(), style="process")
    with pytest.raises(TypeError, match=r"SumApply cannot evaluate window_all\(\)"):
        internal_window_function(SumApply(), keyed=False)
    with pytest.raises(TypeError, match=r"CountAll cannot evaluate a keyed window"):
        internal_window_function(CountAll())
    with pytest.raises(TypeError, match=r"must have a apply\(\) method or be a callable"):
        InternalIterableWindowFunction(object())
    with pytest.raises(ValueError, match="style"):
        internal_window_function(SumApply(), style="reduce")


def test_adapters_pickle():
    internal = pickle.loads(pickle.dumps(internal_window_function(SumApply())))
    assert list(internal.process("k", WIN, None, [2])) == [("k", 0, 2)]
    lam = cloudpickle.loads(cloudpickle.dumps(
        internal_window_function(lambda key, window, inputs: [key], style="apply")))
    assert list(lam.process("k", WIN, None, [])) == ["k"]


def test_keyed_state_store_protocol():
    from flowray.operators.functions import RuntimeContext
    assert isinstance(RuntimeContext("t", 0, 1, 128), KeyedStateStore)
    assert not isinstance(object(), KeyedStateStore)
