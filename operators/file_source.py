"""A bounded source of the lines of local text files, shaped like PyFlink's ``FileSource``.

``FileSource.for_record_stream_format(StreamFormat.text_line_format(), *paths).build()``
reads every line of the given files (and of the non-hidden files directly inside the given
directories) once. The file set is fixed when the source is built: files are sorted by path
and dealt to the subtasks round-robin (subtask ``i`` of ``p`` reads files ``i, i+p, ...``).

A record is one line, decoded (UTF-8 unless told otherwise), without its line terminator
(``\\n``, or ``\\r\\n``); other whitespace is kept, an empty line is an empty string, and a
last line without a terminator is still a line. A reader's position is ``(file index, byte
offset of the next line)`` in its own file list; a restore seeks there and reads on, so no
line is read twice or skipped.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "a.txt"), "w") as f:
...     _ = f.write("one\\ntwo\\nthree")
>>> source = FileSource.for_record_stream_format(
...     StreamFormat.text_line_format(), folder).build()
>>> reader = source.create_reader(SourceReaderContext(0, 1))
>>> reader.poll_next(2)
['one', 'two']
>>> position = reader.snapshot_state(); position
(0, 8)
>>> again = source.create_reader(SourceReaderContext(0, 1))
>>> again.restore_state(position)
>>> again.poll_next(10), again.poll_next(10)
(['three'], None)
>>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import codecs
import os
from typing import Any, BinaryIO, List, Optional, Sequence, Tuple

from flowray.operators.sources import Boundedness, Source, SourceReader, SourceReaderContext
from flowray.operators.local_files import local_path

__all__ = ["StreamFormat", "FileSource", "FileSourceBuilder", "FileSourceReader"]


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


class FileSource(Source):
    """A bounded source of the lines of a fixed list of local files (see the module doc)."""

    default_name = "File Source"

    def __init__(self, stream_format: StreamFormat, files: Sequence[str]) -> None:
        self.stream_format = stream_format
        self.files: List[str] = list(files)

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        """A builder reading ``paths`` (files, directories, ``file://`` URIs) record by
        record in ``stream_format``."""
        return FileSourceBuilder(stream_format, paths)

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_reader(self, context: SourceReaderContext) -> "FileSourceReader":
        mine = self.files[context.subtask_index::context.parallelism]
        return FileSourceReader(mine, self.stream_format.charset)

    def __repr__(self) -> str:
        return f"FileSource({len(self.files)} files, {self.stream_format!r})"


class FileSourceReader(SourceReader):
    """Reads its files in order, line by line; position ``(file index, byte offset)``."""

    def __init__(self, files: Sequence[str], charset: str) -> None:
        self._files = list(files)
        self._charset = charset
        self._index = 0
        self._offset = 0
        self._fh: Optional[BinaryIO] = None

    def poll_next(self, max_records: int) -> Optional[List[str]]:
        batch: List[str] = []
        while len(batch) < max_records and self._index < len(self._files):
            if self._fh is None:
                self._fh = open(self._files[self._index], "rb")
                if self._offset:
                    self._fh.seek(self._offset)
            line = self._fh.readline()
            if not line:
                self._next_file()
                continue
            self._offset += len(line)
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            batch.append(line.decode(self._charset))
        if not batch and self._index >= len(self._files):
            return None
        return batch

    def _next_file(self) -> None:
        self._close_file()
        self._index += 1
        self._offset = 0

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def snapshot_state(self) -> Tuple[int, int]:
        return (self._index, self._offset)

    def restore_state(self, state: Any) -> None:
        index, offset = (int(v) for v in state)
        if not 0 <= index <= len(self._files) or offset < 0:
            raise ValueError(f"FileSource: position {state!r} does not fit this subtask's "
                             f"{len(self._files)} file(s)")
        self._close_file()
        self._index, self._offset = index, offset

    def close(self) -> None:
        self._close_file()
