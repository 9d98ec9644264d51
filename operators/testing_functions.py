"""Map functions for failure tests: count the runs of a task, kill a task's process once.

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
from typing import Any, List, Optional

from .functions import MapFunction

__all__ = ["RecordOpens", "DieOnceOnOpen"]


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
