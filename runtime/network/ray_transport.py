"""Ray-call transport (the alternative data plane, kept for measurement).

A writer sends each encoded frame as the bytes argument of a ``push_frame`` call on the
consumer's actor; the consumer queues it in an in-process channel, and the call returns
only when there is room (credits), so back-pressure reaches the writer through the number
of unfinished calls. The call returns the batch size the consumer announced (buffer
debloating), which the writer learns when it waits for a call. Measured against the socket
transport in ``benchmarks/throughput.py``.
"""

from __future__ import annotations

import time
from typing import Any, List

import ray

from flowray.runtime.network.channel import ChannelClosedError, ChannelStats, ChannelWriter
from flowray.runtime.network.frame_codec import encode_frame
from flowray.runtime.network.elements import Frame, RecordBatch

__all__ = ["RayChannelWriter"]


class RayChannelWriter(ChannelWriter):
    carries_batch_limit = True  # push_frame returns the consumer's announcement

    def __init__(self, channel_id: str, consumer: Any, credits: int) -> None:
        self.channel_id = channel_id
        self.credits = credits
        self.stats = ChannelStats()
        self._consumer = consumer
        self._refs: List[Any] = []
        self._seq = 0
        self.closed = False

    def in_flight(self) -> int:
        """Calls not finished yet (finished ones are let go without waiting)."""
        if self._refs:
            done, self._refs = ray.wait(self._refs, num_returns=len(self._refs), timeout=0)
            for announced in ray.get(done):
                if announced is not None:
                    self.batch_limit = announced
        return len(self._refs)

    def write(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if len(self._refs) >= self.credits:
            self.stats.blocked += 1
            t0 = time.monotonic()
            self.stats.blocked_since = t0
            done, self._refs = ray.wait(self._refs, num_returns=1)
            announced = ray.get(done)[0]
            if announced is not None:
                self.batch_limit = announced
            self.stats.blocked_ms += (time.monotonic() - t0) * 1000
            self.stats.blocked_since = None
        data = encode_frame(frame, self._seq)
        self._refs.append(self._consumer.push_frame.remote(self.channel_id, data))
        self._seq += 1
        st = self.stats
        st.frames += 1
        st.bytes += len(data)
        if type(frame) is RecordBatch:
            st.records += len(frame.records)
        st.max_in_flight = max(st.max_in_flight, len(self._refs))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            ray.get(self._refs, timeout=30)
        except Exception:  # noqa: BLE001 - a peer that died: closing goes on
            pass
        self._refs = []
