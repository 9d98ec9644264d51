"""``JobClient``, at PyFlink's path ``pyflink.common.job_client`` (as Flink's, in
flink-core): a handle on a submitted job. An interface: the runtime implements it
(``execute_async()`` returns one, ``flowray.runtime.execution.jobs.attach`` re-attaches one).
"""

from __future__ import annotations

import abc
from typing import Optional

from flowray.common.compat import not_implemented
from flowray.common.job_execution_result import JobExecutionResult
from flowray.common.job_status import JobStatus

__all__ = ["JobClient"]


class JobClient(abc.ABC):
    """A submitted job, as PyFlink's ``JobClient``."""

    @abc.abstractmethod
    def get_job_id(self) -> str:
        """The job's id."""

    @abc.abstractmethod
    def get_job_status(self) -> JobStatus:
        """The job's status now."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Cancel the job (no savepoint)."""

    @abc.abstractmethod
    def trigger_savepoint(self, savepoint_directory: Optional[str] = None) -> str:
        """Take a savepoint; its path once it completed."""

    @abc.abstractmethod
    def stop_with_savepoint(self, savepoint_directory: Optional[str] = None) -> str:
        """Stop the job with a final savepoint; its path."""

    @abc.abstractmethod
    def get_job_execution_result(self) -> JobExecutionResult:
        """Wait for the job's end; its result."""

    get_accumulators = not_implemented(
        "JobClient.get_accumulators",
        "flowray has no accumulators: see get_job_info() for the tasks' record counts")
