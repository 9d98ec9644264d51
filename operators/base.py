"""The operator lifecycle (Flink's ``StreamOperator``), outputs, and user-code errors.

Lifecycle, called by the task: ``setup(ctx, output)`` -> ``open()`` ->
``process_batch(...)`` / ``process_watermark(...)`` any number of times -> ``end_input()``
-> ``finish()`` -> ``close()``. An operator is a picklable definition until ``setup``;
each subtask unpickles its own copy.
"""

from __future__ import annotations

from flowray.common.constants import MIN_WATERMARK

import heapq
import itertools
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from flowray.state.keyed_backend import KeyedStateBackend
from flowray.state.key_groups import KeyGroupRange

from flowray.operators.functions import KEYED_STATE_METHODS, Function, RuntimeContext

__all__ = [
    "UserFunctionError",
    "Output",
    "ChainedOutput",
    "BroadcastingOutput",
    "CollectingOutput",
    "OperatorContext",
    "ProcessingTimeService",
    "StreamOperator",
    "OneInputOperator",
    "TwoInputOperator",
    "adapt_function",
    "open_function",
    "close_function",
    "iterate_result",
    "keyed_state_methods_used",
    "StateInitializationContext",
    "StateSnapshotContext",
    "CheckpointedFunction",
    "CheckpointListener",
]



class UserFunctionError(Exception):
    """User code raised. Carries the operator's name and the original traceback as text
    (the original exception may not survive pickling across processes)."""

    def __init__(self, operator_name: str, cause: BaseException,
                 subtask: Optional[str] = None) -> None:
        self.operator_name = operator_name
        self.cause_type = type(cause).__name__
        self.cause_message = str(cause)
        self.traceback_text = "".join(
            traceback.format_exception(type(cause), cause, cause.__traceback__))
        self.subtask = subtask
        #: False when the cause says a restart would fail the same way
        #: (e.g. :class:`~flowray.state.key_types.UnsupportedKeyError`)
        self.recoverable = getattr(cause, "recoverable", True) is not False
        super().__init__(f"operator {operator_name!r} raised {self.cause_type}: {cause}")

    def __reduce__(self):  # keep it picklable whatever the cause was
        return (_rebuild_user_error, (self.operator_name, self.cause_type, self.cause_message,
                                      self.traceback_text, self.subtask, self.recoverable))


def _rebuild_user_error(name, ctype, cmsg, tb, subtask, recoverable=True):
    err = UserFunctionError.__new__(UserFunctionError)
    err.operator_name, err.cause_type, err.cause_message = name, ctype, cmsg
    err.traceback_text, err.subtask, err.recoverable = tb, subtask, recoverable
    Exception.__init__(err, f"operator {name!r} raised {ctype}: {cmsg}")
    return err


class Output:
    """Where an operator's results go: chained operators and/or network writers.

    ``timestamps``, when given, holds each record's event time (``None`` for a record
    without one). ``emit_watermark_status(idle)`` tells downstream the output went idle (it
    holds no watermark back until it is active again).
    """

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        raise NotImplementedError

    def emit_watermark(self, timestamp: int) -> None:
        raise NotImplementedError

    def emit_watermark_status(self, idle: bool) -> None:
        pass


