"""One subtask's life: build the operator chain, read inputs, run operators, write outputs.

Pure of Ray: the shell (a Ray actor, or a thread in the local executor) supplies a
:class:`TaskEnvironment` with channels. The task runs in one thread; other threads talk to
it only through :meth:`StreamTask.cancel` and the mailbox (actions run between batches).
"""

from __future__ import annotations

import abc
import enum
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import cloudpickle

from flowray.operators.base import (
    BroadcastingOutput,
    ChainedOutput,
    OperatorContext,
    Output,
    ProcessingTimeService,
    StreamOperator,
    UserFunctionError,
)
from flowray.operators.sources import SourceOperator
from flowray.state.heap import HeapKeyedStateBackend

from .channels import ChannelReader, ChannelWriter, InputGate
from .clock import Clock, SystemClock
from .config import BUFFER_TIMEOUT, CHANNEL_BATCH_SIZE, Configuration
from .elements import (
    MAX_WATERMARK,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    RecordBatch,
    Watermark,
)
from .execution_graph import SubtaskId, TaskDeploymentDescriptor
from .graph import TaskPlan
from .partitioners import KeySelectorError, RecordWriter
from .watermarks import WatermarkValve

__all__ = ["TaskState", "TaskFailure", "TaskResult", "TaskEnvironment", "StreamTask",
           "TaskCancelled", "DriverChannel"]


