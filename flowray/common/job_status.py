"""``JobStatus``, at PyFlink's path ``pyflink.common.job_status`` (as Flink's, in
flink-core): the states of a job. The runtime reports them; this module knows nothing of
it.

>>> JobStatus.CANCELED.is_globally_terminal_state(), JobStatus.RESTARTING.is_terminal_state()
(True, False)
"""

from __future__ import annotations

import enum

__all__ = ["JobStatus"]


class JobStatus(enum.Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    RESTARTING = "RESTARTING"
    # Flink's, for PyFlink programs that compare against them; flowray jobs never report
    # these (no suspended masters, no reconciliation of a recovered cluster)
    SUSPENDED = "SUSPENDED"
    RECONCILING = "RECONCILING"

    def is_globally_terminal_state(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)

    def is_terminal_state(self) -> bool:
        """Globally terminal, or SUSPENDED (as Flink)."""
        return self.is_globally_terminal_state() or self is JobStatus.SUSPENDED
