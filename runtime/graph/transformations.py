"""From the user's program to tasks: transformations -> StreamGraph -> JobGraph.

* A :class:`Transformation` is what a ``DataStream`` call records (lazy, like Flink).
* :func:`build_stream_graph` resolves virtual transformations (partition, union) into
  edges with partitioners: forward when parallelism matches, else rebalance.
* :func:`build_job_graph` chains operators as Flink does: an edge is chained when it is
  forward, the parallelism matches, the consumer has exactly one input edge and neither side
  forbids chaining. A chain may branch (one operator feeding two chained operators).
"""

from __future__ import annotations

import enum
import itertools
from typing import Any, List, Optional, Sequence

from flowray.operators.base import StreamOperator
from flowray.runtime.network.partitioners import (
    StreamPartitioner,
)

__all__ = [
    "GraphError",
    "ChainingStrategy",
    "Transformation",
    "OperatorTransformation",
    "PartitionTransformation",
    "UnionTransformation",
    "SideOutputTransformation",
    "IterationHeadTransformation",
]


class GraphError(ValueError):
    """The program's dataflow cannot run as written (names the operators involved)."""


class ChainingStrategy(enum.Enum):
    ALWAYS = "ALWAYS"
    HEAD = "HEAD"  # start a new chain here, but later operators may chain to it
    NEVER = "NEVER"


_ids = itertools.count(1)


class Transformation:
    """A node of the user's program, before graphs are built."""

    def __init__(self, name: str, inputs: Sequence["Transformation"] = ()) -> None:
        self.id = next(_ids)
        self.name = name
        self.inputs = list(inputs)
        self.uid: Optional[str] = None
        self.parallelism: Optional[int] = None
        self.max_parallelism: Optional[int] = None
        self.chaining = ChainingStrategy.ALWAYS
        #: ``slot_sharing_group(name)``; ``None``: the inputs' group
        self.slot_sharing_group: Optional[str] = None
        #: the declared type of the records (``output_type=``), ``None``: Python objects
        self.output_type: Optional[Any] = None
        #: ``set_buffer_timeout(ms)`` of this operator's output; ``None``: the job's
        #: ``execution.buffer-timeout``
        self.buffer_timeout_ms: Optional[int] = None

    @property
    def is_virtual(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}#{self.id})"


class OperatorTransformation(Transformation):
    def __init__(self, operator: StreamOperator, inputs: Sequence[Transformation] = ()) -> None:
        super().__init__(operator.name, inputs)
        self.operator = operator

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.operator.name

    @name.setter
    def name(self, value: str) -> None:
        if hasattr(self, "operator"):
            self.operator.name = value


class PartitionTransformation(Transformation):
    def __init__(self, input: Transformation, partitioner: StreamPartitioner) -> None:
        super().__init__(f"Partition({partitioner.name})", [input])
        self.partitioner = partitioner

    @property
    def is_virtual(self) -> bool:
        return True


class UnionTransformation(Transformation):
    def __init__(self, inputs: Sequence[Transformation]) -> None:
        super().__init__("Union", inputs)

    @property
    def is_virtual(self) -> bool:
        return True


class SideOutputTransformation(Transformation):
    """The records an operator sends to the side output named ``tag`` (virtual: it becomes
    an edge from that operator carrying only those records)."""

    def __init__(self, input: Transformation, tag: str) -> None:
        super().__init__(f"SideOutput({tag})", [input])
        self.tag = tag

    @property
    def is_virtual(self) -> bool:
        return True


class IterationHeadTransformation(OperatorTransformation):
    """The head of a cycle (``DataStream.iterate``): its input, and the ``feedback``
    streams given to ``close_with``, which become back edges into it."""

    def __init__(self, operator: StreamOperator, input: Transformation) -> None:
        super().__init__(operator, [input])
        # nothing chains into a head; its loop's body may chain after it (a feedback that
        # is not forward keeps it alone: see build_stream_graph)
        self.chaining = ChainingStrategy.HEAD
        self.feedback: List[Transformation] = []

    def reaches_from(self, t: Transformation) -> bool:
        """Whether ``t`` is computed from this head's output (it is inside the loop)."""
        seen, todo = set(), [t]
        while todo:
            cur = todo.pop()
            if cur is self:
                return True
            if cur.id in seen:
                continue
            seen.add(cur.id)
            todo.extend(cur.inputs)
        return False
