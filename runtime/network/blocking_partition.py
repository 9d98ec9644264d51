"""Blocking result partitions for BATCH mode (Flink's ``BLOCKING`` result partitions).

A producer subtask writes its whole output, one file per consumer subtask (a
*subpartition*), and consumers read the files later, as often as they need (a restarted
consumer reads again from the start), possibly in another process on the same machine or
on a shared mount. Contract:

* Layout: ``<root>/<job_id>/<safe name of the channel id>``; channel ids such as
  ``"e3/0->1"`` (edge/producer->consumer) map to collision-free file names made of
  ``[a-z0-9_-]`` and ``%XX`` escapes (see :func:`safe_file_name`), so a name never holds
  a dot and never clashes with another channel's ``.inprogress`` file.
* :meth:`BlockingPartitionStore.writer` gives a :class:`~flowray.runtime.network.channel.ChannelWriter`
  that appends frames, with the codec and sequence numbers of every other channel, to
  ``<file>.inprogress``. It never blocks (no credits: ``credits == 0``, ``in_flight() == 0``).
  ``close()`` after an :class:`~flowray.runtime.network.elements.EndOfPartition` frame fsyncs and
  atomically renames the file to its final name: only then is the subpartition
  *available*. ``close()`` without end-of-partition (a failed or cancelled producer) and
  :meth:`BlockingChannelWriter.discard` delete the in-progress file: never available.
  Writing after end-of-partition or after close raises.
* :meth:`BlockingPartitionStore.reader` gives a :class:`~flowray.runtime.network.channel.ChannelReader`
  over an available subpartition, reading from the start in chunks (never the whole file
  at once). ``poll()`` returns the next frame; after end-of-partition it returns ``None``.
  A missing file (lost, released, or the producer never finished) raises
  :class:`PartitionNotFoundError` naming the channel and the file at :meth:`open` or at the
  first ``poll()``; a file that ends before end-of-partition raises
  :class:`CorruptPartitionError` (a subclass: both mean "produce it again"). Sequence gaps
  or replays raise :class:`~flowray.runtime.network.channel.ChannelSequenceError` as on any
  channel. Each reader has its own file handle, so any number of readers (threads or
  processes) may read one subpartition at once; one reader is not thread-safe.
* ``release`` deletes subpartition files (idempotent), ``release_all`` the job folder.
* :class:`MixedInputGate` waits on blocking readers (a regular file cannot go into
  select/epoll: a blocking reader is ready until it has returned end-of-partition or
  raised) together with other readers, whose waiting it delegates to an inner gate.

>>> import shutil, tempfile
>>> from flowray.runtime.network.elements import EndOfPartition, RecordBatch, Watermark
>>> root = tempfile.mkdtemp()
>>> store = BlockingPartitionStore(root, "job-1")
>>> safe_file_name("e3/0->1")
'e3%2F0-%3E1'
>>> w = store.writer("e3/0->1")
>>> w.write(RecordBatch([1, 2])); w.write(Watermark(5)); w.write(EndOfPartition())
>>> store.is_available("e3/0->1")
False
>>> w.close(); store.is_available("e3/0->1")
True
>>> for attempt in range(2):  # read twice, e.g. by a restarted consumer
...     r = store.reader("e3/0->1")
...     print(r.poll().records, r.poll(), r.poll(), r.poll())
...     r.close()
[1, 2] Watermark(timestamp=5) EndOfPartition(stop_mode=0) None
[1, 2] Watermark(timestamp=5) EndOfPartition(stop_mode=0) None
>>> store.release(["e3/0->1"]); store.reader("e3/0->1").poll()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
flowray.runtime.network.blocking_partition.PartitionNotFoundError: channel 'e3/0->1': blocking partition file .../job-1/e3%2F0-%3E1 not found (lost or released)
>>> store.release_all(); shutil.rmtree(root)
"""

from __future__ import annotations

from flowray.common.files import fsync_dir, safe_file_name

import os
import shutil
import time
from typing import IO, Iterable, List, Optional, Sequence, Union

