"""Which state each subtask of a job restores from a checkpoint or savepoint (Flink's
``StateAssignmentOperation``), pure.

State is matched by operator uid, not by task: a checkpoint records each vertex's layout
(:class:`VertexStateLayout`: parallelism, max parallelism, the uids of its chain), and a
new job may chain, rename and rescale its vertices as long as the uids stay. Rules:

- keyed state goes by key group: a new subtask gets every old handle whose key-group range
  overlaps its own, and its backend keeps only its own groups;
- operator list state is handed over whole (every old subtask's part); the task deals it
  (even split, union to everyone: :func:`~flowray.state.operator_state.redistribute_operator_state`);
- state of an operator the new job does not have fails the assignment
  (:class:`StateAssignmentError`) unless ``allow_non_restored_state``;
- an operator with keyed state must keep its max parallelism (key groups are fixed);
- a vertex with the same layout as in the checkpoint (the job's own checkpoints) restores
  subtask by subtask, finished subtasks included, whatever uids its snapshots hold;
  otherwise an operator counts as finished when every old subtask of it had finished.

>>> from flowray.runtime.checkpoint.completed import CompletedCheckpoint
>>> from flowray.state.snapshot import (OperatorStateEntry, OperatorSubtaskState,
...                                     TaskStateSnapshot)
>>> old = {"v1": VertexStateLayout("v1", "map", 1, 128, ("m",))}
>>> state = OperatorSubtaskState({"seen": OperatorStateEntry("SPLIT_DISTRIBUTE", [b"1"])})
>>> cp = CompletedCheckpoint("j", 7, 0, 0, {"v1:0": TaskStateSnapshot({"m": state})},
...                          vertices=old)
>>> new = {"x": VertexStateLayout("x", "map", 2, 128, ("m",))}
>>> sorted(assign_task_states(cp, new))
['x:0', 'x:1']
>>> assign_task_states(cp, {"x": VertexStateLayout("x", "other", 1, 128, ("n",))})
Traceback (most recent call last):
...
flowray.runtime.checkpoint.state_assignment.StateAssignmentError: checkpoint 7 holds state of operator uid 'm' (in 'map'), which the job no longer has; give the operator that should take it over this uid, or set execution.savepoint.ignore-unclaimed-state: true to drop it
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from flowray.state.key_groups import compute_key_group_range_for_operator_index
from flowray.state.snapshot import KeyedStateHandle, OperatorSubtaskState, TaskStateSnapshot

if TYPE_CHECKING:  # pragma: no cover
    from flowray.runtime.checkpoint.completed import CompletedCheckpoint
    from flowray.runtime.graph.job_graph import JobGraph

__all__ = [
    "StateAssignmentError",
    "VertexStateLayout",
    "OperatorRestore",
    "TaskRestore",
    "vertex_layouts",
    "assign_task_states",
]


class StateAssignmentError(ValueError):
    """A checkpoint's state cannot be given to the job's operators (names what and why)."""


@dataclass(frozen=True)
class VertexStateLayout:
    """What a checkpoint must know of a vertex to hand its state to another job."""

    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    operator_uids: Tuple[str, ...]


@dataclass
class OperatorRestore:
    """One operator's state for one new subtask: the keyed handles overlapping its key
    groups, and every old subtask's operator state (``None`` where there was none)."""

    keyed: List[KeyedStateHandle] = field(default_factory=list)
    operator_states: List[Optional[OperatorSubtaskState]] = field(default_factory=list)
    old_parallelism: int = 1


@dataclass
class TaskRestore:
    """Everything one subtask restores. ``claimed``: the files belong to this job's own
    checkpoints (a restore from a savepoint or another job's checkpoint never builds on its
    files, Flink's NO_CLAIM). ``location``: the directory (path or URI) files are read
    from when it is not the job's checkpoint storage."""

    checkpoint_id: int
    operators: Dict[str, OperatorRestore] = field(default_factory=dict)
    finished: bool = False
    file_checksums: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    claimed: bool = True
    location: Optional[str] = None
    #: records in flight at an unaligned checkpoint that this subtask replays first
    #: (:class:`~flowray.runtime.checkpoint.channel_state.RecoveredInput`)
    in_flight: List[Any] = field(default_factory=list)

    def keyed_handles(self) -> List[KeyedStateHandle]:
        return [h for op in self.operators.values() for h in op.keyed]


def vertex_layouts(job_graph: "JobGraph") -> Dict[str, VertexStateLayout]:
    """The layout of every vertex of ``job_graph`` (uids in chain order)."""
    return {
        v.id: VertexStateLayout(v.id, v.name, v.parallelism, v.max_parallelism,
                                tuple(v.plan.operators[n].uid for n in v.node_ids))
        for v in job_graph.vertices.values()
    }


@dataclass
class _OldOperator:
    layout: VertexStateLayout
    states: List[Optional[OperatorSubtaskState]]
    finished: List[bool]

    def has_state(self) -> bool:
        return any(s is not None and (s.keyed is not None or s.operator_state_file is not None
                                      or any(e.items for e in s.operator_state.values()))
                   for s in self.states)

    def has_keyed_state(self) -> bool:
        return any(s is not None and s.keyed is not None for s in self.states)


def _snapshot_done(snap: Optional[TaskStateSnapshot]) -> bool:
    return snap is not None and (snap.finished or (snap.input_ended and snap.drained))


