"""A task's channels under unaligned checkpoints (docs/internals/unaligned-checkpoints.md):
the task thread's side of FLIP-76, apart from the task's loop.

:class:`UnalignedChannels` puts the task's outputs in overdraft (a write never blocks; a
frame without a credit waits in the writer) and its inputs in eager mode (every frame is
looked at for priority barriers before it is polled). It then

- waits for credits while it keeps taking priority barriers and mailbox actions
  (:meth:`await_outputs`, :meth:`await_consumers`);
- hands each priority barrier to the barrier handler, oldest checkpoint first
  (:meth:`receive_priority`);
- processes a batch in slices of about :attr:`SLICE_MS`, so a barrier never waits for a
  slow function's whole batch (:meth:`process_in_slices`);
- takes the checkpoint: the barrier overtakes the outputs' queued frames, which become
  output channel state, and the inputs still owing the barrier are recorded until it
  comes (:meth:`perform_checkpoint`);
- replays restored channel state before live input, taking checkpoints meanwhile: what
  is not replayed yet is channel state of the new checkpoint (:meth:`replay`).

It works on its task (a :class:`~flowray.runtime.task.stream_task.StreamTask`): the
task's writers, readers, barrier handler, mailbox and checkpointer.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from flowray.runtime.checkpoint.channel_state import RecoveredInput
from flowray.runtime.network.channel import ChannelClosedError
from flowray.runtime.network.credit_wait import CreditWaiter
from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.frame_codec import encode_frame
from flowray.runtime.task.barrier_handler import TriggerCheckpoint, UnalignedBarrierHandler
from flowray.runtime.task.unaligned import InFlightRecording, recovered_batches

__all__ = ["UnalignedChannels", "replay_in_flight"]

#: (exchange name, producer index, consumer index): where channel state is filed
ChannelSpec = Tuple[Tuple[str, str, int], int, int]
Process = Callable[..., None]


def replay_in_flight(recovered: List[RecoveredInput], process: Dict[int, Process]) -> int:
    """Restored channel state through the operators at once (a task without unaligned
    checkpoints now, restored from an unaligned checkpoint); the records replayed."""
    n = 0
    for item in recovered:
        for batch in recovered_batches(item.frames, item.key_groups):
            n += len(batch.records)
            process[item.input_index](batch.records, batch.key_groups, batch.timestamps)
    return n


class UnalignedChannels:
    """One task's channels in unaligned mode (see the module's docstring)."""

    #: longest wait for a credit on a channel that cannot be selected (in process)
    POLL_S = 0.001
    #: longest wait for a credit with an aligned-checkpoint timeout to look at
    TIMEOUT_CHECK_S = 0.005
    #: a batch is processed in slices of about this many ms, and priority barriers are
    #: looked for between slices (a slow function's batch of 1,000 records would
    #: otherwise hold a barrier for seconds)
    SLICE_MS = 10.0
    #: the first slice a task processes, to learn the operators' speed (a first batch of
    #: 1,000 records through a 5 ms function would otherwise hold a barrier for 5 s)
    PROBE_RECORDS = 4
    #: the loop looks at its inputs' sockets for priority barriers at most this often (a
    #: syscall per input per turn cost a fast job 3-5%), and at once when a reader found
    #: one (:meth:`barrier_found`)
    PRIORITY_CHECK_S = 0.001

    def __init__(self, task: Any) -> None:
        self.task = task
        tdd = task.tdd
        self.waiter = CreditWaiter(self.POLL_S)
        self._all_writers: List[Any] = [w for rw in task.record_writers.values()
                                        for w in rw.writers]
        for rw in task.record_writers.values():
            for w in rw.writers:
                if w.supports_priority:
                    w.overdraft = True
                    w.on_credit = self.waiter.wake
        for r in task.readers.values():
            if hasattr(r, "eager"):
                r.eager = True
        self.me = tdd.subtask.index
        self._in_specs: Dict[str, ChannelSpec] = {
            i.channel_id: (i.exchange, i.producer.index, self.me) for i in tdd.inputs}
        self._out_specs = {cid: (o.exchange, c.index, o.aligned_only)
                           for o in tdd.outputs for cid, c in o.channels}
        self.recording: Optional[InFlightRecording] = None
        #: the input (channel id, recorded frames) whose priority barrier starts the
        #: checkpoint being handled
        self._first_barrier: Optional[Tuple[str, List[bytes]]] = None
        self._ms_per_record = 0.0
        #: a batch being processed in slices: (its channel spec, records, key groups,
        #: timestamps, index of the first record not processed)
        self._unprocessed: Optional[Tuple[ChannelSpec, List[Any], Any, Any, int]] = None
        #: restored channel state not replayed yet: (channel spec, input index, batch)
        self._replay_rest: Deque[Tuple[ChannelSpec, int, RecordBatch]] = deque()
        self._next_check = 0.0   # perf_counter() of the next look for priority barriers
        self._found = False      # a reader found one: look at the next turn

    # -- any thread -----------------------------------------------------------------------
    def wake(self) -> None:
        """A mailbox action or a cancel: end a wait for credits now."""
        self.waiter.wake()

    # -- outputs ----------------------------------------------------------------------------
    def _writers(self) -> List[Any]:
        """Every output channel's writer (fixed once the task's outputs are open; looked
        at every turn, so listed once)."""
        return self._all_writers

    def outputs_available(self) -> bool:
        """Nothing is waiting for a credit (sends what the credits allow)."""
        available = True
        for w in self._writers():
            if not w.is_available():
                available = False
        return available

    def await_outputs(self, live: Any) -> None:
        """Outputs hold frames without a credit: wait (back-pressure, as a blocked write
        counts) until credits came back, while priority barriers and mailbox actions
        (a source's trigger) are handled at once."""
        task = self.task
        blocked = [w for w in self._writers() if not w.is_available()]
        now = time.monotonic()
        for w in blocked:
            w.stats.blocked += 1
            w.stats.blocked_since = now
        handler = task.barrier_handler
        # the aligned-checkpoint timeout is looked at while waiting, too
        most = self.TIMEOUT_CHECK_S if isinstance(
            handler, UnalignedBarrierHandler) and handler.aligned_timeout_ms else None
        try:
            while blocked:
                task._check_cancel()
                self.receive_priority(live)
                wait = task._housekeeping()
                blocked = [w for w in blocked if not w.is_available()]
                if blocked:
                    self.waiter.wait(blocked, live, wait if most is None else min(wait, most))
                    # a frame goes out the moment its credit is back; the task's loop
                    # runs the mailbox next anyway
                    blocked = [w for w in blocked if not w.is_available()]
        finally:
            end = time.monotonic()
            for w in self._writers():
                since = w.stats.blocked_since
                if since is not None:
                    w.stats.blocked_ms += (end - since) * 1000.0
                    w.stats.blocked_since = None
        task._loop_turn_ms = task.clock.monotonic_ms()

    def await_consumers(self, timeout_s: float) -> None:
        """After end-of-partition: wait until every consumer took every frame, running
        the mailbox meanwhile, so a checkpoint does not wait for the consumers' backlog
        (the barrier overtakes it: :meth:`perform_checkpoint`)."""
        task = self.task
        writers = [w for w in self._writers() if w.supports_priority]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            task._check_cancel()
            wait = task._housekeeping()
            untaken = [w for w in writers if not w.closed and (
                not w.is_available() or w.in_flight() > 0)]
            if not untaken:
                return
            self.waiter.wait(untaken, (), min(wait, deadline - time.monotonic()))

    # -- inputs -----------------------------------------------------------------------------
    def turn(self, live: Any) -> None:
        """Once per turn of the task's loop: take priority barriers in, if it is time
        to look or a reader found one."""
        now = time.perf_counter()
        if self._found or now >= self._next_check:
            self._found = False
            self._next_check = now + self.PRIORITY_CHECK_S
            self.receive_priority(live)

    def barrier_found(self) -> None:
        """A reader's poll stopped at a priority barrier: take it at the next turn."""
        self._found = True

    def receive_priority(self, live: Any) -> None:
        """Take in what the inputs have; handle each priority barrier now."""
        task = self.task
        handler = task.barrier_handler
        if handler is None:
            return
        # every input's next priority barrier first, then oldest checkpoint first: a
        # reader stops at a barrier until it is handed over, so a recording started by
        # another input's barrier never takes in frames after this one
        arrived = [(barrier, before, reader) for reader in list(live)
                   for barrier, before in reader.receive()]
        arrived.sort(key=lambda a: a[0].checkpoint_id)
        for barrier, before, reader in arrived:
            cid = reader.channel_id
            recording = self.recording
            if recording is not None and recording.checkpoint_id == barrier.checkpoint_id:
                reader.stop_recording()   # started after it arrived: before has it all
                if cid in recording.waiting:
                    recording.input_arrived(cid, before)
                task._apply(handler.on_barrier(cid, barrier))
                continue
            self._first_barrier = (cid, before)
            try:
                task._apply(handler.on_barrier(cid, barrier))
            finally:
                self._first_barrier = None
        if isinstance(handler, UnalignedBarrierHandler) and handler.aligned_timeout_ms:
            task._apply(handler.on_time())

    def on_in_band_barrier(self, reader: Any, checkpoint_id: int) -> None:
        """A barrier polled in band (a producer without a priority path): the input's
        recording for that checkpoint is over."""
        recording = self.recording
        cid = reader.channel_id
        if recording is not None and cid in recording.waiting and \
                recording.checkpoint_id == checkpoint_id:
            recording.input_arrived(cid, reader.stop_recording())

    def on_end_of_partition(self, reader: Any) -> None:
        """An input ended while recording: what it sent before its end is channel state."""
        recording = self.recording
        if recording is not None and reader.channel_id in recording.waiting:
            recording.input_arrived(reader.channel_id, reader.stop_recording())

    def process_in_slices(self, process: Process, frame: RecordBatch, channel_id: str,
                          live: Any) -> None:
        """Process ``frame`` of input ``channel_id`` in slices (see :meth:`_process`)."""
        self._process(process, frame, self._in_specs[channel_id], live)

    def _process(self, process: Process, frame: RecordBatch, spec: ChannelSpec,
                 live: Any) -> None:
        """Process ``frame`` in slices that take about :attr:`SLICE_MS` each (one slice
        when the operators are fast), taking priority barriers between them. A
        checkpoint triggered between slices keeps the rest of the batch as channel state
        of ``spec``."""
        records, kgs, ts = frame.records, frame.key_groups, frame.timestamps
        n = len(records)
        start = 0
        while start < n:
            per_record = self._ms_per_record
            # the operators' speed is not known before the first records: a few first
            size = self.PROBE_RECORDS if per_record <= 0 else \
                max(1, round(self.SLICE_MS / per_record))
            if start == 0 and size >= n:
                t0 = time.perf_counter()
                process(records, kgs, ts)
                self._note_speed(n, t0)
                return
            end = min(n, start + size)
            t0 = time.perf_counter()
            process(records[start:end], kgs[start:end] if kgs is not None else None,
                    ts[start:end] if ts is not None else None)
            self._note_speed(end - start, t0)
            start = end
            if start < n:
                # a checkpoint triggered now keeps the rest of this batch as state
                self._unprocessed = (spec, records, kgs, ts, start)
                try:
                    self.receive_priority(live)
                finally:
                    self._unprocessed = None

    def _note_speed(self, records: int, t0: float) -> None:
        """Milliseconds per record of the operators, smoothed."""
        if records:
            ms = max(1e-6, (time.perf_counter() - t0) * 1000.0 / records)
            self._ms_per_record = ms if self._ms_per_record <= 0 else \
                0.8 * self._ms_per_record + 0.2 * ms

    # -- restore ------------------------------------------------------------------------------
    def replay(self, recovered: List[RecoveredInput], process: Dict[int, Process],
               live: Any) -> int:
        """Restored channel state through the operators before any live input, in
        slices, with back-pressure, priority barriers and the mailbox as in the loop: a
        checkpoint taken meanwhile keeps what is not replayed yet as its channel state.
        The records replayed."""
        task = self.task
        rest = self._replay_rest
        for item in recovered:
            spec = (item.exchange, item.producer, self.me)
            for batch in recovered_batches(item.frames, item.key_groups):
                rest.append((spec, item.input_index, batch))
        n = 0
        while rest:
            task._check_cancel()
            self.receive_priority(live)
            if not self.outputs_available():
                self.await_outputs(live)
                continue
            task._housekeeping()
            spec, index, batch = rest.popleft()
            n += len(batch.records)
            task.records_in += len(batch.records)
            self._process(process[index], batch, spec, live)
        return n

    # -- checkpoints --------------------------------------------------------------------------
    def perform_checkpoint(self, action: TriggerCheckpoint) -> None:
        """Snapshot now; the barrier overtakes every output's queued frames (kept as
        output channel state); the inputs still owing it are recorded until it comes."""
        task = self.task
        barrier = action.barrier
        task.last_alignment_ms = action.alignment_ms
        task.last_start_delay_ms = max(0.0, float(task.clock.now_ms() - barrier.timestamp))
        self.stop_recording(None)   # an older one still recording is over
        recording = InFlightRecording(barrier.checkpoint_id, self._in_specs,
                                      set(action.recording))
        # what this task took in before the barrier and has not processed: ahead of
        # anything recorded from the inputs
        if self._unprocessed is not None:
            spec, records, kgs, ts, start = self._unprocessed
            recording.add_unprocessed(spec, [encode_frame(RecordBatch(
                records[start:], kgs[start:] if kgs is not None else None,
                ts[start:] if ts is not None else None), 0)])
        for spec, _, batch in self._replay_rest:
            recording.add_unprocessed(spec, [encode_frame(batch, 0)])
        first = self._first_barrier
        ended = task._input_ended
        for rw in task.record_writers.values():
            if not ended:
                rw.flush()   # records before the barrier go before it, or into the state
            for w in rw.writers:
                exchange, consumer, aligned_only = self._out_specs[w.channel_id]
                if ended:
                    # end-of-partition is written: the barrier still overtakes the frames
                    # the consumer has not taken (it waits for no backlog at the end);
                    # one that took them all counts the end as the barrier
                    if aligned_only or not w.supports_priority or w.closed or (
                            w.is_available() and w.in_flight() == 0):
                        continue
                    recording.add_output(exchange, self.me, consumer, w.unsent())
                    try:
                        w.write_priority(barrier)
                    except ChannelClosedError:   # it took the end meanwhile, and left
                        pass
                    continue
                if aligned_only or not w.supports_priority:
                    w.write(barrier)   # in band, behind everything (Flink's broadcast)
                    continue
                recording.add_output(exchange, self.me, consumer, w.unsent())
                w.write_priority(barrier)
        for cid in action.recording:
            task.readers[cid].start_recording()
        self.recording = recording
        if first is not None:
            recording.input_arrived(*first)
        if not recording.waiting:
            recording.input_arrived("", [])   # nothing to wait for: complete
        task._snapshot(barrier, action.alignment_ms, in_flight=recording.future)

    def stop_recording(self, checkpoint_id: Optional[int]) -> None:
        """Abort the recording of ``checkpoint_id`` (None: of any checkpoint)."""
        recording = self.recording
        if recording is None or recording.future.done() and not recording.waiting:
            self.recording = None
            return
        if checkpoint_id is not None and recording.checkpoint_id != checkpoint_id:
            return
        for cid in recording.waiting:
            reader = self.task.readers.get(cid)
            if reader is not None:
                reader.stop_recording()
        recording.abort()
        self.recording = None

    def close(self) -> None:
        self.stop_recording(None)
        self.waiter.close()
