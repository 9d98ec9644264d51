"""One subtask's side of a checkpoint: the synchronous snapshot in the task thread, the
asynchronous part (writing to checkpoint storage) in a worker thread, then the
acknowledgement to the job master (Flink's ``SubtaskCheckpointCoordinator``).

Contract: :meth:`SubtaskCheckpointCoordinator.checkpoint` runs in the task thread with no
record being processed; acknowledgements leave in checkpoint order; :meth:`close` waits
until every acknowledgement has been handed to the environment, so a task never reports
its end before the checkpoints it took part in.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, List, Optional

from flowray.operators.base import StateSnapshotContext, StreamOperator
from flowray.state.checksums import ChecksumRecorder, referenced_paths
from flowray.state.keyed_backend import KeyedStateBackend
from flowray.state.snapshot import OperatorSubtaskState, TaskStateSnapshot

from flowray.runtime.checkpoint.savepoints import SavepointStorage
from flowray.runtime.network.elements import CheckpointBarrier
from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = ["CheckpointResponder", "SubtaskCheckpointCoordinator"]

DEFAULT_MEMORY_THRESHOLD = 20 << 10  # state.storage.fs.memory-threshold
#: checksums are kept for the files of this many recent snapshots (an incremental one may
#: reference the files of an earlier, confirmed one)
RECENT_SNAPSHOTS = 8


class CheckpointResponder:
    """Where a task's checkpoint answers go (the job master); no-ops by default."""

    def acknowledge_checkpoint(self, subtask: SubtaskId, checkpoint_id: int,
                               snapshot: TaskStateSnapshot, metrics: Dict[str, Any]) -> None:
        pass

    def decline_checkpoint(self, subtask: SubtaskId, checkpoint_id: int, reason: str,
                           message: str) -> None:
        pass

    def task_initialized(self, subtask: SubtaskId) -> None:
        """The task has connected its channels, restored its state and opened its
        operators (Flink's RUNNING after INITIALIZING): it can take a checkpoint now."""

    def task_ended_input(self, subtask: SubtaskId) -> None:
        """The task's input ended and its operators finished; it waits for a checkpoint
        to complete before it finishes (its two-phase-commit sinks commit then)."""

    def loop_idle(self, subtask: SubtaskId) -> None:
        """An iteration head's regular input has ended and its queue is empty: time to
        find out whether its loop is empty (runtime/jobmaster/loop_termination.py)."""

    def loop_counters(self, subtask: SubtaskId, iteration: str, wave: int,
                      counters: Any) -> None:
        """The answer to a termination wave (a :class:`LoopCounters`)."""