def _direct_restores(checkpoint: "CompletedCheckpoint", vertex_id: str, parallelism: int,
                     claimed: bool, location: Optional[str]) -> Dict[str, TaskRestore]:
    """Subtask ``i`` of a vertex laid out as in the checkpoint: its own keyed state and
    finished flag; operator state of every subtask of the vertex (to deal out again)."""
    snaps = [checkpoint.task_states.get(f"{vertex_id}:{i}") for i in range(parallelism)]
    uids: List[str] = []
    checksums: Dict[str, Tuple[int, int]] = {}
    for snap in snaps:
        if snap is not None:
            uids.extend(u for u in snap.operators if u not in uids)
            checksums.update(snap.file_checksums)
    out: Dict[str, TaskRestore] = {}
    for index, own in enumerate(snaps):
        restore = TaskRestore(checkpoint.checkpoint_id, finished=_snapshot_done(own),
                              file_checksums=dict(checksums), claimed=claimed,
                              location=location)
        for uid in uids:
            mine = own.operators.get(uid) if own is not None else None
            restore.operators[uid] = OperatorRestore(
                [mine.keyed] if mine is not None and mine.keyed is not None else [],
                [s.operators.get(uid) if s is not None else None for s in snaps],
                parallelism)
        out[f"{vertex_id}:{index}"] = restore
    return out


def assign_task_states(checkpoint: "CompletedCheckpoint",
                       layouts: Mapping[str, VertexStateLayout],
                       allow_non_restored_state: bool = False,
                       claimed: bool = True,
                       location: Optional[str] = None) -> Dict[str, TaskRestore]:
    """:class:`TaskRestore` per new subtask key (``"<vertex>:<index>"``); see the module
    doc for the rules. Raises :class:`StateAssignmentError`."""
    cid = checkpoint.checkpoint_id
    old_layouts = dict(getattr(checkpoint, "vertices", None) or {})
    if not old_layouts:  # written without layouts: by this very job
        return {key: restore for lay in layouts.values() for key, restore in
                _direct_restores(checkpoint, lay.vertex_id, lay.parallelism, claimed,
                                 location).items()}
    tasks = checkpoint.task_states
    old: Dict[str, _OldOperator] = {}
    for vid, lay in old_layouts.items():
        snaps = [tasks.get(f"{vid}:{i}") for i in range(lay.parallelism)]
        for uid in lay.operator_uids:
            old[uid] = _OldOperator(
                lay, [s.operators.get(uid) if s is not None else None for s in snaps],
                [_snapshot_done(s) for s in snaps])

    new_vertex_of = {uid: lay for lay in layouts.values() for uid in lay.operator_uids}
    for uid, op in sorted(old.items()):
        if uid not in new_vertex_of and op.has_state() and not allow_non_restored_state:
            raise StateAssignmentError(
                f"checkpoint {cid} holds state of operator uid {uid!r} (in {op.layout.name!r})"
                ", which the job no longer has; give the operator that should take it over "
                "this uid, or set execution.savepoint.ignore-unclaimed-state: true to drop it")
        new = new_vertex_of.get(uid)
        if new is not None and op.has_keyed_state() and op.layout.max_parallelism and \
                op.layout.max_parallelism != new.max_parallelism:
            raise StateAssignmentError(
                f"operator uid {uid!r} ({new.name!r}) has keyed state in checkpoint {cid} "
                f"taken with max parallelism {op.layout.max_parallelism}, but the job now has "
                f"max parallelism {new.max_parallelism}; key groups cannot change: set "
                f"pipeline.max-parallelism (or set_max_parallelism) to "
                f"{op.layout.max_parallelism}")

    result: Dict[str, TaskRestore] = {}
    for vid, lay in layouts.items():
        if old_layouts.get(vid) == lay:
            result.update(_direct_restores(checkpoint, vid, lay.parallelism, claimed,
                                           location))
            continue
        for index in range(lay.parallelism):
            kgr = compute_key_group_range_for_operator_index(
                lay.max_parallelism, lay.parallelism, index)
            restore = TaskRestore(cid, claimed=claimed, location=location)
            finished_flags: List[bool] = []
            contributing: List[TaskStateSnapshot] = []
            for uid in lay.operator_uids:
                op = old.get(uid)
                if op is None:
                    finished_flags.append(False)
                    continue
                keyed = [s.keyed for s in op.states if s is not None and s.keyed is not None
                         and len(s.keyed.key_group_range.intersection(kgr))]
                restore.operators[uid] = OperatorRestore(keyed, list(op.states),
                                                         op.layout.parallelism)
                finished_flags.append(all(op.finished))
                contributing.extend(
                    tasks[k] for k in (f"{op.layout.vertex_id}:{i}"
                                       for i in range(op.layout.parallelism)) if k in tasks)
            if any(finished_flags):
                if not all(finished_flags):
                    done = [u for u, f in zip(lay.operator_uids, finished_flags) if f]
                    running = [u for u, f in zip(lay.operator_uids, finished_flags) if not f]
                    raise StateAssignmentError(
                        f"{lay.name!r} chains operators that had finished in checkpoint "
                        f"{cid} ({', '.join(done)}) with operators that had not "
                        f"({', '.join(running)}); restore it with the chain it ran with")
                restore.finished = True
            for snap in contributing:
                restore.file_checksums.update(snap.file_checksums)
            result[f"{vid}:{index}"] = restore
    return result
