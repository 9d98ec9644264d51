"""Frames on the wire: a header (payload length u64, kind u8, sequence number u64) and a
body. Records, watermarks, barriers, cancellation markers and end-of-partition are all
frames of one stream, so their order holds by construction.

Only record batches are pickled (protocol 5), and they are read only from an
authenticated peer; every control frame is fixed binary or ``msgpack`` (barriers and
cancellation markers), so nothing but user records ever goes through ``pickle.loads``.
A frame's length is 64-bit: a record batch of any size that fits in memory travels.

>>> from flowray.runtime.network.elements import RecordBatch
>>> data = encode_frame(RecordBatch([1, 2]), seq=7)
>>> frame_sequence_number(data)
7
>>> length, kind, seq = HEADER.unpack_from(data)
>>> decode_frame(kind, data[HEADER.size:]).records
[1, 2]
"""

from __future__ import annotations

import pickle
import struct
from array import array
from typing import Any

import msgpack

from flowray.runtime.network.arrow_codec import (
    all_arrow_batches,
    decode_arrow_batches,
    encode_arrow_batches,
)
from flowray.common.types import rows_for_pickling
from flowray.runtime.network.channel import ChannelError
from flowray.runtime.network.elements import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    Frame,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)

__all__ = ["HEADER", "encode_frame", "encode_priority_barrier", "frame_sequence_number",
           "decode_frame", "RecordSerializationError", "PRIORITY_BARRIER", "RECORD_KINDS"]


# header: payload length (u64), kind (u8), sequence number (u64)
HEADER = struct.Struct("<QBQ")

_KG_COUNT = struct.Struct("<I")


_WM = struct.Struct("<q")


