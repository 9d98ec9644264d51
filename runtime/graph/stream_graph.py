"""Transformations -> :class:`StreamGraph`: :func:`build_stream_graph` resolves virtual
transformations (partition, union) into edges with partitioners: forward when parallelism
matches, else rebalance.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from flowray.operators.base import StreamOperator
from flowray.operators.sources import SourceOperator
from flowray.runtime.graph.transformations import (
    ChainingStrategy,
    GraphError,
    IterationHeadTransformation,
    OperatorTransformation,
    PartitionTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
)
from flowray.runtime.network.partitioners import (
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    StreamPartitioner,
)

__all__ = ["StreamEdge", "StreamNode", "StreamGraph", "build_stream_graph",
           "DEFAULT_SLOT_SHARING_GROUP"]

DEFAULT_SLOT_SHARING_GROUP = "default"


@dataclass
class StreamEdge:
    source_id: int
    target_id: int
    partitioner: StreamPartitioner
    input_index: int = 0
    #: the edge carries the source's side output of this name instead of its main output
    side_output_tag: Optional[str] = None
    #: a back edge of a cycle: from the end of an iteration's body to its head
    is_feedback: bool = False

    def __repr__(self) -> str:
        side = f"<{self.side_output_tag}>" if self.side_output_tag else ""
        back = "(feedback)" if self.is_feedback else ""
        return (f"{self.source_id}{side}-[{self.partitioner.name}]{back}->"
                f"{self.target_id}.{self.input_index}")


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
    slot_sharing_group: str = DEFAULT_SLOT_SHARING_GROUP
    #: Ray actor options for each task actor (``num_cpus``, ``memory``, ...) from the group
    resources: Dict[str, Any] = field(default_factory=dict)
    #: the operator's own buffer timeout (``set_buffer_timeout``), None: the job's
    buffer_timeout_ms: Optional[int] = None

    @property
    def is_source(self) -> bool:
        return isinstance(self.operator, SourceOperator)


@dataclass
class StreamGraph:
    job_name: str
    nodes: Dict[int, StreamNode]
    #: operator name -> the uid it was given because the program set none
    generated_uids: Dict[str, str] = field(default_factory=dict)
    #: iteration head node -> the nodes of its loop (head and body)
    loops: Dict[int, Set[int]] = field(default_factory=dict)

    def topological_order(self) -> List[StreamNode]:
        return [self.nodes[i] for i in sorted(self.nodes)]  # ids grow with program order


_Upstream = Tuple[Transformation, Optional[StreamPartitioner], Optional[str]]


def _resolve(t: Transformation) -> List[_Upstream]:
    """Physical upstream transformations of ``t`` with the partitioner on the way and the
    side output read (``None``: the main output)."""
    if isinstance(t, PartitionTransformation):
        return [(phys, t.partitioner, tag) for phys, _, tag in _resolve(t.inputs[0])]
    if isinstance(t, UnionTransformation):
        return [up for i in t.inputs for up in _resolve(i)]
    if isinstance(t, SideOutputTransformation):
        ups = _resolve(t.inputs[0])
        for phys, _, tag in ups:
            if tag is not None:
                raise GraphError(f"side output {t.tag!r} of side output {tag!r}: "
                                 "get_side_output applies to an operator's stream")
        return [(phys, partitioner, t.tag) for phys, partitioner, _ in ups]
    return [(t, None, None)]


def build_stream_graph(
    transformations: Sequence[Transformation],
    job_name: str,
    default_parallelism: int,
    default_max_parallelism: int,
    group_resources: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> StreamGraph:
    """Nodes for every operator transformation, edges with resolved partitioners;
    ``group_resources``: slot sharing group -> Ray actor options of its task actors."""
    group_resources = group_resources or {}
    physical: Dict[int, OperatorTransformation] = {}

    def collect(t: Transformation) -> None:
        if t.id in physical:
            return
        if isinstance(t, OperatorTransformation):
            physical[t.id] = t
        for i in t.inputs:
            collect(i)
        for i in getattr(t, "feedback", ()):
            collect(i)

    for t in transformations:
        collect(t)
    if not physical:
        raise GraphError("the job has no operators: add a source and a sink, then execute()")

    nodes: Dict[int, StreamNode] = {}
    uids: Dict[str, str] = {}
    generated: Dict[str, str] = {}
    hashes: Dict[int, str] = {}
    for ordinal, tid in enumerate(sorted(physical)):
        t = physical[tid]
        hashes[tid] = _position_hash(t, ordinal, physical, hashes)
        p = t.parallelism or default_parallelism
        maxp = t.max_parallelism or default_max_parallelism
        if isinstance(t, IterationHeadTransformation):
            if not t.feedback:
                raise GraphError(f"iteration {t.name!r} is never closed: call "
                                 "close_with(feedback_stream) on the stream iterate() "
                                 "returned")
            if t.parallelism is None:  # as Flink: the head runs as its input does
                ups = [nodes[phys.id] for phys, _, _ in _resolve(t.inputs[0])
                       if phys.id in nodes]
                if ups and len({n.parallelism for n in ups}) == 1:
                    p = ups[0].parallelism
        if p > maxp:
            raise GraphError(
                f"operator {t.name!r}: parallelism {p} exceeds max parallelism "
                f"{maxp} (pipeline.max-parallelism)"
            )
        uid = t.uid or f"{type(t.operator).__name__}_{hashes[tid]}"
        if not t.uid:
            generated[t.name] = uid
        if uid in uids:
            raise GraphError(
                f"uid {uid!r} is used by both {uids[uid]!r} and {t.name!r}; uids must be unique"
            )
        uids[uid] = t.name
        t.operator.uid = uid
        group = t.slot_sharing_group
        if group is None:  # as Flink: the inputs' group if they agree, else "default"
            groups = {nodes[phys.id].slot_sharing_group
                      for inp in t.inputs for phys, _, _ in _resolve(inp) if phys.id in nodes}
            group = groups.pop() if len(groups) == 1 else DEFAULT_SLOT_SHARING_GROUP
        nodes[tid] = StreamNode(tid, t.name, uid, t.operator, p, maxp, t.chaining,
                                slot_sharing_group=group,
                                resources=dict(group_resources.get(group, {})),
                                buffer_timeout_ms=t.buffer_timeout_ms)

    for tid in sorted(physical):
        t = physical[tid]
        target = nodes[tid]
        n_inputs = target.operator.num_inputs
        if n_inputs == 2 and len(t.inputs) != 2:
            raise GraphError(f"operator {t.name!r} needs two inputs")
        for input_index, inp in enumerate(t.inputs):
            for phys, partitioner, tag in _resolve(inp):
                source = nodes[phys.id]
                partitioner = _edge_partitioner(source, target, partitioner)
                edge = StreamEdge(
                    source.id, target.id, partitioner, input_index if n_inputs == 2 else 0,
                    tag,
                )
                source.out_edges.append(edge)
                target.in_edges.append(edge)
        if n_inputs >= 1 and not target.in_edges:
            raise GraphError(f"operator {t.name!r} has no input")
    heads = [physical[tid] for tid in sorted(physical)
             if isinstance(physical[tid], IterationHeadTransformation)]
    for t in heads:
        _add_feedback_edges(t, nodes)
    loops = {t.id: _loop_body(nodes[t.id], nodes) for t in heads}
    _check_not_nested(loops, nodes)
    return StreamGraph(job_name, nodes, generated, loops)


def _loop_body(head: StreamNode, nodes: Dict[int, StreamNode]) -> Set[int]:
    """The nodes on a path from ``head`` to one of its back edges (``head`` included)."""
    after, todo = set(), [head.id]
    while todo:
        for e in nodes[todo.pop()].out_edges:
            if not e.is_feedback and e.target_id not in after:
                after.add(e.target_id)
                todo.append(e.target_id)
    todo = [e.source_id for e in head.in_edges if e.is_feedback]
    before = set(todo)
    while todo:
        for e in nodes[todo.pop()].in_edges:
            if not e.is_feedback and e.source_id not in before:
                before.add(e.source_id)
                todo.append(e.source_id)
    return (after & before) | {head.id}


def _check_not_nested(loops: Dict[int, Set[int]], nodes: Dict[int, StreamNode]) -> None:
    owner: Dict[int, int] = {}
    for head, body in loops.items():
        for n in body:
            if n in owner:
                raise GraphError(
                    f"{nodes[n].name!r} is inside two iterations ({nodes[owner[n]].name!r} "
                    f"and {nodes[head].name!r}): nested iterations are not supported")
            owner[n] = head


def _add_feedback_edges(head_t: IterationHeadTransformation,
                        nodes: Dict[int, StreamNode]) -> None:
    """The back edges of an iteration: from the producers of its feedback streams to its
    head, with the feedback's partitioning (forward when none is given)."""
    head = nodes[head_t.id]
    for feedback in head_t.feedback:
        for phys, partitioner, tag in _resolve(feedback):
            source = nodes[phys.id]
            if source.parallelism != head.parallelism:
                raise GraphError(
                    f"the feedback of iteration {head.name!r} comes from {source.name!r} "
                    f"with parallelism {source.parallelism}, but the iteration head has "
                    f"{head.parallelism}: as in Flink, the feedback stream must have the "
                    f"head's parallelism (set_parallelism({head.parallelism}) on the "
                    "feedback, or on the stream iterate() returned: a head runs with its "
                    "input's parallelism unless set)")
            edge = StreamEdge(source.id, head.id, _edge_partitioner(source, head, partitioner),
                              0, tag, is_feedback=True)
            if not isinstance(edge.partitioner, ForwardPartitioner):
                # a feedback spread over the head's subtasks goes through channels; the
                # body is then not chained to the head, so no task feeds itself a channel
                head.chaining = ChainingStrategy.NEVER
            source.out_edges.append(edge)
            head.in_edges.append(edge)


