"""``flowray.datastream.connectors.spark``: the Spark table sink, where PyFlink users look
for connectors. It lives in the Spark plug-in (:mod:`flowray.spark.table_sink`)."""

from flowray.spark.table_sink import SchemaMismatchError, SparkTableSink, arrow_schema_of

__all__ = ["SparkTableSink", "SchemaMismatchError", "arrow_schema_of"]
