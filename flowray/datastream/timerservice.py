"""As ``pyflink.datastream.timerservice``."""

from flowray.operators.functions import TimerService

__all__ = ["TimerService"]
