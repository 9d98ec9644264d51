"""Finding or starting Ray: the driver's Ray, a cluster named by ``ray.address`` /
``RAY_ADDRESS``, or an embedded local Ray sized to the machine. Quiet by default."""

from __future__ import annotations

import logging
import os
from typing import Optional

from flowray.common.options import RAY_ADDRESS
from flowray.common.configuration import Configuration

__all__ = ["ensure_ray", "NAMESPACE"]

NAMESPACE = "flowray"


def ensure_ray(config: Configuration) -> None:
    import ray

    if ray.is_initialized():
        return
    address: Optional[str] = config.get(RAY_ADDRESS) or os.environ.get("RAY_ADDRESS")
    for name in ("ray", "ray.data", "ray._private", "ray.util"):
        logging.getLogger(name).setLevel(logging.WARNING)
    kwargs = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                  namespace=NAMESPACE)
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(**kwargs)
