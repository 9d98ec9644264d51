"""As ``pyflink.datastream.time_domain``."""

from flowray.operators.functions import TimeDomain

__all__ = ["TimeDomain"]
