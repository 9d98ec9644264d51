"""An operator's declared output type applied to what it emits (PyFlink serializes an
operator's results with its ``output_type``: see :mod:`flowray.common.type_conversion`).

:func:`declare_output_type` records the type on the operator; at ``setup`` the operator
wraps its output in a :class:`TypedOutput` built once from it. A record that does not fit
fails the operator with a non-recoverable :class:`~flowray.operators.base.UserFunctionError`
naming the operator, the field and the value.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from flowray.common.type_conversion import RecordTypeError, batch_converter, record_converter
from flowray.operators.base import Output, StreamOperator

__all__ = ["TypedOutput", "TypedKeySelector", "declare_output_type",
           "declare_side_output_type", "typed_key_selector", "typed_output"]


def declare_output_type(op: StreamOperator, type_info: Any) -> None:
    """Make ``op`` convert what it emits to ``type_info`` (no-op for ``None`` and
    ``Types.PICKLED_BYTE_ARRAY()``). Raises ``TypeError`` at once for a non-type."""
    if record_converter(type_info) is not None:
        op.output_type = type_info
        op.output_wrapper = typed_output


def declare_side_output_type(op: StreamOperator, tag: str, type_info: Any) -> None:
    """Make ``op`` convert what it sends to side output ``tag`` to ``type_info`` (an
    ``OutputTag``'s type, as PyFlink serializes side outputs with it); no-op for ``None``
    and ``Types.PICKLED_BYTE_ARRAY()``."""
    if record_converter(type_info) is not None:
        types = dict(getattr(op, "side_output_types", None) or {})
        types[tag] = type_info
        op.side_output_types = types  # type: ignore[attr-defined]
        op.side_output_wrapper = typed_side_output


def typed_side_output(op: StreamOperator, tag: str, output: Output) -> Output:
    """``output`` (side output ``tag`` of ``op``) converting to its declared type."""
    convert = batch_converter((getattr(op, "side_output_types", None) or {}).get(tag))
    return output if convert is None else TypedOutput(output, convert, op)


class TypedOutput(Output):
    """Converts each emitted record (``convert``: a batch converter), then passes the
    batch on."""

    __slots__ = ("inner", "convert", "op")

    def __init__(self, inner: Output, convert: Callable[[List[Any]], List[Any]],
                 op: StreamOperator) -> None:
        self.inner, self.convert, self.op = inner, convert, op

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        try:
            out = self.convert(records)
        except RecordTypeError as e:
            raise self.op.user_error(e) from e
        self.inner.emit(out, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        self.inner.emit_watermark(timestamp)

    def emit_watermark_status(self, idle: bool) -> None:
        self.inner.emit_watermark_status(idle)


def typed_output(op: StreamOperator, output: Output) -> Output:
    """``output`` converting to ``op.output_type`` (``output`` itself when there is none)."""
    convert = batch_converter(getattr(op, "output_type", None))
    return output if convert is None else TypedOutput(output, convert, op)



class TypedKeySelector:
    """``key_by(key_selector, key_type)``: keys converted to ``key_type`` (as PyFlink
    serializes keys with it) before they are hashed and used. A key that does not fit
    raises :class:`~flowray.common.type_conversion.RecordTypeError` (not recoverable)."""

    def __init__(self, key_selector: Any, key_type: Any) -> None:
        self.key_selector = key_selector
        self.key_type = key_type
        self._key_of: Optional[Callable[[Any], Any]] = None

    def get_key(self, value: Any) -> Any:
        key_of = self._key_of
        if key_of is None:
            key_of = self._key_of = self._compile()
        return key_of(value)

    __call__ = get_key

    def _compile(self) -> Callable[[Any], Any]:
        convert = record_converter(self.key_type)
        assert convert is not None
        selector = self.key_selector
        select = selector.get_key if callable(getattr(selector, "get_key", None)) else selector

        def key_of(value: Any) -> Any:
            key = select(value)
            try:
                return convert(key)
            except RecordTypeError as e:
                e.root = "key"
                raise
        return key_of

    def __getstate__(self) -> Any:  # the compiled function is rebuilt where it runs
        return {"key_selector": self.key_selector, "key_type": self.key_type}

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state, _key_of=None)


def typed_key_selector(key_selector: Any, key_type: Any) -> Any:
    """``key_selector`` converting its keys to ``key_type`` (itself when there is no
    conversion, e.g. no type or ``Types.PICKLED_BYTE_ARRAY()``)."""
    if record_converter(key_type) is None:
        return key_selector
    return TypedKeySelector(key_selector, key_type)
