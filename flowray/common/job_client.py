"""``JobClient`` at PyFlink's path, ``pyflink.common.job_client``.

It lives in ``flowray.runtime.execution.client``; importing this module imports the
runtime's client side (no Ray).
"""

from flowray.runtime.execution.client import JobClient

__all__ = ["JobClient"]
