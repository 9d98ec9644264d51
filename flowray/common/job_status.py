"""``JobStatus`` at PyFlink's path, ``pyflink.common.job_status``.

It lives in ``flowray.runtime.messages``; importing this module imports the
runtime's client side (no Ray).
"""

from flowray.runtime.messages import JobStatus

__all__ = ["JobStatus"]
