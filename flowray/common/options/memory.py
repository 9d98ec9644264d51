"""Spilling staged records to disk."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_memory_bytes,
    register_option,
)
from flowray.common.options.validators import not_negative

__all__ = ["SINK_SPILL_THRESHOLD", "ITERATION_SPILL_THRESHOLD"]


SINK_SPILL_THRESHOLD = register_option(
    "flowray.sink.spill-threshold",
    parse_memory_bytes,
    64 << 20,
    "Sinks that stage a checkpoint interval's records before writing them (Parquet files, "
    "Spark tables) keep up to this many bytes of records in memory per subtask, measured "
    "as their pickled size (Python objects take several times more); past it staged "
    "records go to a spill file in the local temp folder, read back in pieces of this size "
    "when the transaction is written. 0 spills every record.",
    check=not_negative,
)

ITERATION_SPILL_THRESHOLD = register_option(
    "flowray.iteration.spill-threshold",
    parse_memory_bytes,
    64 << 20,
    "An iteration head keeps up to this many bytes of records that came back over its "
    "back edge in memory (measured as their pickled size); past it they wait in a spill "
    "file in the local temp folder, so a cycle whose output is back-pressured always "
    "takes its feedback and cannot deadlock. At least 1 byte.",
    check=lambda v: None if v >= 1 else "must be at least 1 byte",
)
