"""``flowray.datastream.checkpoint_config``: as ``pyflink.datastream.checkpoint_config``."""

from flowray.runtime.checkpoint_config import CheckpointConfig

__all__ = ["CheckpointConfig"]
