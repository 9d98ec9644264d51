"""As ``pyflink.datastream.connectors.number_seq``."""

from flowray.operators.sources import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
