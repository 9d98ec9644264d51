"""``flowray.datastream.async_retry_predicates``: as PyFlink's module of that name (use
with ``functools.partial`` for ``exception_type_predicate``)."""

from flowray.operators.async_functions import (
    empty_result_predicate,
    exception_type_predicate,
    has_exception_predicate,
)

__all__ = ["empty_result_predicate", "has_exception_predicate", "exception_type_predicate"]
