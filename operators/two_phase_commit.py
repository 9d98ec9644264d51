"""Exactly-once sinks by two-phase commit (Flink's ``TwoPhaseCommitSinkFunction``).

A :class:`TwoPhaseCommitSink` is a picklable definition; each subtask unpickles its own
copy and drives it through :class:`TwoPhaseCommitSinkOperator`:

* records between two checkpoints go into one *transaction* (``begin_transaction`` returns
  a picklable handle; ``write(transaction, records)`` adds records to it);
* at a checkpoint's synchronous point the current transaction is *pre-committed*
  (``pre_commit``: flush everything; after it, ``commit`` must be able to succeed), kept as
  pending for that checkpoint, and a new transaction begins; the pending transactions and
  the new current one are stored in operator state (list state
  ``"two-phase-commit-state"``, ``SPLIT_DISTRIBUTE``);
* when checkpoint ``n`` completes, every pending transaction of a checkpoint ``<= n`` is
  committed, in checkpoint order. An aborted checkpoint changes nothing: its transaction
  is committed with the next completed checkpoint;
* on restore, every pending transaction of the restored state is committed again
  (``recover_and_commit``; this is why ``commit`` must be idempotent: it may have been
  committed before the failure) and the transaction that was current at the checkpoint is
  aborted (``recover_and_abort``; its records will be replayed); then
  ``finish_recovering_state`` runs and a fresh transaction begins;
* ``close`` aborts the current transaction (pending ones are left to recovery);
* at the end of a bounded input, with checkpointing the task waits for a checkpoint taken
  after the end of input (``requires_final_checkpoint``) that pre-commits and then commits
  the last transaction; without checkpointing the task calls
  :meth:`TwoPhaseCommitSinkOperator.commit_on_end_of_input`.

Exceptions raised by the sink become :class:`UserFunctionError` naming the operator.

Driven by hand (the task does the same):

>>> from flowray.state.operator_state import OperatorStateStore
>>> from flowray.operators.base import StateInitializationContext, StateSnapshotContext
>>> import uuid
>>> class DictSink(TwoPhaseCommitSink):
...     '''Commits a transaction by storing its records in ``target`` under its id.'''
...     def __init__(self, target):
...         self.target = target
...     def begin_transaction(self):
...         return {"id": uuid.uuid4().hex, "records": []}
...     def write(self, transaction, records):
...         transaction["records"].extend(records)
...     def pre_commit(self, transaction):
...         pass
...     def commit(self, transaction):          # idempotent
...         self.target.setdefault(transaction["id"], list(transaction["records"]))
...     def abort(self, transaction):
...         transaction["records"].clear()
>>> def visible(target):
...     return [r for records in target.values() for r in records]
>>> committed = {}
>>> op = TwoPhaseCommitSinkOperator(DictSink(committed))
>>> store = OperatorStateStore()
>>> op.initialize_state(StateInitializationContext(store))
>>> op.open()
>>> op.process_batch(["a", "b"], None)
>>> op.snapshot_state(StateSnapshotContext(checkpoint_id=1, checkpoint_timestamp=0))
>>> checkpoint_1 = store.snapshot()
>>> op.process_batch(["c"], None)
>>> visible(committed)                       # nothing is visible before the commit
[]
>>> op.notify_checkpoint_complete(1)
>>> visible(committed)
['a', 'b']

The task fails before checkpoint 2; a new instance restores checkpoint 1, commits its
pending transaction again (harmless here) and aborts the one that held ``"c"``, which the
source replays:

>>> recovered = TwoPhaseCommitSinkOperator(DictSink(committed))
>>> recovered.initialize_state(StateInitializationContext(
...     OperatorStateStore.restore(checkpoint_1), restored_checkpoint_id=1))
>>> recovered.open()
>>> recovered.process_batch(["c"], None)
>>> recovered.commit_on_end_of_input()      # a bounded run without checkpoints
>>> recovered.close()
>>> visible(committed)
['a', 'b', 'c']
"""

from __future__ import annotations

import abc
from typing import Any, Dict, List, Optional, Tuple

from flowray.state.descriptors import ListStateDescriptor

from flowray.operators.base import StateInitializationContext, StateSnapshotContext, StreamOperator
from flowray.operators.sinks import SinkWriterContext

__all__ = ["TwoPhaseCommitSink", "TwoPhaseCommitSinkOperator", "TWO_PHASE_COMMIT_STATE"]