class TaskState(enum.Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    FAILED = "FAILED"


class TaskCancelled(Exception):
    pass


@dataclass
class TaskFailure:
    """Why a task failed: where (task, operator) and what (cause and its traceback)."""

    task: str
    operator: Optional[str]
    cause_type: str
    message: str
    traceback_text: str
    user_code: bool

    def describe(self) -> str:
        where = f"operator {self.operator!r} in task {self.task!r}" if self.operator \
            else f"task {self.task!r}"
        return f"{where} failed: {self.cause_type}: {self.message}"


@dataclass
class TaskResult:
    subtask: SubtaskId
    state: TaskState
    failure: Optional[TaskFailure] = None
    metrics: Dict[str, Any] = field(default_factory=dict)


class DriverChannel:
    """Records from a task to the driver (print/collect), over a channel writer."""

    def __init__(self, writer: ChannelWriter) -> None:
        self.writer = writer

    def send(self, records: List[Any]) -> None:
        if records:
            self.writer.write(RecordBatch(records))

    def end(self) -> None:
        self.writer.write(EndOfPartition())

    def close(self) -> None:
        self.writer.close()


class TaskEnvironment(abc.ABC):
    """What the shell gives a task: channels and a clock."""

    clock: Clock = SystemClock()

    @abc.abstractmethod
    def open_output(self, channel_id: str, consumer: SubtaskId) -> ChannelWriter: ...

    @abc.abstractmethod
    def open_inputs(self, channel_ids: List[str], should_stop: Callable[[], bool]
                    ) -> Tuple[Dict[str, ChannelReader], InputGate]: ...

    @abc.abstractmethod
    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter: ...


class _WriterOutput(Output):
    __slots__ = ("writer", "clock")

    def __init__(self, writer: RecordWriter, clock: Clock) -> None:
        self.writer = writer
        self.clock = clock

    def emit(self, records: List[Any]) -> None:
        self.writer.emit(records, self.clock.monotonic_ms())

    def emit_watermark(self, timestamp: int) -> None:
        self.writer.broadcast_event(Watermark(timestamp))


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
        self.buffer_timeout_ms = config.get(BUFFER_TIMEOUT)
        self.state = TaskState.CREATED
        self._cancelled = threading.Event()
        self._mailbox: Deque[Callable[[], None]] = deque()
        self.records_in = 0
        self.operators: List[StreamOperator] = []
        self.record_writers: Dict[str, RecordWriter] = {}
        self.readers: Dict[str, ChannelReader] = {}
        self._driver_channels: List[DriverChannel] = []
        self._started = 0.0
        self._finished = 0.0

    # -- control (any thread) ----------------------------------------------------------
    def cancel(self) -> None:
        self._cancelled.set()

    def submit(self, action: Callable[[], None]) -> None:
        """Run ``action`` in the task thread between two batches (Flink's mailbox)."""
        self._mailbox.append(action)

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
        }

    # -- life cycle --------------------------------------------------------------------
    def run(self) -> TaskResult:
        self._started = time.monotonic()
        self.state = TaskState.RUNNING
        try:
            self._setup()
            if self.tdd.num_inputs == 0:
                self._run_source()
            else:
                self._run_inputs()
            self._end()
            self.state = TaskState.FINISHED
            return TaskResult(self.tdd.subtask, TaskState.FINISHED, None, self._final_metrics())
        except TaskCancelled:
            self.state = TaskState.CANCELED
            return TaskResult(self.tdd.subtask, TaskState.CANCELED, None, self._final_metrics())
        except BaseException as e:  # noqa: BLE001 - every failure becomes the result
            if self._cancelled.is_set():
                self.state = TaskState.CANCELED
                return TaskResult(self.tdd.subtask, TaskState.CANCELED, None,
                                  self._final_metrics())
            self.state = TaskState.FAILED
            return TaskResult(self.tdd.subtask, TaskState.FAILED, self._failure(e),
                              self._final_metrics())
        finally:
            self._release()

    def _final_metrics(self) -> Dict[str, Any]:
        self._finished = time.monotonic()
        return self.metrics()

    def _failure(self, e: BaseException) -> TaskFailure:
        task = self.tdd.display_name
        if isinstance(e, UserFunctionError):
            return TaskFailure(task, e.operator_name, e.cause_type, e.cause_message,
                               e.traceback_text, True)
        if isinstance(e, KeySelectorError):
            cause = e.cause
            return TaskFailure(task, "key_by key selector", type(cause).__name__, str(cause),
                               "".join(traceback.format_exception(type(cause), cause,
                                                                  cause.__traceback__)), True)
        return TaskFailure(task, None, type(e).__name__, str(e),
                           "".join(traceback.format_exception(type(e), e, e.__traceback__)),
                           False)

    def _check_cancel(self) -> None:
        if self._cancelled.is_set():
            raise TaskCancelled()

    # -- setup -------------------------------------------------------------------------
    def _setup(self) -> None:
        tdd = self.tdd
        try:
            plan: TaskPlan = cloudpickle.loads(tdd.plan_bytes)
        except Exception as e:
            raise RuntimeError(f"task {tdd.display_name}: cannot load the job's functions: "
                               f"{type(e).__name__}: {e}") from e
        self.plan = plan
        backend = (HeapKeyedStateBackend(tdd.key_group_range, tdd.max_parallelism)
                   if plan.keyed else None)
        self.keyed_backend = backend
        self.timers = ProcessingTimeService(self.clock)
        ctx = OperatorContext(
            task_name=tdd.vertex_name, subtask_index=tdd.subtask.index,
            parallelism=tdd.parallelism, max_parallelism=tdd.max_parallelism,
            key_group_range=tdd.key_group_range, processing_time_service=self.timers,
            attempt_number=tdd.attempt, keyed_backend=backend,
            open_driver_channel=self._open_driver_channel)

        for out in tdd.outputs:
            writers = [self.env.open_output(cid, consumer) for cid, consumer in out.channels]
            self.record_writers[out.edge_id] = RecordWriter(
                plan.partitioners[out.edge_id], writers, tdd.subtask.index, self.batch_size)
        if tdd.inputs:
            self.readers, self.gate = self.env.open_inputs(
                [i.channel_id for i in tdd.inputs], self._cancelled.is_set)
        self._check_cancel()

        # wire outputs tail-first so every operator's output exists when it is set up
        order = self._chain_order(plan)
        for node_id in reversed(order):
            outputs: List[Output] = [ChainedOutput(plan.operators[c])
                                     for c in plan.chained.get(node_id, [])]
            outputs += [_WriterOutput(self.record_writers[eid], self.clock)
                        for eid in plan.network_outputs.get(node_id, [])]
            output = outputs[0] if len(outputs) == 1 else BroadcastingOutput(outputs)
            plan.operators[node_id].setup(ctx, output)
        self.operators = [plan.operators[n] for n in order]
        self.head = plan.operators[plan.head]
        for op in reversed(self.operators):
            op.open()

    @staticmethod
    def _chain_order(plan: TaskPlan) -> List[int]:
        order, stack = [], [plan.head]
        while stack:
            n = stack.pop(0)
            order.append(n)
            stack.extend(plan.chained.get(n, []))
        return order

    def _open_driver_channel(self, endpoint_id: str) -> DriverChannel:
        cid = f"driver:{endpoint_id}/{self.tdd.subtask.key}"
        ch = DriverChannel(self.env.open_driver_channel(endpoint_id, cid))
        self._driver_channels.append(ch)
        return ch

    # -- the loops ---------------------------------------------------------------------
    def _housekeeping(self) -> float:
        """Run mailbox actions, due timers and due flushes; seconds until the next duty."""
        while self._mailbox:
            self._mailbox.popleft()()
        self.timers.fire_due()
        wait = self.MAX_WAIT_S
        now = self.clock.monotonic_ms()
        timeout = self.buffer_timeout_ms
        for rw in self.record_writers.values():
            since = rw.pending_since_ms
            if since is not None:
                left = since + timeout - now
                if left <= 0:
                    rw.flush()
                else:
                    wait = min(wait, left / 1000.0)
        deadline = self.timers.next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, (deadline - self.clock.now_ms()) / 1000.0))
        return wait

    def _run_source(self) -> None:
        head = self.head
        assert isinstance(head, SourceOperator)
        batch_size = self.batch_size
        while True:
            self._check_cancel()
            n = head.emit_next(batch_size)
            if n is None:
                break
            self.records_in += n
            wait = self._housekeeping()
            if n == 0:
                time.sleep(min(wait, self.IDLE_SOURCE_WAIT_S))
        head.output.emit_watermark(MAX_WATERMARK)

    def _run_inputs(self) -> None:
        tdd, head = self.tdd, self.head
        input_of = {i.channel_id: i.input_index for i in tdd.inputs}
        channels_of_input: Dict[int, List[str]] = {}
        for i in tdd.inputs:
            channels_of_input.setdefault(i.input_index, []).append(i.channel_id)
        valves = {idx: WatermarkValve(chs) for idx, chs in channels_of_input.items()}
        open_channels = {idx: len(chs) for idx, chs in channels_of_input.items()}
        process = {0: head.process_batch, 1: head.process_batch2}
        active = list(self.readers.values())
        gate = self.gate

        while active:
            self._check_cancel()
            wait = self._housekeeping()
            ready = gate.wait(active, wait)
            for reader in ready:
                cid = reader.channel_id
                idx = input_of[cid]
                for _ in range(self.FRAMES_PER_TURN):
                    frame = reader.poll()
                    if frame is None:
                        break
                    t = type(frame)
                    if t is RecordBatch:
                        self.records_in += len(frame.records)
                        process[idx](frame.records, frame.key_groups)
                    elif t is Watermark:
                        wm = valves[idx].on_watermark(cid, frame.timestamp)
                        if wm is not None:
                            head.process_watermark(wm, idx)
                    elif t is EndOfPartition:
                        active.remove(reader)
                        wm = valves[idx].on_end_of_partition(cid)
                        if wm is not None:
                            head.process_watermark(wm, idx)
                        open_channels[idx] -= 1
                        if open_channels[idx] == 0:
                            head.end_input(idx)
                        break
                    elif t in (CheckpointBarrier, CancelCheckpointMarker):
                        self.on_checkpoint_event(frame, cid)
                    else:
                        raise RuntimeError(f"unexpected frame {frame!r} on {cid}")

    def on_checkpoint_event(self, frame: Any, channel_id: str) -> None:
        """Checkpoint barriers arrive with the checkpoint issue; ignored until then."""

    def _end(self) -> None:
        for op in self.operators:
            op.finish()
        for rw in self.record_writers.values():
            rw.broadcast_event(EndOfPartition())
        for ch in self._driver_channels:
            ch.close()
        for op in self.operators:
            op.close()

    def _release(self) -> None:
        for rw in self.record_writers.values():
            rw.close()
        for r in self.readers.values():
            r.close()
        gate = getattr(self, "gate", None)
        if gate is not None:
            gate.close()
        for ch in self._driver_channels:
            ch.close()
        if getattr(self, "keyed_backend", None) is not None:
            self.keyed_backend.dispose()
