"""Map functions for failure tests: count the runs of a task, kill a task's process once,
count the records each subtask has passed on so far, raise once in user code.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "runs.txt")
>>> class Ctx:
...     def get_index_of_this_subtask(self): return 1
>>> counter = RecordOpens(path)
>>> counter.open(Ctx()); counter.open(Ctx())
>>> RecordOpens.runs(path)
['1', '1']
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Optional, TextIO

from flowray.operators.functions import MapFunction
from flowray.testing.sources import TestingFailure

__all__ = ["RecordOpens", "DieOnceOnOpen", "CountRecords", "FailOnce", "HangOnce"]


class RecordOpens(MapFunction):
    """Passes records through; appends the subtask index to ``path`` each time a subtask
    opens, i.e. once per run of that task (read back with :meth:`runs`)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, runtime_context: Any) -> None:
        with open(self.path, "a") as f:
            f.write(f"{runtime_context.get_index_of_this_subtask()}\n")

    @staticmethod
    def runs(path: str) -> List[str]:
        """The subtask indexes recorded, sorted."""
        with open(path) as f:
            return sorted(f.read().split())

    def map(self, value: Any) -> Any:
        return value


class DieOnceOnOpen(MapFunction):
    """Passes records through; the first time subtask ``index`` opens (a ledger file marks
    it, across processes), deletes ``delete`` (a folder) if given and ends its own process,
    as a crash would."""

    def __init__(self, ledger: str, delete: Optional[str] = None, index: int = 0) -> None:
        self.ledger, self.delete, self.index = ledger, delete, index

    def open(self, runtime_context: Any) -> None:
        if runtime_context.get_index_of_this_subtask() != self.index:
            return
        try:
            os.close(os.open(self.ledger, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        if self.delete:
            shutil.rmtree(self.delete, ignore_errors=True)
        os._exit(1)

    def map(self, value: Any) -> Any:
        return value


class CountRecords(MapFunction):
    """Passes records through; each subtask appends one byte per record to
    ``<directory>/<subtask index>`` as it goes (unbuffered), so a test can watch the
    progress of each parallel pipeline while the job runs (:meth:`counts`). The count
    spans every run of a subtask: a restarted one counts its replayed records again.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> class Ctx:
    ...     def get_index_of_this_subtask(self): return 2
    >>> f = CountRecords(d); f.open(Ctx())
    >>> [f.map(x) for x in "abc"]
    ['a', 'b', 'c']
    >>> f.close(); CountRecords.counts(d)
    {2: 3}
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._file: Optional[TextIO] = None

    def open(self, runtime_context: Any) -> None:
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, str(runtime_context.get_index_of_this_subtask()))
        self._file = open(path, "a", buffering=1)

    def map(self, value: Any) -> Any:
        assert self._file is not None
        self._file.write(".")
        self._file.flush()
        return value

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @staticmethod
    def counts(directory: str) -> Dict[int, int]:
        """Records passed on so far, per subtask index (subtasks not started: absent)."""
        if not os.path.isdir(directory):
            return {}
        return {int(name): os.path.getsize(os.path.join(directory, name))
                for name in os.listdir(directory) if name.isdigit()}


class FailOnce(MapFunction):
    """Passes records through; subtask ``index`` raises :class:`TestingFailure` in place of
    its ``after``-th record (counted from its start), the first time only: a ledger file
    marks it, across processes and restarts. A failure in user code, for recovery tests.

    >>> import tempfile, os
    >>> ledger = os.path.join(tempfile.mkdtemp(), "failed")
    >>> class Ctx:
    ...     def get_index_of_this_subtask(self): return 0
    >>> f = FailOnce(ledger, after=2); f.open(Ctx())
    >>> f.map("a")
    'a'
    >>> f.map("b")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    TestingFailure: FailOnce: subtask 0 failed at record 2
    >>> g = FailOnce(ledger, after=2); g.open(Ctx())   # after a restart: never again
    >>> [g.map(x) for x in "abc"]
    ['a', 'b', 'c']
    """

    def __init__(self, ledger: str, after: int, index: int = 0) -> None:
        if after < 1:
            raise ValueError(f"after must be at least 1, got {after}")
        self.ledger, self.after, self.index = ledger, after, index
        self._seen = 0
        self._armed = False

    def open(self, runtime_context: Any) -> None:
        self._seen = 0
        self._armed = (runtime_context.get_index_of_this_subtask() == self.index
                       and not os.path.exists(self.ledger))

    def map(self, value: Any) -> Any:
        if self._armed:
            self._seen += 1
            if self._seen >= self.after:
                self._armed = False
                try:
                    os.close(os.open(self.ledger, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return value
                raise TestingFailure(
                    f"FailOnce: subtask {self.index} failed at record {self._seen}")
        return value


class HangOnce(MapFunction):
    """Passes records through; the first time (a ledger file marks it, across processes
    and restarts) it meets ``value``, it never returns, as a hung call to a remote service
    would. Later runs go past it."""

    def __init__(self, ledger: str, value: Any) -> None:
        self.ledger, self.value = ledger, value

    def map(self, value: Any) -> Any:
        if value == self.value:
            try:
                os.close(os.open(self.ledger, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return value
            import threading

            threading.Event().wait()  # forever: only a kill ends this task
        return value