#: name of the operator list state holding ``{"pending": [(checkpoint_id, txn)], "current": txn}``
TWO_PHASE_COMMIT_STATE = "two-phase-commit-state"


class TwoPhaseCommitSink(abc.ABC):
    """A picklable exactly-once sink definition; one instance per subtask after unpickling.

    Implement ``begin_transaction`` (return a picklable handle: it is stored in
    checkpoints), ``write``, ``pre_commit`` (after it, ``commit`` must succeed even in
    another process after a failure), ``commit`` (idempotent: it may run again for a
    transaction already committed) and ``abort``. ``recover_and_commit`` /
    ``recover_and_abort`` handle transactions of a restored checkpoint (default: ``commit``
    / ``abort``); ``finish_recovering_state`` runs after them (e.g. to remove leftovers of
    failed attempts). ``open`` runs before anything else in the subtask, ``close`` last.

    A sink that keeps a transaction's records until ``pre_commit`` should stage them in a
    :class:`~flowray.operators.staged_records.StagedRecords` (bounded memory: it spills
    past ``flowray.sink.spill-threshold``, which ``open``'s ``context.config`` carries) and
    leave it out of the handle's pickled form: a transaction that had not pre-committed is
    aborted on restore and its records replayed, so staged records never belong in a
    checkpoint.
    """

    default_name = "TwoPhaseCommitSink"

    def open(self, context: SinkWriterContext) -> None:
        """Called first in each subtask: its index, the parallelism, the attempt number,
        the job's configuration, the job id, the operator uid and the checkpoint the
        subtask restores (``None``: none)."""

    @abc.abstractmethod
    def begin_transaction(self) -> Any:
        """Start a transaction; returns a picklable handle."""

    @abc.abstractmethod
    def write(self, transaction: Any, records: List[Any]) -> None:
        """Add ``records`` to ``transaction``."""

    @abc.abstractmethod
    def pre_commit(self, transaction: Any) -> None:
        """Flush ``transaction``; afterwards ``commit`` must be able to succeed."""

    def pre_commit_checkpoint(self, transaction: Any, checkpoint_id: Optional[int]) -> None:
        """``pre_commit`` for checkpoint ``checkpoint_id`` (``None``: the end of a bounded
        input without checkpointing). Override it instead of ``pre_commit`` when the
        transaction's durable name needs the checkpoint (a database's prepared
        transaction id)."""
        self.pre_commit(transaction)

    @abc.abstractmethod
    def commit(self, transaction: Any) -> None:
        """Make ``transaction`` visible. Must be idempotent."""

    @abc.abstractmethod
    def abort(self, transaction: Any) -> None:
        """Discard ``transaction``."""

    def recover_and_commit(self, transaction: Any) -> None:
        """Commit a pending transaction of a restored checkpoint (maybe committed before)."""
        self.commit(transaction)

    def recover_and_abort(self, transaction: Any) -> None:
        """Abort the transaction that was current when the restored checkpoint was taken."""
        self.abort(transaction)

    def finish_recovering_state(self) -> None:
        """After the restored transactions were committed/aborted, before the first new one."""

    def close(self) -> None:
        """Release resources; called last (after the current transaction was aborted)."""


