"""Window functions, as in ``pyflink.datastream.functions``, and the internal adapters the
window operator calls.

User-facing: :class:`WindowFunction` ``apply(key, window, inputs)``, :class:`AllWindowFunction`
``apply(window, inputs)``, :class:`ProcessWindowFunction` ``process(key, context, elements)``
and :class:`ProcessAllWindowFunction` ``process(context, elements)``; each returns (or
yields) an iterable of outputs, or None. Plain callables with those parameters work too.

Internal: :func:`internal_window_function` turns any of them into an
:class:`InternalWindowFunction`, the one shape the operator calls:
``process(key, window, context, input_data) -> Iterable`` where ``input_data`` is the pane's
elements (iterable variants, for ``apply``/``process``) or the one pre-aggregated value of a
``reduce``/``aggregate`` (single-value variants).

>>> f = internal_window_function(lambda key, window, inputs: [(key, sum(inputs))],
...                              style="apply")
>>> list(f.process("k", None, None, [1, 2, 3]))
[('k', 6)]
>>> list(internal_window_function(None, single_value=True).process("k", None, None, 42))
[42]
"""

from __future__ import annotations

import abc
import inspect
from typing import (Any, Callable, Generic, Iterable, Optional, Protocol, Sequence, TypeVar,
                    runtime_checkable)

from flowray.operators.functions import Function

__all__ = [
    "KeyedStateStore",
    "WindowFunction",
    "AllWindowFunction",
    "ProcessWindowFunction",
    "ProcessAllWindowFunction",
    "PassThroughWindowFunction",
    "PassThroughAllWindowFunction",
    "InternalWindowFunction",
    "InternalSingleValueWindowFunction",
    "InternalSingleValueAllWindowFunction",
    "InternalIterableWindowFunction",
    "InternalIterableAllWindowFunction",
    "InternalSingleValueProcessWindowFunction",
    "InternalSingleValueProcessAllWindowFunction",
    "InternalIterableProcessWindowFunction",
    "InternalIterableProcessAllWindowFunction",
    "internal_window_function",
    "check_arity",
]

IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
W2 = TypeVar("W2")


@runtime_checkable
class KeyedStateStore(Protocol):
    """Access to keyed state (a RuntimeContext is one): what ``window_state()`` and
    ``global_state()`` return."""

    def get_state(self, state_descriptor: Any) -> Any: ...

    def get_list_state(self, state_descriptor: Any) -> Any: ...

    def get_map_state(self, state_descriptor: Any) -> Any: ...

    def get_reducing_state(self, state_descriptor: Any) -> Any: ...

    def get_aggregating_state(self, state_descriptor: Any) -> Any: ...


# -- user-facing -------------------------------------------------------------------------

class WindowFunction(Function, abc.ABC, Generic[IN, OUT, KEY, W]):
    """Evaluates a keyed window."""

    @abc.abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Optional[Iterable[OUT]]: ...


class AllWindowFunction(Function, abc.ABC, Generic[IN, OUT, W]):
    """Evaluates a non-keyed window (``window_all``)."""

    @abc.abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Optional[Iterable[OUT]]: ...


class ProcessWindowFunction(Function, abc.ABC, Generic[IN, OUT, KEY, W]):
    """Evaluates a keyed window with a :class:`Context` (window, time, state)."""

    class Context(abc.ABC, Generic[W2]):
        @abc.abstractmethod
        def window(self) -> W2: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        @abc.abstractmethod
        def window_state(self) -> KeyedStateStore:
            """State of this key and window; clean it up in :meth:`clear`."""

        @abc.abstractmethod
        def global_state(self) -> KeyedStateStore:
            """State of this key across windows."""

    @abc.abstractmethod
    def process(self, key: KEY, context: "ProcessWindowFunction.Context",
                elements: Iterable[IN]) -> Optional[Iterable[OUT]]: ...

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        """The window expired (its cleanup time passed): delete its ``window_state()``."""


