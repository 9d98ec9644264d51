"""Test doubles for the job master's pure classes, driven by hand in tests and examples.

``TestingTopology()`` is a hand-built subtask graph for the failover strategies
(:mod:`flowray.runtime.jobmaster.failover`): vertices by name, result partitions by
``connect``. ``RecordingDeployer()`` records what a
:class:`~flowray.runtime.jobmaster.scheduler.JobScheduler` asks of its tasks;
``OneTaskGraph()`` is the smallest execution graph a scheduler can run (one subtask).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Set

from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.failover import RESULT_TYPES, FailoverTopology

__all__ = ["TestingTopology", "RecordingDeployer", "OneTaskGraph"]


class TestingTopology(FailoverTopology):
    """A subtask graph built by hand, for failover tests (Flink's ``TestingSchedulingTopology``).

    Vertices are their names (strings); each ``connect`` makes a new result partition, named
    ``"<producer>#<n>"`` (the producer's n-th partition), unless ``partition=`` adds one more
    consumer to an existing partition of the producer.

    >>> t = TestingTopology()
    >>> a, b, c = t.add_vertex("a"), t.add_vertex("b"), t.add_vertex("c")
    >>> t.connect(a, b, "pipelined"), t.connect(a, c, "blocking")
    ('a#0', 'a#1')
    >>> t.partition_type("a#1"), list(t.consumed_partitions(c)), t.partition_producer("a#1")
    ('blocking', ['a#1'], 'a')
    >>> t.set_scheduled(c, False); t.is_scheduled(c)
    False
    >>> t.connect(a, b, "bounded")
    Traceback (most recent call last):
    ...
    ValueError: result_type must be one of pipelined, blocking, not 'bounded'
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, default_scheduled: bool = True) -> None:
        self.default_scheduled = default_scheduled
        self._vertices: Dict[str, bool] = {}  # name -> scheduled; insertion ordered
        self._consumed: Dict[str, List[str]] = {}
        self._produced: Dict[str, List[str]] = {}
        self._producer: Dict[str, str] = {}
        self._consumers: Dict[str, List[str]] = {}
        self._type: Dict[str, str] = {}
        self._finished: Set[str] = set()

    # -- building ----------------------------------------------------------------------
    def add_vertex(self, name: Optional[str] = None, scheduled: Optional[bool] = None) -> str:
        """Add a vertex (default name ``"v<k>"``, k from 1) and return it.

        ``scheduled``: its initial scheduled flag; unset: ``default_scheduled``.
        """
        if name is None:
            name = f"v{len(self._vertices) + 1}"
        if name in self._vertices:
            raise ValueError(f"vertex {name!r} already exists")
        self._vertices[name] = self.default_scheduled if scheduled is None else scheduled
        self._consumed[name] = []
        self._produced[name] = []
        return name

    def connect(self, producer: str, consumer: str, result_type: str = "pipelined", *,
                partition: Optional[str] = None) -> str:
        """``producer`` writes a partition of ``result_type`` that ``consumer`` reads.

        ``result_type``: ``"pipelined"`` or ``"blocking"`` (``ValueError`` otherwise).
        Returns the partition id; with ``partition=`` (a partition of ``producer`` of the same
        type) the consumer is added to that partition instead of a new one.
        """
        if result_type not in RESULT_TYPES:
            raise ValueError(f"result_type must be one of {', '.join(RESULT_TYPES)}, "
                             f"not {result_type!r}")
        for v in (producer, consumer):
            self._check_vertex(v)
        if partition is None:
            partition = f"{producer}#{len(self._produced[producer])}"
            self._produced[producer].append(partition)
            self._producer[partition] = producer
            self._consumers[partition] = []
            self._type[partition] = result_type
        else:
            if self._producer.get(partition) != producer:
                raise ValueError(f"{partition!r} is not a partition of {producer!r}")
            if self._type[partition] != result_type:
                raise ValueError(f"{partition!r} is {self._type[partition]}, "
                                 f"not {result_type}")
            if consumer in self._consumers[partition]:
                raise ValueError(f"{consumer!r} already reads {partition!r}")
        self._consumers[partition].append(consumer)
        self._consumed[consumer].append(partition)
        return partition

    def set_scheduled(self, vertex: str, scheduled: bool = True) -> None:
        """Mark ``vertex`` scheduled (deployed at least once) or not (Flink's CREATED)."""
        self._check_vertex(vertex)
        self._vertices[vertex] = scheduled

    def set_finished(self, vertex: str, finished: bool = True) -> None:
        """Mark ``vertex`` finished in its latest attempt (or not)."""
        self._check_vertex(vertex)
        (self._finished.add if finished else self._finished.discard)(vertex)

    def _check_vertex(self, vertex: str) -> None:
        if vertex not in self._vertices:
            raise ValueError(f"unknown vertex {vertex!r}")

    def _check_partition(self, partition: str) -> None:
        if partition not in self._producer:
            raise ValueError(f"unknown result partition {partition!r}")

    # -- FailoverTopology ----------------------------------------------------------------
    def vertices(self) -> Iterable[str]:
        return list(self._vertices)

    def consumed_partitions(self, vertex: str) -> Iterable[str]:
        self._check_vertex(vertex)
        return list(self._consumed[vertex])

    def produced_partitions(self, vertex: str) -> Iterable[str]:
        self._check_vertex(vertex)
        return list(self._produced[vertex])

    def partition_producer(self, partition: str) -> str:
        self._check_partition(partition)
        return self._producer[partition]

    def partition_consumers(self, partition: str) -> Iterable[str]:
        self._check_partition(partition)
        return list(self._consumers[partition])

    def partition_type(self, partition: str) -> str:
        self._check_partition(partition)
        return self._type[partition]

    def is_scheduled(self, vertex: str) -> bool:
        self._check_vertex(vertex)
        return self._vertices[vertex]

    def is_finished(self, vertex: str) -> bool:
        self._check_vertex(vertex)
        return vertex in self._finished

    def __repr__(self) -> str:
        return (f"TestingTopology({len(self._vertices)} vertices, "
                f"{len(self._producer)} partitions)")


class RecordingDeployer(TaskDeployer):
    """A :class:`~flowray.runtime.jobmaster.scheduler.TaskDeployer` that records every call, for
    driving a :class:`~flowray.runtime.jobmaster.scheduler.JobScheduler` by hand in tests."""

    def __init__(self) -> None:
        self.deploys: List[tuple] = []    # (attempt, [descriptors])
        self.cancels: List[list] = []     # [subtask, ...] per call
        self.kills: List[list] = []       # [subtask, ...] per call
        self.triggers: List[tuple] = []   # (subtask, checkpoint id, timestamp, is_savepoint)
        self.completes: List[tuple] = []  # (subtask, checkpoint id)
        self.aborts: List[tuple] = []     # (subtask, checkpoint id, reason)
        self.loop_waves: List[tuple] = []  # ([subtask, ...], iteration, wave)
        self.loop_ends: List[list] = []   # [head subtask, ...] per call

    def deploy(self, attempt: int, descriptors: List[Any]) -> None:
        self.deploys.append((attempt, list(descriptors)))

    def cancel_tasks(self, subtasks: Any) -> None:
        self.cancels.append(sorted(subtasks))

    def kill(self, subtasks: Any) -> None:
        self.kills.append(sorted(subtasks))

    def trigger(self, subtask: Any, checkpoint_id: int, timestamp_ms: int,
                is_savepoint: bool, location: Any = None) -> None:
        self.triggers.append((subtask, checkpoint_id, timestamp_ms, is_savepoint))

    def notify_complete(self, subtask: Any, checkpoint_id: int) -> None:
        self.completes.append((subtask, checkpoint_id))

    def notify_aborted(self, subtask: Any, checkpoint_id: int, reason: Any) -> None:
        self.aborts.append((subtask, checkpoint_id, reason))

    def request_loop_counters(self, subtasks: Any, iteration: str, wave: int) -> None:
        self.loop_waves.append((sorted(subtasks), iteration, wave))

    def end_loop(self, subtasks: Any) -> None:
        self.loop_ends.append(sorted(subtasks))

    @property
    def last_descriptors(self) -> Dict[Any, Any]:
        return {d.subtask: d for d in self.deploys[-1][1]}


class OneTaskGraph:
    """An execution graph of one subtask ``v1[0]``; its deployment descriptor is the
    subtask itself."""

    def subtasks(self) -> List[SubtaskId]:
        return [SubtaskId("v1", 0)]

    def upstream(self) -> Dict[SubtaskId, set]:
        return {SubtaskId("v1", 0): set()}

    def deployment_descriptor(self, s: SubtaskId, *args: Any, **kwargs: Any) -> Any:
        return s
