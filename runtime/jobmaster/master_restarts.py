"""How many times a job's master was restarted, kept in checkpoint storage so every
successor counts on from its predecessor (``JobOutcome.job_master_restarts``)."""

from __future__ import annotations

import logging

from flowray.runtime.checkpoint.storage import CheckpointStorage

__all__ = ["JOB_MASTER_RESTARTS_FILE", "record_job_master_restart"]

log = logging.getLogger(__name__)

JOB_MASTER_RESTARTS_FILE = "jobmaster-restarts"


def record_job_master_restart(storage: CheckpointStorage) -> int:
    """Count one more restart of the job master and return the count (1 for the first)."""
    path = f"{storage.job_root}/{JOB_MASTER_RESTARTS_FILE}"
    try:
        restarts = int(storage.read_file(path).decode()) + 1
    except (FileNotFoundError, ValueError):
        restarts = 1
    try:
        storage.write_file(path, str(restarts).encode())
    except Exception:  # noqa: BLE001 - only the count would be wrong
        log.warning("flowray: could not record the job master restart", exc_info=True)
    return restarts
