"""Size and CRC-32 of every checkpoint file, recorded when it is written and verified when
it is read back, so a damaged or truncated file fails the restore with an error naming it
instead of restoring different values.

>>> files = {}
>>> recorder = ChecksumRecorder()
>>> write = recorder.recording(lambda path, data: files.__setitem__(path, data) or len(data))
>>> write("chk-1/v1-0.keyed", b"state")
5
>>> expected = recorder.for_paths(["chk-1/v1-0.keyed"])
>>> read = verifying_reader(files.__getitem__, expected)
>>> read("chk-1/v1-0.keyed")
b'state'
>>> files["chk-1/v1-0.keyed"] = b"stale"
>>> read("chk-1/v1-0.keyed")
Traceback (most recent call last):
...
flowray.state.checksums.CorruptedStateError: checkpoint file chk-1/v1-0.keyed is damaged: expected 5 bytes with CRC-32 a393d2fb, read 5 bytes with CRC-32 21884aa2
"""

from __future__ import annotations

import zlib
from typing import Callable, Dict, Iterable, List, Tuple

from flowray.state.snapshot import IncrementalKeyedStateHandle, TaskStateSnapshot

__all__ = ["CorruptedStateError", "file_checksum", "ChecksumRecorder", "verifying_reader",
           "referenced_paths"]

#: path -> (size in bytes, CRC-32)
Checksums = Dict[str, Tuple[int, int]]


class CorruptedStateError(ValueError):
    """A checkpoint file does not hold what was written to it."""


def file_checksum(data: bytes) -> int:
    """The CRC-32 (zlib's) of a file's bytes."""
    return zlib.crc32(data) & 0xFFFFFFFF


class ChecksumRecorder:
    """Remembers the size and checksum of the files one task wrote (and of the files of
    the checkpoint it was restored from), to put them into its snapshots. Files not
    referenced by recent snapshots are forgotten (:meth:`forget_all_but`)."""

    def __init__(self) -> None:
        self.known: Checksums = {}

    def recording(self, write_file: Callable[[str, bytes], int]) -> Callable[[str, bytes], int]:
        """``write_file`` that also records each file's size and checksum."""
        def write(path: str, data: bytes) -> int:
            size = write_file(path, data)
            self.known[path] = (len(data), file_checksum(data))
            return len(data) if size is None else size
        return write

    def learn(self, checksums: Checksums) -> None:
        self.known.update(checksums)

    def for_paths(self, paths: Iterable[str]) -> Checksums:
        return {p: self.known[p] for p in paths if p in self.known}

    def forget_all_but(self, paths: Iterable[str]) -> None:
        keep = set(paths)
        self.known = {p: v for p, v in self.known.items() if p in keep}


def referenced_paths(snapshot: TaskStateSnapshot) -> List[str]:
    """Every checkpoint file ``snapshot`` needs to be restored."""
    paths: List[str] = []
    for state in snapshot.operators.values():
        handle = state.keyed
        if isinstance(handle, IncrementalKeyedStateHandle):
            paths.extend(handle.shared.values())
            paths.extend(handle.private.values())
        elif handle is not None:
            paths.append(handle.path)
        if state.operator_state_file is not None:
            paths.append(state.operator_state_file.path)
    return paths


def verifying_reader(read: Callable[[str], bytes], expected: Checksums
                     ) -> Callable[[str], bytes]:
    """``read`` that checks a file with a recorded size and checksum against them
    (:class:`CorruptedStateError` naming the file); other files are read as they are."""
    def verified(path: str) -> bytes:
        data = read(path)
        want = expected.get(path)
        if want is not None:
            got = (len(data), file_checksum(data))
            if got != want:
                raise CorruptedStateError(
                    f"checkpoint file {path} is damaged: expected {want[0]} bytes with "
                    f"CRC-32 {want[1]:08x}, read {got[0]} bytes with CRC-32 {got[1]:08x}")
        return data
    return verified
