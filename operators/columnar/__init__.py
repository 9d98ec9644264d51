"""The columnar path's operators, in one place: :mod:`.operators` (``map_batches``, rows <->
Arrow record batches, vectorized keyed running aggregates), :mod:`.batches` (what a
batch-producing function may return, and how it becomes record batches), :mod:`.state`
(running values cached in numpy in front of the state table) and :mod:`.sink` (record
batches into Arrow tables for the Parquet and Spark sinks).
"""

from flowray.operators.columnar.operators import (
    DEFAULT_BATCH_SIZE,
    ColumnarKeyedAggregateOperator,
    MapBatchesOperator,
    ToRowsOperator,
)

__all__ = ["MapBatchesOperator", "ToRowsOperator", "ColumnarKeyedAggregateOperator",
           "DEFAULT_BATCH_SIZE"]
