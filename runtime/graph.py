"""From the user's program to tasks: transformations -> StreamGraph -> JobGraph.

* A :class:`Transformation` is what a ``DataStream`` call records (lazy, like Flink).
* :func:`build_stream_graph` resolves virtual transformations (partition, union) into
  edges with partitioners: forward when parallelism matches, else rebalance.
* :func:`build_job_graph` chains operators as Flink does: an edge is chained when it is
  forward, the parallelism matches, the consumer has exactly one input edge and neither side
  forbids chaining. A chain may branch (one operator feeding two chained operators).
"""

from __future__ import annotations

import copy
import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from flowray.operators.base import StreamOperator
from flowray.operators.sources import SourceOperator

from flowray.runtime.partitioners import (
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    StreamPartitioner,
)

__all__ = [
    "ChainingStrategy",
    "GraphError",
    "Transformation",
    "OperatorTransformation",
    "PartitionTransformation",
    "UnionTransformation",
    "StreamNode",
    "StreamEdge",
    "StreamGraph",
    "JobEdge",
    "JobVertex",
    "JobGraph",
    "TaskPlan",
    "build_stream_graph",
    "build_job_graph",
    "is_chainable",
]


class GraphError(ValueError):
    """The program's dataflow cannot run as written (names the operators involved)."""


class ChainingStrategy(enum.Enum):
    ALWAYS = "ALWAYS"
    HEAD = "HEAD"      # start a new chain here, but later operators may chain to it
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


@dataclass
class StreamEdge:
    source_id: int
    target_id: int
    partitioner: StreamPartitioner
    input_index: int = 0

    def __repr__(self) -> str:
        return f"{self.source_id}-[{self.partitioner.name}]->{self.target_id}.{self.input_index}"


@dataclass
class StreamNode:
    id: int
    name: str
    uid: str
    operator: StreamOperator
    parallelism: int
    max_parallelism: int
    chaining: ChainingStrategy
    in_edges: List[StreamEdge] = field(default_factory=list)
    out_edges: List[StreamEdge] = field(default_factory=list)

    @property
    def is_source(self) -> bool:
        return isinstance(self.operator, SourceOperator)


@dataclass
class StreamGraph:
    job_name: str
    nodes: Dict[int, StreamNode]

    def topological_order(self) -> List[StreamNode]:
        return [self.nodes[i] for i in sorted(self.nodes)]  # ids grow with program order


def _resolve(t: Transformation) -> List[Tuple[Transformation, Optional[StreamPartitioner]]]:
    """Physical upstream transformations of ``t`` with the partitioner on the way."""
    if isinstance(t, PartitionTransformation):
        return [(phys, t.partitioner) for phys, _ in _resolve(t.inputs[0])]
    if isinstance(t, UnionTransformation):
        return [pair for i in t.inputs for pair in _resolve(i)]
    return [(t, None)]


def build_stream_graph(transformations: Sequence[Transformation], job_name: str,
                       default_parallelism: int, default_max_parallelism: int) -> StreamGraph:
    """Nodes for every operator transformation, edges with resolved partitioners."""
    physical: Dict[int, OperatorTransformation] = {}

    def collect(t: Transformation) -> None:
        if t.id in physical:
            return
        for i in t.inputs:
            collect(i)
        if isinstance(t, OperatorTransformation):
            physical[t.id] = t

    for t in transformations:
        collect(t)
    if not physical:
        raise GraphError("the job has no operators: add a source and a sink, then execute()")

    nodes: Dict[int, StreamNode] = {}
    uids: Dict[str, str] = {}
    for tid in sorted(physical):
        t = physical[tid]
        p = t.parallelism or default_parallelism
        maxp = t.max_parallelism or default_max_parallelism
        if p > maxp:
            raise GraphError(f"operator {t.name!r}: parallelism {p} exceeds max parallelism "
                             f"{maxp} (pipeline.max-parallelism)")
        uid = t.uid or f"{type(t.operator).__name__}_{tid}"
        if uid in uids:
            raise GraphError(f"uid {uid!r} is used by both {uids[uid]!r} and {t.name!r}; "
                             "uids must be unique")
        uids[uid] = t.name
        t.operator.uid = uid
        nodes[tid] = StreamNode(tid, t.name, uid, t.operator, p, maxp, t.chaining)

    for tid in sorted(physical):
        t = physical[tid]
        target = nodes[tid]
        n_inputs = target.operator.num_inputs
        if n_inputs == 2 and len(t.inputs) != 2:
            raise GraphError(f"operator {t.name!r} needs two inputs")
        for input_index, inp in enumerate(t.inputs):
            for phys, partitioner in _resolve(inp):
                source = nodes[phys.id]
                partitioner = _edge_partitioner(source, target, partitioner)
                edge = StreamEdge(source.id, target.id, partitioner,
                                  input_index if n_inputs == 2 else 0)
                source.out_edges.append(edge)
                target.in_edges.append(edge)
        if n_inputs >= 1 and not target.in_edges:
            raise GraphError(f"operator {t.name!r} has no input")
    return StreamGraph(job_name, nodes)


