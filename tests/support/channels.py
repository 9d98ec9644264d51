"""The channel contract's shared pieces: :class:`Pair` (both ends of some channels of one
transport plus a gate), frame helpers, and the contract checks that every transport must
pass, also a write-then-read one (blocking partitions). Each check takes a ``make_pair``
factory, ``make_pair(n=1, credits=8) -> Pair``."""

import time

import pytest

from flowray.runtime.network.channel import ChannelClosedError
from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK
from flowray.runtime.network.elements import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    RecordBatch,
    Watermark,
)

WAIT_S = 10.0  # generous upper bound for anything that must happen; never a timing assertion


class Pair:
    """Both ends of one or more channels of one transport, plus a gate over the readers."""

    def __init__(self, writers, readers, gate, push_raw, cleanup):
        self.writers = writers
        self.readers = readers
        self.gate = gate
        self._push_raw = push_raw
        self._cleanup = cleanup

    @property
    def writer(self):
        return self.writers[0]

    @property
    def reader(self):
        return self.readers[0]

    def push_raw(self, data, index=0):
        """Send already-encoded frame bytes on channel ``index``, bypassing the writer."""
        self._push_raw(index, data)

    def next_frame(self, reader=None, timeout_s=WAIT_S):
        """Poll until a frame arrives (waiting on the gate, never sleeping)."""
        reader = reader or self.reader
        deadline = time.monotonic() + timeout_s
        while True:
            frame = reader.poll()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no frame on {reader.channel_id} within {timeout_s} s")
            self.gate.wait([reader], min(left, 0.2))

    def poll_until_raises(self, exc_type, reader=None, timeout_s=WAIT_S):
        reader = reader or self.reader
        deadline = time.monotonic() + timeout_s
        with pytest.raises(exc_type) as info:
            while time.monotonic() < deadline:
                reader.poll()
                self.gate.wait([reader], 0.2)
        return info.value

    def close(self):
        self._cleanup()


def norm(frame):
    """A frame as a comparable value (``RecordBatch`` has no equality)."""
    if type(frame) is RecordBatch:
        return ("batch", list(frame.records),
                None if frame.key_groups is None else list(frame.key_groups))
    return frame


def mixed_frames(n_batches):
    """``n_batches`` frames of every kind, then edge cases and an ``EndOfPartition``."""
    frames = []
    for i in range(n_batches):
        if i % 4 == 0:
            frames.append(RecordBatch([i, f"s{i}", (i, None), {"k": [i]}, b"\x00" * (i % 5)]))
        elif i % 4 == 1:
            frames.append(RecordBatch([("k", i), ("j", -i)], [i % 128, 32767]))
        elif i % 4 == 2:
            frames.append(Watermark(i * 1000))
        else:
            frames.append(CheckpointBarrier(i, 10_000 + i, is_savepoint=(i % 8 == 3)))
    frames += [RecordBatch([]), RecordBatch(list(range(5000))), Watermark(MIN_WATERMARK),
               Watermark(MAX_WATERMARK), CancelCheckpointMarker(7), EndOfPartition()]
    return frames


# ---------------------------------------------------------------------------------------
# contract checks shared by every transport
# ---------------------------------------------------------------------------------------

def closing_writer_after_end_of_partition_is_clean(make_pair):
    pair = make_pair()
    pair.writer.write(RecordBatch([1]))
    pair.writer.write(EndOfPartition())
    pair.writer.close()
    assert pair.next_frame().records == [1]
    assert pair.next_frame() == EndOfPartition()
    for _ in range(5):
        assert pair.reader.poll() is None
        pair.gate.wait([pair.reader], 0.05)


def close_is_idempotent_on_both_ends(make_pair):
    pair = make_pair()
    pair.writer.write(EndOfPartition())
    pair.writer.close()
    pair.writer.close()
    pair.reader.close()
    pair.reader.close()
    with pytest.raises(ChannelClosedError):
        pair.writer.write(RecordBatch([1]))  # write after close
