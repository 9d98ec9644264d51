"""Spilling staged records to disk, and the Python garbage collector of task processes."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_int,
    parse_memory_bytes,
    register_option,
)
from flowray.common.options.validators import bounded, not_negative

__all__ = ["SINK_SPILL_THRESHOLD", "ITERATION_SPILL_THRESHOLD", "TASK_GC_THRESHOLD"]


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

TASK_GC_THRESHOLD = register_option(
    "flowray.task.gc-threshold",
    parse_int,
    100_000,
    "While a task runs in its own process (a task actor on Ray), Python's cyclic garbage "
    "collector starts a young-generation collection after this many allocations of "
    "container objects net of deallocations (Python's own default is 700). A task makes a "
    "tuple or a list for nearly every record and frees it again by reference counting; at "
    "700 the collector runs every few hundred records and walks the records still alive. "
    "The task also freezes (gc.freeze) the objects its process held when it started, so "
    "that full collections walk only what the job made. Both are undone when the task "
    "ends. Garbage in reference cycles waits for up to this many allocations before it is "
    "freed. 0: leave the collector as it is. Tasks of the local executor (threads of one "
    "process) leave it as it is.",
    check=bounded(0, 100_000_000, below="must not be negative"),
)