class ProcessAllWindowFunction(Function, abc.ABC, Generic[IN, OUT, W]):
    """Evaluates a non-keyed window with a :class:`Context`."""

    class Context(abc.ABC, Generic[W2]):
        @abc.abstractmethod
        def window(self) -> W2: ...

        @abc.abstractmethod
        def window_state(self) -> KeyedStateStore: ...

        @abc.abstractmethod
        def global_state(self) -> KeyedStateStore: ...

    @abc.abstractmethod
    def process(self, context: "ProcessAllWindowFunction.Context",
                elements: Iterable[IN]) -> Optional[Iterable[OUT]]: ...

    def clear(self, context: "ProcessAllWindowFunction.Context") -> None:
        """The window expired: delete its ``window_state()``."""


class PassThroughWindowFunction(WindowFunction[IN, IN, KEY, W]):
    """Emits the window's inputs unchanged (``reduce``/``aggregate`` without a function)."""

    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[IN]:
        return inputs


class PassThroughAllWindowFunction(AllWindowFunction[IN, IN, W]):
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[IN]:
        return inputs


# -- arity and results -------------------------------------------------------------------

def _describe(fn: Any) -> str:
    target = getattr(fn, "__func__", fn)
    name = getattr(target, "__qualname__", None) or type(fn).__qualname__
    code = getattr(target, "__code__", None)
    if code is not None:
        return f"{name} ({code.co_filename}:{code.co_firstlineno})"
    return name


def check_arity(fn: Callable[..., Any], params: Sequence[str], what: str) -> None:
    """TypeError unless ``fn`` can be called with ``len(params)`` positional arguments.

    >>> check_arity(lambda w, xs: xs, ("key", "window", "inputs"), "apply()")
    Traceback (most recent call last):
    TypeError: apply() <lambda> (...) takes 2 arguments (w, xs) but must take 3: (key, window, ...)
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    kw_required = [p for p in signature.parameters.values()
                   if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    n = len(params)
    if len(required) <= n and (varargs or n <= len(positional)) and not kw_required:
        return
    names = ", ".join(p.name for p in signature.parameters.values())
    count = f"{len(positional)} argument{'s' if len(positional) != 1 else ''}"
    raise TypeError(f"{what} {_describe(fn)} takes {count} ({names}) but must take {n}: "
                    f"({', '.join(params)})")


def _outputs(result: Any, fn: Any) -> Iterable[Any]:
    if result is None:
        return ()
    if isinstance(result, (str, bytes, bytearray)) or not hasattr(result, "__iter__"):
        raise TypeError(f"window function {_describe(fn)} returned {type(result).__name__} "
                        f"{result!r:.80}; return an iterable of outputs (e.g. [value]), "
                        "yield them, or return None")
    return result


# -- internal ----------------------------------------------------------------------------

class InternalWindowFunction(Function, abc.ABC, Generic[IN, OUT, KEY, W]):
    """The one shape the window operator calls; ``open``/``close`` reach the user function."""

    class InternalWindowContext(abc.ABC):
        """What the operator provides for the current key and window."""

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        @abc.abstractmethod
        def window_state(self) -> KeyedStateStore: ...

        @abc.abstractmethod
        def global_state(self) -> KeyedStateStore: ...

    @abc.abstractmethod
    def process(self, key: KEY, window: W, context: "InternalWindowFunction.InternalWindowContext",
                input_data: IN) -> Iterable[OUT]:
        """Outputs of the pane ``(key, window)`` (an iterable, never None)."""

    @abc.abstractmethod
    def clear(self, window: W, context: "InternalWindowFunction.InternalWindowContext") -> None:
        """The window expired: let a process function clean its per-window state."""

    def clears_windows(self) -> bool:
        """False if :meth:`clear` does nothing (the operator may skip calling it)."""
        return True

    def passes_through(self) -> bool:
        """True if :meth:`process` gives ``[input_data]`` and reads nothing (no key, no
        window, no state): the operator may collect the pane's result itself."""
        return False