from flowray.runtime.network.frame_codec import HEADER, decode_frame, encode_frame
from flowray.runtime.network.channel import (
    ChannelClosedError,
    ChannelError,
    ChannelReader,
    ChannelStats,
    ChannelWriter,
    InputGate,
    _SequenceChecker,
)
from flowray.runtime.network.elements import EndOfPartition, Frame, RecordBatch

__all__ = [
    "PartitionNotFoundError",
    "CorruptPartitionError",
    "BlockingPartitionStore",
    "BlockingChannelWriter",
    "BlockingChannelReader",
    "MixedInputGate",
    "safe_file_name",
    "INPROGRESS_SUFFIX",
    "DEFAULT_READ_CHUNK",
]

INPROGRESS_SUFFIX = ".inprogress"
DEFAULT_READ_CHUNK = 1 << 20  # bytes a reader takes from its file at a time
_WRITE_BUFFER = 1 << 18


class PartitionNotFoundError(ChannelError):
    """A blocking subpartition is not there to read: lost, released, or never finished."""

    def __init__(self, message: str, channel_id: str = "", path: str = "") -> None:
        super().__init__(message)
        self.channel_id = channel_id
        self.path = path


class CorruptPartitionError(PartitionNotFoundError):
    """A published subpartition file ends before its end-of-partition frame."""


ChannelIds = Union[str, Iterable[str]]


def _ids(channel_ids: ChannelIds) -> List[str]:
    # a lone string is one channel id, not an iterable of one-letter ids
    return [channel_ids] if isinstance(channel_ids, str) else list(channel_ids)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class BlockingPartitionStore:
    """The blocking subpartition files of one job under ``<root>/<job_id>``. Holds only
    paths, so it pickles to other processes on the same machine (or shared mount)."""

    def __init__(self, root_dir: str, job_id: str) -> None:
        if (not isinstance(job_id, str) or not job_id or job_id in (".", "..")
                or "/" in job_id or "\\" in job_id or "\0" in job_id):
            raise ValueError(f"job id {job_id!r} cannot be a folder name")
        self.root_dir = os.path.abspath(os.fspath(root_dir))
        self.job_id = job_id
        self.job_dir = os.path.join(self.root_dir, job_id)

    def __repr__(self) -> str:
        return f"BlockingPartitionStore({self.root_dir!r}, {self.job_id!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BlockingPartitionStore)
                and (other.root_dir, other.job_id) == (self.root_dir, self.job_id))

    def __hash__(self) -> int:
        return hash((self.root_dir, self.job_id))

    # -- layout ----------------------------------------------------------------------------
    def path(self, channel_id: str) -> str:
        """The final (available) file of ``channel_id``."""
        return os.path.join(self.job_dir, safe_file_name(channel_id))

    def inprogress_path(self, channel_id: str) -> str:
        return self.path(channel_id) + INPROGRESS_SUFFIX

    # -- ends --------------------------------------------------------------------------------
    def writer(self, channel_id: str, fsync: bool = True) -> "BlockingChannelWriter":
        """A writer to ``<file>.inprogress`` (an earlier attempt's in-progress file is
        replaced; an earlier attempt's available file stays readable until this one is
        published over it)."""
        return BlockingChannelWriter(channel_id, self.path(channel_id), fsync=fsync)

    def reader(self, channel_id: str,
               chunk_size: int = DEFAULT_READ_CHUNK) -> "BlockingChannelReader":
        """A reader from the start of ``channel_id``'s file; opens it at the first poll."""
        return BlockingChannelReader(channel_id, self.path(channel_id), chunk_size)

    # -- bookkeeping -------------------------------------------------------------------------
    def is_available(self, channel_id: str) -> bool:
        return os.path.isfile(self.path(channel_id))

    def is_partition_available(self, channel_ids: ChannelIds) -> bool:
        """Whether every subpartition in ``channel_ids`` (one producer's result) is
        available; true for none."""
        return all(self.is_available(cid) for cid in _ids(channel_ids))

    def size_bytes(self, channel_ids: ChannelIds) -> int:
        """Bytes in the available files among ``channel_ids`` (missing ones count 0)."""
        total = 0
        for cid in _ids(channel_ids):
            try:
                total += os.path.getsize(self.path(cid))
            except FileNotFoundError:
                pass
        return total

    def release(self, channel_ids: ChannelIds) -> None:
        """Delete the files (available and in-progress) of ``channel_ids``; idempotent.
        Readers that already opened a file keep reading it (POSIX)."""
        for cid in _ids(channel_ids):
            _unlink(self.path(cid))
            _unlink(self.inprogress_path(cid))

    def release_all(self) -> None:
        """Delete the job's folder with every file in it; idempotent."""

        def ignore_missing(func, path, exc_info):  # type: ignore[no-untyped-def]
            if not isinstance(exc_info[1], FileNotFoundError):
                raise exc_info[1]

        shutil.rmtree(self.job_dir, onerror=ignore_missing)


