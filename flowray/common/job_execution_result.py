"""``JobExecutionResult``, at PyFlink's path ``pyflink.common.job_execution_result`` (as
Flink's, in flink-core): what ``execute()`` returns. An interface: the runtime implements
it (an ended job's result, or a detached job's, which knows only the job's id).
"""

from __future__ import annotations

import abc
from typing import Any, Dict

from flowray.common.compat import not_implemented

__all__ = ["JobExecutionResult"]


class JobExecutionResult(abc.ABC):
    """The result of a job's execution, as PyFlink's (``get_job_id``, ``get_net_runtime``,
    ``is_job_execution_result``...)."""

    @abc.abstractmethod
    def get_job_id(self) -> str:
        """The job's id."""

    @abc.abstractmethod
    def get_net_runtime(self) -> int:
        """How long the job ran, in milliseconds."""

    @abc.abstractmethod
    def get_checkpoint_stats(self) -> Dict[str, Any]:
        """The job's checkpoint statistics (flowray's: PyFlink has accumulators instead)."""

    def is_job_execution_result(self) -> bool:
        """``True``: the job ran here to its end (``False`` for a detached job's)."""
        return True

    def get_job_execution_result(self) -> "JobExecutionResult":
        return self

    get_accumulator_result = not_implemented(
        "JobExecutionResult.get_accumulator_result",
        "flowray has no accumulators: count in operator state or a side output, or read "
        "task_metrics()")
    get_all_accumulator_results = not_implemented(
        "JobExecutionResult.get_all_accumulator_results",
        "flowray has no accumulators: see task_metrics() and get_checkpoint_stats()")