class SubtaskCheckpointCoordinator:
    """Snapshots the operators of one subtask and acknowledges each checkpoint."""

    def __init__(self, subtask: SubtaskId, operators: List[StreamOperator],
                 operator_stores: Dict[str, Any], keyed_backend: Optional[KeyedStateBackend],
                 keyed_owner: Optional[str], storage_factory: Callable[[], Any],
                 responder: CheckpointResponder,
                 memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
                 checksums: Optional[ChecksumRecorder] = None) -> None:
        self.subtask = subtask
        self.operators = operators
        self.operator_stores = operator_stores
        self.keyed_backend = keyed_backend
        self.keyed_owner = keyed_owner
        self._storage_factory = storage_factory
        self._storage: Any = None
        self.responder = responder
        self.memory_threshold = memory_threshold
        self.last_checkpoint_id = 0
        self._pool: Optional[ThreadPoolExecutor] = None
        self._futures: List[Future] = []
        #: size and CRC-32 of the files this task wrote (or restored from)
        self.checksums = checksums if checksums is not None else ChecksumRecorder()
        self._recent_paths: Deque[List[str]] = deque(maxlen=RECENT_SNAPSHOTS)
        #: operator uid -> bytes of its state in the latest snapshot acknowledged (keyed
        #: state counts for the chain's keyed operator); replaced whole, never mutated
        self.operator_state_sizes: Dict[str, int] = {}

    @property
    def storage(self) -> Any:
        if self._storage is None:
            self._storage = self._storage_factory()
        return self._storage

    def checkpoint(self, barrier: CheckpointBarrier, alignment_ms: float,
                   input_ended: bool, drained: bool = True,
                   in_flight: "Optional[Future]" = None) -> None:
        """Synchronous part now; the asynchronous part and the ack in the worker thread.
        The caller has already forwarded the barrier downstream. ``in_flight``: an
        unaligned checkpoint's channel state, a future the ack waits for (an exception
        in it: the checkpoint was aborted meanwhile, and nothing is acknowledged)."""
        cid = barrier.checkpoint_id
        t0 = time.perf_counter()
        ctx = StateSnapshotContext(cid, barrier.timestamp)
        for op in self.operators:
            op.snapshot_state(ctx)
        states = {uid: OperatorSubtaskState(store.snapshot())
                  for uid, store in self.operator_stores.items()}
        writer = (self.keyed_backend.snapshot(cid, savepoint=barrier.is_savepoint)
                  if self.keyed_backend is not None else None)
        sync_ms = (time.perf_counter() - t0) * 1000.0
        self.last_checkpoint_id = max(self.last_checkpoint_id, cid)
        snapshot = TaskStateSnapshot(states, finished=False, input_ended=input_ended,
                                     drained=drained)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"flowray-async-{self.subtask.key}")
        self._futures = [f for f in self._futures if not f.done()]
        self._futures.append(self._pool.submit(self._finish_async, cid, snapshot, writer,
                                               sync_ms, alignment_ms, barrier.location,
                                               in_flight))

    def _finish_async(self, cid: int, snapshot: TaskStateSnapshot, writer: Any,
                      sync_ms: float, alignment_ms: float,
                      location: Optional[str] = None,
                      in_flight: "Optional[Future]" = None) -> None:
        t0 = time.perf_counter()
        try:
            # storage is reached only when a file is written; a savepoint's files go to
            # its own directory
            target: Callable[[], Any] = (
                (lambda: self.storage) if location is None else
                (lambda s=SavepointStorage(location): s))
            write = self.checksums.recording(lambda p, d: target().write_file(p, d))
            if writer is not None and self.keyed_owner is not None:
                path = target().task_state_path(cid, self.subtask, "keyed")
                handle = writer.write(write, path)
                snapshot.operators.setdefault(self.keyed_owner, OperatorSubtaskState()).keyed = handle
            self._offload_operator_state(cid, snapshot, write, target)
            if in_flight is not None:
                try:   # every input's barrier has come (the task sets it)
                    snapshot.in_flight = in_flight.result()
                except Exception:  # noqa: BLE001 - aborted meanwhile: declined already
                    return
            paths = referenced_paths(snapshot)
            snapshot.file_checksums = self.checksums.for_paths(paths)
            self._recent_paths.append(paths)
            self.checksums.forget_all_but(p for ps in self._recent_paths for p in ps)
        except Exception as e:  # noqa: BLE001 - reported as a declined checkpoint
            self.responder.decline_checkpoint(self.subtask, cid, "ASYNC_FAILURE",
                                              f"{type(e).__name__}: {e}")
            return
        async_ms = (time.perf_counter() - t0) * 1000.0
        self.operator_state_sizes = {uid: s.size() for uid, s in snapshot.operators.items()}
        metrics = {"sync_ms": round(sync_ms, 3), "async_ms": round(async_ms, 3),
                   "alignment_ms": round(alignment_ms, 3), "bytes": snapshot.state_size()}
        if in_flight is not None:   # Flink's "persisted data" of an unaligned checkpoint
            metrics["unaligned"] = True
            metrics["persisted_data"] = sum(d.size() for d in snapshot.in_flight)
        self.responder.acknowledge_checkpoint(self.subtask, cid, snapshot, metrics)

    def _offload_operator_state(self, cid: int, snapshot: TaskStateSnapshot,
                                write: Any, target: Callable[[], Any]) -> None:
        """List states above the memory threshold go to files of their own (Flink's
        ``state.storage.fs.memory-threshold``); smaller ones stay inline in the ack."""
        for index, state in enumerate(snapshot.operators.values()):
            if sum(e.size() for e in state.operator_state.values()) > self.memory_threshold:
                storage = target()
                state.offload_operator_state(
                    self.memory_threshold, write,
                    storage.task_state_path(cid, self.subtask, f"op{index}"))

    def decline(self, checkpoint_id: int, reason: str, message: str = "") -> None:
        self.last_checkpoint_id = max(self.last_checkpoint_id, checkpoint_id)
        self.responder.decline_checkpoint(self.subtask, checkpoint_id, reason, message)

    def close(self, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=not wait)
            self._pool = None
