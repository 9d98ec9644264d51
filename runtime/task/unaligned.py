"""One task's side of unaligned checkpoints (docs/internals/unaligned-checkpoints.md): the
channel state of a checkpoint while its inputs' barriers are still coming
(:class:`InFlightRecording`), and the replay of restored channel state
(:func:`recovered_batches`). Pure: the task feeds them frames.

>>> from flowray.runtime.network.elements import RecordBatch
>>> from flowray.runtime.network.frame_codec import encode_frame
>>> rec = InFlightRecording(7, {"e1/0->0": (("src", "sum", 0), 0, 0)}, {"e1/0->0"})
>>> rec.add_output(("sum", "sink", 0), 0, 1, [RecordBatch([1, 2])])
>>> rec.input_arrived("e1/0->0", [encode_frame(RecordBatch([3]), 5)])
True
>>> [(d.side, d.exchange[0], len(d.frames)) for d in rec.future.result()]
[('output', 'sum', 1), ('input', 'src', 1)]
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.frame_codec import HEADER, decode_frame, encode_frame
from flowray.state.key_groups import KeyGroupRange
from flowray.state.snapshot import INPUT_SIDE, OUTPUT_SIDE, InFlightData

__all__ = ["InFlightRecording", "CheckpointAbortedWhileRecording", "recovered_batches"]

ExchangeName = Tuple[str, str, int]


class CheckpointAbortedWhileRecording(Exception):
    """The checkpoint was aborted before every input's barrier came."""


class InFlightRecording:
    """The channel state of unaligned checkpoint ``checkpoint_id`` at one task.

    ``inputs``: input channel id -> (exchange name, producer index, consumer index);
    ``waiting``: the input channels whose barrier has not come. :attr:`future` holds the
    :class:`InFlightData` list once every waiting channel arrived (or ended), or
    :class:`CheckpointAbortedWhileRecording`.
    """

    def __init__(self, checkpoint_id: int,
                 inputs: Dict[str, Tuple[ExchangeName, int, int]],
                 waiting: Set[str]) -> None:
        self.checkpoint_id = checkpoint_id
        self._inputs = inputs
        self.waiting = set(waiting)
        self.entries: List[InFlightData] = []
        self._unprocessed = 0   # entries added by add_unprocessed (at the front)
        self.future: "Future[List[InFlightData]]" = Future()

    def add_output(self, exchange: ExchangeName, producer: int, consumer: int,
                   frames: List[Any]) -> None:
        """The frames a priority barrier overtook on one output channel (record batches
        are kept, encoded; events are not)."""
        encoded = [encode_frame(f, 0) for f in frames if type(f) is RecordBatch and f.records]
        if encoded:
            self.entries.append(InFlightData(exchange, producer, consumer, OUTPUT_SIDE,
                                             encoded))

    def input_arrived(self, channel_id: str, frames: List[bytes]) -> bool:
        """``channel_id``'s barrier came (or it ended) after ``frames`` (encoded record
        frames); whether the recording is complete now."""
        if frames:
            exchange, producer, consumer = self._inputs[channel_id]
            self.entries.append(InFlightData(exchange, producer, consumer, INPUT_SIDE,
                                             list(frames)))
        self.waiting.discard(channel_id)
        if not self.waiting and not self.future.done():
            self.future.set_result(self.entries)
        return not self.waiting

    def add_unprocessed(self, channel: Tuple[ExchangeName, int, int],
                        frames: List[bytes]) -> None:
        """Records taken in before the checkpoint and not processed when it was taken
        (the rest of a batch, restored channel state not replayed yet), of ``channel``
        (exchange name, producer index, consumer index): channel state ahead of
        anything recorded from the inputs, in the order of the calls."""
        if frames:
            exchange, producer, consumer = channel
            self.entries.insert(self._unprocessed, InFlightData(
                exchange, producer, consumer, INPUT_SIDE, list(frames)))
            self._unprocessed += 1

    def abort(self) -> None:
        if not self.future.done():
            self.future.set_exception(CheckpointAbortedWhileRecording(
                f"checkpoint {self.checkpoint_id} was aborted before its barrier came on "
                f"{sorted(self.waiting)}"))


def recovered_batches(frames: List[bytes], key_groups: Optional[KeyGroupRange]
                      ) -> Iterator[RecordBatch]:
    """The record batches of restored channel state, in order; with ``key_groups``
    (after a rescale), only the records of those key groups."""
    for data in frames:
        length, kind, _ = HEADER.unpack_from(data, 0)
        batch = decode_frame(kind, memoryview(data)[HEADER.size:HEADER.size + length])
        if type(batch) is not RecordBatch:
            continue
        if key_groups is None:
            yield batch
            continue
        if batch.key_groups is None:
            raise ValueError("records in flight without key groups cannot be split among "
                             "rescaled subtasks (a columnar keyed exchange): restore at "
                             "the parallelism of the checkpoint")
        keep = [i for i, kg in enumerate(batch.key_groups) if kg in key_groups]
        if len(keep) == len(batch.records):
            yield batch
        elif keep:
            ts = batch.timestamps
            yield RecordBatch([batch.records[i] for i in keep],
                              [batch.key_groups[i] for i in keep],
                              [ts[i] for i in keep] if ts is not None else None)