class _ContextView(ProcessWindowFunction.Context, ProcessAllWindowFunction.Context):
    """The user's context for one evaluation: the window plus the operator's context."""

    def __init__(self, window: Any, underlying: InternalWindowFunction.InternalWindowContext):
        self._window = window
        self._underlying = underlying

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._underlying.current_processing_time()

    def current_watermark(self) -> int:
        return self._underlying.current_watermark()

    def window_state(self) -> KeyedStateStore:
        return self._underlying.window_state()

    def global_state(self) -> KeyedStateStore:
        return self._underlying.global_state()


class _Adapter(InternalWindowFunction):
    """Resolves the user's method (or plain callable), checks its arity once, and wraps a
    single pre-aggregated value into a one-element list when ``single_value``."""

    _method: str = ""
    _params: Sequence[str] = ()
    _what: str = ""
    _single_value: bool = False

    def __init__(self, wrapped_function: Any) -> None:
        self._wrapped_function = wrapped_function
        method = getattr(wrapped_function, self._method, None)
        if callable(method):
            self._call = method
        elif callable(wrapped_function) and not isinstance(wrapped_function, Function):
            self._call = wrapped_function
        else:
            raise TypeError(f"{self._what} must have a {self._method}() method or be a "
                            f"callable taking ({', '.join(self._params)}), got "
                            f"{wrapped_function!r}")
        check_arity(self._call, self._params, self._what)

    @property
    def wrapped_function(self) -> Any:
        """The user's function, as given."""
        return self._wrapped_function

    def _has_lifecycle(self) -> bool:
        fn = self._wrapped_function
        return isinstance(fn, Function) or (callable(getattr(fn, "open", None))
                                            and callable(getattr(fn, "close", None)))

    def open(self, runtime_context: Any) -> None:
        if self._has_lifecycle():
            self._wrapped_function.open(runtime_context)

    def close(self) -> None:
        if self._has_lifecycle():
            self._wrapped_function.close()

    def _elements(self, input_data: Any) -> Iterable[Any]:
        return [input_data] if self._single_value else input_data

    def clear(self, window: Any, context: InternalWindowFunction.InternalWindowContext) -> None:
        pass

    def clears_windows(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wrapped_function!r})"


class _ApplyAdapter(_Adapter):
    _method = "apply"
    _params = ("key", "window", "inputs")
    _what = "apply() window function"

    def process(self, key: Any, window: Any, context: Any, input_data: Any) -> Iterable[Any]:
        return _outputs(self._call(key, window, self._elements(input_data)), self._call)


class _ApplyAllAdapter(_Adapter):
    _method = "apply"
    _params = ("window", "inputs")
    _what = "apply() all-window function"

    def process(self, key: Any, window: Any, context: Any, input_data: Any) -> Iterable[Any]:
        return _outputs(self._call(window, self._elements(input_data)), self._call)


class _ProcessAdapter(_Adapter):
    _method = "process"
    _params = ("key", "context", "elements")
    _what = "process() window function"

    def process(self, key: Any, window: Any, context: Any, input_data: Any) -> Iterable[Any]:
        view = _ContextView(window, context)
        return _outputs(self._call(key, view, self._elements(input_data)), self._call)

    def clear(self, window: Any, context: InternalWindowFunction.InternalWindowContext) -> None:
        clear = getattr(self._wrapped_function, "clear", None)
        if callable(clear) and self._call is not self._wrapped_function:
            clear(_ContextView(window, context))

    def clears_windows(self) -> bool:
        return True


class _ProcessAllAdapter(_ProcessAdapter):
    _params = ("context", "elements")
    _what = "process() all-window function"

    def process(self, key: Any, window: Any, context: Any, input_data: Any) -> Iterable[Any]:
        view = _ContextView(window, context)
        return _outputs(self._call(view, self._elements(input_data)), self._call)


