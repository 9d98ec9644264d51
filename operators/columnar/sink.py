"""Record batches (a columnar stream's elements) into a table of a sink's schema, with no
per-row objects: :func:`batches_to_table`, used by the Parquet and Spark table sinks.

>>> import pyarrow as pa
>>> b = pa.record_batch({"user": ["a"], "n": pa.array([1], pa.int32())})
>>> batches_to_table([b], pa.schema([("user", pa.string()), ("n", pa.int64())])).schema
user: string
n: int64
"""

from __future__ import annotations

from typing import Any, List, Type

__all__ = ["batches_to_table"]


def batches_to_table(batches: List[Any], schema: Any, where: str = "",
                     mismatch: Type[Exception] = ValueError) -> Any:
    """One table of ``batches``, in ``schema`` (``None``: theirs): columns matched by name
    and cast safely; ``mismatch`` (the sink's schema error) names what does not fit."""
    import pyarrow as pa

    SchemaMismatchError = mismatch
    for b in batches:
        if not isinstance(b, pa.RecordBatch):
            raise SchemaMismatchError(f"{where or 'the table'}: a batch of record batches "
                                      f"also holds a {type(b).__name__} record")
    target = schema if schema is not None else batches[0].schema
    names = list(target.names)
    out = []
    for b in batches:
        if sorted(b.schema.names) != sorted(names):
            raise SchemaMismatchError(f"a record batch has columns {sorted(b.schema.names)}, "
                                      f"the schema of {where or 'the table'} has "
                                      f"{sorted(names)}")
        try:
            out.append(pa.RecordBatch.from_arrays(
                [b.column(n).cast(target.field(n).type) for n in names], schema=target))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(f"a record batch does not fit the schema of "
                                      f"{where or 'the table'} ({target}): {e}") from e
    return pa.Table.from_batches(out, schema=target)
