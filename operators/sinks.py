"""Sinks: the ``sink_to`` interface (:class:`Sink` / :class:`SinkWriter`), ``add_sink``
functions, and the driver-bound sinks behind ``print()`` and ``execute_and_collect()``."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional

from flowray.operators.base import StreamOperator, adapt_function, close_function, open_function

__all__ = [
    "SinkWriterContext",
    "Sink",
    "SinkWriter",
    "SinkWriterOperator",
    "SinkFunctionOperator",
    "DriverSinkOperator",
    "CommittedSinkStandIn",
    "stand_in_for_committed_sinks",
]


@dataclass(frozen=True)
class SinkWriterContext:
    """What a sink's subtask knows of its task. ``config``: the job's configuration
    (Flink keys -> values, as the task got it; empty when driven by hand); ``job_id`` and
    ``operator_uid`` name the job and the sink operator (empty when driven by hand);
    ``restored_checkpoint_id``: the checkpoint this subtask's state was restored from
    (``None``: started without state)."""

    subtask_index: int
    parallelism: int
    attempt_number: int = 0
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)
    job_id: str = ""
    operator_uid: str = ""
    restored_checkpoint_id: Optional[int] = None


class SinkWriter(abc.ABC):
    @abc.abstractmethod
    def write(self, element: Any) -> None: ...

    def write_batch(self, elements: List[Any]) -> None:
        for e in elements:
            self.write(e)

    def flush(self, end_of_input: bool) -> None:
        pass

    def close(self) -> None:
        pass


class Sink(abc.ABC):
    """A picklable sink definition; each subtask gets its own writer."""

    default_name = "Sink"

    @abc.abstractmethod
    def create_writer(self, context: SinkWriterContext) -> SinkWriter: ...


class SinkWriterOperator(StreamOperator):
    default_name = "Sink"
    is_sink = True

    def __init__(self, sink: Sink, name: Optional[str] = None) -> None:
        if not isinstance(sink, Sink):
            raise TypeError(f"sink_to expects a flowray Sink, got {sink!r}")
        super().__init__(name or f"Sink: {getattr(sink, 'default_name', 'Sink')}")
        self.sink = sink

    def user_functions(self) -> List[Any]:
        return [self.sink]

    def open(self) -> None:
        try:
            self.writer = self.sink.create_writer(SinkWriterContext(
                self.ctx.subtask_index, self.ctx.parallelism, self.ctx.attempt_number,
                self.ctx.config))
        except Exception as e:
            raise self.user_error(e) from e

    def process_batch(self, records, key_groups, timestamps=None):
        try:
            self.writer.write_batch(records)
        except Exception as e:
            raise self.user_error(e) from e

    def finish(self) -> None:
        try:
            self.writer.flush(True)
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.close()


class _SinkContext:
    """``SinkFunction.Context``: the record's timestamp, the sink's watermark, the time."""

    def __init__(self, op: "SinkFunctionOperator") -> None:
        self._op = op
        self._timestamp: Optional[int] = None

    def current_processing_time(self) -> int:
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def timestamp(self) -> Optional[int]:
        return self._timestamp


class SinkFunctionOperator(StreamOperator):
    """``add_sink(fn)``: ``fn.invoke(value, context)`` (or ``fn(value)``) per record."""

    default_name = "Sink: Unnamed"
    is_sink = True

    def __init__(self, fn: Any, name: Optional[str] = None) -> None:
        super().__init__(name)
        adapt_function(fn, "invoke", self.name)
        self.fn = fn

    def user_functions(self) -> List[Any]:
        return [self.fn]

    def open(self) -> None:
        invoke = getattr(self.fn, "invoke", None)
        self._sink_ctx = ctx = _SinkContext(self)
        if callable(invoke):
            self._call = lambda v: invoke(v, ctx)
        else:
            self._call = self.fn
        try:
            open_function(self.fn, self.ctx.runtime_context(self.name))
        except Exception as e:
            raise self.user_error(e) from e

    def process_batch(self, records, key_groups, timestamps=None):
        f = self._call
        try:
            if timestamps is None:
                for r in records:
                    f(r)
            else:
                ctx = self._sink_ctx
                for r, t in zip(records, timestamps):
                    ctx._timestamp = t
                    f(r)
                ctx._timestamp = None
        except Exception as e:
            raise self.user_error(e) from e

    def close(self) -> None:
        try:
            close_function(self.fn)
        except Exception as e:
            raise self.user_error(e) from e


class DriverSinkOperator(StreamOperator):
    """Streams records to the driver process (``print()`` and ``execute_and_collect()``).

    ``mode="print"`` sends the text Flink prints (``"2> record"`` when parallel);
    ``mode="collect"`` sends the records themselves.
    """

    is_sink = True

    def __init__(self, mode: str, endpoint_id: str, name: Optional[str] = None,
                 formatter: Optional[Callable[[Any], str]] = None,
                 sink_identifier: Optional[str] = None) -> None:
        if mode not in ("print", "collect"):
            raise ValueError(mode)
        super().__init__(name or ("Sink: Print to Std. Out" if mode == "print"
                                  else "Sink: Collect"))
        self.mode = mode
        self.endpoint_id = endpoint_id
        self.formatter = formatter or str
        self.sink_identifier = sink_identifier

    def open(self) -> None:
        # the task provides the channel: an object with send(records) and end()
        self._channel = self.ctx.open_driver_channel(self.endpoint_id)
        # Flink's PrintSinkFunction: "id:2> ", "2> ", "id> " or nothing
        ident, parallel = self.sink_identifier, self.ctx.parallelism > 1
        index = self.ctx.subtask_index + 1
        if ident:
            self._prefix = f"{ident}:{index}> " if parallel else f"{ident}> "
        else:
            self._prefix = f"{index}> " if parallel else ""

    def process_batch(self, records, key_groups, timestamps=None):
        if self.mode == "print":
            p, fmt = self._prefix, self.formatter
            records = [f"{p}{fmt(r)}" for r in records]
        self._channel.send(list(records))

    def finish(self) -> None:
        self._channel.end()

    def close(self) -> None:
        ch = getattr(self, "_channel", None)
        if ch is not None:
            ch.close()


class CommittedSinkStandIn(StreamOperator):
    """Takes the place of a sink in a subtask that finished in an earlier attempt, when the
    job runs it again without a checkpoint to restore (BATCH: its blocking partition was
    lost and a consumer needs it; or its region restarted around it). That sink committed
    every record it will ever get, so the stand-in drops the records and never opens it:
    nothing is written or committed twice. (Only the subtask's other outputs are wanted
    from the re-run; its input is the same, so they are too.)

    >>> class Boom(StreamOperator):
    ...     is_sink = True
    ...     def process_batch(self, records, key_groups, timestamps=None):
    ...         raise AssertionError("written twice")
    >>> s = CommittedSinkStandIn(Boom("Sink: files"))
    >>> s.process_batch([1, 2], None); s.name, s.user_functions()
    ('Sink: files', [])
    """

    def __init__(self, sink: StreamOperator) -> None:
        super().__init__(sink.name)
        self.uid = sink.uid
        self.replaced = type(sink).__name__

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        pass

    def process_batch2(self, records: List[Any], key_groups: Optional[List[int]],
                       timestamps: Optional[List[Any]] = None) -> None:
        pass


def stand_in_for_committed_sinks(operators: Mapping[Any, StreamOperator]
                                 ) -> dict:
    """``operators`` (a chain's, by node) with every sink replaced by a
    :class:`CommittedSinkStandIn`; the other operators are the same objects."""
    return {node: CommittedSinkStandIn(op) if op.is_sink else op
            for node, op in operators.items()}