class BlockingChannelWriter(ChannelWriter):
    """Appends encoded frames to ``<path>.inprogress``; see the module contract."""

    def __init__(self, channel_id: str, path: str, fsync: bool = True) -> None:
        self.channel_id = channel_id
        self.path = path
        self.inprogress_path = path + INPROGRESS_SUFFIX
        self.credits = 0  # never blocks: nothing is "in flight"
        self.stats = ChannelStats()
        self.fsync = fsync
        self.closed = False
        self.published = False
        self._ended = False
        self._seq = 0
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # A fresh file (new inode), never a truncated old one: a zombie earlier attempt
        # still writing its file then cannot publish over this one (see _still_ours).
        for attempt in range(3):
            _unlink(self.inprogress_path)
            try:
                fd = os.open(self.inprogress_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                if attempt == 2:
                    raise
        self._file: Optional[IO[bytes]] = open(fd, "wb", buffering=_WRITE_BUFFER)
        st = os.fstat(self._file.fileno())
        self._identity = (st.st_dev, st.st_ino)

    def in_flight(self) -> int:
        return 0

    def write(self, frame: Frame) -> None:
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: write after close")
        if self._ended:
            raise ChannelError(f"channel {self.channel_id}: write after end-of-partition")
        data = encode_frame(frame, self._seq)
        assert self._file is not None
        self._file.write(data)
        self._seq += 1
        st = self.stats
        st.frames += 1
        st.bytes += len(data)
        if type(frame) is RecordBatch:
            st.records += len(frame.records)
        elif type(frame) is EndOfPartition:
            self._ended = True

    def _still_ours(self) -> bool:
        """Whether the in-progress path is still this writer's file (not replaced by a later
        attempt of the same producer, nor deleted by a release)."""
        try:
            st = os.stat(self.inprogress_path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def close(self) -> None:
        """Publish the subpartition if end-of-partition was written, else discard it."""
        if self.closed:
            return
        if not self._ended:
            self.discard()
            return
        self.closed = True
        f, self._file = self._file, None
        assert f is not None
        try:
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
            f.close()
            if not self._still_ours():
                raise ChannelError(
                    f"channel {self.channel_id}: {self.inprogress_path} was released or "
                    "replaced by another attempt before it was published")
            os.replace(self.inprogress_path, self.path)
        except BaseException:
            try:
                f.close()
            except OSError:
                pass
            if self._still_ours():
                _unlink(self.inprogress_path)
            raise
        if self.fsync:
            fsync_dir(os.path.dirname(self.path))
        self.published = True

    def discard(self) -> None:
        """Close and delete the in-progress file without publishing; idempotent."""
        if self.closed:
            return
        self.closed = True
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
        if self._still_ours():
            _unlink(self.inprogress_path)


class BlockingChannelReader(ChannelReader):
    """Reads one available subpartition file from the start, ``chunk_size`` bytes at a
    time (a frame larger than a chunk is read whole); see the module contract."""

    def __init__(self, channel_id: str, path: str, chunk_size: int = DEFAULT_READ_CHUNK) -> None:
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self.channel_id = channel_id
        self.path = path
        self.chunk_size = chunk_size
        self.bytes_read = 0
        self.frames_read = 0
        self.closed = False
        self._file: Optional[IO[bytes]] = None
        self._buf = bytearray()
        self._pos = 0
        self._seqs = _SequenceChecker(channel_id)
        self._ended = False

    def has_frames(self) -> bool:
        """True until end-of-partition (or an error) was returned: the file is complete, so
        a poll yields a frame or raises, never waits."""
        return not self._ended and not self.closed

    def open(self) -> None:
        """Open the file now (``poll`` does it otherwise); raises
        :class:`PartitionNotFoundError` if it is missing."""
        if self._file is not None or self._ended:
            return
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: reader closed")
        try:
            self._file = open(self.path, "rb", buffering=0)
        except FileNotFoundError:
            if os.path.exists(self.path + INPROGRESS_SUFFIX):
                why = "the producer has not finished it"
            else:
                why = "lost or released"
            raise PartitionNotFoundError(
                f"channel {self.channel_id!r}: blocking partition file {self.path} "
                f"not found ({why})", self.channel_id, self.path) from None

    def _finish(self) -> None:
        self._ended = True
        self._buf = bytearray()
        self._pos = 0
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def poll(self) -> Optional[Frame]:
        if self._ended:
            return None
        if self.closed:
            raise ChannelClosedError(f"channel {self.channel_id}: poll after close")
        if self._file is None:
            self.open()
        f = self._file
        assert f is not None
        buf = self._buf
        while True:
            pos = self._pos
            avail = len(buf) - pos
            if avail >= HEADER.size:
                length, kind, seq = HEADER.unpack_from(buf, pos)
                end = pos + HEADER.size + length
                if end <= len(buf):
                    break
                need = end - len(buf)
            else:
                need = HEADER.size - avail
            if pos:
                del buf[:pos]
                self._pos = 0
            data = f.read(max(self.chunk_size, need))
            if not data:
                self._finish()
                raise CorruptPartitionError(
                    f"channel {self.channel_id!r}: blocking partition file {self.path} ends "
                    f"after {self.frames_read} frames without end-of-partition (truncated?)",
                    self.channel_id, self.path)
            self.bytes_read += len(data)
            buf += data
        try:
            self._seqs.check(seq)
        except ChannelError:
            self._finish()
            raise
        with memoryview(buf) as view:
            frame = decode_frame(kind, view[pos + HEADER.size:end])
        self.frames_read += 1
        if end == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
        if type(frame) is EndOfPartition:
            self._finish()
        return frame

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        f, self._file = self._file, None
        if f is not None:
            f.close()
        self._buf = bytearray()
        self._pos = 0


class MixedInputGate(InputGate):
    """An :class:`~flowray.runtime.network.channel.InputGate` over blocking readers and others.

    Blocking readers are ready while they have something to return (see
    :meth:`BlockingChannelReader.has_frames`); the others wait in ``inner`` (a socket or
    in-process gate). With a blocking reader ready, ``wait`` returns the ready blocking
    readers plus whatever ``inner`` has ready right now (timeout 0), in the order given;
    otherwise it waits in ``inner`` for up to ``timeout_s``.
    """

    def __init__(self, inner: Optional[InputGate] = None) -> None:
        self.inner = inner
        self._closed = False

    def wait(self, readers: Sequence[ChannelReader], timeout_s: float) -> List[ChannelReader]:
        blocking_ready = set()
        others = []
        for r in readers:
            if isinstance(r, BlockingChannelReader):
                if r.has_frames():
                    blocking_ready.add(id(r))
            else:
                others.append(r)
        if others and self.inner is None:
            raise ChannelError(
                "MixedInputGate without an inner gate cannot wait on "
                f"{type(others[0]).__name__} (channel {others[0].channel_id})")
        if blocking_ready:
            other_ready = self.inner.wait(others, 0) if others else []  # type: ignore[union-attr]
        elif self.inner is not None:
            other_ready = self.inner.wait(others, timeout_s)
        else:
            # only exhausted blocking readers: nothing can arrive; pause briefly as the
            # socket gate does with nothing to wait on
            time.sleep(max(0.0, min(timeout_s, 0.05)))
            return []
        if not blocking_ready:
            return list(other_ready)
        picked = blocking_ready | {id(r) for r in other_ready}
        return [r for r in readers if id(r) in picked]

    def wakeup(self) -> None:
        if self.inner is not None:
            self.inner.wakeup()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.inner is not None:
            self.inner.close()
