"""The execution graph as the job master's policies see it: :class:`SubtaskTopology` gives the
failover strategies (:class:`~flowray.runtime.jobmaster.failover.FailoverTopology`) subtasks
and the result partitions between them, and each subtask's scheduled flag."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set

from flowray.runtime.graph.execution_graph import (
    ExecutionGraph,
    ResultPartitionSpec,
    SubtaskId,
)
from flowray.runtime.jobmaster.failover import FailoverTopology

__all__ = ["SubtaskTopology", "result_partitions"]


def result_partitions(eg: ExecutionGraph) -> List[ResultPartitionSpec]:
    """The graph's result partitions (none for a graph that has no exchanges to track)."""
    partitions = getattr(eg, "result_partitions", None)
    return partitions() if partitions is not None else []


class SubtaskTopology(FailoverTopology):
    """Subtasks and partitions; ``created`` (shared with the scheduler, which updates it)
    holds the subtasks not scheduled in their current attempt, ``finished(subtask)`` says
    whether one finished in its latest attempt."""

    def __init__(self, subtasks: List[SubtaskId], partitions: Dict[str, ResultPartitionSpec],
                 created: Set[SubtaskId],
                 finished: Optional[Callable[[SubtaskId], bool]] = None) -> None:
        self._subtasks = list(subtasks)
        self._partitions = partitions
        self._created = created
        self._finished = finished or (lambda subtask: False)
        self._consumed: Dict[SubtaskId, List[str]] = {s: [] for s in subtasks}
        self._produced: Dict[SubtaskId, List[str]] = {s: [] for s in subtasks}
        for pid, p in partitions.items():
            self._produced[p.producer].append(pid)
            for c in p.consumers:
                self._consumed[c].append(pid)

    def vertices(self) -> List[SubtaskId]:
        return list(self._subtasks)

    def consumed_partitions(self, vertex: SubtaskId) -> List[str]:
        return self._consumed[vertex]

    def produced_partitions(self, vertex: SubtaskId) -> List[str]:
        return self._produced[vertex]

    def partition_producer(self, partition: str) -> SubtaskId:
        return self._partitions[partition].producer

    def partition_consumers(self, partition: str) -> List[SubtaskId]:
        return list(self._partitions[partition].consumers)

    def partition_type(self, partition: str) -> str:
        return "blocking" if self._partitions[partition].blocking else "pipelined"

    def is_scheduled(self, vertex: SubtaskId) -> bool:
        return vertex not in self._created

    def is_finished(self, vertex: SubtaskId) -> bool:
        return self._finished(vertex)
