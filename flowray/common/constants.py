"""Values several layers agree on."""

__all__ = ["MIN_WATERMARK", "MAX_WATERMARK", "DEFAULT_CHECKPOINTS_DIR"]

#: the watermark before any (Flink's Long.MIN_VALUE) and the final one of a bounded input
MIN_WATERMARK = -(1 << 63)
MAX_WATERMARK = (1 << 63) - 1

#: where checkpoints go when ``execution.checkpointing.dir`` is unset (under the working directory)
DEFAULT_CHECKPOINTS_DIR = "flowray-checkpoints"
