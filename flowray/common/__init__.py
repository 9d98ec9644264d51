"""``flowray.common``: as ``pyflink.common`` (Configuration, Types)."""

from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.restart_strategy import RestartStrategies
from flowray.common.serialization import Encoder
from flowray.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from flowray.common.types import Row

__all__ = ["Row", "Configuration", "ConfigurationError", "Types", "TypeInformation", "RowTypeInfo",
           "TupleTypeInfo", "WatermarkStrategy", "RestartStrategies", "Encoder"]


class WatermarkStrategy:
    """Accepted by ``from_source`` as in PyFlink; event-time watermarks from a strategy are
    not generated yet (bounded sources still end with the final watermark)."""

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy()

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        raise NotImplementedError("event-time watermark strategies arrive with windows")

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: object) -> "WatermarkStrategy":
        raise NotImplementedError("event-time watermark strategies arrive with windows")
