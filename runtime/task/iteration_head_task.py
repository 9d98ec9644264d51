"""The task of an iteration head: head and tail of a cycle in one subtask
(docs/iterations.md).

Its inputs are the iteration's regular input and the back edges from the end of the loop's
body. It never blocks while the loop is full:

* every frame on a back edge is taken as soon as it arrives, into a
  :class:`~flowray.runtime.task.iteration.FeedbackQueue` that spills to disk, also while
  an output write waits for credit (:class:`_FeedbackDrainingWriter`);
* the regular input is read only while the queue holds less than a few batches.

Checkpoints follow the snapshot algorithm for cycles: the barrier goes on at once, the
queue as it was is kept, and records arriving on a back edge are logged until the barrier
comes back on it; queue and log are then the head operator's state. Termination: a loop
closed inside the head's own chain ends when the head is idle (its regular input ended,
its queue empty); a loop through channels ends when the job master finds it empty
(:mod:`~flowray.runtime.jobmaster.loop_termination`), which the head asks for when it is
idle; with ``max_wait_time_ms``, the head ends after its back edge was idle that long.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

from flowray.common.configuration import Configuration
from flowray.common.options import ITERATION_SPILL_THRESHOLD
from flowray.operators.base import Output
from flowray.operators.iteration import IterationHeadOperator
from flowray.runtime.network.channel import ChannelReader, ChannelWriter
from flowray.runtime.network.elements import (
    STOP_NO_DRAIN,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    Frame,
    RecordBatch,
)
from flowray.runtime.task.iteration import BackEdgeLog, Batch, FeedbackQueue
from flowray.runtime.task.stream_task import StreamTask

__all__ = ["IterationHeadTask", "is_iteration_head", "create_stream_task"]

log = logging.getLogger(__name__)

#: the regular input is read while the queue holds fewer than this many batches
QUEUED_BATCHES_BEFORE_INPUT_WAITS = 4
#: longest a write waiting for credit waits before it looks at its back edges again
CREDIT_POLL_S = 0.002


def is_iteration_head(tdd: Any) -> bool:
    return getattr(tdd, "iteration_head", False) or any(i.feedback for i in tdd.inputs)


def create_stream_task(tdd: Any, env: Any) -> StreamTask:
    """The task that runs ``tdd``: an :class:`IterationHeadTask` for a subtask with back
    edges, else a :class:`StreamTask`."""
    return IterationHeadTask(tdd, env) if is_iteration_head(tdd) else StreamTask(tdd, env)


class _FeedbackDrainingWriter(ChannelWriter):
    """A head's output channel: while it has no credit, the head takes what its back
    edges bring instead of blocking (so the loop cannot deadlock)."""

    def __init__(self, inner: ChannelWriter, task: "IterationHeadTask") -> None:
        self._inner = inner
        self._task = task
        self.channel_id = inner.channel_id
        self.credits = inner.credits

    @property
    def stats(self) -> Any:   # type: ignore[override]
        return self._inner.stats

    @property
    def carries_batch_limit(self) -> bool:   # type: ignore[override]
        return self._inner.carries_batch_limit

    @property
    def batch_limit(self) -> Optional[int]:   # type: ignore[override]
        return self._inner.batch_limit

    @batch_limit.setter
    def batch_limit(self, value: Optional[int]) -> None:
        self._inner.batch_limit = value

    def write(self, frame: Frame) -> None:
        inner = self._inner
        if inner.in_flight() >= inner.credits and self._task.feedback_open():
            stats = inner.stats
            t0 = time.monotonic()
            stats.blocked += 1
            stats.blocked_since = t0
            try:
                while inner.in_flight() >= inner.credits and self._task.feedback_open():
                    self._task.take_feedback(CREDIT_POLL_S)
            finally:
                stats.blocked_ms += (time.monotonic() - t0) * 1000
                stats.blocked_since = None
        inner.write(frame)

    def in_flight(self) -> int:
        return self._inner.in_flight()

    def await_taken(self, timeout_s: float) -> None:
        self._inner.await_taken(timeout_s)

    def close(self) -> None:
        self._inner.close()


class _LocalFeedbackOutput(Output):
    """The output of a feedback producer chained into its head's task: records go to the
    head's queue (no channel); watermarks that went round are the head's own."""

    def __init__(self, push: Any) -> None:
        self.push = push

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        if records:
            self.push(records, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        pass

    def emit_watermark_status(self, idle: bool) -> None:
        pass


class IterationHeadTask(StreamTask):
    """A :class:`StreamTask` whose head operator is an :class:`IterationHeadOperator`."""

    def __init__(self, tdd: Any, env: Any) -> None:
        super().__init__(tdd, env)
        conf = Configuration(tdd.config)
        self._queue = FeedbackQueue(conf.get(ITERATION_SPILL_THRESHOLD))
        feedback = sorted(self._feedback_ids)
        self._log = BackEdgeLog(feedback)
        self._feedback_live = set(feedback)
        self._regular_ids = frozenset(i.channel_id for i in tdd.inputs if not i.feedback)
        #: checkpoint id -> (barrier, alignment ms, the queue as the barrier passed)
        self._pending: Dict[int, Tuple[CheckpointBarrier, float, List[Batch]]] = {}
        #: checkpoints whose barrier came back on every back edge: (id, log)
        self._returned: List[Tuple[int, List[Batch]]] = []
        #: the job master was told this head is idle (and it has not moved since)
        self._said_idle = False
        self._found_empty = False
        self._keep_after_end = False
        self._dropped = 0
        self._feedback_records = 0
        self._last_feedback_ms = self.clock.monotonic_ms()

    # -- setup ---------------------------------------------------------------------------
    def _open_output_writer(self, channel_id: str, consumer: Any) -> Any:
        return _FeedbackDrainingWriter(super()._open_output_writer(channel_id, consumer), self)

    def _setup(self) -> None:
        super()._setup()
        head = self.head
        if not isinstance(head, IterationHeadOperator):
            raise RuntimeError(f"task {self.tdd.display_name} has back edges but its first "
                               f"operator is {type(head).__name__}")
        self._head_op = head
        self._loop_outputs = [o.edge_id for o in self.tdd.outputs if o.loop]
        for records, timestamps in head.restored:   # round again, before any new input
            self._queue.push(records, timestamps)
        head.restored = []

    def _local_feedback_output(self) -> Any:
        return _LocalFeedbackOutput(self._on_local_feedback)

    def _on_local_feedback(self, records: List[Any], timestamps: Optional[List[Any]]) -> None:
        """Feedback from an operator chained in this task: straight into the queue."""
        if self._input_ended:
            raise RuntimeError(f"iteration head {self.tdd.display_name}: records came back "
                               "after the loop ended")
        self._feedback_records += len(records)
        self._queue.push(records, timestamps)

    # -- the back edge -------------------------------------------------------------------
    def feedback_open(self) -> bool:
        return bool(self._feedback_live)

    def take_feedback(self, timeout_s: float) -> None:
        """Take every frame waiting on the back edges (waiting up to ``timeout_s`` for
        one); called while an output write waits for credit."""
        self._check_cancel()
        readers = [self.readers[c] for c in sorted(self._feedback_live)]
        for reader in self.gate.wait(readers, timeout_s) if readers else []:
            if self._read_feedback(reader):
                self._feedback_live.discard(reader.channel_id)
                live = getattr(self, "_active", None)   # the input loop's live readers
                if live is not None and reader in live:
                    live.remove(reader)

    def _read_feedback(self, reader: ChannelReader) -> bool:
        """Take the frames waiting on one back-edge channel; True when it ended."""
        cid = reader.channel_id
        if cid not in self._feedback_live:
            return True
        while True:
            frame = reader.poll()
            if frame is None:
                return False
            t = type(frame)
            if t is RecordBatch:
                self._on_feedback_records(cid, frame.records, frame.timestamps)
            elif t is CheckpointBarrier:
                logged = self._log.on_barrier(cid, frame.checkpoint_id)
                if logged is not None:
                    self._returned.append((frame.checkpoint_id, logged))
            elif t is CancelCheckpointMarker:
                self._log.abort(frame.checkpoint_id)
                self._pending.pop(frame.checkpoint_id, None)
            elif t is EndOfPartition:
                self._feedback_live.discard(cid)
                self._returned.extend(self._log.on_channel_ended(cid))
                return True
            # watermarks that went round the loop are the head's own: not used again

    def _on_feedback_records(self, cid: str, records: List[Any],
                             timestamps: Optional[List[Any]]) -> None:
        self._log.on_records(cid, records, timestamps)
        self._loop_received += len(records)
        if self._input_ended and self._keep_after_end:
            self._queue.push(records, timestamps)   # for the stop's savepoint
            return
        if self._input_ended:
            if self._found_empty:
                raise RuntimeError(
                    f"iteration head {self.tdd.display_name}: {len(records)} records came "
                    "back after the loop was found empty (made in the loop without a record "
                    "coming in: a processing-time timer or async I/O inside it?)")
            if not self._dropped and self._stop_mode != STOP_NO_DRAIN:
                log.warning("flowray: iteration head %s ended after max_wait_time_ms; "
                            "records still coming back are dropped", self.tdd.display_name)
            self._dropped += len(records)
            return
        self.records_in += len(records)
        self._feedback_records += len(records)
        self._queue.push(records, timestamps)
        self._said_idle = False
        self._last_feedback_ms = self.clock.monotonic_ms()

    # -- the loop's turn -----------------------------------------------------------------
    def _reads_regular_input(self) -> bool:
        return (not self._input_ended
                and len(self._queue) < QUEUED_BATCHES_BEFORE_INPUT_WAITS * self.batch_size)

    def _iteration_turn(self) -> float:
        while self._returned:
            checkpoint_id, logged = self._returned.pop(0)
            self._complete_snapshot(checkpoint_id, logged)
        if (self._stop_mode == STOP_NO_DRAIN and not self._input_ended
                and not any(r.channel_id in self._regular_ids for r in self._active)):
            # stopped with a savepoint, taken once every task ended its input: the body
            # sends back what it still holds, and the queue keeps it for the savepoint
            self._end_output(keep_queue=True)
        queue = self._queue
        if not self._input_ended:
            budget = self.batch_size * self.FRAMES_PER_TURN
            while budget > 0 and len(queue) and not self._mailbox:
                batch = queue.pop(min(budget, self.batch_size))
                assert batch is not None
                budget -= len(batch[0])
                self._head_op.process_feedback(batch[0], batch[1])
        if len(queue) and not self._input_ended:
            return 0.0
        return self._maybe_end()

    def _maybe_end(self) -> float:
        """Once the regular input ended and the queue is empty: probe, or end after
        ``max_wait_time_ms``; seconds until this should be looked at again."""
        if self._input_ended or any(r.channel_id in self._regular_ids for r in self._active):
            return self.MAX_WAIT_S
        if self.finished_on_restore:
            self._end_output()
            return self.MAX_WAIT_S
        max_wait = self._head_op.max_wait_time_ms
        if max_wait is not None:
            idle_ms = self.clock.monotonic_ms() - self._last_feedback_ms
            if idle_ms >= max_wait or not self._feedback_live:
                self._end_output()
                return self.MAX_WAIT_S
            return min(self.MAX_WAIT_S, (max_wait - idle_ms) / 1000.0)
        if not self._feedback_live:   # the whole loop is in this task (or it ended)
            self._found_empty = True
            self._end_output()
        elif not self._said_idle:
            self._said_idle = True
            self.env.responder.loop_idle(self.tdd.subtask)
        return self.MAX_WAIT_S

    def _loop_idle(self) -> bool:
        if self._input_ended:
            return True
        if getattr(self, "_active", None) is None:   # not reading yet
            return False
        return (not len(self._queue)
                and not any(r.channel_id in self._regular_ids for r in self._active))

    def _end_loop(self) -> None:
        if self._input_ended:
            return
        if not self._loop_idle():
            raise RuntimeError(f"iteration head {self.tdd.display_name} was told its loop is "
                               "empty while it holds records (a bug in termination detection)")
        self._found_empty = True
        self._end_output()

    def _end_output(self, keep_queue: bool = False) -> None:
        """End-of-partition into the loop; ``keep_queue``: a stop without drain, whose
        savepoint holds the records in the loop (they are kept as they come back)."""
        self._keep_after_end = keep_queue
        if not keep_queue:
            self._queue.discard()
        StreamTask._end_input(self)

    def _end_input(self) -> None:
        if not self._input_ended:   # (ended when the loop was found empty)
            self._end_output()

    # -- checkpoints ---------------------------------------------------------------------
    def _perform_checkpoint(self, barrier: CheckpointBarrier, alignment_ms: float) -> None:
        self.last_alignment_ms = alignment_ms
        self.last_start_delay_ms = max(0.0, float(self.clock.now_ms() - barrier.timestamp))
        as_it_was = self._queue.batches()
        if self._input_ended or not self._feedback_live:
            # no barrier goes round (the loop is all in this task, or over): the queue is
            # the whole share of the head
            if not self._input_ended:
                for rw in self.record_writers.values():
                    rw.broadcast_event(barrier)
            self._head_op.snapshot_batches = as_it_was
            self._snapshot(barrier, alignment_ms)
            return
        # the log starts before the barrier leaves: it may come back during the sending
        self._log.start(barrier.checkpoint_id)
        self._pending[barrier.checkpoint_id] = (barrier, alignment_ms, as_it_was)
        for rw in self.record_writers.values():
            rw.broadcast_event(barrier)

    def _complete_snapshot(self, checkpoint_id: int, logged: List[Batch]) -> None:
        pending = self._pending.pop(checkpoint_id, None)
        if pending is None:
            return   # aborted meanwhile
        barrier, alignment_ms, as_it_was = pending
        self._head_op.snapshot_batches = as_it_was + logged
        # the barrier passed before the output ended (else there was no log)
        self._snapshot(barrier, alignment_ms, input_ended=False)

    def _on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._log.abort(checkpoint_id)
        self._pending.pop(checkpoint_id, None)
        super()._on_checkpoint_aborted(checkpoint_id)

    def metrics(self) -> Dict[str, Any]:
        out = super().metrics()
        out["iteration"] = {"feedback_records": self._feedback_records,
                            "spilled_batches": self._queue.spilled_batches,
                            "dropped_records": self._dropped}
        return out

    def _final_metrics(self) -> Dict[str, Any]:
        if self._dropped:
            log.warning("flowray: iteration head %s dropped %d records that came back after "
                        "it ended (max_wait_time_ms)", self.tdd.display_name, self._dropped)
        return super()._final_metrics()

    def _release(self) -> None:
        self._queue.discard()
        super()._release()
