"""The iteration head operator (``DataStream.iterate``; docs/iterations.md).

It is the only operator of its task. Records of its regular input pass through; records
that came back over the back edge are handed to it by the task
(:class:`~flowray.runtime.task.iteration_head_task.IterationHeadTask`) from its feedback
queue and go out the same way, or to the ``feedback`` side output when the iteration was
connected (``with_feedback_type``). Its operator state is the head's share of a
checkpoint: the feedback queue as the barrier passed, and the back-edge log; a restore
hands those records out again before any new input.
"""

from __future__ import annotations

from typing import Any, List, Optional

from flowray.common.constants import MAX_WATERMARK
from flowray.operators.base import (
    OneInputOperator,
    StateInitializationContext,
    StateSnapshotContext,
)

__all__ = ["IterationHeadOperator", "ITERATION_STATE", "FEEDBACK_TAG"]

#: the operator-state list of the head: record batches ``(records, timestamps)``
ITERATION_STATE = "_iteration_head_feedback_"
#: the side output that carries the feedback of a connected iteration
FEEDBACK_TAG = "feedback"


class IterationHeadOperator(OneInputOperator):
    default_name = "Iteration"
    is_iteration_head = True

    def __init__(self, max_wait_time_ms: Optional[int] = None, connected: bool = False,
                 name: Optional[str] = None) -> None:
        super().__init__(name)
        self.max_wait_time_ms = max_wait_time_ms
        #: feedback records go to the ``feedback`` side output (ConnectedIterativeStreams)
        self.connected = connected
        #: batches restored from a checkpoint, to go round again before new input
        self.restored: List[Any] = []
        #: what the next ``snapshot_state`` writes (set by the task when the barrier has
        #: come back over every back edge)
        self.snapshot_batches: List[Any] = []
        self._state: Any = None
        self._end_watermark = False

    def initialize_state(self, context: StateInitializationContext) -> None:
        self._state = context.get_operator_state_store().get_list_state(ITERATION_STATE)
        if context.is_restored():
            self.restored = list(self._state.get())
        self._state.clear()

    def snapshot_state(self, context: StateSnapshotContext) -> None:
        self._state.update(list(self.snapshot_batches))
        self.snapshot_batches = []

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        self.output.emit(records, timestamps)

    def process_feedback(self, records: List[Any], timestamps: Optional[List[Any]]) -> None:
        out = self.side_outputs.get(FEEDBACK_TAG) if self.connected else self.output
        if out is not None:
            out.emit(records, timestamps)

    def process_watermark(self, timestamp: int, input_index: int = 0) -> None:
        # the end of the input is not the end of event time while records still go round:
        # the final watermark waits until the loop has ended
        if timestamp >= MAX_WATERMARK:
            self._end_watermark = True
            return
        super().process_watermark(timestamp, input_index)

    def finish(self) -> None:
        if self._end_watermark:
            super().process_watermark(MAX_WATERMARK, 0)
