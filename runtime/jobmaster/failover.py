"""Failover strategies: which tasks restart when one task fails (Flink's FLIP-1).

Two strategies, chosen by ``jobmanager.execution.failover-strategy`` as in Flink:

``region`` (default) -- :class:`RestartPipelinedRegionFailoverStrategy`
    The subtasks are grouped into *pipelined regions*: the weakly connected components of the
    subtask graph whose edges are the pipelined exchanges. A blocking exchange (the producer
    writes its whole result before the consumer reads it) is a region boundary. A job with
    forward edges only has one region per parallel pipeline. When a task fails, the regions
    to restart are found with Flink's three rules:

    1. the region of the failed task restarts;
    2. if a result partition that a restarting region consumes is not available any more,
       the region that produces it restarts too (and so on, upstream);
    3. every region that consumes a partition produced by a restarting region restarts too
       (and so on, downstream) -- except a consumer region that has *finished*: it read
       every input to its end and its output (committed sink output, its own blocking
       partitions) is complete, so running it again would only repeat that output (Flink
       restarts it; flowray does not, see docs/internals/failover.md). A finished region
       still restarts when rule 2 needs a partition of its again.

    Tasks that were never scheduled (Flink's ``CREATED`` state) are left out of the result:
    there is nothing to restart, they start when their inputs are ready.

``full`` -- :class:`RestartAllFailoverStrategy`
    Every task of the job restarts.

The strategies are pure: they read a :class:`FailoverTopology` (the subtask graph, with each
partition's exchange type and each task's scheduled flag) and an ``is_partition_available``
callback, and return the set of vertices to restart. They never cancel or deploy anything.

>>> from flowray.testing.jobmaster import TestingTopology
>>> t = TestingTopology()
>>> for name in ("src", "map", "agg", "sink"):
...     _ = t.add_vertex(name)
>>> _ = t.connect("src", "map", "pipelined")
>>> rp = t.connect("map", "agg", "blocking")
>>> _ = t.connect("agg", "sink", "pipelined")
>>> [sorted(r) for r in compute_pipelined_regions(t)]
[['map', 'src'], ['agg', 'sink']]
>>> s = RestartPipelinedRegionFailoverStrategy(t)
>>> sorted(s.get_tasks_needing_restart("sink"))
['agg', 'sink']
>>> sorted(s.get_tasks_needing_restart("map"))
['agg', 'map', 'sink', 'src']
>>> lost = RestartPipelinedRegionFailoverStrategy(t, is_partition_available=lambda p: p != rp)
>>> sorted(lost.get_tasks_needing_restart("sink"))
['agg', 'map', 'sink', 'src']
>>> failover_strategy_from_config({"jobmanager.execution.failover-strategy": "full"}, t).name
'full'
"""

from __future__ import annotations

import abc
from collections import deque
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    FrozenSet,
    Hashable,
    Iterable,
    List,
    Mapping,
    Optional,
    Set,
    Union,
)

from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.options import FAILOVER_STRATEGY

__all__ = [
    "PIPELINED",
    "BLOCKING",
    "RESULT_TYPES",
    "FailoverTopology",
    "compute_pipelined_regions",
    "FailoverStrategy",
    "RestartAllFailoverStrategy",
    "RestartPipelinedRegionFailoverStrategy",
    "failover_strategy_from_config",
]

PIPELINED = "pipelined"
"""The consumer reads while the producer writes; producer and consumer share a region."""
BLOCKING = "blocking"
"""The producer writes its whole result first (to a store that outlives it); a region
boundary. The partition can be read again after the producer finished."""
RESULT_TYPES = (PIPELINED, BLOCKING)

Vertex = Hashable
PartitionId = Hashable
Region = FrozenSet[Vertex]


class FailoverTopology(abc.ABC):
    """The subtask graph as the failover strategies see it (Flink's ``SchedulingTopology``).

    A *vertex* is one subtask (any hashable: a subtask key, a tuple ...). A *result
    partition* is what one producer subtask writes for its consumers over one exchange (any
    hashable id); it has exactly one producer and one or more consumers, and a type:
    ``"pipelined"`` or ``"blocking"``.

    The structure (vertices, partitions, types) must not change once a strategy is built
    from the topology (regions are computed once, as in Flink); :meth:`is_scheduled` is read
    at every failure.
    """

    @abc.abstractmethod
    def vertices(self) -> Iterable[Vertex]:
        """Every vertex once, in a stable order (topological is best; it orders regions)."""

    @abc.abstractmethod
    def consumed_partitions(self, vertex: Vertex) -> Iterable[PartitionId]:
        """The result partitions ``vertex`` reads."""

    @abc.abstractmethod
    def produced_partitions(self, vertex: Vertex) -> Iterable[PartitionId]:
        """The result partitions ``vertex`` writes."""

    @abc.abstractmethod
    def partition_producer(self, partition: PartitionId) -> Vertex:
        """The vertex that writes ``partition``."""

    @abc.abstractmethod
    def partition_consumers(self, partition: PartitionId) -> Iterable[Vertex]:
        """The vertices that read ``partition``."""

    @abc.abstractmethod
    def partition_type(self, partition: PartitionId) -> str:
        """``"pipelined"`` or ``"blocking"``."""

    def is_scheduled(self, vertex: Vertex) -> bool:
        """False while ``vertex`` has not been scheduled in this attempt (Flink's ``CREATED``
        state): the region strategy leaves it out of the tasks to restart. Default: True."""
        return True

    def is_finished(self, vertex: Vertex) -> bool:
        """True once ``vertex`` finished in its latest attempt (and is not about to run
        again): rule 3 leaves a consumer region out when all of its vertices have.
        Default: False."""
        return False


