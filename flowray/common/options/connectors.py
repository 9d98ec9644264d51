"""Connectors' settings."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_duration_ms,
    register_option,
)
from flowray.common.options.validators import positive

__all__ = ["KAFKA_CONNECT_TIMEOUT"]


# -- connectors -------------------------------------------------------------------------
KAFKA_CONNECT_TIMEOUT = register_option(
    "flowray.kafka.connect-timeout",
    parse_duration_ms,
    30_000,
    "How long a Kafka source or sink keeps retrying, with back-off, a broker it cannot "
    "reach (at start, and when the connection is lost while the job runs) before it fails "
    "its task with an error naming the bootstrap servers.",
    check=positive,
)