def _edge_partitioner(source: StreamNode, target: StreamNode,
                      partitioner: Optional[StreamPartitioner]) -> StreamPartitioner:
    if partitioner is None:
        if source.parallelism == target.parallelism:
            return ForwardPartitioner()
        return RebalancePartitioner()
    if isinstance(partitioner, ForwardPartitioner) and source.parallelism != target.parallelism:
        raise GraphError(
            f"forward partitioning does not allow a change of parallelism: {source.name!r} "
            f"has {source.parallelism}, {target.name!r} has {target.parallelism}; "
            "use rebalance() or shuffle()")
    partitioner = copy.copy(partitioner)
    if isinstance(partitioner, KeyGroupStreamPartitioner):
        partitioner.max_parallelism = target.max_parallelism
    return partitioner


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    up, down = graph.nodes[edge.source_id], graph.nodes[edge.target_id]
    return (
        len(down.in_edges) == 1
        and isinstance(edge.partitioner, ForwardPartitioner)
        and up.parallelism == down.parallelism
        and up.max_parallelism == down.max_parallelism
        and up.chaining is not ChainingStrategy.NEVER
        and down.chaining is ChainingStrategy.ALWAYS
        and down.operator.num_inputs == 1
    )


@dataclass
class JobEdge:
    id: str
    source_vertex: str
    target_vertex: str
    source_node: int
    partitioner: StreamPartitioner
    input_index: int
    #: "pipelined" (streamed while produced) or "blocking" (written whole, read later:
    #: BATCH mode); blocking exchanges bound failover regions
    result_type: str = "pipelined"


def mark_blocking_exchanges(job_graph: "JobGraph") -> None:
    """BATCH mode: every exchange that is not forward becomes blocking (as in Flink)."""
    for edge in job_graph.edges.values():
        if not edge.partitioner.is_pointwise:
            edge.result_type = "blocking"


@dataclass
class TaskPlan:
    """What a task builds: its operators (chain, head first), how they connect, and the
    partitioner of each output edge. Pickled as one blob because it holds user code."""

    head: int
    operators: Dict[int, StreamOperator]
    chained: Dict[int, List[int]]            # node -> chained downstream nodes
    network_outputs: Dict[int, List[str]]    # node -> job edge ids it writes to
    partitioners: Dict[str, StreamPartitioner]
    keyed: bool                              # needs a keyed state backend


@dataclass
class JobVertex:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    node_ids: List[int]
    plan: TaskPlan
    inputs: List[JobEdge] = field(default_factory=list)
    outputs: List[JobEdge] = field(default_factory=list)
    is_source: bool = False
    num_inputs: int = 1


@dataclass
class JobGraph:
    job_name: str
    vertices: Dict[str, JobVertex]
    edges: Dict[str, JobEdge]

    def topological_order(self) -> List[JobVertex]:
        order, seen = [], set()

        def visit(v: JobVertex) -> None:
            if v.id in seen:
                return
            seen.add(v.id)
            for e in v.inputs:
                visit(self.vertices[e.source_vertex])
            order.append(v)

        for v in self.vertices.values():
            visit(v)
        return order


def build_job_graph(graph: StreamGraph) -> JobGraph:
    """Chain operators into job vertices; edges between chains become job edges."""
    chained_from = {}  # node id -> head of its chain
    heads: List[StreamNode] = []
    for node in graph.topological_order():
        if len(node.in_edges) == 1 and is_chainable(node.in_edges[0], graph):
            chained_from[node.id] = chained_from[node.in_edges[0].source_id]
        else:
            chained_from[node.id] = node.id
            heads.append(node)

    vertices: Dict[str, JobVertex] = {}
    vertex_of_head: Dict[int, str] = {}
    used_names: Dict[str, int] = {}
    for head in heads:
        members = [n for n in graph.topological_order() if chained_from[n.id] == head.id]
        name = " -> ".join(n.name for n in members)
        if name in used_names:
            used_names[name] += 1
            name = f"{name} ({used_names[name]})"
        else:
            used_names[name] = 1
        chained = {n.id: [e.target_id for e in n.out_edges
                          if chained_from[e.target_id] == head.id and e.target_id != n.id
                          and is_chainable(e, graph)] for n in members}
        plan = TaskPlan(head.id, {n.id: n.operator for n in members}, chained,
                        {n.id: [] for n in members}, {},
                        keyed=any(n.operator.is_keyed for n in members))
        vid = f"v{head.id}"
        vertex_of_head[head.id] = vid
        vertices[vid] = JobVertex(vid, name, head.parallelism, head.max_parallelism,
                                  [n.id for n in members], plan, is_source=head.is_source,
                                  num_inputs=head.operator.num_inputs)

    edges: Dict[str, JobEdge] = {}
    for node in graph.topological_order():
        for e in node.out_edges:
            if chained_from[e.target_id] == chained_from[e.source_id] and is_chainable(e, graph):
                continue
            src = vertices[vertex_of_head[chained_from[e.source_id]]]
            dst = vertices[vertex_of_head[e.target_id]]
            eid = f"e{len(edges) + 1}"
            je = JobEdge(eid, src.id, dst.id, e.source_id, e.partitioner, e.input_index)
            edges[eid] = je
            src.outputs.append(je)
            dst.inputs.append(je)
            src.plan.network_outputs[e.source_id].append(eid)
            src.plan.partitioners[eid] = e.partitioner
    return JobGraph(graph.job_name, vertices, edges)
