"""A bounded source of the lines of local text files, shaped like PyFlink's ``FileSource``.

``FileSource.for_record_stream_format(StreamFormat.text_line_format(), *paths).build()``
reads every line of the given files (and of the non-hidden files directly inside the given
directories) once. The file set is fixed when the source is built, sorted by path.

A record is one line, decoded (UTF-8 unless told otherwise), without its line terminator
(``\\n``, or ``\\r\\n``); other whitespace is kept, an empty line is an empty string, and a
last line without a terminator is still a line.

The source is split-based (see :mod:`flowray.operators.sources`): each file is a split, a
:class:`FileSourceSplit` ``(path, offset)`` whose progress is the byte offset of its next
line. A job that starts without state deals the files round-robin (subtask ``i`` of ``p``
reads files ``i, i+p, ...``); a reader reads its splits in order, and its checkpointed
state is the files it has not finished, each at its offset, so a restore, at any
parallelism, seeks there and reads on: no line is read twice or skipped.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "a.txt"), "w") as f:
...     _ = f.write("one\\ntwo\\nthree")
>>> source = FileSource.for_record_stream_format(
...     StreamFormat.text_line_format(), folder).build()
>>> reader = source.create_reader(SourceReaderContext(0, 1))
>>> reader.add_splits(source.create_splits(1))
>>> reader.poll_next(2)
['one', 'two']
>>> state = reader.snapshot_state()
>>> [(os.path.basename(split.path), split.offset) for split in state]
[('a.txt', 8)]
>>> again = source.create_reader(SourceReaderContext(0, 1))
>>> again.add_splits(state)
>>> again.poll_next(10), again.poll_next(10)
(['three'], None)
>>> again.snapshot_state()
[]

A reader given no splits (used directly, or restored from a position of a run that did not
use splits) reads its round-robin share of the files; its position is then ``(file index,
byte offset)`` in that share, and :meth:`FileSourceReader.restore_state` rewinds to it.

>>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import Any, BinaryIO, List, Optional, Sequence

from flowray.common.compat import not_implemented
from flowray.operators.sources import (
    Boundedness,
    ShareOrSplitReader,
    Source,
    SourceReaderContext,
)
from flowray.operators.local_files import local_path

__all__ = ["StreamFormat", "FileSource", "FileSourceBuilder", "FileSourceReader",
           "FileSourceSplit"]


class StreamFormat:
    """How a file's bytes become records; only ``text_line_format`` exists."""

    def __init__(self, charset: str) -> None:
        try:
            codecs.lookup(charset)
        except LookupError:
            raise ValueError(f"text_line_format: unknown charset {charset!r}") from None
        if "\n".encode(charset) != b"\n" or "a".encode(charset) != b"a":
            raise ValueError(f"text_line_format: charset {charset!r} is not ASCII-compatible "
                             f"(lines are split on the byte b'\\n')")
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        """One record per line of text in ``charset_name`` (an ASCII-compatible charset)."""
        return StreamFormat(charset_name)

    def __repr__(self) -> str:
        return f"StreamFormat.text_line_format({self.charset!r})"


def _local_path(path: str) -> str:
    return local_path(path, "FileSource")


def enumerate_files(paths: Sequence[str]) -> List[str]:
    """Files named in ``paths`` plus the non-hidden regular files directly inside the
    directories named, as absolute paths, sorted and without duplicates."""
    found = set()
    for p in paths:
        local = _local_path(p)
        if os.path.isdir(local):
            for name in os.listdir(local):
                full = os.path.join(local, name)
                if not name.startswith(".") and os.path.isfile(full):
                    found.add(full)
        elif os.path.isfile(local):
            found.add(local)
        else:
            raise FileNotFoundError(f"FileSource: no such file or directory: {p!r}")
    return sorted(found)


@dataclass(frozen=True)
class FileSourceSplit:
    """A split of a :class:`FileSource`: the file ``path``, read from byte ``offset`` (the
    start of its next line) to its end; ``offset`` is the progress."""

    path: str
    offset: int = 0


class FileSourceBuilder:
    """Built by :meth:`FileSource.for_record_stream_format`; ``build()`` lists the files."""

    def __init__(self, stream_format: StreamFormat, paths: Sequence[str]) -> None:
        if not isinstance(stream_format, StreamFormat):
            raise TypeError(f"FileSource: expected a StreamFormat, got {stream_format!r}")
        if not paths:
            raise ValueError("FileSource: no paths given")
        self._format = stream_format
        self._paths = [os.fspath(p) for p in paths]

    def process_static_file_set(self) -> "FileSourceBuilder":
        """Read the files present at build time, then end (the only mode; as PyFlink's)."""
        return self

    def monitor_continuously(self, discovery_interval: Any) -> "FileSourceBuilder":
        raise NotImplementedError("FileSource: continuous monitoring is not supported; "
                                  "the source reads a static file set")

    def build(self) -> "FileSource":
        return FileSource(self._format, enumerate_files(self._paths))

    set_file_enumerator = not_implemented(
        "FileSourceBuilder.set_file_enumerator",
        "the source lists the files under its paths itself (folders recursively)")
    set_split_assigner = not_implemented(
        "FileSourceBuilder.set_split_assigner",
        "the source deals its splits out itself, evenly, and rescales them on restore")