def _type_of(topology: FailoverTopology, partition: PartitionId) -> str:
    kind = topology.partition_type(partition)
    if kind not in RESULT_TYPES:
        raise ValueError(f"result partition {partition!r} has type {kind!r}; "
                         f"expected one of {', '.join(RESULT_TYPES)}")
    return kind


def compute_pipelined_regions(topology: FailoverTopology) -> List[Region]:
    """The pipelined regions of ``topology``, each a frozenset of vertices.

    Vertices joined by a pipelined partition are in the same region (weakly connected
    components over pipelined edges). Then, as Flink does since FLINK-17330, regions whose
    blocking exchanges form a cycle (region A feeds B and B feeds A) are merged into one:
    neither could otherwise be scheduled before the other. Regions come in the order of
    their first vertex in ``topology.vertices()``; every vertex is in exactly one region.
    """
    vertices = list(topology.vertices())
    index: Dict[Vertex, int] = {}
    for v in vertices:
        if v in index:
            raise ValueError(f"vertex {v!r} is listed twice by the topology")
        index[v] = len(index)

    def producer_index(partition: PartitionId, consumer: Vertex) -> int:
        producer = topology.partition_producer(partition)
        if producer not in index:
            raise ValueError(f"producer {producer!r} of partition {partition!r} (read by "
                             f"{consumer!r}) is not a vertex of the topology")
        return index[producer]

    # 1. weakly connected components over pipelined edges (union-find)
    parent = list(range(len(vertices)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    blocking_edges = []  # (producer index, consumer index)
    for v in vertices:
        for p in topology.consumed_partitions(v):
            kind = _type_of(topology, p)
            producer = producer_index(p, v)
            if kind == PIPELINED:
                a, b = find(producer), find(index[v])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                blocking_edges.append((producer, index[v]))

    raw: Dict[int, int] = {}  # union-find root -> raw region number
    raw_of = []
    for i in range(len(vertices)):
        raw_of.append(raw.setdefault(find(i), len(raw)))

    # 2. merge raw regions on cycles of blocking edges (strongly connected components)
    out_edges: List[Set[int]] = [set() for _ in range(len(raw))]
    for producer, consumer in blocking_edges:
        a, b = raw_of[producer], raw_of[consumer]
        if a != b:
            out_edges[a].add(b)
    component = _strongly_connected_components(len(raw), out_edges)

    merged: Dict[int, List[Vertex]] = {}
    for i, v in enumerate(vertices):
        merged.setdefault(component[raw_of[i]], []).append(v)
    return [frozenset(members) for members in merged.values()]


def _strongly_connected_components(n: int, out_edges: List[Set[int]]) -> List[int]:
    """Tarjan's algorithm without recursion: node -> component number."""
    counter = 0
    order = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: List[int] = []
    component = [-1] * n
    components = 0
    for root in range(n):
        if order[root] != -1:
            continue
        work = [(root, iter(sorted(out_edges[root])))]
        order[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if order[succ] == -1:
                    order[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack[succ] = True
                    work.append((succ, iter(sorted(out_edges[succ]))))
                    advanced = True
                    break
                if on_stack[succ]:
                    low[node] = min(low[node], order[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent_node = work[-1][0]
                low[parent_node] = min(low[parent_node], low[node])
            if low[node] == order[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component


class FailoverStrategy(abc.ABC):
    """Decides which vertices restart when one fails (Flink's ``FailoverStrategy``)."""

    name: str = ""
    """The ``jobmanager.execution.failover-strategy`` value that selects this strategy."""

    @abc.abstractmethod
    def get_tasks_needing_restart(self, failed_vertex: Vertex, *,
                                  failed_partition: Optional[PartitionId] = None
                                  ) -> Set[Vertex]:
        """The vertices to restart because ``failed_vertex`` failed.

        ``failed_partition``: the failure was an error reading this result partition
        (Flink's ``PartitionException``); it counts as unavailable for this call.
        """


class RestartAllFailoverStrategy(FailoverStrategy):
    """Restarts every vertex of the topology, whatever failed (Flink's ``full``).

    Like Flink's ``RestartAllFailoverStrategy``, the result holds every vertex, scheduled or
    not: a full restart starts the job's tasks afresh.
    """

    name = "full"

    def __init__(self, topology: FailoverTopology) -> None:
        self.topology = topology

    def get_tasks_needing_restart(self, failed_vertex: Vertex, *,
                                  failed_partition: Optional[PartitionId] = None
                                  ) -> Set[Vertex]:
        everything = set(self.topology.vertices())
        if failed_vertex not in everything:
            raise ValueError(f"{failed_vertex!r} is not a vertex of the topology")
        return everything

    def __repr__(self) -> str:
        return "RestartAllFailoverStrategy()"


class RestartPipelinedRegionFailoverStrategy(FailoverStrategy):
    """Restarts the regions a failure involves (Flink's ``region``; see the module doc).

    ``is_partition_available(partition) -> bool`` says whether a result partition can still
    be read (its blocking files still exist); unset: every partition is available. As in
    Flink, only a blocking partition can be available to a restarted consumer: a pipelined
    one is gone with its reader (and its producer is in the consumer's region anyway).

    Regions are computed once, here; :meth:`FailoverTopology.is_scheduled` and
    ``is_partition_available`` are asked at each failure.
    """

    name = "region"

    def __init__(self, topology: FailoverTopology,
                 is_partition_available: Optional[Callable[[PartitionId], bool]] = None
                 ) -> None:
        self.topology = topology
        self._is_partition_available = is_partition_available or (lambda partition: True)
        self._regions = compute_pipelined_regions(topology)
        self._region_of: Dict[Vertex, Region] = {
            v: region for region in self._regions for v in region}
        self._position = {v: i for i, v in enumerate(topology.vertices())}

    def regions(self) -> List[Region]:
        """Every pipelined region (see :func:`compute_pipelined_regions`)."""
        return list(self._regions)

    def region_of(self, vertex: Vertex) -> Region:
        """The pipelined region that holds ``vertex``."""
        try:
            return self._region_of[vertex]
        except KeyError:
            raise ValueError(f"{vertex!r} is not a vertex of the topology") from None

    def _available(self, partition: PartitionId, failed_partition: Optional[PartitionId]
                   ) -> bool:
        return (partition != failed_partition
                and _type_of(self.topology, partition) == BLOCKING
                and self._is_partition_available(partition))

    def regions_to_restart(self, failed_vertex: Vertex, *,
                           failed_partition: Optional[PartitionId] = None) -> List[Region]:
        """The involved regions, the failed vertex's first, in the order they were found.

        1. the failed vertex's region is involved; 2. if a partition consumed by an involved
        region is unavailable, its producer's region is involved; 3. every region consuming
        a partition produced by an involved region is involved, unless it has finished.
        """
        failed_region = self.region_of(failed_vertex)
        topology = self.topology
        is_finished = topology.is_finished
        involved: List[Region] = []
        visited = {failed_region}
        queue: Deque[Region] = deque([failed_region])
        while queue:
            region = queue.popleft()
            involved.append(region)
            found: List[Region] = []
            for v in sorted(region, key=self._position.__getitem__):
                for p in topology.consumed_partitions(v):  # rule 2: upstream
                    if not self._available(p, failed_partition):
                        found.append(self.region_of(topology.partition_producer(p)))
                for p in topology.produced_partitions(v):  # rule 3: downstream
                    for consumer in topology.partition_consumers(p):
                        other = self.region_of(consumer)
                        if not all(is_finished(c) for c in other):
                            found.append(other)
            for other in found:
                if other not in visited:
                    visited.add(other)
                    queue.append(other)
        return involved

    def get_tasks_needing_restart(self, failed_vertex: Vertex, *,
                                  failed_partition: Optional[PartitionId] = None
                                  ) -> Set[Vertex]:
        """Every vertex of :meth:`regions_to_restart` except those not yet scheduled."""
        is_scheduled = self.topology.is_scheduled
        return {v for region in self.regions_to_restart(
                    failed_vertex, failed_partition=failed_partition)
                for v in region if is_scheduled(v)}

    def __repr__(self) -> str:
        return f"RestartPipelinedRegionFailoverStrategy({len(self._regions)} regions)"


def failover_strategy_from_config(
        config: Union[Configuration, Mapping[str, Any], None],
        topology: FailoverTopology,
        is_partition_available: Optional[Callable[[PartitionId], bool]] = None,
) -> FailoverStrategy:
    """The strategy ``jobmanager.execution.failover-strategy`` names: ``region`` (default) or
    ``full``, built on ``topology``. A bad value raises ``ConfigurationError``.

    >>> from flowray.testing.jobmaster import TestingTopology
    >>> t = TestingTopology()
    >>> _ = t.add_vertex("a")
    >>> failover_strategy_from_config(None, t)
    RestartPipelinedRegionFailoverStrategy(1 regions)
    """
    conf = config if isinstance(config, Configuration) else Configuration(config or {})
    kind = conf.get(FAILOVER_STRATEGY)
    if kind == "region":
        return RestartPipelinedRegionFailoverStrategy(topology, is_partition_available)
    if kind == "full":
        return RestartAllFailoverStrategy(topology)
    raise ConfigurationError(  # unreachable while the option's choices match the branches
        f"invalid value {kind!r} for configuration key {FAILOVER_STRATEGY.key!r}")