def _position_hash(t: OperatorTransformation, ordinal: int,
                   physical: Dict[int, OperatorTransformation], done: Dict[int, str]) -> str:
    """A stable hash of an operator's place in the program (its kind, its rank in program
    order, what feeds it): the same program gets the same uids in every run, so its
    state can be restored; changing the program may change them (hence explicit uids)."""
    inputs = sorted(f"{i}:{done[phys.id]}:{tag or ''}"
                    for i, inp in enumerate(t.inputs) for phys, _, tag in _resolve(inp)
                    if phys.id in done)
    text = "|".join([type(t.operator).__name__, str(ordinal), *inputs])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _edge_partitioner(
    source: StreamNode, target: StreamNode, partitioner: Optional[StreamPartitioner]
) -> StreamPartitioner:
    if partitioner is None:
        if source.parallelism == target.parallelism:
            return ForwardPartitioner()
        return RebalancePartitioner()
    if isinstance(partitioner, ForwardPartitioner) and source.parallelism != target.parallelism:
        raise GraphError(
            f"forward partitioning does not allow a change of parallelism: {source.name!r} "
            f"has {source.parallelism}, {target.name!r} has {target.parallelism}; "
            "use rebalance() or shuffle()"
        )
    partitioner = copy.copy(partitioner)
    if isinstance(partitioner, KeyGroupStreamPartitioner):
        partitioner.max_parallelism = target.max_parallelism
    return partitioner
