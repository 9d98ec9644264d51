"""What a task needs from the process that hosts it (:class:`TaskEnvironment`: output
channels, input gates, the driver's channel for ``print``/``collect``), and the small
adapters the task puts between its operators and those channels.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Dict, List, Optional, Tuple

from flowray.operators.base import (
    Output,
)
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.network.channel import ChannelReader, ChannelWriter, InputGate
from flowray.runtime.network.elements import (
    EndOfPartition,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)
from flowray.runtime.network.partitioners import RecordWriter
from flowray.runtime.task.subtask_checkpoints import (
    CheckpointResponder,
)

from flowray.common.clock import Clock, SystemClock

__all__ = ["DriverChannel", "TaskEnvironment"]


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
    """What the shell gives a task: channels, a clock, and where checkpoint answers go."""

    clock: Clock = SystemClock()
    responder: CheckpointResponder = CheckpointResponder()
    #: a task actor's subtask's metric group (``flowray.metrics.groups.TaskMetricGroup``);
    #: ``None``: no task metrics (operators still get groups of their own)
    metrics_group: Optional[Any] = None

    def metrics_group_for(self, tdd: Any) -> Optional[Any]:
        """The metric group of the subtask ``tdd`` describes (an environment that runs
        several subtasks makes one each)."""
        return self.metrics_group

    @abc.abstractmethod
    def open_output(self, channel_id: str, consumer: SubtaskId) -> ChannelWriter: ...

    @abc.abstractmethod
    def open_inputs(
        self, channel_ids: List[str], should_stop: Callable[[], bool]
    ) -> Tuple[Dict[str, ChannelReader], InputGate]: ...

    @abc.abstractmethod
    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter: ...


class _WriterOutput(Output):
    __slots__ = ("writer", "clock")

    def __init__(self, writer: RecordWriter, clock: Clock) -> None:
        self.writer = writer
        self.clock = clock

    def emit(self, records: List[Any], timestamps: Any = None) -> None:
        self.writer.emit(records, self.clock.monotonic_ms(), timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        self.writer.broadcast_event(Watermark(timestamp))

    def emit_watermark_status(self, idle: bool) -> None:
        self.writer.broadcast_event(WatermarkStatus(idle))
