"""What an ended job leaves in checkpoint storage (Flink's externalized-checkpoint
retention, ``execution.checkpointing.externalized-checkpoint-retention``).

>>> from flowray.runtime.messages import JobStatus
>>> discard_on_end("RETAIN_ON_CANCELLATION", JobStatus.CANCELED)
False
>>> discard_on_end("DELETE_ON_CANCELLATION", JobStatus.CANCELED)
True
>>> discard_on_end("DELETE_ON_CANCELLATION", JobStatus.FAILED)
False
"""

from __future__ import annotations

import logging
from typing import Iterable

from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator
from flowray.runtime.checkpoint.storage import CheckpointStorage
from flowray.runtime.messages import JobStatus

__all__ = ["discard_on_end", "clean_up_ended_job"]

log = logging.getLogger(__name__)


def discard_on_end(retention: str, status: JobStatus) -> bool:
    """Are a job's checkpoints deleted when it ends with ``status``?"""
    if status is JobStatus.FINISHED or retention == "NO_EXTERNALIZED_CHECKPOINTS":
        return True
    if status is JobStatus.CANCELED:
        return retention == "DELETE_ON_CANCELLATION"
    return False  # FAILED: kept by both externalized modes


def clean_up_ended_job(storage: CheckpointStorage, coordinator: CheckpointCoordinator,
                       retention: str, status: JobStatus, job_name: str,
                       job_files: Iterable[str]) -> None:
    """Leave nothing, or (retention) the retained checkpoints with the shared files they
    reference and nothing else; ``job_files``: the job's own files under its root (names),
    deleted when checkpoints are kept. Idempotent."""
    if discard_on_end(retention, status):
        try:
            storage.discard_job()
        except Exception as e:  # noqa: BLE001 - the job's outcome stands
            log.warning("flowray: could not delete the checkpoints of job %r: %s",
                        job_name, e)
        return
    coordinator.discard_orphans()
    for name in job_files:
        try:
            storage.delete_file(f"{storage.job_root}/{name}")
        except Exception:  # cleanup only
            log.debug("could not delete %s", name, exc_info=True)
