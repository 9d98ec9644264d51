"""As ``pyflink.datastream.connectors.base``: the ``Source`` and ``Sink`` base classes and
``DeliveryGuarantee``.

>>> DeliveryGuarantee.EXACTLY_ONCE.value
'exactly-once'
"""

import enum

from flowray.operators.sinks import Sink
from flowray.operators.sources import Source

__all__ = ["Source", "Sink", "DeliveryGuarantee"]


class DeliveryGuarantee(enum.Enum):
    """What a sink promises after failures (Flink's ``DeliveryGuarantee``). flowray's
    two-phase-commit sinks (``FileSink``) are EXACTLY_ONCE with checkpoints; ``Sink``
    writers are AT_LEAST_ONCE."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    NONE = "none"