def _packb(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpackb(body: Any) -> Any:
    try:
        return msgpack.unpackb(bytes(body), raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise ChannelError(f"malformed control frame: {type(e).__name__}: {e}") from e


_RECORDS, _RECORDS_KG, _WATERMARK, _EOP, _BARRIER, _CANCEL = 1, 2, 3, 4, 5, 6
_RECORDS_TS, _RECORDS_KG_TS, _IDLE, _ACTIVE = 7, 8, 9, 10
_ARROW = 11  # a batch of pyarrow.RecordBatch elements, as Arrow IPC (arrow_codec)
#: an unaligned checkpoint's barrier: sent ahead of queued frames and without a credit,
#: taken by the reader ahead of the frames before it (it returns no credit for it)
PRIORITY_BARRIER = 12
#: the kinds of frames that carry records (what channel state keeps)
RECORD_KINDS = frozenset((_RECORDS, _RECORDS_KG, _RECORDS_TS, _RECORDS_KG_TS, _ARROW))

#: a record without a timestamp, in the int64 array of a batch's timestamps
_NO_TIMESTAMP = -(1 << 63)


def _encode_timestamps(timestamps: Any) -> bytes:
    try:
        ts = array("q", timestamps).tobytes()
    except TypeError:   # records without one (None), or not ints: the error is array's
        ts = array("q", [_NO_TIMESTAMP if t is None else t for t in timestamps]).tobytes()
    return _KG_COUNT.pack(len(ts)) + ts


def _decode_timestamps(body: Any, pos: int) -> Any:
    (n,) = _KG_COUNT.unpack_from(body, pos)
    ts = array("q")
    ts.frombytes(body[pos + 4 : pos + 4 + n])
    stamps = ts.tolist()
    if _NO_TIMESTAMP in stamps:   # records without one: None
        stamps = [None if t == _NO_TIMESTAMP else t for t in stamps]
    return stamps, pos + 4 + n


class RecordSerializationError(Exception):
    """Records that cannot be serialized for a channel. Not recoverable when a record
    cannot be pickled (the same record fails again after a restart); out of memory is."""

    def __init__(self, message: str, recoverable: bool) -> None:
        super().__init__(message)
        self.recoverable = recoverable

    @classmethod
    def of(cls, records: Any, cause: BaseException) -> "RecordSerializationError":
        """Name the first record that fails alone, its type and the batch."""
        if isinstance(cause, MemoryError):
            return cls(f"a batch of {len(records)} records does not fit in memory when "
                       "serialized; lower flowray.channel.batch-bytes or make records "
                       "smaller", True)
        for index, record in enumerate(records):
            try:
                pickle.dumps(record, protocol=5)
            except MemoryError:
                return cls(f"record {index} (of type {type(record).__name__}) does not fit "
                           "in memory when serialized", True)
            except Exception as e:  # noqa: BLE001 - this is the one
                return cls(f"record {index} of a batch of {len(records)} (of type "
                           f"{type(record).__name__}) cannot be serialized: "
                           f"{type(e).__name__}: {e}", False)
        return cls(f"a batch of {len(records)} records cannot be serialized: "
                   f"{type(cause).__name__}: {cause}", False)


def encode_frame(frame: Frame, seq: int) -> bytes:
    """Header + payload bytes of one frame; :class:`RecordSerializationError` for
    records that cannot be serialized."""
    if type(frame) is RecordBatch and all_arrow_batches(frame.records):
        kind, body = _ARROW, encode_arrow_batches(frame.records)  # Arrow IPC, no rows
    elif type(frame) is RecordBatch:
        try:
            body = pickle.dumps(rows_for_pickling(frame.records), protocol=5)
        except (Exception, MemoryError) as e:
            raise RecordSerializationError.of(frame.records, e) from e
        if frame.key_groups is None:
            kind = _RECORDS
        else:
            kind = _RECORDS_KG
            kgs = array("H", frame.key_groups).tobytes()
            body = _KG_COUNT.pack(len(kgs)) + kgs + body
        if frame.timestamps is not None:
            kind = _RECORDS_TS if kind == _RECORDS else _RECORDS_KG_TS
            body = _encode_timestamps(frame.timestamps) + body
    elif type(frame) is Watermark:
        kind, body = _WATERMARK, _WM.pack(frame.timestamp)
    elif type(frame) is WatermarkStatus:
        kind, body = (_IDLE if frame.idle else _ACTIVE), b""
    elif type(frame) is EndOfPartition:
        kind, body = _EOP, (bytes((frame.stop_mode,)) if frame.stop_mode else b"")
    elif type(frame) is CheckpointBarrier:
        kind, body = (
            _BARRIER,
            _packb([frame.checkpoint_id, frame.timestamp, frame.is_savepoint,
                    frame.location]),
        )
    elif type(frame) is CancelCheckpointMarker:
        kind, body = _CANCEL, _packb(frame.checkpoint_id)
    else:
        raise TypeError(f"not a channel frame: {frame!r}")
    return HEADER.pack(len(body), kind, seq) + body


def encode_priority_barrier(barrier: CheckpointBarrier, seq: int) -> bytes:
    """A barrier as a priority frame (:data:`PRIORITY_BARRIER`); it decodes to the same
    :class:`CheckpointBarrier`."""
    body = _packb([barrier.checkpoint_id, barrier.timestamp, barrier.is_savepoint,
                   barrier.location])
    return HEADER.pack(len(body), PRIORITY_BARRIER, seq) + body


def frame_sequence_number(data: bytes) -> int:
    """The sequence number in an encoded frame's header."""
    return HEADER.unpack_from(data, 0)[2]


_EOP_FRAME = EndOfPartition()
_IDLE_FRAME, _ACTIVE_FRAME = WatermarkStatus(True), WatermarkStatus(False)


def decode_frame(kind: int, body: Any) -> Frame:
    """The frame of ``kind`` whose payload is the bytes-like ``body``."""
    if kind == _RECORDS:
        return RecordBatch(pickle.loads(body))
    if kind == _RECORDS_KG:
        (n,) = _KG_COUNT.unpack_from(body, 0)
        kgs = array("H")
        kgs.frombytes(body[4 : 4 + n])
        return RecordBatch(pickle.loads(body[4 + n :]), kgs.tolist())
    if kind == _RECORDS_TS or kind == _RECORDS_KG_TS:
        timestamps, pos = _decode_timestamps(body, 0)
        kgs_list = None
        if kind == _RECORDS_KG_TS:
            (n,) = _KG_COUNT.unpack_from(body, pos)
            kgs = array("H")
            kgs.frombytes(body[pos + 4 : pos + 4 + n])
            kgs_list, pos = kgs.tolist(), pos + 4 + n
        return RecordBatch(pickle.loads(body[pos:]), kgs_list, timestamps)
    if kind == _ARROW:
        return RecordBatch(decode_arrow_batches(body))
    if kind == _IDLE:
        return _IDLE_FRAME
    if kind == _ACTIVE:
        return _ACTIVE_FRAME
    if kind == _WATERMARK:
        return Watermark(_WM.unpack_from(body, 0)[0])
    if kind == _EOP:
        return EndOfPartition(body[0]) if len(body) else _EOP_FRAME
    if kind == _BARRIER or kind == PRIORITY_BARRIER:
        cid, ts, is_savepoint, location = _unpackb(body)
        return CheckpointBarrier(int(cid), int(ts), bool(is_savepoint),
                                 None if location is None else str(location))
    if kind == _CANCEL:
        return CancelCheckpointMarker(int(_unpackb(body)))
    raise ChannelError(f"unknown frame kind {kind}")
