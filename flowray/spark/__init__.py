"""Spark on the job's Ray cluster (RayDP): the session flowray uses for ``env.from_spark``
and the Spark table sink.

``get_or_create_spark(config)`` returns the running Spark session (one the user started
with ``raydp.init_spark`` is used as is) or starts one with ``flowray.spark.*`` and
``spark.*`` keys; ``stop_spark()`` stops a session flowray started, leaving no Java process.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from flowray.common.configuration import Configuration
from flowray.spark.source import SparkTableNotFoundError, release_all_blocks
from flowray.spark.session import (
    JavaNotFoundError,
    SparkSessionManager,
    check_java,
    spark_configs,
    spark_settings,
)

__all__ = ["get_or_create_spark", "stop_spark", "release_all_blocks", "JavaNotFoundError", "SparkTableNotFoundError",
           "SparkSessionManager", "check_java", "spark_configs", "spark_settings"]

_manager = SparkSessionManager()


def get_or_create_spark(config: "Configuration | Mapping[str, Any] | None" = None) -> Any:
    """The Spark session (started on Ray through RayDP if none is running)."""
    return _manager.get_or_create(config)


def stop_spark() -> None:
    """Free the converted DataFrames' blocks; stop the Spark session if flowray started it."""
    release_all_blocks()
    _manager.stop()
