"""One subtask's life: build the operator chain, read inputs, run operators, write outputs.

Pure of Ray: the shell (a Ray actor, or a thread in the local executor) supplies a
:class:`~flowray.runtime.task.environment.TaskEnvironment` with channels. The task runs in
one thread; other threads talk to it only through :meth:`StreamTask.cancel` and the mailbox
(actions run between batches).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import cloudpickle
from flowray.operators.base import OperatorContext, ProcessingTimeService, StreamOperator
from flowray.operators.sinks import stand_in_for_committed_sinks
from flowray.operators.sources import SourceOperator
from flowray.runtime.checkpoint.state_assignment import TaskRestore
from flowray.runtime.checkpoint.storage import checkpoint_storage_from_config
from flowray.runtime.graph.execution_graph import TaskDeploymentDescriptor
from flowray.runtime.graph.job_graph import TaskPlan
from flowray.runtime.messages import LoopCounters, TaskFailure, TaskResult, TaskState
from flowray.runtime.network.blocking_partition import (
    BlockingPartitionStore,
    MixedInputGate,
)
from flowray.runtime.network.channel import ChannelReader, InputGate
from flowray.runtime.network.debloat import INITIAL_BATCH, BufferDebloater
from flowray.runtime.network.elements import (
    CancelCheckpointMarker,
    END_OF_INPUT,
    STOP_NO_DRAIN,
    CheckpointBarrier,
    EndOfPartition,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)
from flowray.runtime.network.partitioners import RecordWriter
from flowray.runtime.task.barrier_handler import (
    AbortCheckpoint,
    BarrierHandler,
    ChannelStateComplete,
    TriggerCheckpoint,
    create_barrier_handler,
)
from flowray.runtime.task.environment import DriverChannel, TaskEnvironment
from flowray.runtime.task.io_metrics import TaskIOMetrics, register_operator_metrics
from flowray.runtime.task.operator_chain import wire_operator_chain
from flowray.runtime.task.source_pacing import ThinPollPacer
from flowray.runtime.task.state_initializer import (
    checkpoint_reader,
    initialize_operator_state,
    restore_keyed_state,
)
from flowray.runtime.task.task_failures import decline_reason, describe_failure
from flowray.runtime.task.subtask_checkpoints import (
    SubtaskCheckpointCoordinator,
)
from flowray.runtime.task.unaligned_channels import UnalignedChannels, replay_in_flight
from flowray.runtime.task.watermark_valve import WatermarkValve
from flowray.state.queryable import QueryableStates, UnknownQueryableStateError
from flowray.state.state_backend import create_keyed_backend

from flowray.common.configuration import Configuration
from flowray.common.pyflink_options import GLOBAL_JOB_PARAMETERS
from flowray.common.options import (
    AUTO_WATERMARK_INTERVAL,
    BLOCKING_PARTITIONS_DIR,
    buffer_timeout_ms,
    CHANNEL_BATCH_BYTES,
    CHANNEL_BATCH_SIZE,
    CHANNEL_CREDITS,
    CHECKPOINTING_ALIGNED_TIMEOUT,
    CHECKPOINTING_INTERVAL,
    CHECKPOINTING_MODE,
    CHECKPOINTING_UNALIGNED_FORCED,
    DEBLOAT_ENABLED,
    DEBLOAT_PERIOD,
    DEBLOAT_SAMPLES,
    DEBLOAT_TARGET,
    DEBLOAT_THRESHOLD,
    MEMORY_THRESHOLD,
    RUNTIME_MODE,
    unaligned_checkpoints_enabled,
)

__all__ = ["TaskCancelled", "StreamTask"]

log = logging.getLogger(__name__)

#: failures that leave the task's process unfit to host another attempt
_FATAL_ERRORS = (MemoryError, SystemError)


def _is_fatal(error: BaseException) -> bool:
    """Whether ``error``, or an error behind it (an operator wraps what a user function
    raised), is one of the process: ``_FATAL_ERRORS``, or no ``Exception`` at all."""
    seen = set()
    e: Optional[BaseException] = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if not isinstance(e, Exception) or isinstance(e, _FATAL_ERRORS):
            return True
        e = e.__cause__ or e.__context__
    return False


#: longest a finished task waits for its consumers to take its last frames
CONSUMER_DRAIN_TIMEOUT_S = 600.0

class TaskCancelled(Exception):
    pass


class StreamTask:
    """Runs one subtask to completion. ``run()`` returns a :class:`TaskResult`; it never
    raises for failures inside the job (those are the result)."""

    IDLE_SOURCE_WAIT_S = 0.005
    MAX_WAIT_S = 0.1
    FRAMES_PER_TURN = 8

    def __init__(self, tdd: TaskDeploymentDescriptor, env: TaskEnvironment) -> None:
        self.tdd = tdd
        self.env = env
        self.clock = env.clock
        config = Configuration(tdd.config)
        self.batch_size = config.get(CHANNEL_BATCH_SIZE)
        self.batch_bytes = config.get(CHANNEL_BATCH_BYTES)
        self.buffer_timeout_ms = buffer_timeout_ms(config)
        self.checkpointing = config.get(CHECKPOINTING_INTERVAL) is not None
        self.batch_execution = config.get(RUNTIME_MODE) == "BATCH"
        self.checkpointing_mode = config.get(CHECKPOINTING_MODE)
        # unaligned checkpoints (docs/internals/unaligned-checkpoints.md): decided per
        # task in _setup (a task reading a broadcast or loop edge aligns)
        self.unaligned_enabled = (self.checkpointing and not self.batch_execution
                                  and self.checkpointing_mode == "EXACTLY_ONCE"
                                  and unaligned_checkpoints_enabled(config))
        self.unaligned = False
        self._aligned_timeout_ms = config.get(CHECKPOINTING_ALIGNED_TIMEOUT)
        self._unaligned_forced = config.get(CHECKPOINTING_UNALIGNED_FORCED)
        # buffer debloating: outputs start small and follow their consumers' announcements;
        # inputs measure this task's throughput and announce (see _make_debloater)
        self.debloating = config.get(DEBLOAT_ENABLED)
        self.state = TaskState.CREATED
        self._cancelled = threading.Event()
        self._mailbox: Deque[Callable[[], None]] = deque()
        self._wakeup = threading.Event()
        #: this task's channels under unaligned checkpoints (None: aligned)
        self.unaligned_channels: Optional[UnalignedChannels] = None
        # restored from a checkpoint taken after this subtask finished (or after its
        # operators finished): emit nothing, run no finish() again, just end
        self.finished_on_restore = bool(tdd.restore is not None and tdd.restore.finished)
        self._input_ended = False  # operators finished, end-of-partition sent
        #: END_OF_INPUT, or how a stop-with-savepoint ends this task (asked of a source,
        #: learnt from end-of-partition frames by the others)
        self._stop_mode = END_OF_INPUT
        self._restoring = False  # loading state: a failure now is a restore failure
        self._final_checkpoint: Optional[int] = None  # first checkpoint after input ended
        self._final_checkpoint_done = False
        self.barrier_handler: Optional[BarrierHandler] = None
        self.checkpointer: Optional[SubtaskCheckpointCoordinator] = None
        self.records_in = 0
        #: ms spent waiting for input (a source: for its reader to have records), in all
        self.idle_ms = 0.0
        #: the last checkpoint here: barrier alignment, and trigger to start (ms)
        self.last_alignment_ms = 0.0
        self.last_start_delay_ms = 0.0
        self.io_metrics: Optional[TaskIOMetrics] = None
        self.metrics_group = env.metrics_group_for(tdd)
        self.operators: List[StreamOperator] = []
        #: the operators opened and not closed yet, in the order they were opened
        self._opened: List[StreamOperator] = []
        #: a cancelled or failed task closed every operator it had opened without error
        self._closed_cleanly = False
        #: the task failed with an error of its process (memory, the interpreter)
        self._fatal = False
        self.record_writers: Dict[str, RecordWriter] = {}
        self.readers: Dict[str, ChannelReader] = {}
        self.gate: Optional[InputGate] = None
        self._driver_channels: List[DriverChannel] = []
        #: a task of an iteration's loop counts the records it reads from the loop's
        #: channels and writes into them (termination detection, docs/iterations.md)
        self._loop_inputs: frozenset = frozenset(i.channel_id for i in tdd.inputs
                                                 if i.loop and not i.feedback)
        self._loop_outputs: List[str] = [o.edge_id for o in tdd.outputs if o.loop]
        self._loop_received = 0
        #: an iteration head's back-edge channels (read by IterationHeadTask)
        self._feedback_ids: frozenset = frozenset(i.channel_id for i in tdd.inputs
                                                  if i.feedback)
        self._iteration_head = bool(self._feedback_ids) or getattr(tdd, "iteration_head",
                                                                   False)
        self._started = 0.0
        self._finished = 0.0
        self._released = False
        #: clock.monotonic_ms() of the loop's latest turn; None before the loop starts
        self._loop_turn_ms: Optional[float] = None

    # -- control (any thread) ----------------------------------------------------------
    def cancel(self) -> None:
        self._cancelled.set()
        self._wakeup.set()
        channels = self.unaligned_channels
        if channels is not None:
            channels.wake()

    def submit(self, action: Callable[[], None]) -> None:
        """Run ``action`` in the task thread between two batches (Flink's mailbox)."""
        self._mailbox.append(action)
        self._wakeup.set()
        channels = self.unaligned_channels
        if channels is not None:   # a task waiting for a credit runs the action now
            channels.wake()
        gate = self.gate
        if gate is not None:  # a task waiting for input runs the action now
            gate.wakeup()

    def trigger_checkpoint(
        self, checkpoint_id: int, timestamp: int, is_savepoint: bool = False,
        location: Optional[str] = None,
    ) -> None:
        """The job master triggers this task directly (a source, or a task whose inputs'
        producers have all finished)."""
        self.submit(
            lambda: self._on_direct_trigger(
                CheckpointBarrier(checkpoint_id, timestamp, is_savepoint, location)
            )
        )

    def stop_source(self, stop_mode: int) -> None:
        """Stop-with-savepoint: a source task stops reading and ends its output with
        ``stop_mode`` (:data:`STOP_DRAIN`: as if its input ended; :data:`STOP_NO_DRAIN`:
        operators keep their state unfinished). Other tasks ignore it."""
        self.submit(lambda: self._request_stop(stop_mode))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.submit(lambda: self._on_checkpoint_complete(checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.submit(lambda: self._on_checkpoint_aborted(checkpoint_id))

    def metrics(self) -> Dict[str, Any]:
        channels = {}
        for rw in self.record_writers.values():
            for w in rw.writers:
                channels[w.channel_id] = w.stats.to_dict()
        end = self._finished or time.monotonic()
        return {
            "task": self.tdd.display_name,
            "is_source": self.tdd.num_inputs == 0,
            "state": self.state.value,
            "records_in": self.records_in,
            "records_out": sum(rw.records_out for rw in self.record_writers.values()),
            "duration_ms": round((end - self._started) * 1000, 1) if self._started else 0.0,
            "channels": channels,
            "metrics": self.metric_values(),
        }

    def metric_values(self) -> Dict[str, Any]:
        """The subtask's metrics now: Flink's task metric names, and
        ``<operator>.<name>`` (with ``[key=value]`` for key/value groups) for operator and
        user metrics; a meter gives its rate, a distribution a dict."""
        group = self.metrics_group
        if group is None:
            return {}
        scope = set(group.labels.items())
        out: Dict[str, Any] = {}
        for s in group.registry.snapshot():
            if not scope <= set(s.labels.items()):
                continue
            key = s.name[len("flowray_"):]
            op = s.labels.get("operator_name")
            extra = "".join(f"[{k}={v}]" for k, v in sorted(s.labels.items())
                            if k not in group.labels and k != "operator_name")
            out[f"{op}.{key}{extra}" if op is not None else key + extra] = s.value
        return out

    def _records_out(self) -> int:
        return sum(rw.records_out for rw in list(self.record_writers.values()))

    def _bytes_out(self) -> int:
        return sum(w.stats.bytes for rw in list(self.record_writers.values())
                   for w in rw.writers)

    def _bytes_in(self) -> int:
        return sum(r.bytes_read for r in list(self.readers.values()))

    def back_pressured_ms(self) -> float:
        """ms the task's writes have waited for credit (back-pressure), in all, the wait
        under way included (any thread may ask)."""
        now = time.monotonic()
        total = 0.0
        for rw in list(self.record_writers.values()):
            for w in rw.writers:
                st = w.stats
                total += st.blocked_ms
                since = st.blocked_since
                if since is not None:
                    total += (now - since) * 1000.0
        return total

    def stalled_ms(self) -> float:
        """How long the task's loop has gone without a turn (any thread may ask; the
        heartbeat's payload): 0 before the loop starts, after the task ended, and while
        a write waits for a slow consumer (back-pressure is not a hang)."""
        turn = self._loop_turn_ms
        if turn is None or self._finished:
            return 0.0
        for rw in list(self.record_writers.values()):
            for w in rw.writers:
                if w.stats.blocked_since is not None:
                    return 0.0
        for ch in list(self._driver_channels):
            if ch.writer.stats.blocked_since is not None:
                return 0.0
        return max(0.0, self.clock.monotonic_ms() - turn)

    # -- life cycle --------------------------------------------------------------------
    def run(self) -> TaskResult:
        self._started = time.monotonic()
        self.state = TaskState.RUNNING
        try:
            self._setup()
            self.env.responder.task_initialized(self.tdd.subtask)
            if self.tdd.num_inputs == 0:
                self._run_source()
            else:
                self._run_inputs()
            self._end_input()
            self._await_final_checkpoint()
            self._await_consumers()
            self._close_operators()
            self.state = TaskState.FINISHED
            return TaskResult(self.tdd.subtask, TaskState.FINISHED, None, self._final_metrics())
        except TaskCancelled:
            self.state = TaskState.CANCELED
            return TaskResult(self.tdd.subtask, TaskState.CANCELED, None, self._final_metrics())
        except BaseException as e:  # noqa: BLE001 - every failure becomes the result
            if self._cancelled.is_set():
                self.state = TaskState.CANCELED
                return TaskResult(
                    self.tdd.subtask, TaskState.CANCELED, None, self._final_metrics()
                )
            self.state = TaskState.FAILED
            # an error of the process itself leaves it unfit for another attempt
            self._fatal = _is_fatal(e)
            return TaskResult(
                self.tdd.subtask, TaskState.FAILED, self._failure(e), self._final_metrics()
            )
        finally:
            self._release()

    def ended_normally(self) -> bool:
        """The task finished (end of input, or stopped with a savepoint) and released what
        it held: its actor may host another task."""
        return self.state is TaskState.FINISHED and self._released

    def can_host_another(self) -> bool:
        """The task ended and released what it held, and its operators were closed: it
        finished, or it was cancelled or failed (not with an error of its process:
        ``MemoryError``, ``SystemError``, or no ``Exception`` at all) and every operator
        it had opened closed without an error. Its actor may then host another attempt
        of a task (a failover redeploys into it, as Flink redeploys into the same slot)."""
        if not self._released:
            return False
        if self.state is TaskState.FINISHED:
            return True
        return (self.state in (TaskState.CANCELED, TaskState.FAILED) and self._closed_cleanly
                and not self._fatal)

    def _final_metrics(self) -> Dict[str, Any]:
        self._finished = time.monotonic()
        return self.metrics()

    def _failure(self, e: BaseException) -> TaskFailure:
        failure = describe_failure(self.tdd.display_name, e)
        if self._restoring:
            failure.restoring_checkpoint = self.tdd.restore_checkpoint_id
        return failure

    def _check_cancel(self) -> None:
        if self._cancelled.is_set():
            raise TaskCancelled()

    # -- setup -------------------------------------------------------------------------
    def _setup(self) -> None:
        tdd = self.tdd
        config = Configuration(tdd.config)
        try:
            plan: TaskPlan = cloudpickle.loads(tdd.plan_bytes)
        except Exception as e:
            raise RuntimeError(
                f"task {tdd.display_name}: cannot load the job's functions: "
                f"{type(e).__name__}: {e}"
            ) from e
        if tdd.output_committed:  # a re-run: its sinks committed everything already
            plan.operators = stand_in_for_committed_sinks(plan.operators)
            log.info("flowray: %s runs again for its other outputs; its sinks committed "
                     "their records in an earlier attempt and drop them now",
                     tdd.display_name)
        self.plan = plan
        backend = (
            create_keyed_backend(
                tdd.config,
                tdd.key_group_range,
                tdd.max_parallelism,
                tdd.job_id,
                tdd.subtask.key,
                tdd.attempt,
            )
            if plan.keyed
            else None
        )
        self.keyed_backend = backend
        if backend is not None:
            backend.ttl_clock = self.clock  # state TTL counts the task's processing time
            backend.queryable = QueryableStates(backend, tdd.restore_checkpoint_id or 0)
        self.timers = ProcessingTimeService(self.clock)
        ctx = OperatorContext(
            task_name=tdd.vertex_name,
            subtask_index=tdd.subtask.index,
            parallelism=tdd.parallelism,
            max_parallelism=tdd.max_parallelism,
            key_group_range=tdd.key_group_range,
            processing_time_service=self.timers,
            attempt_number=tdd.attempt,
            keyed_backend=backend,
            open_driver_channel=self._open_driver_channel,
            batch_execution=self.batch_execution,
            auto_watermark_interval_ms=config.get(AUTO_WATERMARK_INTERVAL),
            config=dict(tdd.config),
            job_id=tdd.job_id,
            job_parameters=config.get(GLOBAL_JOB_PARAMETERS),  # ExecutionConfig's
            # operators with work in other threads (async I/O) hand results back through
            # the mailbox and give up waiting when the task is cancelled
            services={"mailbox": self.submit, "cancelled": self._cancelled.is_set},
            metrics=self.metrics_group,
        )
        if self.metrics_group is not None:
            self.io_metrics = TaskIOMetrics(
                self.metrics_group, records_in=lambda: self.records_in,
                records_out=self._records_out, bytes_in=self._bytes_in,
                bytes_out=self._bytes_out, idle_ms=lambda: self.idle_ms,
                back_pressured_ms=self.back_pressured_ms,
                running_ms=lambda t0=self.clock.monotonic_ms(): self.clock.monotonic_ms() - t0)
            # the last checkpoint at this task, in ns (Flink's names and units)
            self.metrics_group.gauge("checkpointAlignmentTime",
                                     lambda: int(self.last_alignment_ms * 1e6))
            self.metrics_group.gauge("checkpointStartDelayNanos",
                                     lambda: int(self.last_start_delay_ms * 1e6))

        # the head of a cycle accepts its inputs first, the others connect their outputs
        # first: so the tasks of a loop, each waiting on the next, do not wait in a ring
        if self._feedback_ids:
            self._open_inputs()
            self._open_outputs(plan)
        else:
            self._open_outputs(plan)
            if tdd.inputs:
                self._open_inputs()
        self.unaligned = self.unaligned_enabled and (self._unaligned_forced or not (
            self._iteration_head or self._loop_inputs or self._loop_outputs
            or any(i.aligned_only for i in tdd.inputs)))
        if self.unaligned:
            self.unaligned_channels = UnalignedChannels(self)
        if tdd.inputs:
            self.barrier_handler = create_barrier_handler(
                self.checkpointing_mode, [i.channel_id for i in tdd.inputs if not i.feedback],
                self.clock, unaligned=self.unaligned, aligned_timeout_ms=self._aligned_timeout_ms)
        self._check_cancel()

        self.operators, self.head = wire_operator_chain(plan, ctx, self.record_writers,
                                                        self.clock,
                                                        self._local_feedback_output())
        if self.metrics_group is not None:
            for op in self.operators:
                group = self.metrics_group.operator_group(op.name)
                register_operator_metrics(group, op)
                group.gauge("stateSize", lambda op=op: self.operator_state_size(op))
        self._restoring = self.tdd.restore is not None
        self._initialize_state()
        self._restoring = False
        for op in reversed(self.operators):
            op.open()
            self._opened.append(op)
        if backend is not None:
            backend.queryable.mark_opened()

    def operator_state_size(self, op: Any) -> int:
        """Bytes of ``op``'s state in this subtask's latest acknowledged snapshot (0 before
        the first, and for an operator without state)."""
        checkpointer = getattr(self, "checkpointer", None)
        if checkpointer is None:
            return 0
        return checkpointer.operator_state_sizes.get(op.uid, 0)

    # -- queryable state ---------------------------------------------------------------
    def query_state(self, name: str, key: Any, committed: bool,
                    timeout_s: float = 10.0) -> Tuple[int, Any]:
        """``(checkpoint id, value)`` of ``key`` in the state queryable as ``name``:
        committed, as of the latest completed checkpoint (id > 0; any thread), or live
        (id -1; read on the task thread through the mailbox). Raises
        ``UnknownQueryableStateError``, or ``TimeoutError`` if the task thread does not
        come to it (it is blocked, or ended)."""
        backend = getattr(self, "keyed_backend", None)
        queryable = backend.queryable if backend is not None else None
        if queryable is None:
            raise UnknownQueryableStateError(
                f"task {self.tdd.display_name} has no keyed state, so no queryable state "
                f"{name!r}")
        if committed:
            return queryable.committed_value(name, key)
        done = threading.Event()
        answer: Dict[str, Any] = {}

        def read() -> None:
            try:
                answer["value"] = queryable.live_value(name, key)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                answer["error"] = e
            done.set()
        self.submit(read)
        if not done.wait(timeout_s):
            raise TimeoutError(f"task {self.tdd.display_name} did not read its state within "
                               f"{timeout_s:.0f} s")
        if "error" in answer:
            raise answer["error"]
        return -1, answer["value"]

    def _partitions(self) -> BlockingPartitionStore:
        store = getattr(self, "_partition_store", None)
        if store is None:
            root = Configuration(self.tdd.config).get(BLOCKING_PARTITIONS_DIR)
            store = self._partition_store = BlockingPartitionStore(root, self.tdd.job_id)
        return store

    def _open_inputs(self) -> None:
        """Pipelined inputs from the environment, blocking ones from their files."""
        tdd = self.tdd
        pipelined = [i.channel_id for i in tdd.inputs if not i.blocking]
        blocking = [i.channel_id for i in tdd.inputs if i.blocking]
        readers: Dict[str, ChannelReader] = {}
        gate: Optional[InputGate] = None
        if pipelined:
            readers, gate = self.env.open_inputs(pipelined, self._cancelled.is_set)
        if blocking:
            readers = dict(readers)
            for cid in blocking:
                readers[cid] = self._partitions().reader(cid)
            gate = MixedInputGate(gate)
        self.readers, self.gate = readers, gate

    def _initialize_state(self) -> None:
        """Restore keyed and operator state (if any), then each operator's own state."""
        tdd = self.tdd
        restore: Optional[TaskRestore] = tdd.restore
        storage = None
        if self.checkpointing or restore is not None:
            storage = checkpoint_storage_from_config(Configuration(tdd.config), tdd.job_id)
        self._storage = storage
        read, checksums = checkpoint_reader(storage, restore)
        restore_keyed_state(self.keyed_backend, restore, read)
        stores = initialize_operator_state(self.operators, restore, self.keyed_backend, read,
                                           tdd.parallelism, tdd.subtask.index)
        self.requires_final_checkpoint = any(
            op.commits_on_checkpoint_complete for op in self.operators)
        self.checkpointer = SubtaskCheckpointCoordinator(
            tdd.subtask,
            self.operators,
            stores,
            self.keyed_backend,
            self.head.uid if self.keyed_backend is not None else None,
            lambda: self._storage,
            self.env.responder,
            Configuration(tdd.config).get(MEMORY_THRESHOLD),
            checksums,
        )

    def _open_outputs(self, plan: TaskPlan) -> None:
        tdd = self.tdd
        for out in tdd.outputs:
            if out.blocking:  # BATCH: the whole output goes to files, read later
                writers = [self._partitions().writer(cid) for cid, _ in out.channels]
            else:
                writers = [self._open_output_writer(cid, consumer)
                           for cid, consumer in out.channels]
            self.record_writers[out.edge_id] = RecordWriter(
                plan.partitioners[out.edge_id], writers, tdd.subtask.index, self.batch_size,
                self.batch_bytes, INITIAL_BATCH if self.debloating else None,
                self.buffer_timeout_ms if out.buffer_timeout_ms is None
                else out.buffer_timeout_ms,
            )

    def _open_output_writer(self, channel_id: str, consumer: Any) -> Any:
        return self.env.open_output(channel_id, consumer)

    def _open_driver_channel(self, endpoint_id: str) -> DriverChannel:
        cid = f"driver:{endpoint_id}/{self.tdd.subtask.key}"
        ch = DriverChannel(self.env.open_driver_channel(endpoint_id, cid))
        self._driver_channels.append(ch)
        return ch

    # -- the loops ---------------------------------------------------------------------
    def _housekeeping(self) -> float:
        """Run mailbox actions, due timers and due flushes; seconds until the next duty."""
        self._loop_turn_ms = self.clock.monotonic_ms()
        self._wakeup.clear()
        while self._mailbox:
            self._mailbox.popleft()()
        self.timers.fire_due()
        wait = self.MAX_WAIT_S
        now = self.clock.monotonic_ms()
        for rw in self.record_writers.values():
            left = rw.flush_if_due(now)
            if left is not None:
                wait = min(wait, left / 1000.0)
        deadline = self.timers.next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, (deadline - self.clock.now_ms()) / 1000.0))
        return wait

    def _run_source(self) -> None:
        head = self.head
        assert isinstance(head, SourceOperator)
        batch_size = self.batch_size
        self._loop_turn_ms = self.clock.monotonic_ms()
        writers = list(self.record_writers.values()) if self.debloating else []
        unaligned = self.unaligned_channels
        pacer = ThinPollPacer.for_buffer_timeout(min(
            (rw.buffer_timeout_ms for rw in self.record_writers.values()
             if rw.buffer_timeout_ms >= 0), default=-1))
        while not self.finished_on_restore and self._stop_mode == END_OF_INPUT:
            self._check_cancel()
            if unaligned is not None and not unaligned.outputs_available():
                unaligned.await_outputs(())
                continue
            # debloated outputs: emit about a batch per channel at a time, so a trigger
            # waiting in the mailbox is not held behind a long back-pressured write
            asked = (max(1, min(batch_size, *(rw.capacity() for rw in writers)))
                     if writers else batch_size)
            n = head.emit_next(asked)
            if n is None:
                break
            self.records_in += n
            wait = self._housekeeping()
            # nothing: wait for the source to have records; a thin poll (records trickle
            # in): wait a little for more to arrive, off the core the tasks downstream need
            pause = self.IDLE_SOURCE_WAIT_S if n == 0 else 0.0
            pause = max(pause, pacer.after_poll(n, asked))
            if pause:
                t0 = self.clock.monotonic_ms()
                self._wakeup.wait(min(wait, pause))
                self.idle_ms += self.clock.monotonic_ms() - t0
        self._housekeeping()  # a trigger that arrived meanwhile goes before end-of-partition
        if not self.finished_on_restore and self._stop_mode != STOP_NO_DRAIN:
            head.end_of_input()

    def _run_inputs(self) -> None:
        tdd, head = self.tdd, self.head
        input_of = {i.channel_id: i.input_index for i in tdd.inputs}
        channels_of_input: Dict[int, List[str]] = {}
        for i in tdd.inputs:
            if not i.feedback:
                channels_of_input.setdefault(i.input_index, []).append(i.channel_id)
        feedback = self._feedback_ids
        head_of_loop = self._iteration_head
        loop_inputs = self._loop_inputs
        in_loop = head_of_loop or bool(loop_inputs)
        valves = {idx: WatermarkValve(chs) for idx, chs in channels_of_input.items()}
        open_channels = {idx: len(chs) for idx, chs in channels_of_input.items()}
        process = {0: head.process_batch, 1: head.process_batch2}
        handler = self.barrier_handler
        assert handler is not None
        live = list(self.readers.values())  # not ended
        self._active = live
        gate = self.gate
        skip_records = self.finished_on_restore
        self._loop_turn_ms = self.clock.monotonic_ms()
        # BATCH: an operator may ask for one input to be read to its end first (its
        # producers have finished: BATCH exchanges into a two-input operator are blocking
        # unless forward, and a forward producer just waits meanwhile)
        first = head.batch_first_input if self.batch_execution else None
        debloater = self._make_debloater()
        monotonic_ms = self.clock.monotonic_ms

        # (an iteration head goes on while its loop holds records, even with no channel
        # left: a loop closed inside its own chain has none)
        unaligned = self.unaligned_channels
        self._replay_in_flight(process, live)   # channel state of an unaligned checkpoint
        while live or (head_of_loop and not self._input_ended):
            self._check_cancel()
            if unaligned is not None:   # a barrier overtakes what is queued; outputs first
                unaligned.turn(live)
                if not unaligned.outputs_available():
                    unaligned.await_outputs(live)
                    continue
            wait = self._housekeeping()
            if head_of_loop:   # an iteration head: its queue, its probes, its end
                wait = min(wait, self._iteration_turn())
                regular = self._reads_regular_input()
                active = [r for r in live if r.channel_id in feedback
                          or (regular and not handler.is_blocked(r.channel_id))]
            else:
                active = [r for r in live if not handler.is_blocked(r.channel_id)]
            if first is not None and open_channels.get(first, 0) > 0:
                active = [r for r in active if input_of[r.channel_id] == first]
            if debloater is not None:  # (debloating measures busy time)
                size = debloater.update(monotonic_ms(), self.records_in, self.idle_ms,
                                        len(live))
                if size is not None:
                    for r in live:
                        r.announce_batch_size(size)
            t0 = monotonic_ms()
            if in_loop and active:
                # in a cycle a record waiting for the buffer timeout waits at every hop of
                # every round: out with what is pending before the task goes idle
                ready = gate.wait(active, 0.0)
                if not ready:
                    for rw in self.record_writers.values():
                        if rw.pending_since_ms is not None:
                            rw.flush()
                    ready = gate.wait(active, wait)
            else:
                ready = gate.wait(active, wait) if active else []
            self.idle_ms += monotonic_ms() - t0
            for reader in ready:
                cid = reader.channel_id
                if cid in feedback:
                    if self._read_feedback(reader):
                        live.remove(reader)
                    continue
                idx = input_of[cid]
                for i in range(self.FRAMES_PER_TURN):
                    # a mailbox action (a query, a trigger) waits at most one frame per
                    # input; each ready input still moves a frame per turn (no starving)
                    if handler.is_blocked(cid) or (i and self._mailbox):
                        break
                    frame = reader.poll()
                    if frame is None:
                        if unaligned is not None and reader.priority_pending():
                            unaligned.barrier_found()
                        break
                    # progress is a frame, not a whole turn: a turn of several full
                    # batches through a slow function is not a hang
                    self._loop_turn_ms = monotonic_ms()
                    t = type(frame)
                    if t is RecordBatch:
                        if skip_records:
                            continue
                        self.records_in += len(frame.records)
                        if in_loop and cid in loop_inputs:
                            self._loop_received += len(frame.records)
                        if unaligned is not None:   # a barrier waits for no slow batch
                            unaligned.process_in_slices(process[idx], frame, cid, live)
                        else:
                            process[idx](frame.records, frame.key_groups, frame.timestamps)
                    elif t is Watermark:
                        wm = valves[idx].on_watermark(cid, frame.timestamp)
                        if wm is not None and not skip_records:
                            head.process_watermark(wm, idx)
                    elif t is WatermarkStatus:
                        wm, idle = valves[idx].on_status(cid, frame.idle)
                        if not skip_records:
                            if wm is not None:
                                head.process_watermark(wm, idx)
                            if idle is not None:
                                head.process_watermark_status(idle, idx)
                    elif t is EndOfPartition:
                        live.remove(reader)
                        if unaligned is not None:
                            unaligned.on_end_of_partition(reader)
                        wm = valves[idx].on_end_of_partition(cid)
                        idle = valves[idx].status_change()
                        self._stop_mode = max(self._stop_mode, frame.stop_mode)
                        # stopped without drain: nothing moves on (no watermark, no
                        # end of input), the state waits for the savepoint
                        if not skip_records and self._stop_mode != STOP_NO_DRAIN:
                            if wm is not None:
                                head.process_watermark(wm, idx)
                            if idle is not None:
                                head.process_watermark_status(idle, idx)
                        open_channels[idx] -= 1
                        if open_channels[idx] == 0 and not skip_records and \
                                self._stop_mode != STOP_NO_DRAIN:
                            head.end_input(idx)
                        self._apply(handler.on_end_of_partition(cid))
                        break
                    elif t is CheckpointBarrier:
                        if unaligned is not None:   # (a producer without a priority path)
                            unaligned.on_in_band_barrier(reader, frame.checkpoint_id)
                        self._apply(handler.on_barrier(cid, frame))
                    elif t is CancelCheckpointMarker:
                        self._apply(handler.on_cancel_marker(cid, frame.checkpoint_id))
                    else:
                        raise RuntimeError(f"unexpected frame {frame!r} on {cid}")

    # -- iterations (an iteration head overrides these: IterationHeadTask) --------------
    def _local_feedback_output(self) -> Any:
        """Where a loop's feedback produced in this task's chain goes (None: no loop)."""
        return None

    def _iteration_turn(self) -> float:
        """An iteration head's own work in a turn; seconds it may wait for input."""
        return self.MAX_WAIT_S

    def _reads_regular_input(self) -> bool:
        return True

    def _read_feedback(self, reader: ChannelReader) -> bool:
        raise RuntimeError(f"task {self.tdd.display_name} has no back edge")

    def report_loop_counters(self, iteration: str, wave: int) -> None:
        """The job master's termination wave (any thread): the task answers with its
        :class:`LoopCounters`, read on its thread between two records."""
        self.submit(lambda: self.env.responder.loop_counters(
            self.tdd.subtask, iteration, wave, self.loop_counters()))

    def loop_counters(self) -> LoopCounters:
        """(task thread)"""
        sent = sum(self.record_writers[eid].records_out for eid in self._loop_outputs)
        return LoopCounters(sent, self._loop_received, self._loop_idle())

    def _loop_idle(self) -> bool:
        return True   # a body task acts only on what it reads

    def end_loop(self) -> None:
        """The job master found this task's loop empty: an iteration head ends its
        output (any thread)."""
        self.submit(self._end_loop)

    def _end_loop(self) -> None:
        pass

    def _make_debloater(self) -> Optional[BufferDebloater]:
        """This task's input-side debloater (None when debloating is off or every input
        is a blocking partition)."""
        if not self.debloating or all(i.blocking for i in self.tdd.inputs):
            return None
        config = Configuration(self.tdd.config)
        return BufferDebloater(
            target_ms=config.get(DEBLOAT_TARGET), period_ms=config.get(DEBLOAT_PERIOD),
            samples=config.get(DEBLOAT_SAMPLES), threshold_pct=config.get(DEBLOAT_THRESHOLD),
            max_batch=self.batch_size, credits=config.get(CHANNEL_CREDITS),
            initial=INITIAL_BATCH)

    def _request_stop(self, stop_mode: int) -> None:
        if self.barrier_handler is None and not self._input_ended:  # a source task
            self._stop_mode = max(self._stop_mode, stop_mode)
            self._wakeup.set()

    def _replay_in_flight(self, process: Dict[int, Callable[..., None]], live: Any) -> None:
        """Restored channel state goes through the operators before any live input."""
        restore = self.tdd.restore
        recovered = getattr(restore, "in_flight", None) if restore is not None else None
        if not recovered or self.finished_on_restore:
            return
        if self.unaligned_channels is not None:   # checkpoints go on meanwhile
            self.unaligned_channels.replay(recovered, process, live)
        else:
            self.records_in += replay_in_flight(recovered, process)

    # -- checkpoints (task thread) -------------------------------------------------------
    def _apply(self, actions: List[Any]) -> None:
        for action in actions:
            if isinstance(action, TriggerCheckpoint):
                if action.unaligned:
                    self._unaligned().perform_checkpoint(action)
                else:
                    self._perform_checkpoint(action.barrier, action.alignment_ms)
            elif isinstance(action, ChannelStateComplete):
                pass   # the recording completed itself as its last input arrived
            elif isinstance(action, AbortCheckpoint):
                cid = action.checkpoint_id
                if self.unaligned_channels is not None:
                    self.unaligned_channels.stop_recording(cid)
                if not self._input_ended:
                    for rw in self.record_writers.values():
                        rw.broadcast_event(CancelCheckpointMarker(cid))
                self.checkpointer.decline(cid, decline_reason(action.reason), action.reason.value)

    def _on_direct_trigger(self, barrier: CheckpointBarrier) -> None:
        if self.barrier_handler is None:  # a source task
            if barrier.checkpoint_id > self.checkpointer.last_checkpoint_id:
                # with an aligned-checkpoint timeout a source's barrier starts aligned, in
                # band; a task downstream switches once it is old enough
                if self.unaligned and not barrier.is_savepoint and \
                        not self._aligned_timeout_ms:
                    self._unaligned().perform_checkpoint(TriggerCheckpoint(barrier, 0.0, True))
                else:
                    self._perform_checkpoint(barrier, 0.0)
        else:
            self._apply(
                self.barrier_handler.on_direct_trigger(
                    barrier.checkpoint_id, barrier.timestamp, barrier.is_savepoint,
                    barrier.location,
                )
            )

    def _perform_checkpoint(self, barrier: CheckpointBarrier, alignment_ms: float) -> None:
        self.last_alignment_ms = alignment_ms
        self.last_start_delay_ms = max(0.0, float(self.clock.now_ms() - barrier.timestamp))
        if not self._input_ended:
            for rw in self.record_writers.values():
                rw.broadcast_event(barrier)
        self._snapshot(barrier, alignment_ms)

    def _unaligned(self) -> UnalignedChannels:
        channels = self.unaligned_channels
        assert channels is not None, "an unaligned checkpoint at an aligned task"
        return channels

    def _snapshot(self, barrier: CheckpointBarrier, alignment_ms: float,
                  input_ended: Optional[bool] = None,
                  in_flight: Optional[Future] = None) -> None:
        """The checkpoint's synchronous part at this task, after the barrier went on;
        ``input_ended``: whether the input had ended when the barrier passed (default:
        now); ``in_flight``: the channel state of an unaligned checkpoint, to come."""
        if self.keyed_backend is not None:
            self.keyed_backend.queryable.on_checkpoint(barrier.checkpoint_id)
        ended = self._input_ended if input_ended is None else input_ended
        self.checkpointer.checkpoint(barrier, alignment_ms, ended,
                                     drained=self._stop_mode != STOP_NO_DRAIN,
                                     in_flight=in_flight)
        # a stopping task ends with the savepoint of the stop, no other checkpoint
        final = barrier.is_savepoint if self._stop_mode != END_OF_INPUT else True
        if self._input_ended and self._final_checkpoint is None and final:
            self._final_checkpoint = barrier.checkpoint_id

    def _on_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.keyed_backend is not None:
            self.keyed_backend.notify_checkpoint_complete(checkpoint_id)
            self.keyed_backend.queryable.on_complete(checkpoint_id)
        for op in self.operators:
            op.notify_checkpoint_complete(checkpoint_id)
        if self._final_checkpoint is not None and checkpoint_id >= self._final_checkpoint:
            self._final_checkpoint_done = True

    def _on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.unaligned_channels is not None:
            self.unaligned_channels.stop_recording(checkpoint_id)
        if self.keyed_backend is not None:
            self.keyed_backend.notify_checkpoint_aborted(checkpoint_id)
        for op in self.operators:
            op.notify_checkpoint_aborted(checkpoint_id)

    # -- the end -----------------------------------------------------------------------
    def _end_input(self) -> None:
        """Every input ended: finish the operators (not when stopped without drain) and
        send end-of-partition downstream."""
        if not self.finished_on_restore and self._stop_mode != STOP_NO_DRAIN:
            for op in self.operators:
                op.finish()
        for rw in self.record_writers.values():
            rw.broadcast_event(EndOfPartition(self._stop_mode))
        self._input_ended = True

    def _await_final_checkpoint(self) -> None:
        """Two-phase-commit operators commit their last transaction before the task ends:
        with checkpointing, once a checkpoint taken after the end of input completes;
        without, right away."""
        stopping = self._stop_mode != END_OF_INPUT  # every task waits for the savepoint
        if (not self.requires_final_checkpoint and not stopping) or self.finished_on_restore:
            return
        if not self.checkpointing and not stopping:
            for op in self.operators:
                commit = getattr(op, "commit_on_end_of_input", None)
                if callable(commit):
                    commit()
            return
        self.env.responder.task_ended_input(self.tdd.subtask)
        while not self._final_checkpoint_done:
            self._check_cancel()
            wait = self._housekeeping()
            if not self._final_checkpoint_done:
                self._wakeup.wait(wait)

    def _close_operators(self) -> None:
        for ch in self._driver_channels:
            ch.close()
        while self._opened:  # the head first, the operator opened last
            self._opened.pop().close()
        if self.unaligned_channels is not None:   # an input never sent its barrier: no ack
            self.unaligned_channels.stop_recording(None)
        if self.checkpointer is not None:
            self.checkpointer.close(wait=True)

    def _await_consumers(self) -> None:
        """Before the connections close: every consumer has taken every frame (closing a
        TCP connection earlier may lose them; see ``ChannelWriter.await_taken``). With
        unaligned checkpoints the mailbox runs meanwhile: a checkpoint does not wait for
        the consumers' backlog."""
        if self.unaligned_channels is not None and not self._cancelled.is_set():
            self.unaligned_channels.await_consumers(CONSUMER_DRAIN_TIMEOUT_S)
        for rw in self.record_writers.values():
            rw.await_taken(CONSUMER_DRAIN_TIMEOUT_S)
        for ch in self._driver_channels:
            ch.writer.await_taken(CONSUMER_DRAIN_TIMEOUT_S)

    def _close_after_abort(self) -> bool:
        """After a cancel or a failure: close the operators that were opened, as Flink
        calls ``close()`` then too (what ``open()`` took is given back: connections,
        threads, transactions not pre-committed are aborted). Nothing is flushed
        (``finish()`` is not called). An error is logged and the next operator closed.
        True if every operator closed without one."""
        clean = True
        while self._opened:
            op = self._opened.pop()
            try:
                op.close()
            except BaseException as e:  # noqa: BLE001 - the task ends either way
                clean = False
                log.info("flowray: %s: closing %s after the task was %s raised %s: %s",
                         self.tdd.display_name, op.name,
                         "cancelled" if self.state is TaskState.CANCELED else "failed",
                         type(e).__name__, e)
        return clean

    def _release(self) -> None:
        if self.state is not TaskState.FINISHED:
            self._closed_cleanly = self._close_after_abort()
        # a checkpoint still recording channel state is over: its ack waits no more
        channels, self.unaligned_channels = self.unaligned_channels, None
        if channels is not None:
            channels.close()
        for rw in self.record_writers.values():
            rw.close()
        for r in self.readers.values():
            r.close()
        gate = getattr(self, "gate", None)
        if gate is not None:
            gate.close()
        for ch in self._driver_channels:
            ch.close()
        if self.checkpointer is not None:
            # a finished task's snapshots end with it (its actor may host another task)
            self.checkpointer.close(wait=self.state is TaskState.FINISHED)
        if getattr(self, "keyed_backend", None) is not None:
            # a finished subtask is never restored; a failed or cancelled one may be
            self.keyed_backend.dispose(discard_local_state=self.state is TaskState.FINISHED)
        self._released = True
