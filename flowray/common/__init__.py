"""``flowray.common``: as ``pyflink.common`` (Configuration, Types, Time, WatermarkStrategy)."""

from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.restart_strategy import RestartStrategies
from flowray.common.serialization import Encoder
from flowray.common.time import Duration, Instant, Time
from flowray.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from flowray.common.types import Row
from flowray.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = ["Row", "Configuration", "ConfigurationError", "Types", "TypeInformation", "RowTypeInfo",
           "TupleTypeInfo", "WatermarkStrategy", "TimestampAssigner", "RestartStrategies",
           "Encoder", "Time", "Duration", "Instant"]
