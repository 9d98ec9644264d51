"""As ``pyflink.datastream.externalized_checkpoint_retention``: what happens to a job's
checkpoints when it ends (``execution.checkpointing.externalized-checkpoint-retention``)."""

import enum

__all__ = ["ExternalizedCheckpointRetention"]


class ExternalizedCheckpointRetention(enum.Enum):
    """DELETE_ON_CANCELLATION: kept if the job failed; RETAIN_ON_CANCELLATION: kept if it
    failed or was cancelled; NO_EXTERNALIZED_CHECKPOINTS: always deleted."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"
