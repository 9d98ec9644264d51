"""Arrow record batches on the wire: a channel batch whose records are all
``pyarrow.RecordBatch`` es (a columnar stream's elements) travels as Arrow IPC streams, one
per element, never as pickled rows.

Body: element count (u32), then per element its IPC stream's length (u64) and bytes. Decoding copies the body once (the
transports reuse their read buffers) and reads the batches from that copy.
Columnar elements carry neither key groups (a keyed columnar operator hashes its key column
itself) nor timestamps.

pyarrow is imported on first use: ``import flowray`` does not import it.
"""

from __future__ import annotations

import struct
from typing import Any, List

__all__ = ["is_arrow_batch", "all_arrow_batches", "encode_arrow_batches",
           "decode_arrow_batches"]

_COUNT = struct.Struct("<I")
_LENGTH = struct.Struct("<Q")


def is_arrow_batch(obj: Any) -> bool:
    """Whether ``obj`` is a ``pyarrow.RecordBatch`` (without importing pyarrow)."""
    t = type(obj)
    return t.__name__ == "RecordBatch" and t.__module__ == "pyarrow.lib"


def all_arrow_batches(records: List[Any]) -> bool:
    """Whether ``records`` is non-empty and holds only ``pyarrow.RecordBatch`` es."""
    return bool(records) and all(is_arrow_batch(r) for r in records)


def encode_arrow_batches(batches: List[Any]) -> bytes:
    """The frame body of ``batches`` (see the module doc)."""
    import pyarrow as pa

    parts = [_COUNT.pack(len(batches))]
    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        buf = sink.getvalue()
        parts.append(_LENGTH.pack(buf.size))
        parts.append(buf.to_pybytes())
    return b"".join(parts)


def decode_arrow_batches(body: Any) -> List[Any]:
    """The record batches of a body made by :func:`encode_arrow_batches`."""
    import pyarrow as pa

    # a copy: the transport reuses (and resizes) the buffer ``body`` views, and the
    # batches read from it would keep pointing into it
    buf = pa.py_buffer(bytes(body))
    (count,) = _COUNT.unpack_from(buf, 0)
    pos, out = _COUNT.size, []
    for _ in range(count):
        (n,) = _LENGTH.unpack_from(buf, pos)
        pos += _LENGTH.size
        reader = pa.ipc.open_stream(buf.slice(pos, n))
        out.append(reader.read_next_batch())
        pos += n
    return out
