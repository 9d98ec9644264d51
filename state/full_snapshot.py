"""The portable full keyed-state snapshot, versioned: what both backends write and read, so
state moves between the heap and RocksDB (savepoints always use it).

Three versions; both backends read all of them (:func:`open_full_snapshot`):

* ``flowray-heap-v1``: one pickle ``{"format", "kinds", "groups": {key group: {state:
  {key: value}}}}``, with ``"values": "pickled"`` when each value is its pickle (as RocksDB
  holds it). The heap backend writes it (its state is in memory anyway); RocksDB wrote it
  before v2. It can only be read whole.
* ``flowray-keyed-v2`` (:class:`StreamedSnapshotWriter`): written as a stream, key group
  by key group, never holding more than one part and one record batch. At handle path
  ``P``:

  - a *record* is an 8-byte big-endian length and the pickle of ``(key group, state,
    [key, value, key, value, ...])`` (about ``record_bytes`` of entries; a flat list is
    smaller than pairs); a key group's records are consecutive and key groups ascend;
  - records are packed into *parts* of about ``part_bytes``: each full part is a file
    ``P.parts/<n>`` (``n`` = 00000, 00001, ...), the last partial one (the *tail*) lives in
    the index, so a small snapshot is one file;
  - the *index*, at ``P`` and written last: the pickle of ``{"format": "flowray-keyed-v2",
    "kinds": {state: kind}, "values": "pickled" | None, "parts": [(path relative to P's
    directory, size, CRC-32)], "tail": bytes, "groups": {key group: [(part, offset,
    length), ...]}}``; part number ``len(parts)`` is the tail. Relative part paths keep a
    moved savepoint directory whole; sizes and checksums make a damaged part fail the
    restore naming it (the index itself is checked by the task like any state file).

  A restoring subtask reads the index, then only the parts that hold its key groups, one
  at a time, and only their spans (:meth:`FullSnapshotReader.records`).
* ``flowray-keyed-v3`` (:class:`RawSnapshotWriter`; what RocksDB writes): v2's
  parts, tail, index and spans, but a record is the pickle of ``(key group, state, [key
  bytes, ...], [value bytes, ...])`` with every key in RocksDB's byte encoding (the 2-byte
  big-endian key group, then :func:`~flowray.state.rocksdb.layout.encode_key`) and every
  value as :func:`~flowray.state.value_codec.encode_value` wrote it; the index says
  ``"keys": "rocksdb"`` and ``"values": "pickled"``. RocksDB writes and restores it without
  decoding a key or a value (runs of entries, never one entry at a time in Python); the
  heap decodes keys and values when it restores. Key-group ranges stay intact: a record
  holds one key group.

v1 and v2 store keys as objects; v3 stores them encoded and :meth:`FullSnapshotReader.records`
decodes them, so a key written by one backend is the same key in the other.

>>> files = {}
>>> def write_file(path, data):
...     files[path] = bytes(data); return len(data)
>>> w = StreamedSnapshotWriter(write_file, "chk-1/op.keyed", {"v": "value"},
...                            pickled_values=False, part_bytes=100, record_bytes=32)
>>> for kg in range(4):
...     w.add(kg, "v", f"key-{kg}", kg * 10, 16)
>>> size = w.finish()
>>> sorted(files)
['chk-1/op.keyed', 'chk-1/op.keyed.parts/00000']
>>> reader = open_full_snapshot("chk-1/op.keyed", files.__getitem__)
>>> reader.version, [(kg, state, entries) for kg, state, entries in reader.records(range(1, 3))]
(2, [(1, 'v', [('key-1', 10)]), (2, 'v', [('key-2', 20)])])
"""

from __future__ import annotations

import io
import pickle
import posixpath
import struct
import zlib
from itertools import repeat
from operator import itemgetter, sub
from typing import Any, Callable, Container, Dict, Iterator, List, Optional, Tuple

import cloudpickle

from flowray.state.checksums import CorruptedStateError

__all__ = [
    "FORMAT_V1",
    "FORMAT_V2",
    "FORMAT_V3",
    "PICKLED_VALUES",
    "ROCKSDB_KEYS",
    "DEFAULT_PART_BYTES",
    "DEFAULT_RECORD_BYTES",
    "StreamedSnapshotWriter",
    "RawSnapshotWriter",
    "WriterStats",
    "FullSnapshotReader",
    "open_full_snapshot",
    "dumps_state",
    "loads_state",
]