class FileSource(Source):
    """A bounded source of the lines of a fixed list of local files (see the module doc)."""

    default_name = "File Source"

    def __init__(self, stream_format: StreamFormat, files: Sequence[str]) -> None:
        self.stream_format = stream_format
        self.files: List[str] = list(files)

    for_bulk_file_format = not_implemented(
        "FileSource.for_bulk_file_format",
        "bulk formats are Java: read text lines with for_record_stream_format("
        "StreamFormat.text_line_format(), ...)")

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """A builder reading ``paths`` (files, directories, ``file://`` URIs) record by
        record in ``stream_format``."""
        return FileSourceBuilder(stream_format, paths)

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_splits(self, parallelism: int) -> List[FileSourceSplit]:
        """One split per file, in file order (so subtask ``i`` starts with files ``i,
        i+p, ...``)."""
        return [FileSourceSplit(path) for path in self.files]

    def create_reader(self, context: SourceReaderContext) -> "FileSourceReader":
        # the round-robin share is read only if the reader is given no splits
        mine = self.files[context.subtask_index::context.parallelism]
        return FileSourceReader(mine, self.stream_format.charset)

    def __repr__(self) -> str:
        return f"FileSource({len(self.files)} files, {self.stream_format!r})"


class FileSourceReader(ShareOrSplitReader):
    source_label = "FileSource"

    """Reads its splits (files) in order, line by line.

    Split-based use (:meth:`add_splits`): ``snapshot_state`` is a list of
    :class:`FileSourceSplit`, the files not finished, each at the offset of its next line.
    A reader given no splits reads ``files`` instead (its round-robin share), with the
    position ``(file index, byte offset)`` in ``files`` (:meth:`restore_state`).
    """

    def __init__(self, files: Sequence[str], charset: str) -> None:
        self._files = list(files)            # the share read without splits
        self._charset = charset
        self._splits: List[List[Any]] = []   # [path, offset] per file not finished, in order
        self._done = 0                       # files finished (the index without splits)
        self._fh: Optional[BinaryIO] = None

    def _read_own_share(self) -> None:
        self._splits = [[path, 0] for path in self._files]

    def add_splits(self, splits: List[Any]) -> None:
        self._mode(True, "add_splits")
        for split in splits:
            if not isinstance(split, FileSourceSplit):
                raise TypeError(f"FileSource: expected a FileSourceSplit, got {split!r}")
            if not isinstance(split.offset, int) or split.offset < 0:
                raise ValueError(f"FileSource: split {split!r} has a bad offset")
            self._splits.append([split.path, split.offset])

    def poll_next(self, max_records: int) -> Optional[List[str]]:
        if self._split_based is None:
            self._mode(False, "poll_next")
        splits = self._splits
        batch: List[str] = []
        while len(batch) < max_records and splits:
            head = splits[0]
            if self._fh is None:
                self._fh = open(head[0], "rb")
                if head[1]:
                    self._fh.seek(head[1])
            line = self._fh.readline()
            if not line:
                self._close_file()
                splits.pop(0)
                self._done += 1
                continue
            head[1] += len(line)
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            batch.append(line.decode(self._charset))
        if not batch and not splits:
            return None
        return batch

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def snapshot_state(self) -> Any:
        """Split-based: the files not finished as :class:`FileSourceSplit` s; else
        ``(file index, byte offset)``."""
        if self._split_based is None:
            self._mode(False, "snapshot_state")
        if self._split_based:
            return [FileSourceSplit(path, offset) for path, offset in self._splits]
        return (self._done, self._splits[0][1] if self._splits else 0)

    def restore_state(self, state: Any) -> None:
        """Without splits: rewind to a position ``(file index, byte offset)``."""
        self._mode(False, "restore_state")
        index, offset = (int(v) for v in state)
        if not 0 <= index <= len(self._files) or offset < 0:
            raise ValueError(f"FileSource: position {state!r} does not fit this subtask's "
                             f"{len(self._files)} file(s)")
        self._close_file()
        self._splits = [[path, 0] for path in self._files[index:]]
        if self._splits:
            self._splits[0][1] = offset
        self._done = index

    def close(self) -> None:
        self._close_file()