class InternalIterableWindowFunction(_ApplyAdapter):
    """``apply(key, window, inputs)`` over the pane's buffered elements."""


class InternalSingleValueWindowFunction(_ApplyAdapter):
    """``apply(key, window, [value])`` over a reduce/aggregate result."""

    _single_value = True

    def passes_through(self) -> bool:
        return type(self._wrapped_function) is PassThroughWindowFunction


class InternalIterableAllWindowFunction(_ApplyAllAdapter):
    """``apply(window, inputs)``; the key is ignored."""


class InternalSingleValueAllWindowFunction(_ApplyAllAdapter):
    _single_value = True

    def passes_through(self) -> bool:
        return type(self._wrapped_function) is PassThroughAllWindowFunction


class InternalIterableProcessWindowFunction(_ProcessAdapter):
    """``process(key, context, elements)``; ``clear`` calls the user's ``clear(context)``."""


class InternalSingleValueProcessWindowFunction(_ProcessAdapter):
    _single_value = True


class InternalIterableProcessAllWindowFunction(_ProcessAllAdapter):
    """``process(context, elements)``; the key is ignored."""


class InternalSingleValueProcessAllWindowFunction(_ProcessAllAdapter):
    _single_value = True


_ADAPTERS = {
    # (style, keyed, single_value) -> adapter
    ("apply", True, False): InternalIterableWindowFunction,
    ("apply", True, True): InternalSingleValueWindowFunction,
    ("apply", False, False): InternalIterableAllWindowFunction,
    ("apply", False, True): InternalSingleValueAllWindowFunction,
    ("process", True, False): InternalIterableProcessWindowFunction,
    ("process", True, True): InternalSingleValueProcessWindowFunction,
    ("process", False, False): InternalIterableProcessAllWindowFunction,
    ("process", False, True): InternalSingleValueProcessAllWindowFunction,
}


def internal_window_function(function: Any, *, keyed: bool = True, single_value: bool = False,
                             style: Optional[str] = None) -> InternalWindowFunction:
    """The adapter for a window function.

    ``keyed``: after ``key_by(...).window`` (else ``window_all``). ``single_value``: the input
    is one ``reduce``/``aggregate`` result, not the pane's elements. ``style``: ``"apply"`` or
    ``"process"`` as the user called it; None infers it from the class (a plain callable is
    taken as an apply function, as the window function of ``reduce``/``aggregate``).
    ``function`` None: pass the value through (``reduce``/``aggregate`` alone).
    Raises TypeError for a function of the wrong kind or arity.
    """
    if function is None:
        function = PassThroughWindowFunction() if keyed else PassThroughAllWindowFunction()
        style = "apply"
    is_process = isinstance(function, (ProcessWindowFunction, ProcessAllWindowFunction))
    is_apply = isinstance(function, (WindowFunction, AllWindowFunction))
    if style is None:
        style = "process" if is_process else "apply"
    if style not in ("apply", "process"):
        raise ValueError(f"style must be 'apply' or 'process', got {style!r}")
    if (style == "apply" and is_process) or (style == "process" and is_apply):
        other = "process" if is_process else "apply"
        raise TypeError(f"{type(function).__name__} is a {other}() window function; pass it "
                        f"to {other}() (or as the window function of reduce/aggregate)")
    expected = {True: (WindowFunction, ProcessWindowFunction),
                False: (AllWindowFunction, ProcessAllWindowFunction)}[keyed]
    wrong = {True: (AllWindowFunction, ProcessAllWindowFunction),
             False: (WindowFunction, ProcessWindowFunction)}[keyed]
    if isinstance(function, wrong) and not isinstance(function, expected):
        stream = "a keyed window (key_by().window())" if keyed else "window_all()"
        raise TypeError(f"{type(function).__name__} cannot evaluate {stream}; use "
                        f"{' or '.join(c.__name__ for c in expected)}")
    return _ADAPTERS[(style, keyed, single_value)](function)
