"""Arrow record batches travel through channels as Arrow IPC, one element each; other
records are still pickled; key groups of a columnar keyed exchange match the row path."""

import pickle

import pyarrow as pa
import pytest

from flowray.runtime.network.columnar_partitioner import ColumnarKeyGroupPartitioner
from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.frame_codec import HEADER, decode_frame, encode_frame
from flowray.runtime.network.partitioners import KeySelectorError
from flowray.state.columnar_keys import column_keys
from flowray.state.key_groups import (
    KeyGroupAssigner,
    assign_to_key_group,
    compute_operator_index_for_key_group,
)


def _roundtrip(frame):
    data = encode_frame(frame, seq=3)
    length, kind, seq = HEADER.unpack_from(data)
    assert seq == 3 and length == len(data) - HEADER.size
    return kind, decode_frame(kind, memoryview(data)[HEADER.size:])


def test_record_batches_travel_as_arrow_ipc_not_pickle(monkeypatch):
    b1 = pa.record_batch({"user": ["a", None], "n": [1, 2]})
    b2 = pa.record_batch({"x": [1.5]})
    monkeypatch.setattr(pickle, "dumps", _no_pickle)
    kind, frame = _roundtrip(RecordBatch([b1, b2]))
    assert kind == 11
    assert [b.equals(e) for b, e in zip(frame.records, [b1, b2])] == [True, True]
    assert frame.key_groups is None and frame.timestamps is None


def _no_pickle(*args, **kwargs):
    raise AssertionError("an Arrow batch was pickled")


def test_a_frame_mixing_rows_and_batches_is_pickled():
    b = pa.record_batch({"n": [1]})
    kind, frame = _roundtrip(RecordBatch([b, ("a", 1)]))
    assert kind != 11
    assert frame.records[0].equals(b) and frame.records[1] == ("a", 1)


def test_an_empty_batch_keeps_its_schema():
    b = pa.record_batch({"n": pa.array([], pa.int32())})
    _, frame = _roundtrip(RecordBatch([b]))
    assert frame.records[0].schema == b.schema and frame.records[0].num_rows == 0


@pytest.mark.parametrize("values", [
    ["a", "b", None, "a", "ü", ""],
    [1, -5, None, 2**40, 1, 0],
    [1.5, 2.0, None, -0.25, 2.0, 7.0],
    [b"x", b"", None, b"x", b"yy", b"z"],
])
def test_column_key_groups_are_the_row_paths(values):
    keys = column_keys(pa.array(values), KeyGroupAssigner(128))
    assert keys.row_key_groups.tolist() == [assign_to_key_group(v, 128) for v in values]
    assert [keys.keys[i] for i in keys.indices.tolist()] == values


def test_columnar_key_by_sends_each_row_where_the_row_path_sends_it():
    users = [f"u{i % 37}" for i in range(500)] + [None]
    batch = pa.record_batch({"user": users, "i": list(range(len(users)))})
    p = ColumnarKeyGroupPartitioner("user", 128)
    p.setup(3, 0)
    out = [[], [], []]
    p.route([batch], out, [[], [], []])
    seen = []
    for c, elements in enumerate(out):
        for e in elements:
            for u, i in zip(e.column("user").to_pylist(), e.column("i").to_pylist()):
                assert compute_operator_index_for_key_group(
                    128, 3, assign_to_key_group(u, 128)) == c
                seen.append(i)
    assert sorted(seen) == list(range(len(users)))
    # within a channel the rows keep their order
    for elements in out:
        for e in elements:
            idx = e.column("i").to_pylist()
            assert idx == sorted(idx)


def test_columnar_key_by_on_a_missing_column_names_it():
    p = ColumnarKeyGroupPartitioner("nope", 128)
    p.setup(2, 0)
    with pytest.raises(KeySelectorError, match="nope"):
        p.route([pa.record_batch({"user": ["a"]})], [[], []], [[], []])


def test_columnar_key_by_rejects_rows():
    p = ColumnarKeyGroupPartitioner("user", 128)
    p.setup(2, 0)
    with pytest.raises(TypeError, match="RecordBatch"):
        p.route([("a", 1)], [[], []], [[], []])


def test_decoded_batches_do_not_hold_the_transport_buffer():
    # the socket transport reads into a bytearray it clears and resizes between frames
    b = pa.record_batch({"user": ["a", "b"], "n": [1, 2]})
    buf = bytearray(encode_frame(RecordBatch([b]), seq=1))
    _, kind, _ = HEADER.unpack_from(buf)
    view = memoryview(buf)
    frame = decode_frame(kind, view[HEADER.size:])
    view.release()
    buf.clear()  # raises BufferError if a batch still exports the buffer
    buf.extend(b"x" * 100)
    assert frame.records[0].equals(b)
