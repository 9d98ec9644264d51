"""The packages only some connectors need, installed with an extra of flowray's.

flowray's core needs none of these; a connector checks for its package when the user builds
it (on the driver, before a job is submitted) and names the extra to install::

    pip install 'flowray[kafka]'      # confluent-kafka: KafkaSource, KafkaSink
    pip install 'flowray[postgres]'   # psycopg: JdbcSink on PostgreSQL
    pip install 'flowray[avro]'       # fastavro: the Avro row formats

>>> require("json", "none", "this doctest").__name__
'json'
>>> require("no_such_module_xyz", "kafka", "KafkaSource")
Traceback (most recent call last):
...
flowray.common.optional_deps.MissingDependencyError: KafkaSource needs the Python package 'no_such_module_xyz', which is not installed: pip install 'flowray[kafka]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingDependencyError", "require", "EXTRAS"]

#: module -> (the distribution that provides it, the extra of flowray's that installs it)
EXTRAS = {
    "confluent_kafka": ("confluent-kafka", "kafka"),
    "psycopg": ("psycopg", "postgres"),
    "fastavro": ("fastavro", "avro"),
}


class MissingDependencyError(ImportError):
    """A connector's optional package is not installed; the message names the extra."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """``module``, imported; :class:`MissingDependencyError` naming ``feature`` and the
    ``pip install 'flowray[extra]'`` that provides it if it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name is not None and e.name != module.split(".")[0] and e.name != module:
            raise   # the package is there but broken: its own error says more
        dist = EXTRAS.get(module, (module, extra))[0]
        raise MissingDependencyError(
            f"{feature} needs the Python package {dist!r}, which is not installed: "
            f"pip install 'flowray[{extra}]'") from None
