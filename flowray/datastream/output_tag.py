"""``flowray.datastream.output_tag``: as ``pyflink.datastream.output_tag``."""

from flowray.operators.output_tag import OutputTag

__all__ = ["OutputTag"]