class TwoPhaseCommitSinkOperator(StreamOperator):
    """Runs a :class:`TwoPhaseCommitSink` in a subtask (see the module docstring)."""

    default_name = "Sink"
    requires_final_checkpoint = True
    is_sink = True

    def __init__(self, sink: TwoPhaseCommitSink, name: Optional[str] = None) -> None:
        if not isinstance(sink, TwoPhaseCommitSink):
            raise TypeError(f"expected a flowray TwoPhaseCommitSink, got {sink!r}")
        super().__init__(name or f"Sink: {getattr(sink, 'default_name', type(sink).__name__)}")
        self.sink = sink
        self._initialized = False
        self._sink_open = False
        self._closed = False
        self._state: Any = None
        self._current: Any = None
        self._has_current = False
        self._pending: Dict[int, Any] = {}

    def user_functions(self) -> List[Any]:
        return [self.sink]

    # -- lifecycle ---------------------------------------------------------------------
    def _open_sink(self, restored_checkpoint_id: Optional[int] = None) -> None:
        if self._sink_open:
            return
        ctx = self.ctx
        context = (SinkWriterContext(ctx.subtask_index, ctx.parallelism, ctx.attempt_number,
                                     ctx.config, job_id=ctx.job_id,
                                     operator_uid=self.uid or "",
                                     restored_checkpoint_id=restored_checkpoint_id)
                   if ctx is not None else
                   SinkWriterContext(0, 1, 0, restored_checkpoint_id=restored_checkpoint_id))
        try:
            self.sink.open(context)
        except Exception as e:
            raise self.user_error(e) from e
        self._sink_open = True

    def initialize_state(self, context: StateInitializationContext) -> None:
        """Open the sink, recover the transactions of a restored checkpoint, begin one."""
        self._open_sink(context.get_restored_checkpoint_id())
        self._state = context.get_operator_state_store().get_list_state(
            ListStateDescriptor(TWO_PHASE_COMMIT_STATE))
        self._pending = {}
        try:
            if context.is_restored():
                for element in self._state.get():
                    for _, txn in sorted(element.get("pending", ()), key=lambda p: p[0]):
                        self.sink.recover_and_commit(txn)
                    if element.get("current") is not None:
                        self.sink.recover_and_abort(element["current"])
                self._state.clear()
                self.sink.finish_recovering_state()
            self._begin()
        except Exception as e:
            raise self.user_error(e) from e
        self._initialized = True

    def open(self) -> None:
        if not self._initialized:  # driven without a state-initialization step
            from flowray.state.operator_state import OperatorStateStore
            self.initialize_state(StateInitializationContext(OperatorStateStore()))

    def _begin(self) -> None:
        self._current = self.sink.begin_transaction()
        self._has_current = True

    def process_batch(self, records: List[Any], key_groups: Optional[List[int]],
                      timestamps: Optional[List[Any]] = None) -> None:
        if not self._has_current:
            raise RuntimeError(f"{self.name}: records arrived with no open transaction "
                               f"(after commit_on_end_of_input or close)")
        try:
            self.sink.write(self._current, list(records))
        except Exception as e:
            raise self.user_error(e) from e

    def finish(self) -> None:
        """End of input: nothing to do; the final checkpoint pre-commits the transaction."""

    # -- checkpoints -------------------------------------------------------------------
    def snapshot_state(self, context: StateSnapshotContext) -> None:
        """Pre-commit the current transaction, keep it for this checkpoint, begin anew."""
        cid = context.checkpoint_id
        if cid in self._pending:
            raise RuntimeError(f"{self.name}: checkpoint {cid} was already snapshotted")
        if not self._has_current:
            raise RuntimeError(f"{self.name}: checkpoint {cid} after the sink committed its "
                               f"last transaction")
        try:
            self.sink.pre_commit_checkpoint(self._current, cid)
            self._pending[cid] = self._current
            self._begin()
        except Exception as e:
            raise self.user_error(e) from e
        self._state.update([{"pending": self.pending_transactions(),
                             "current": self._current}])

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit, in checkpoint order, every pending transaction up to ``checkpoint_id``."""
        if self._closed:
            return
        for cid in sorted(self._pending):
            if cid > checkpoint_id:
                break
            try:
                self.sink.commit(self._pending[cid])
            except Exception as e:
                raise self.user_error(e) from e
            del self._pending[cid]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Nothing: the transaction of an aborted checkpoint stays pending and is committed
        with the next completed checkpoint (as in Flink)."""

    def commit_on_end_of_input(self) -> None:
        """End of a bounded input without checkpointing: pre-commit and commit the current
        transaction after every pending one. Afterwards no records are accepted."""
        try:
            if self._has_current:
                self.sink.pre_commit_checkpoint(self._current, None)
            for cid in sorted(self._pending):
                self.sink.commit(self._pending.pop(cid))
            if self._has_current:
                self.sink.commit(self._current)
                self._current, self._has_current = None, False
        except Exception as e:
            raise self.user_error(e) from e

    def pending_transactions(self) -> List[Tuple[int, Any]]:
        """``(checkpoint_id, transaction)`` pre-committed and not yet committed, in order."""
        return sorted(self._pending.items(), key=lambda p: p[0])

    def close(self) -> None:
        """Abort the current (not pre-committed) transaction, then close the sink."""
        if self._closed:
            return
        self._closed = True
        error: Optional[BaseException] = None
        if self._has_current:
            current, self._current, self._has_current = self._current, None, False
            try:
                self.sink.abort(current)
            except Exception as e:  # noqa: BLE001 - raised below, after close
                error = e
        if self._sink_open:
            try:
                self.sink.close()
            except Exception as e:  # noqa: BLE001 - raised below as the user's error
                error = error or e
        if error is not None:
            raise self.user_error(error) from error
