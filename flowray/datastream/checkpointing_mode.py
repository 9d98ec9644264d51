"""``flowray.datastream.checkpointing_mode``: as ``pyflink.datastream.checkpointing_mode``."""

from flowray.runtime.checkpoint_config import CheckpointingMode

__all__ = ["CheckpointingMode"]
