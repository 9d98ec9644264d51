"""The Spark plug-in's configuration keys: ``flowray.spark.*`` options, and every ``spark.*``
key passed to the Spark session as is. Registered when :mod:`flowray.spark` is imported
(``import flowray`` does it).

>>> from flowray.common import Configuration
>>> Configuration().set_string("spark.sql.shuffle.partitions", "4").get_string(
...     "spark.sql.shuffle.partitions", None)
'4'
"""

from __future__ import annotations

import re

from flowray.common.configuration import (
    parse_bool,
    parse_int,
    parse_str,
    register_option,
    register_passthrough_prefix,
)
from flowray.common.options.validators import positive

# -- Spark through RayDP -------------------------------------------------------------------
#: every ``spark.*`` key is passed to the Spark session as is
SPARK_PASSTHROUGH_PREFIX = "spark."
register_passthrough_prefix(SPARK_PASSTHROUGH_PREFIX, "Spark")
SPARK_APP_NAME = register_option(
    "flowray.spark.app-name",
    parse_str,
    "flowray",
    "Name of the Spark application flowray starts through RayDP.",
)
SPARK_EXECUTORS = register_option(
    "flowray.spark.executors",
    parse_int,
    1,
    "Spark executors (each a Ray actor holding executor-cores CPUs).",
    check=positive,
)
SPARK_EXECUTOR_CORES = register_option(
    "flowray.spark.executor-cores", parse_int, 1, "CPU cores per Spark executor.", check=positive
)
SPARK_EXECUTOR_MEMORY = register_option(
    "flowray.spark.executor-memory",
    parse_str,
    "1g",
    "Memory per Spark executor (e.g. 512m, 2g).",
    check=lambda v: (
        None
        if re.fullmatch(r"\s*\d+\s*([kmgt]b?|b)?\s*", str(v).lower())
        else "must be a size such as 512m or 2g"
    ),
)
SPARK_ENABLE_HIVE = register_option(
    "flowray.spark.enable-hive",
    parse_bool,
    False,
    "Use an embedded Hive metastore (tables persist across sessions).",
)
