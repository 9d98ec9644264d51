"""A transactional testing sink: exactly-once output that tests can read back.

``TransactionalTestingSink(directory)`` is a :class:`TwoPhaseCommitSink` that keeps each
transaction's records in a hidden file at pre-commit and makes it visible at commit (an
atomic rename), so the driver sees exactly what was committed. ``committed()`` returns
every committed record (any picklable value), ``pending()`` the pre-committed ones not yet
committed. Works across processes on one machine (or a shared mount).

A transaction pre-committed for a checkpoint that never completed is in no checkpoint a
later attempt restores: as Flink's Kafka sink aborts such *lingering* transactions, each
subtask, before its first transaction, aborts every pre-committed transaction its earlier
attempts left (those of the restored checkpoint were committed by then), so ``pending()``
is empty once a job has ended.

>>> import tempfile
>>> from flowray.operators.base import StateInitializationContext, StateSnapshotContext
>>> from flowray.operators.two_phase_commit import TwoPhaseCommitSinkOperator
>>> from flowray.state.operator_state import OperatorStateStore
>>> sink = TransactionalTestingSink(tempfile.mkdtemp())
>>> op = TwoPhaseCommitSinkOperator(sink)
>>> op.initialize_state(StateInitializationContext(OperatorStateStore())); op.open()
>>> op.process_batch([1, 2], None)
>>> op.snapshot_state(StateSnapshotContext(1, 0))
>>> sink.committed(), sink.pending()
([], [1, 2])
>>> op.notify_checkpoint_complete(1)
>>> sink.committed(), sink.pending()
([1, 2], [])
>>> sink.cleanup()
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from typing import Any, Dict, List

import cloudpickle

from flowray.common.files import atomic_write
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSink

__all__ = ["TransactionalTestingSink"]

_PENDING = ".pending-"
_COMMITTED = "committed-"


class TransactionalTestingSink(TwoPhaseCommitSink):
    """Exactly-once sink into ``directory``; see the module docstring."""

    default_name = "Transactional Testing Sink"

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._subtask = 0
        self._attempt_token = ""
        self._lingering_aborted = False

    # -- the sink ----------------------------------------------------------------------
    def open(self, context: SinkWriterContext) -> None:
        self._subtask = context.subtask_index
        self._attempt_token = uuid.uuid4().hex[:8]
        self._lingering_aborted = False

    def begin_transaction(self) -> Dict[str, Any]:
        if not self._lingering_aborted:
            self._abort_lingering()
        name = f"{self._subtask}-{self._attempt_token}-{uuid.uuid4().hex[:8]}"
        return {"name": name, "records": []}

    def write(self, transaction: Dict[str, Any], records: List[Any]) -> None:
        transaction["records"].extend(records)

    def pre_commit(self, transaction: Dict[str, Any]) -> None:
        atomic_write(self._path(_PENDING, transaction), cloudpickle.dumps(transaction["records"]))
        transaction["records"] = []  # the file holds them now; keep the handle small

    def commit(self, transaction: Dict[str, Any]) -> None:
        pending, done = self._path(_PENDING, transaction), self._path(_COMMITTED, transaction)
        if os.path.exists(pending):
            os.replace(pending, done)
        elif not os.path.exists(done):
            raise RuntimeError(f"transaction {transaction['name']} was neither pre-committed "
                               f"nor committed in {self.directory}")

    def abort(self, transaction: Dict[str, Any]) -> None:
        try:
            os.remove(self._path(_PENDING, transaction))
        except FileNotFoundError:
            pass

    def _abort_lingering(self) -> None:
        """Remove this subtask's pre-committed files of earlier attempts (runs after the
        restored transactions were committed; an earlier attempt is gone by then)."""
        self._lingering_aborted = True
        mine = f"{_PENDING}{self._subtask}-"
        for name in os.listdir(self.directory):
            if name.startswith(mine) and not name.startswith(mine + self._attempt_token):
                try:
                    os.remove(os.path.join(self.directory, name))
                except FileNotFoundError:
                    pass

    def _path(self, prefix: str, transaction: Dict[str, Any]) -> str:
        return os.path.join(self.directory, prefix + transaction["name"])

    # -- for tests (driver side) -------------------------------------------------------
    def _read(self, prefix: str) -> List[Any]:
        out: List[Any] = []
        for name in sorted(os.listdir(self.directory)):
            if name.startswith(prefix) and not name.endswith(".tmp"):
                with open(os.path.join(self.directory, name), "rb") as f:
                    out.extend(pickle.loads(f.read()))
        return out

    def committed(self) -> List[Any]:
        """Every record of every committed transaction."""
        return self._read(_COMMITTED)

    def pending(self) -> List[Any]:
        """Records pre-committed but not (yet) committed."""
        return self._read(_PENDING)

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
