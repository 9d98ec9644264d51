"""``flowray.common``: as ``pyflink.common`` (Configuration, Types, Time, WatermarkStrategy)."""

from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.restart_strategy import RestartStrategies
from flowray.common.serialization import Encoder
from flowray.common.time import Duration, Instant, Time
from flowray.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from flowray.common.types import Row, RowKind
from flowray.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from flowray.common import pyflink_options as _pyflink_options  # noqa: F401 (registers keys)
from flowray.common.execution_config import ExecutionConfig
from flowray.common.restart_strategy import RestartStrategyConfiguration
from flowray.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    SerializationSchema,
    SimpleStringSchema,
)

# PyFlink's pyflink.common.JobClient & co. live in the runtime: imported on first use
_RUNTIME_NAMES = {"JobClient": "flowray.common.job_client",
                  "JobExecutionResult": "flowray.common.job_execution_result",
                  "JobStatus": "flowray.common.job_status",
                  # pyflink.common also exposes the row formats (PyFlink's _install())
                  "JsonRowSerializationSchema": "flowray.datastream.formats.json",
                  "JsonRowDeserializationSchema": "flowray.datastream.formats.json",
                  "CsvRowSerializationSchema": "flowray.datastream.formats.csv",
                  "CsvRowDeserializationSchema": "flowray.datastream.formats.csv",
                  "AvroRowSerializationSchema": "flowray.datastream.formats.avro",
                  "AvroRowDeserializationSchema": "flowray.datastream.formats.avro"}


def __getattr__(name: str) -> object:
    if name in _RUNTIME_NAMES:
        import importlib

        return getattr(importlib.import_module(_RUNTIME_NAMES[name]), name)
    raise AttributeError(f"module 'flowray.common' has no attribute {name!r}")

__all__ = ["Row", "RowKind", "Configuration", "ConfigurationError", "Types", "TypeInformation",
           "RowTypeInfo",
           "TupleTypeInfo", "WatermarkStrategy", "TimestampAssigner", "RestartStrategies",
           "Encoder", "Time", "Duration", "Instant", "ExecutionConfig",
           "RestartStrategyConfiguration", "SerializationSchema", "DeserializationSchema",
           "SimpleStringSchema", "ByteArraySchema"]
