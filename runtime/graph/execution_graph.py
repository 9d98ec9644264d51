"""The job graph expanded by parallelism: subtasks and the channels between them.

A forward edge connects producer ``i`` to consumer ``i``; every other edge connects every
producer subtask to every consumer subtask. Channel ids are ``"<edge>/<producer>-><consumer>"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from flowray.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index

from flowray.runtime.graph.job_graph import JobEdge, JobGraph, JobVertex
from flowray.runtime.network.partitioners import KeyGroupStreamPartitioner, rescale_pairs

__all__ = ["SubtaskId", "InputChannelSpec", "OutputEdgeSpec", "ResultPartitionSpec",
           "TaskDeploymentDescriptor", "ExecutionGraph", "channel_id"]


@dataclass(frozen=True, order=True)
class SubtaskId:
    vertex_id: str
    index: int

    @property
    def key(self) -> str:
        return f"{self.vertex_id}:{self.index}"


def channel_id(edge_id: str, producer: int, consumer: int) -> str:
    return f"{edge_id}/{producer}->{consumer}"


def _first_uid(vertex: "JobVertex") -> str:
    return str(vertex.plan.operators[vertex.node_ids[0]].uid or vertex.id)


def _is_keyed(edge: "JobEdge") -> bool:
    return isinstance(edge.partitioner, KeyGroupStreamPartitioner)


def _aligned_only(edge: "JobEdge") -> bool:
    """Broadcast exchanges and back edges are checkpointed aligned: a broadcast record in
    flight cannot be split among rescaled consumers, and a loop keeps its own log."""
    return bool(edge.partitioner.is_broadcast or edge.is_feedback)


@dataclass(frozen=True)
class InputChannelSpec:
    channel_id: str
    input_index: int
    producer: SubtaskId
    blocking: bool = False
    #: a back edge into this iteration head
    feedback: bool = False
    #: the iteration whose cycle the channel is on (its head's vertex id), else None
    loop: Optional[str] = None
    #: the exchange's stable name for channel state: (producer vertex's first operator
    #: uid, consumer vertex's first operator uid, input index)
    exchange: Tuple[str, str, int] = ("", "", 0)
    #: records cross it by key group (channel state is split by key group on rescale)
    keyed: bool = False
    #: checkpointed aligned even when checkpoints are unaligned (broadcast, as Flink)
    aligned_only: bool = False


@dataclass(frozen=True)
class OutputEdgeSpec:
    edge_id: str
    # (channel id, consumer subtask) in the order the partitioner indexes them
    channels: Tuple[Tuple[str, SubtaskId], ...]
    blocking: bool = False
    #: the iteration whose cycle the edge is on (its head's vertex id), else None
    loop: Optional[str] = None
    #: the exchange's stable name for channel state (see InputChannelSpec.exchange)
    exchange: Tuple[str, str, int] = ("", "", 0)
    #: checkpointed aligned even when checkpoints are unaligned (broadcast, as Flink)
    aligned_only: bool = False
    #: the producing operator's buffer timeout; None: the job's execution.buffer-timeout
    buffer_timeout_ms: Optional[int] = None


@dataclass(frozen=True)
class ResultPartitionSpec:
    """The output of one producer subtask on one edge: one subpartition (channel) per
    consumer subtask. Blocking partitions are complete before consumers read them."""

    partition_id: str
    producer: SubtaskId
    consumers: Tuple[SubtaskId, ...]
    channel_ids: Tuple[str, ...]
    blocking: bool


@dataclass
class TaskDeploymentDescriptor:
    """Everything one subtask needs to run; ``plan_bytes`` holds the user code."""

    job_name: str
    job_id: str
    subtask: SubtaskId
    vertex_name: str
    parallelism: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    plan_bytes: bytes
    inputs: List[InputChannelSpec]
    outputs: List[OutputEdgeSpec]
    num_inputs: int
    config: Dict[str, Any]
    attempt: int = 0
    driver_endpoints: Dict[str, Any] = field(default_factory=dict)
    #: what this attempt restores (flowray.runtime.checkpoint.state_assignment.TaskRestore)
    restore: Any = None
    #: the job's secret: channels authenticate with it (set by the job master's shell)
    channel_secret: bytes = field(default=b"", repr=False)
    #: Ray actor options for this subtask's actor (num_cpus, memory, num_gpus, resources)
    resources: Dict[str, Any] = field(default_factory=dict)
    #: the head of an iteration (its task keeps the loop's feedback queue)
    iteration_head: bool = False
    #: this subtask finished in an earlier attempt and this one restores no checkpoint:
    #: its sinks committed everything already, so this run only produces its other
    #: outputs again (a lost blocking partition) and its sinks drop what they get
    output_committed: bool = False

    @property
    def restore_checkpoint_id(self) -> Optional[int]:
        return self.restore.checkpoint_id if self.restore is not None else None

    @property
    def task_name(self) -> str:
        return self.vertex_name

    @property
    def display_name(self) -> str:
        return f"{self.vertex_name} ({self.subtask.index + 1}/{self.parallelism})"


class ExecutionGraph:
    """Subtasks and channels of a :class:`JobGraph`."""

    def __init__(self, job_graph: JobGraph) -> None:
        self.job_graph = job_graph
        self.vertices = job_graph.vertices

    def subtasks(self) -> List[SubtaskId]:
        return [SubtaskId(v.id, i) for v in self.job_graph.topological_order()
                for i in range(v.parallelism)]

    def vertex(self, subtask: SubtaskId) -> JobVertex:
        return self.vertices[subtask.vertex_id]

    def _pairs(self, edge: JobEdge) -> List[Tuple[int, int]]:
        src, dst = self.vertices[edge.source_vertex], self.vertices[edge.target_vertex]
        if edge.partitioner.is_pointwise:
            if src.parallelism != dst.parallelism:
                raise ValueError(f"pointwise edge {edge.id} with unequal parallelism")
            return [(i, i) for i in range(src.parallelism)]
        if getattr(edge.partitioner, "is_rescale", False):
            return rescale_pairs(src.parallelism, dst.parallelism)
        return [(p, c) for p in range(src.parallelism) for c in range(dst.parallelism)]

    def input_channels(self, subtask: SubtaskId) -> List[InputChannelSpec]:
        out = []
        for edge in self.vertex(subtask).inputs:
            for p, c in self._pairs(edge):
                if c == subtask.index:
                    out.append(InputChannelSpec(channel_id(edge.id, p, c), edge.input_index,
                                                SubtaskId(edge.source_vertex, p),
                                                edge.result_type == "blocking",
                                                edge.is_feedback, edge.loop,
                                                self.exchange_name(edge),
                                                _is_keyed(edge), _aligned_only(edge)))
        return out

    def exchange_name(self, edge: "JobEdge") -> Tuple[str, str, int]:
        """The stable name channel state is filed under: the first operator uid of the
        producer and of the consumer vertex, and the consumer's input index."""
        return (_first_uid(self.vertices[edge.source_vertex]),
                _first_uid(self.vertices[edge.target_vertex]), edge.input_index)

    def output_edges(self, subtask: SubtaskId) -> List[OutputEdgeSpec]:
        out = []
        for edge in self.vertex(subtask).outputs:
            chans = tuple((channel_id(edge.id, p, c), SubtaskId(edge.target_vertex, c))
                          for p, c in self._pairs(edge) if p == subtask.index)
            out.append(OutputEdgeSpec(edge.id, chans, edge.result_type == "blocking",
                                      edge.loop, self.exchange_name(edge),
                                      _aligned_only(edge), edge.buffer_timeout_ms))
        return out

    def result_partitions(self) -> List[ResultPartitionSpec]:
        """Every producer subtask's partition on every edge."""
        out = []
        for edge in self.job_graph.edges.values():
            pairs = self._pairs(edge)
            for p in range(self.vertices[edge.source_vertex].parallelism):
                mine = [(c, channel_id(edge.id, p, c)) for pp, c in pairs if pp == p]
                out.append(ResultPartitionSpec(
                    f"{edge.id}/{p}", SubtaskId(edge.source_vertex, p),
                    tuple(SubtaskId(edge.target_vertex, c) for c, _ in mine),
                    tuple(cid for _, cid in mine), edge.result_type == "blocking"))
        return out

    def all_channels(self) -> List[str]:
        return [channel_id(e.id, p, c) for e in self.job_graph.edges.values()
                for p, c in self._pairs(e)]

    def deployment_descriptor(self, subtask: SubtaskId, job_id: str, plan_bytes: bytes,
                              config: Dict[str, Any], attempt: int = 0,
                              driver_endpoints: Dict[str, Any] | None = None,
                              restore: Any = None,
                              output_committed: bool = False) -> TaskDeploymentDescriptor:
        v = self.vertex(subtask)
        kgr = compute_key_group_range_for_operator_index(v.max_parallelism, v.parallelism,
                                                         subtask.index)
        return TaskDeploymentDescriptor(
            self.job_graph.job_name, job_id, subtask, v.name, v.parallelism,
            v.max_parallelism, kgr, plan_bytes, self.input_channels(subtask),
            self.output_edges(subtask), v.num_inputs, dict(config), attempt,
            dict(driver_endpoints or {}), restore, resources=dict(v.resources),
            iteration_head=v.iteration_head, output_committed=output_committed)

    def upstream(self) -> Dict[SubtaskId, set]:
        """Every subtask -> the subtasks it reads from (empty for sources); a back edge
        does not count (an iteration head is upstream of its body, not the reverse)."""
        return {s: {i.producer for i in self.input_channels(s) if not i.feedback}
                for s in self.subtasks()}
