"""The Spark plug-in: Spark on the job's Ray cluster (RayDP) as a source, an exactly-once
table sink and a blocking stage in the middle of a program.

``get_or_create_spark(config)`` returns the running Spark session (one the user started
with ``raydp.init_spark`` is used as is) or starts one with ``flowray.spark.*`` and
``spark.*`` keys; ``stop_spark()`` stops a session flowray started, leaving no Java process.

The core does not know Spark: importing :mod:`flowray` installs this plug-in, which
registers its configuration keys (:mod:`~flowray.spark.options`), adds
``env.from_spark`` and ``stream.to_spark_dataframe`` and runs programs with a Spark stage
(:mod:`~flowray.spark.program`). Modules: :mod:`~flowray.spark.session` (the session),
:mod:`~flowray.spark.source` and :mod:`~flowray.spark.block_source` (tables in),
:mod:`~flowray.spark.table_sink` (tables out), :mod:`~flowray.spark.stage` (Spark between
two jobs). Nothing here imports pyspark, raydp or Ray until it is used.
"""

from __future__ import annotations

from flowray.spark import options as _options  # noqa: F401  (registers the keys)
from flowray.spark.program import install as _install
from flowray.spark.session import (
    JavaNotFoundError,
    SparkSessionManager,
    SparkTableNotFoundError,
    check_java,
    get_or_create_spark,
    spark_configs,
    spark_settings,
    stop_spark_session,
)

__all__ = ["get_or_create_spark", "stop_spark", "release_all_blocks", "JavaNotFoundError",
           "SparkTableNotFoundError", "SparkSessionManager", "check_java", "spark_configs",
           "spark_settings"]


def stop_spark() -> None:
    """Free the converted DataFrames' blocks; stop the Spark session if flowray started it."""
    release_all_blocks()
    stop_spark_session()


def release_all_blocks() -> int:
    """Free the Ray blocks of every DataFrame converted for ``from_spark``; how many."""
    from flowray.spark.source import release_all_blocks as release  # imports Ray

    return release()


_install()
