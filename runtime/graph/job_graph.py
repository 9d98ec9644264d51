"""StreamGraph -> :class:`JobGraph`: :func:`build_job_graph` chains operators as Flink does:
an edge is chained when it is forward, the parallelism matches, the consumer has exactly one
input edge and neither side forbids chaining (:func:`is_chainable`). A chain may branch (one
operator feeding two chained operators). :func:`mark_blocking_exchanges` turns every
non-forward edge into a blocking exchange (BATCH mode).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from flowray.operators.base import StreamOperator
from flowray.runtime.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from flowray.runtime.graph.transformations import ChainingStrategy
from flowray.runtime.network.partitioners import (
    ForwardPartitioner,
    StreamPartitioner,
)

__all__ = ["is_chainable", "JobEdge", "TaskPlan", "JobVertex", "JobGraph", "build_job_graph"]


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
        and up.slot_sharing_group == down.slot_sharing_group  # as Flink: one slot, one chain
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
    #: a back edge of a cycle (into an iteration head)
    is_feedback: bool = False
    #: the iteration (its head's vertex id) whose cycle this edge is on, else None
    loop: Optional[str] = None
    #: how long a record may wait in a batch on this edge (its producing operator's
    #: ``set_buffer_timeout``); None: the job's ``execution.buffer-timeout``
    buffer_timeout_ms: Optional[int] = None


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
    chained: Dict[int, List[int]]  # node -> chained downstream nodes
    network_outputs: Dict[int, List[str]]  # node -> job edge ids it writes to
    partitioners: Dict[str, StreamPartitioner]
    keyed: bool  # needs a keyed state backend
    #: side outputs: node -> [(tag, chained node)] and node -> [(tag, job edge id)]
    side_chained: Dict[int, List[Tuple[str, int]]] = field(default_factory=dict)
    side_network_outputs: Dict[int, List[Tuple[str, str]]] = field(default_factory=dict)
    #: a loop's feedback produced in its head's own chain: node -> the outputs (a side
    #: output's tag, None: the main one) that go straight to the head's queue
    local_feedback: Dict[int, List[Optional[str]]] = field(default_factory=dict)

    def chain_order(self) -> List[int]:
        """The chain's nodes, head first, every node after the ones feeding it."""
        order, queue = [], [self.head]
        while queue:
            n = queue.pop(0)
            order.append(n)
            queue.extend(self.chained.get(n, []))
            queue.extend(target for _, target in self.side_chained.get(n, []))
        return order


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
    #: Ray actor options of each subtask's actor (the slot sharing group's resources)
    resources: Dict[str, Any] = field(default_factory=dict)
    #: the head of an iteration: its task keeps the loop's feedback queue
    iteration_head: bool = False


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
                if not e.is_feedback:
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
        def chained_edges(n: StreamNode) -> List[StreamEdge]:
            return [e for e in n.out_edges
                    if chained_from[e.target_id] == head.id
                    and e.target_id != n.id
                    and is_chainable(e, graph)]

        chained = {n.id: [e.target_id for e in chained_edges(n) if e.side_output_tag is None]
                   for n in members}
        side_chained = {n.id: [(e.side_output_tag, e.target_id) for e in chained_edges(n)
                               if e.side_output_tag is not None]
                        for n in members}
        plan = TaskPlan(
            head.id,
            {n.id: n.operator for n in members},
            chained,
            {n.id: [] for n in members},
            {},
            keyed=any(n.operator.is_keyed for n in members),
            side_chained=side_chained,
            side_network_outputs={n.id: [] for n in members},
        )
        vid = f"v{head.id}"
        vertex_of_head[head.id] = vid
        vertices[vid] = JobVertex(
            vid,
            name,
            head.parallelism,
            head.max_parallelism,
            [n.id for n in members],
            plan,
            is_source=head.is_source,
            num_inputs=head.operator.num_inputs,
            resources=dict(head.resources),
            iteration_head=bool(getattr(head.operator, "is_iteration_head", False)),
        )

    edges: Dict[str, JobEdge] = {}
    for node in graph.topological_order():
        for e in node.out_edges:
            if chained_from[e.target_id] == chained_from[e.source_id] and is_chainable(e, graph):
                continue
            if e.is_feedback and chained_from[e.source_id] == e.target_id:
                # the loop is closed inside the head's own chain: no channel at all
                owner = vertices[vertex_of_head[e.target_id]]
                owner.plan.local_feedback.setdefault(e.source_id, []).append(
                    e.side_output_tag)
                continue
            src = vertices[vertex_of_head[chained_from[e.source_id]]]
            dst = vertices[vertex_of_head[e.target_id]]
            eid = f"e{len(edges) + 1}"
            je = JobEdge(eid, src.id, dst.id, e.source_id, e.partitioner, e.input_index,
                         is_feedback=e.is_feedback,
                         buffer_timeout_ms=graph.nodes[e.source_id].buffer_timeout_ms)
            edges[eid] = je
            src.outputs.append(je)
            dst.inputs.append(je)
            if e.side_output_tag is None:
                src.plan.network_outputs[e.source_id].append(eid)
            else:
                src.plan.side_network_outputs[e.source_id].append((e.side_output_tag, eid))
            src.plan.partitioners[eid] = e.partitioner
    job_graph = JobGraph(graph.job_name, vertices, edges)
    _mark_loops(graph, job_graph,
                {n: vertex_of_head[head] for n, head in chained_from.items()})
    return job_graph


def _mark_loops(graph: StreamGraph, job_graph: JobGraph, vertex_of_node: Dict[int, str]
                ) -> None:
    """Set ``loop`` on every edge of each iteration's cycle: the edges among the job
    vertices that hold its head and its body (``StreamGraph.loops``)."""
    for head, body in graph.loops.items():
        vertices = {vertex_of_node[n] for n in body}
        for e in job_graph.edges.values():
            if e.source_vertex in vertices and e.target_vertex in vertices:
                e.loop = vertex_of_node[head]