class ChainedOutput(Output):
    __slots__ = ("op",)

    def __init__(self, op: "StreamOperator") -> None:
        self.op = op

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        if records:
            self.op.process_batch(records, None, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        self.op.process_watermark(timestamp)

    def emit_watermark_status(self, idle: bool) -> None:
        self.op.process_watermark_status(idle)


class BroadcastingOutput(Output):
    def __init__(self, outputs: List[Output]) -> None:
        self.outputs = outputs

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        for o in self.outputs:
            o.emit(records, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        for o in self.outputs:
            o.emit_watermark(timestamp)

    def emit_watermark_status(self, idle: bool) -> None:
        for o in self.outputs:
            o.emit_watermark_status(idle)


class CollectingOutput(Output):
    """Keeps everything; for harnesses and tests. ``timestamps[i]`` belongs to
    ``records[i]`` (``None`` when it had none)."""

    def __init__(self) -> None:
        self.records: List[Any] = []
        self.timestamps: List[Any] = []
        self.watermarks: List[int] = []
        self.statuses: List[bool] = []

    def emit(self, records: List[Any], timestamps: Optional[List[Any]] = None) -> None:
        self.records.extend(records)
        self.timestamps.extend(timestamps if timestamps is not None else [None] * len(records))

    def emit_watermark(self, timestamp: int) -> None:
        self.watermarks.append(timestamp)

    def emit_watermark_status(self, idle: bool) -> None:
        self.statuses.append(idle)


class ProcessingTimeService:
    """Callbacks at wall-clock times, fired by the task loop (no threads of its own)."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._heap: List[Tuple[int, int, Callable[[int], None]]] = []
        self._seq = itertools.count()

    def current_processing_time(self) -> int:
        return self.clock.now_ms()

    def register_timer(self, timestamp: int, callback: Callable[[int], None]) -> None:
        heapq.heappush(self._heap, (timestamp, next(self._seq), callback))

    def next_deadline(self) -> Optional[int]:
        return self._heap[0][0] if self._heap else None

    def fire_due(self, now_ms: Optional[int] = None) -> int:
        now = self.clock.now_ms() if now_ms is None else now_ms
        fired = 0
        while self._heap and self._heap[0][0] <= now:
            ts, _, cb = heapq.heappop(self._heap)
            cb(ts)
            fired += 1
        return fired


class CheckpointedFunction:
    """Mix-in for user functions with operator state (Flink's ``CheckpointedFunction``).

    ``initialize_state(context)`` runs before ``open``: get list states from
    ``context.get_operator_state_store()`` (``get_list_state`` redistributes by even split
    on rescale, ``get_union_list_state`` gives every subtask everything) and check
    ``context.is_restored()``. ``snapshot_state(context)`` runs at each checkpoint's
    synchronous point: write what must survive into those list states.
    """

    def initialize_state(self, context: "StateInitializationContext") -> None:
        pass

    def snapshot_state(self, context: "StateSnapshotContext") -> None:
        pass


class CheckpointListener:
    """Mix-in: ``notify_checkpoint_complete(checkpoint_id)`` after a checkpoint completed
    (every task acknowledged and its metadata is written); ``notify_checkpoint_aborted``
    when it was given up. Both may be repeated or skipped for a checkpoint superseded by a
    later one: act on everything up to ``checkpoint_id``."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass


@dataclass
class StateInitializationContext:
    """Given to ``initialize_state``: the operator's state stores and whether it was
    restored from a checkpoint (``restored_checkpoint_id``)."""

    operator_state_store: Any
    keyed_state_backend: Optional[KeyedStateBackend] = None
    restored_checkpoint_id: Optional[int] = None

    def get_operator_state_store(self) -> Any:
        return self.operator_state_store

    def get_keyed_state_store(self) -> Optional[KeyedStateBackend]:
        return self.keyed_state_backend

    def is_restored(self) -> bool:
        return self.restored_checkpoint_id is not None

    def get_restored_checkpoint_id(self) -> Optional[int]:
        return self.restored_checkpoint_id


@dataclass(frozen=True)
class StateSnapshotContext:
    """Given to ``snapshot_state``: which checkpoint is being taken."""

    checkpoint_id: int
    checkpoint_timestamp: int

    def get_checkpoint_id(self) -> int:
        return self.checkpoint_id

    def get_checkpoint_timestamp(self) -> int:
        return self.checkpoint_timestamp


@dataclass
class OperatorContext:
    """Everything an operator instance may use from its task."""

    task_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    processing_time_service: ProcessingTimeService
    attempt_number: int = 0
    keyed_backend: Optional[KeyedStateBackend] = None
    job_parameters: Dict[str, Any] = field(default_factory=dict)
    open_driver_channel: Optional[Callable[[str], Any]] = None
    services: Dict[str, Any] = field(default_factory=dict)
    #: BATCH execution: inputs are bounded and complete; keyed aggregations emit only
    #: final values, timers fire at the end of input
    batch_execution: bool = False
    #: ``pipeline.auto-watermark-interval`` in ms (0: no periodic watermarks)
    auto_watermark_interval_ms: int = 200
    #: the job's configuration (Flink keys -> values, as the task got it)
    config: Mapping[str, Any] = field(default_factory=dict)
    #: the job's id (stays the same across failovers of the job; a restore from a
    #: savepoint is another job)
    job_id: str = ""
    #: the subtask's metric group (``None``: each operator gets a group of its own that
    #: nothing exports, as in unit tests)
    metrics: Optional[Any] = None

    def runtime_context(self, operator_name: str) -> RuntimeContext:
        group = self.metrics.operator_group(operator_name) if self.metrics is not None \
            else None
        return RuntimeContext(self.task_name, self.subtask_index, self.parallelism,
                              self.max_parallelism, self.attempt_number, self.keyed_backend,
                              operator_name, self.job_parameters, metric_group=group)


class StreamOperator:
    """Base operator. Subclasses set ``default_name`` and override what they need."""

    default_name = "Operator"
    num_inputs = 1
    is_keyed = False  # needs a keyed state backend (applied on a KeyedStream)
    #: the declared type emitted records are converted to (``output_type=``; ``None``: none)
    output_type: Any = None
    #: ``(operator, output) -> output`` applied at setup (set with the output type)
    output_wrapper: Optional[Callable[["StreamOperator", Output], Output]] = None
    #: ``(operator, tag name, output) -> output`` applied at setup to each side output
    #: (set when a side output's ``OutputTag`` declares a type)
    side_output_wrapper: Optional[Callable[["StreamOperator", str, Output], Output]] = None
    #: BATCH mode: the input (index) read to its end before the others (Flink reads the
    #: broadcast side of a broadcast-state operator first); ``None``: interleaved
    batch_first_input: Optional[int] = None
    #: writes outside the job (a sink): a re-run of a subtask whose sinks committed
    #: everything already puts a :class:`~flowray.operators.sinks.CommittedSinkStandIn`
    #: in its place
    is_sink = False

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name or self.default_name
        self.uid: Optional[str] = None
        self.ctx: Optional[OperatorContext] = None
        self.output: Output = CollectingOutput()
        #: where records sent to an ``OutputTag`` go, by tag name (unknown tags: nowhere)
        self.side_outputs: Dict[str, Output] = {}
        self._watermarks = [MIN_WATERMARK] * self.num_inputs
        self._input_idle = [False] * self.num_inputs
        self._output_idle = False
        self.current_watermark = MIN_WATERMARK

    def input_watermarks(self) -> List[int]:
        """The latest watermark of each input (Flink's ``currentInput<n>Watermark``)."""
        return list(self._watermarks)

    # -- lifecycle ---------------------------------------------------------------------
    def setup(self, ctx: OperatorContext, output: Output,
              side_outputs: Optional[Dict[str, Output]] = None) -> None:
        self.ctx = ctx
        if self.output_wrapper is not None:
            output = self.output_wrapper(self, output)
        self.output = output
        self.side_outputs = dict(side_outputs or {})
        if self.side_output_wrapper is not None:
            self.side_outputs = {tag: self.side_output_wrapper(self, tag, out)
                                 for tag, out in self.side_outputs.items()}

    def open(self) -> None:
        pass

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        """``records`` of the (first) input; ``key_groups`` after a keyed exchange;
        ``timestamps[i]`` is the event time of ``records[i]`` (or the list is ``None``)."""
        raise NotImplementedError

    def process_batch2(self, records: List[Any], key_groups: Optional[List[int]],
                       timestamps: Optional[List[Any]] = None) -> None:
        raise NotImplementedError(f"{self.name} has one input")

    def process_watermark(self, timestamp: int, input_index: int = 0) -> None:
        """Combine per-input watermarks (the minimum over inputs that are not idle) and
        forward when it advances, after firing what it makes due (``on_watermark``)."""
        wms = self._watermarks
        if timestamp <= wms[input_index]:
            return
        wms[input_index] = timestamp
        self._advance_watermark()

    def _advance_watermark(self) -> None:
        if self.num_inputs == 1:
            combined = self._watermarks[0]
        else:
            active = [w for w, idle in zip(self._watermarks, self._input_idle) if not idle]
            if not active:
                return
            combined = min(active)
        if combined > self.current_watermark:
            self.current_watermark = combined
            self.on_watermark(combined)
            self.output.emit_watermark(combined)
            for side in self.side_outputs.values():  # side outputs follow event time too
                side.emit_watermark(combined)

    def process_watermark_status(self, idle: bool, input_index: int = 0) -> None:
        """An input went idle (it no longer holds the watermark back) or active again;
        the output is idle while every input is."""
        if input_index >= len(self._input_idle) or self._input_idle[input_index] == idle:
            return
        self._input_idle[input_index] = idle
        if idle:
            self._advance_watermark()
        now_idle = all(self._input_idle)
        if now_idle != self._output_idle:
            self._output_idle = now_idle
            self.output.emit_watermark_status(now_idle)
            for side in self.side_outputs.values():
                side.emit_watermark_status(now_idle)

    def on_watermark(self, timestamp: int) -> None:
        """Hook: event time reached ``timestamp`` (fire event-time timers here)."""

    def end_input(self, input_index: int = 0) -> None:
        pass

    def finish(self) -> None:
        pass

    # -- checkpoints -------------------------------------------------------------------
    #: the task must not finish before a checkpoint after its end of input completed
    #: (two-phase-commit sinks commit their last transaction then)
    requires_final_checkpoint = False

    @property
    def commits_on_checkpoint_complete(self) -> bool:
        """Whether a completed checkpoint has side effects here (a two-phase-commit sink
        commits, a user function listens): restoring an older checkpoint would repeat
        them."""
        return self.requires_final_checkpoint or any(
            callable(getattr(fn, "notify_checkpoint_complete", None))
            for fn in self.user_functions())

    def initialize_state(self, context: StateInitializationContext) -> None:
        """Before ``open``: restore operator state. The default hands the context to user
        functions that implement ``initialize_state`` (:class:`CheckpointedFunction`)."""
        self._call_user_hooks("initialize_state", context)

    def snapshot_state(self, context: StateSnapshotContext) -> None:
        """At the checkpoint's synchronous point: write state into the operator state
        store. The default calls ``snapshot_state`` of user functions."""
        self._call_user_hooks("snapshot_state", context, also_needs="initialize_state")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._call_user_hooks("notify_checkpoint_complete", checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._call_user_hooks("notify_checkpoint_aborted", checkpoint_id)

    def _call_user_hooks(self, method: str, argument: Any,
                         also_needs: Optional[str] = None) -> None:
        """Call ``method(argument)`` on every user function that has it (and, if given,
        also has ``also_needs``); exceptions become user errors naming the operator."""
        for fn in self.user_functions():
            hook = getattr(fn, method, None)
            if not callable(hook) or (also_needs and not hasattr(fn, also_needs)):
                continue
            try:
                hook(argument)
            except Exception as e:
                raise self.user_error(e) from e

    def close(self) -> None:
        pass

    # -- helpers -----------------------------------------------------------------------
    def user_error(self, cause: BaseException) -> UserFunctionError:
        if isinstance(cause, UserFunctionError):  # e.g. from a chained operator: keep it
            return cause
        subtask = None
        if self.ctx is not None:
            subtask = f"{self.ctx.subtask_index + 1}/{self.ctx.parallelism}"
        return UserFunctionError(self.name, cause, subtask)

    def user_functions(self) -> List[Any]:
        """User objects this operator calls (for pickling checks and open/close)."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class OneInputOperator(StreamOperator):
    num_inputs = 1


class TwoInputOperator(StreamOperator):
    num_inputs = 2


def adapt_function(fn: Any, method: str, what: str) -> Callable[..., Any]:
    """The callable behind ``fn``: its ``method`` if it is a Function object, else ``fn``."""
    bound = getattr(fn, method, None)
    if isinstance(fn, Function) or (bound is not None and callable(bound)
                                    and not isinstance(fn, types.FunctionType)):
        if bound is None or not callable(bound):
            raise TypeError(f"{what}: {type(fn).__name__} does not implement {method}()")
        return bound
    if callable(fn):
        return fn
    raise TypeError(f"{what}: expected a function or an object with .{method}(), got {fn!r}")


def open_function(fn: Any, runtime_context: RuntimeContext) -> None:
    if isinstance(fn, Function) or callable(getattr(fn, "open", None)) and hasattr(fn, "close"):
        fn.open(runtime_context)


def close_function(fn: Any) -> None:
    if isinstance(fn, Function) or callable(getattr(fn, "close", None)) and hasattr(fn, "open"):
        fn.close()


_GENERATOR = types.GeneratorType


def iterate_result(result: Any) -> Iterable[Any]:
    """Outputs of a flat_map/process call: yielded values, a returned iterable, or none."""
    if result is None:
        return ()
    return result


_NOT_SCANNED = ("initialize_state", "snapshot_state")


def keyed_state_methods_used(fn: Any) -> List[str]:
    """Which keyed-state getters (``get_state`` ...) the code of ``fn`` refers to.

    A static look at the bytecode of the function (or of the methods of its class), used
    to reject keyed state on non-keyed streams when the graph is built, before anything
    runs. Operator-state hooks (``initialize_state``) are not scanned.
    """
    codes = []
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        codes.append(getattr(fn, "__code__", None) or fn.__func__.__code__)
    else:
        for klass in type(fn).__mro__:
            if klass.__module__.startswith("flowray.") or klass is object:
                continue
            for attr, value in vars(klass).items():
                if attr in _NOT_SCANNED:
                    continue
                code = getattr(value, "__code__", None)
                if code is not None:
                    codes.append(code)
    found = set()
    stack = [c for c in codes if c is not None]
    while stack:
        code = stack.pop()
        found.update(KEYED_STATE_METHODS.intersection(code.co_names))
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return sorted(found)
