"""``JobExecutionResult`` at PyFlink's path, ``pyflink.common.job_execution_result``.

It lives in ``flowray.runtime.execution.client``; importing this module imports the
runtime's client side (no Ray).
"""

from flowray.runtime.execution.client import JobExecutionResult

__all__ = ["JobExecutionResult"]
