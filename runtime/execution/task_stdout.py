"""What user functions print in a task actor, on the client's stdout.

PyFlink's local mode shows a Python function's ``print()`` on the console that ran the
program; flowray's functions run in Ray actors, whose stdout is a log file. While a task
runs, its actor's ``sys.stdout`` is a :class:`TaskStdout`: every complete line goes, as a
record, through an authenticated channel to the client's ``task-stdout`` endpoint
(``flowray.task-stdout-to-client``), which prints it. A partial line waits for its newline
(or the end of the task). The channel ends when the task returns, so the client knows it
has every line before the job's result is reported.

>>> from flowray.runtime.network.elements import RecordBatch, EndOfPartition
>>> class Frames:
...     def __init__(self): self.frames = []
...     def write(self, frame): self.frames.append(frame)
...     def close(self): pass
>>> sent = Frames()
>>> out = TaskStdout(sent, original=None)
>>> print("Sending: 1", file=out); out.write("partial")
7
>>> out.end()
>>> [f.records if isinstance(f, RecordBatch) else "end" for f in sent.frames]
[['Sending: 1'], ['partial'], 'end']
"""

from __future__ import annotations

import io
import threading
from typing import Any, Optional

from flowray.runtime.network.elements import EndOfPartition, RecordBatch

__all__ = ["TASK_STDOUT", "TaskStdout"]

#: the client endpoint that prints the tasks' stdout
TASK_STDOUT = "task-stdout"


class TaskStdout(io.TextIOBase):
    """A task actor's ``sys.stdout`` while it runs a task (see the module docstring).
    Thread-safe: async I/O threads may print too."""

    def __init__(self, writer: Any, original: Optional[Any]) -> None:
        super().__init__()
        self._writer = writer
        self.original = original
        self._partial = ""
        self._lock = threading.Lock()
        self._ended = False

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        with self._lock:
            if self._ended:  # after the task: the worker's own stdout
                if self.original is not None:
                    self.original.write(s)
                return len(s)
            text = self._partial + s
            if "\n" in text:
                *lines, self._partial = text.split("\n")
                self._writer.write(RecordBatch(lines))
            else:
                self._partial = text
        return len(s)

    def flush(self) -> None:
        """Lines are sent as they complete; a partial line waits for its end."""

    def end(self) -> None:
        """The task returned: send a partial line, then the end of the channel."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            if self._partial:
                self._writer.write(RecordBatch([self._partial]))
                self._partial = ""
            self._writer.write(EndOfPartition())

    def close_channel(self) -> None:
        with self._lock:
            self._ended = True
        self._writer.close()