#: the whole-pickle format (heap backend; RocksDB before v2)
FORMAT_V1 = "flowray-heap-v1"
#: the streamed, key-group-indexed format (RocksDB before v3)
FORMAT_V2 = "flowray-keyed-v2"
#: v2's layout with keys and values in RocksDB's byte encodings (RocksDB)
FORMAT_V3 = "flowray-keyed-v3"
#: ``"keys"`` of a v3 snapshot: 2-byte key group + ``encode_key`` bytes
ROCKSDB_KEYS = "rocksdb"
#: ``"values"`` of a snapshot whose values are their stored bytes (written from RocksDB:
#: ``value_codec.encode_value``, read with ``decode_value``); otherwise values are the
#: objects themselves
PICKLED_VALUES = "pickled"

#: a part file holds about this many bytes of records (the writer's and the reader's
#: memory bound)
DEFAULT_PART_BYTES = 16 << 20
#: a record (one pickle) holds about this many bytes of entries
DEFAULT_RECORD_BYTES = 256 << 10

_LENGTH = struct.Struct(">Q")

#: one record as read back: ``(key group, state name, [(key, value), ...])``
Record = Tuple[int, str, List[Tuple[Any, Any]]]


def dumps_state(obj: Any) -> bytes:
    """Pickle state; cloudpickle for objects pickle cannot name (classes of ``__main__``)."""
    try:
        return pickle.dumps(obj, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return cloudpickle.dumps(obj, protocol=5)


def loads_state(data: Any, where: str) -> Any:
    """Unpickle state read from ``where``; a damaged pickle is a ValueError naming it."""
    try:
        return pickle.loads(data)
    except Exception as e:
        raise ValueError(f"{where}: cannot read state snapshot: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------------------
# writing (v2 and v3)
# ---------------------------------------------------------------------------------------

class WriterStats:
    """What a snapshot writer held at most at once (its memory bound, in entries and bytes
    of entries and serialized records not yet written) and wrote."""

    __slots__ = ("entries", "peak_buffered_entries", "peak_buffered_bytes", "parts_written",
                 "bytes_written")

    def __init__(self) -> None:
        self.entries = 0
        self.peak_buffered_entries = 0
        self.peak_buffered_bytes = 0
        self.parts_written = 0
        self.bytes_written = 0

    def __repr__(self) -> str:
        return (f"WriterStats(entries={self.entries}, peak_buffered_entries="
                f"{self.peak_buffered_entries}, peak_buffered_bytes={self.peak_buffered_bytes}, "
                f"parts_written={self.parts_written}, bytes_written={self.bytes_written})")


class _PartedWriter:
    """The parts, tail, spans and index shared by v2 and v3 (see the module doc): records
    are appended key groups ascending; a part is written when it reaches ``part_bytes``."""

    _FORMAT = ""

    def __init__(self, write_file: Callable[[str, bytes], int], path: str,
                 kinds: Dict[str, str], part_bytes: int = DEFAULT_PART_BYTES,
                 record_bytes: int = DEFAULT_RECORD_BYTES) -> None:
        if part_bytes <= 0 or record_bytes <= 0:
            raise ValueError(f"part_bytes and record_bytes must be positive, got "
                             f"{part_bytes} and {record_bytes}")
        self.write_file = write_file
        self.path = path
        self.kinds = dict(kinds)
        self.part_bytes = part_bytes
        self.record_bytes = record_bytes
        self.stats = WriterStats()
        self._directory = posixpath.dirname(path)
        self._parts: List[Tuple[str, int, int]] = []
        self._groups: Dict[int, List[List[int]]] = {}
        self._part = bytearray()
        self._part_entries = 0
        self._key_group = -1
        self._finished = False

    def _check_order(self, key_group: int) -> None:
        if key_group < self._key_group:
            raise ValueError(f"{self.path}: key group {key_group} after key group "
                             f"{self._key_group}: entries must come in key-group order")

    def _append_record(self, key_group: int, data: bytes, entries: int,
                       pending_bytes: int) -> None:
        """Add one serialized record of ``entries`` entries of ``key_group``;
        ``pending_bytes``: what the caller still holds besides (for the stats)."""
        offset = len(self._part)
        self._part += _LENGTH.pack(len(data))
        self._part += data
        length = len(self._part) - offset
        part_no = len(self._parts)
        spans = self._groups.setdefault(key_group, [])
        if spans and spans[-1][0] == part_no and spans[-1][1] + spans[-1][2] == offset:
            spans[-1][2] += length
        else:
            spans.append([part_no, offset, length])
        self._part_entries += entries
        buffered_bytes = len(self._part) + pending_bytes
        if buffered_bytes > self.stats.peak_buffered_bytes:
            self.stats.peak_buffered_bytes = buffered_bytes
        if len(self._part) >= self.part_bytes:
            self._flush_part()

    def _flush_part(self) -> None:
        relative = f"{posixpath.basename(self.path)}.parts/{len(self._parts):05d}"
        data = bytes(self._part)
        self._part = bytearray()
        self._part_entries = 0
        written = self.write_file(posixpath.join(self._directory, relative), data)
        self._parts.append((relative, len(data), zlib.crc32(data) & 0xFFFFFFFF))
        self.stats.parts_written += 1
        self.stats.bytes_written += len(data) if written is None else written

    def _flush_record(self) -> None:
        """Serialize what is batched (a subclass' batch)."""

    def _index_fields(self) -> Dict[str, Any]:
        return {}

    def finish(self) -> Optional[int]:
        """Write the index (with the tail part); bytes written in all, or ``None`` when no
        entry was added (nothing is written then)."""
        if self._finished:
            raise RuntimeError(f"{self.path}: the snapshot was already finished")
        self._finished = True
        self._flush_record()
        if not self._groups:
            return None
        index = {
            "format": self._FORMAT,
            "kinds": self.kinds,
            **self._index_fields(),
            "parts": self._parts,
            "tail": bytes(self._part),
            "groups": {kg: [tuple(s) for s in spans] for kg, spans in self._groups.items()},
        }
        data = dumps_state(index)
        self._part = bytearray()
        written = self.write_file(self.path, data)
        self.stats.bytes_written += len(data) if written is None else written
        return self.stats.bytes_written


class StreamedSnapshotWriter(_PartedWriter):
    """Writes one ``flowray-keyed-v2`` snapshot at ``path`` through ``write_file(path,
    data) -> size`` from entries fed one by one with :meth:`add`, key groups ascending;
    :meth:`finish` writes the index. Holds at most one record batch (about
    ``record_bytes``) and one part (about ``part_bytes``) -- :attr:`stats` counts it.

    ``kinds``: state name -> ``StateKind`` value of every state; ``pickled_values``: the
    values fed are their stored bytes (RocksDB's), stored as they are."""

    _FORMAT = FORMAT_V2

    def __init__(self, write_file: Callable[[str, bytes], int], path: str,
                 kinds: Dict[str, str], pickled_values: bool,
                 part_bytes: int = DEFAULT_PART_BYTES,
                 record_bytes: int = DEFAULT_RECORD_BYTES) -> None:
        super().__init__(write_file, path, kinds, part_bytes, record_bytes)
        self.pickled_values = pickled_values
        self._state: Optional[str] = None
        self._batch: List[Any] = []  # key, value, key, value, ...
        self._batch_bytes = 0

    def add(self, key_group: int, state: str, key: Any, value: Any, size: int) -> None:
        """One entry; ``size``: its approximate serialized size in bytes (what bounds the
        record batch). Key groups must not descend."""
        if key_group != self._key_group or state != self._state:
            self._check_order(key_group)
            self._flush_record()
            self._key_group, self._state = key_group, state
        self._batch.append(key)
        self._batch.append(value)
        self._batch_bytes += size
        stats = self.stats
        stats.entries += 1
        buffered = self._part_entries + len(self._batch) // 2
        if buffered > stats.peak_buffered_entries:
            stats.peak_buffered_entries = buffered
        if self._batch_bytes >= self.record_bytes:
            self._flush_record()

    def _flush_record(self) -> None:
        if not self._batch:
            return
        batch, pending = self._batch, self._batch_bytes
        self._batch = []
        self._batch_bytes = 0
        data = dumps_state((self._key_group, self._state, batch))
        self._append_record(self._key_group, data, len(batch) // 2, pending)

    def _index_fields(self) -> Dict[str, Any]:
        return {"values": PICKLED_VALUES if self.pickled_values else None}


def _dumps_flat(obj: Any) -> bytes:
    """Pickle ``obj`` without the memo (``Pickler.fast``): 3x faster for long lists of
    bytes; only for objects without cycles or shared parts (a record of bytes is one)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.fast = True
    pickler.dump(obj)
    return out.getvalue()


class RawSnapshotWriter(_PartedWriter):
    """Writes one ``flowray-keyed-v3`` snapshot at ``path`` through ``write_file(path,
    data) -> size`` from runs of encoded entries (:meth:`add_run`: keys in RocksDB's byte
    encoding, values as stored), key groups ascending; :meth:`finish` writes the index.
    Each run becomes one record, so a run should hold about ``record_bytes``; the writer
    holds one part (about ``part_bytes``) besides -- :attr:`stats` counts it."""

    _FORMAT = FORMAT_V3

    def add_run(self, key_group: int, state: str, keys: List[bytes], values: List[bytes],
                size: int) -> None:
        """Entries ``zip(keys, values)`` of state ``state`` in ``key_group`` (every key
        starts with its 2 bytes), ``size`` bytes of keys and values. Key groups must not
        descend."""
        if key_group != self._key_group:
            self._check_order(key_group)
            self._key_group = key_group
        if not keys:
            return
        stats = self.stats
        stats.entries += len(keys)
        buffered = self._part_entries + len(keys)
        if buffered > stats.peak_buffered_entries:
            stats.peak_buffered_entries = buffered
        data = _dumps_flat((key_group, state, keys, values))
        self._append_record(key_group, data, len(keys), 0)

    def _index_fields(self) -> Dict[str, Any]:
        return {"keys": ROCKSDB_KEYS, "values": PICKLED_VALUES}


# ---------------------------------------------------------------------------------------
# reading (v1, v2 and v3)
# ---------------------------------------------------------------------------------------

_VERSIONS = {FORMAT_V1: 1, FORMAT_V2: 2, FORMAT_V3: 3}

#: one record of encoded entries: ``(key group, state, [key bytes], [value bytes])``
RawRecord = Tuple[int, str, List[bytes], List[bytes]]


_TAG = itemgetter(2)
_LENGTH_BYTE = itemgetter(3)
_PAYLOAD = itemgetter(slice(4, None))
_T_STR = 0x12  # flowray.state.rocksdb.layout's tag of a string


def _decoded_keys(keys: List[bytes]) -> List[Any]:
    """The keys of RocksDB-encoded ``keys`` (2-byte key group + ``encode_key``). A record
    of strings under 128 bytes only, the common case, is decoded without a Python loop."""
    if keys and set(map(_TAG, keys)) == {_T_STR}:
        lengths = list(map(_LENGTH_BYTE, keys))
        if max(lengths) < 0x80 and lengths == list(map(sub, map(len, keys), repeat(4))):
            try:
                return list(map(bytes.decode, map(_PAYLOAD, keys)))
            except UnicodeDecodeError:  # a lone surrogate (encoded with surrogatepass)
                pass
    from flowray.state.rocksdb.layout import decode_key  # the codec's home; lazily

    return [decode_key(k, 2) for k in keys]


class FullSnapshotReader:
    """A full snapshot opened for restore (:func:`open_full_snapshot`): ``kinds`` (state
    name -> ``StateKind`` value), ``pickled`` (values are their stored bytes, to be read
    with ``value_codec.decode_value``), ``encoded_keys`` (v3: :meth:`raw_records` gives
    keys in RocksDB's encoding), ``version``."""

    def __init__(self, path: str, read: Callable[[str], bytes], index: Dict[str, Any]) -> None:
        self.path = path
        self._read = read
        self._index = index
        self.version = _VERSIONS[index["format"]]
        self.kinds: Dict[str, str] = dict(index["kinds"])
        self.pickled = index.get("values") == PICKLED_VALUES
        self.encoded_keys = index.get("keys") == ROCKSDB_KEYS
        if self.version == 3 and not self.encoded_keys:
            raise ValueError(f"{path}: a {FORMAT_V3!r} snapshot with keys "
                             f"{index.get('keys')!r}; this flowray reads {ROCKSDB_KEYS!r}")

    def key_groups(self) -> List[int]:
        """The key groups that hold entries, ascending."""
        return sorted(self._index["groups"])

    def records(self, key_groups: Container[int]) -> Iterator[Record]:
        """``(key group, state, [(key, value), ...])`` of the key groups in
        ``key_groups``, ascending by key group, keys decoded; v2 and v3 read only the parts
        that hold them, one at a time."""
        if self.version == 1:
            yield from self._records_v1(key_groups)
        elif self.version == 2:
            for kg, state, flat in self._spans(key_groups):
                yield kg, state, list(zip(flat[0::2], flat[1::2]))
        else:
            for kg, state, keys, values in self.raw_records(key_groups):
                yield kg, state, list(zip(_decoded_keys(keys), values))

    def raw_records(self, key_groups: Container[int]) -> Iterator[RawRecord]:
        """v3 only: ``(key group, state, [key bytes], [value bytes])`` of the key groups in
        ``key_groups`` as stored (keys in RocksDB's encoding, each checked to start with
        its key group; values as stored)."""
        if self.version != 3:
            raise ValueError(f"{self.path}: version {self.version} stores no encoded keys")
        for record in self._spans(key_groups):
            kg, state, keys, values = record
            prefix = kg.to_bytes(2, "big")
            # keys ascend, so the first and the last bound all of them
            if len(keys) != len(values) or (keys and (keys[0][:2] != prefix
                                                      or keys[-1][:2] != prefix)):
                raise CorruptedStateError(
                    f"{self.path}: a record of key group {kg} holds {len(keys)} keys, "
                    f"{len(values)} values, keys outside the key group")
            yield record

    def _records_v1(self, key_groups: Container[int]) -> Iterator[Record]:
        groups = self._index["groups"]
        for kg in sorted(groups):
            if kg in key_groups:
                for name, entries in groups[kg].items():
                    yield kg, name, list(entries.items())

    def _spans(self, key_groups: Container[int]) -> Iterator[Any]:
        """The records (as unpickled) of v2 and v3 spans of ``key_groups``."""
        by_part: Dict[int, List[Tuple[int, int, int]]] = {}
        for kg, spans in self._index["groups"].items():
            if kg in key_groups:
                for part_no, offset, length in spans:
                    by_part.setdefault(part_no, []).append((offset, length, kg))
        for part_no in sorted(by_part):
            data = self._part(part_no)
            for offset, length, kg in sorted(by_part[part_no]):
                for record in self._parse(data, offset, length, part_no):
                    if record[0] != kg:
                        raise CorruptedStateError(
                            f"{self.path}: part {part_no} at {offset} holds key group "
                            f"{record[0]}, the index says {kg}")
                    yield record
            del data

    def _part(self, part_no: int) -> bytes:
        parts = self._index["parts"]
        if part_no == len(parts):
            return self._index["tail"]
        relative, size, crc = parts[part_no]
        path = posixpath.join(posixpath.dirname(self.path), relative)
        data = self._read(path)
        got = (len(data), zlib.crc32(data) & 0xFFFFFFFF)
        if got != (size, crc):
            raise CorruptedStateError(
                f"checkpoint file {path} is damaged: expected {size} bytes with CRC-32 "
                f"{crc:08x}, read {got[0]} bytes with CRC-32 {got[1]:08x}")
        return data

    def _parse(self, data: bytes, offset: int, length: int, part_no: int) -> Iterator[Any]:
        view = memoryview(data)
        pos, end = offset, offset + length
        if end > len(data):
            raise CorruptedStateError(f"{self.path}: part {part_no} has {len(data)} bytes, "
                                      f"the index names bytes up to {end}")
        where = f"{self.path} (part {part_no})"
        while pos < end:
            (n,) = _LENGTH.unpack_from(view, pos)
            pos += _LENGTH.size
            yield loads_state(view[pos:pos + n], where)
            pos += n


def open_full_snapshot(path: str, read: Callable[[str], bytes]) -> FullSnapshotReader:
    """The full snapshot at ``path`` (v1, v2 or v3; ``read(path) -> bytes`` reads files);
    :class:`ValueError` naming ``path`` if it is none of them."""
    index = loads_state(read(path), path)
    if not isinstance(index, dict) or index.get("format") not in _VERSIONS:
        found = index.get("format") if isinstance(index, dict) else type(index).__name__
        known = ", ".join(repr(f) for f in _VERSIONS)
        raise ValueError(f"{path}: not a full keyed-state snapshot (found {found!r}; this "
                         f"flowray reads {known})")
    return FullSnapshotReader(path, read, index)
