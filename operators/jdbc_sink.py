"""JDBC sinks for PostgreSQL (through psycopg 3): at-least-once batches and exactly-once
two-phase commit. The PyFlink-shaped entry point is
``flowray.datastream.connectors.jdbc.JdbcSink``.

Both are :class:`~flowray.operators.two_phase_commit.TwoPhaseCommitSink` s, so the task
drives them through checkpoints the same way: ``write`` as records arrive,
``pre_commit_checkpoint`` at each checkpoint's synchronous point, ``commit`` when the
checkpoint completed, and a final checkpoint (or, without checkpointing,
``commit_on_end_of_input``) at the end of a bounded input. Records become the statement's
parameters through its row type (:class:`~flowray.operators.jdbc_statement.JdbcStatement`)
and are sent with ``executemany`` in batches of ``JdbcExecutionOptions.batch_size``.

**At-least-once** (:class:`JdbcAtLeastOnceSink`): each batch is one database transaction,
committed when sent. A batch is sent when full, when ``batch_interval_ms`` passed since
the previous send (a background thread of the subtask, as Flink's scheduled flush), at
every checkpoint (its synchronous part: the checkpoint completes only after every row
before its barrier is committed) and at the end of input. A batch that fails on a
connection error is sent again on a new connection, up to ``max_retries`` times, after
``attempt x 1 s`` (Flink's back-off). After a failure the job replays from the last
checkpoint: rows may be written twice, none is lost.

**Exactly-once** (:class:`JdbcExactlyOnceSink`): the rows of one checkpoint epoch of a
subtask go into one database transaction on the subtask's data connection (batched, each
batch inside a savepoint). At the checkpoint the transaction is prepared,
``PREPARE TRANSACTION '<gid>'``: durable, invisible, and from then on committable from any
session. When the checkpoint completed, ``COMMIT PREPARED '<gid>'`` on the subtask's second
(autocommit) connection makes it visible. An epoch with no rows prepares nothing.

* Transaction ids (:class:`TransactionIds`): ``flowray:<job id>:<sink uid>:<subtask>:<checkpoint>``
  (a part that is not ``[A-Za-z0-9_.-]{1,64}`` is replaced by a hash of it). The job id
  and the uid survive failovers and job master restarts, so the id of a pre-committed
  transaction, stored in the checkpoint, names the same prepared transaction for every
  later attempt.
* ``commit`` is idempotent: a gid no longer in ``pg_prepared_xacts`` was committed
  earlier (by an attempt that died before its checkpoint could record it). That is safe
  because this sink never rolls back a prepared transaction of a checkpoint at or before
  the one restored, and commits only those: a transaction that a checkpoint still lists
  can only have left ``pg_prepared_xacts`` by being committed.
* Lingering transactions: prepared for a checkpoint that never completed (the task died
  between ``PREPARE`` and the checkpoint's completion) they hold locks until someone ends
  them. At start (``open``), each subtask rolls back the prepared transactions of this
  job and sink that were written by *its own* subtask index (or, after scaling in, by a
  former index ``w >= parallelism`` with ``w % parallelism == index``) and whose
  checkpoint is after the restored one (all of them when it restores nothing). Limiting
  each subtask to its own writers is what keeps two subtasks that recover at once (or
  one that recovers while the others keep running, in a region failover) from rolling
  back a transaction another still has to commit; limiting it to checkpoints after the
  restored one keeps it away from what the restored checkpoint commits.
* A SQL error (a constraint, a bad value) rolls back the batch's savepoint; the batch is
  then run row by row to find the record at fault, and the task fails with an error that
  names the statement and the record. The epoch's transaction dies with the task; the
  job restarts from the last checkpoint, whose prepared transactions are committed, so no
  row is lost. A lost connection fails the task the same way (a transaction cannot move
  to another session before it is prepared), which is why Flink's exactly-once sink
  requires ``max_retries == 0``, as this one does.
* The server must allow prepared transactions: ``max_prepared_transactions = 0`` fails
  ``open`` with an error saying so (not recoverable by restarting). Each subtask holds at
  most one prepared transaction per checkpoint that is pending or was aborted since the
  last completed one.

Transaction ids and which lingering ones a subtask rolls back (pure, no server):

>>> ids = TransactionIds("a1b2", "orders-sink")
>>> ids.gid(subtask_index=1, checkpoint_id=7)
'flowray:a1b2:orders-sink:1:7'
>>> ids.parse('flowray:a1b2:orders-sink:1:7'), ids.parse('flowray:a1b2:other:1:7')
((1, 7), None)
>>> lingering = [ids.gid(s, c) for s in (0, 1, 2) for c in (6, 7, 8)]
>>> ids.to_roll_back(lingering, subtask_index=0, parallelism=2, restored_checkpoint_id=7)
['flowray:a1b2:orders-sink:0:8', 'flowray:a1b2:orders-sink:2:8']
>>> ids.to_roll_back(lingering, subtask_index=1, parallelism=2, restored_checkpoint_id=None)
['flowray:a1b2:orders-sink:1:6', 'flowray:a1b2:orders-sink:1:7', 'flowray:a1b2:orders-sink:1:8']
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from flowray.common.type_conversion import RecordTypeError

from flowray.operators.jdbc_options import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
)
from flowray.operators.jdbc_statement import JdbcStatement, describe_record
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSink

__all__ = [
    "JdbcSinkError",
    "JdbcStatementError",
    "JdbcConnectionError",
    "JdbcConfigurationError",
    "JdbcTransaction",
    "TransactionIds",
    "JdbcAtLeastOnceSink",
    "JdbcExactlyOnceSink",
]

_GID_PREFIX = "flowray"
_SAFE_PART = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


# -- errors ---------------------------------------------------------------------------------

class JdbcSinkError(Exception):
    """Base of the JDBC sink's errors; picklable (the text is kept, not the cause)."""

    def __reduce__(self) -> Any:
        return (type(self), self.args)


class JdbcStatementError(JdbcSinkError):
    """The statement failed on the database (or a record did not fit its row type).

    ``statement`` is the JDBC statement, ``record`` the offending record's ``repr`` (or
    ``None`` when no single record is at fault), ``sqlstate`` the server's code."""

    def __init__(self, message: str, statement: str = "", record: Optional[str] = None,
                 sqlstate: Optional[str] = None) -> None:
        super().__init__(message, statement, record, sqlstate)
        self.statement, self.record, self.sqlstate = statement, record, sqlstate

    def __str__(self) -> str:
        return str(self.args[0])


class JdbcConnectionError(JdbcSinkError):
    """The database could not be reached, or the connection was lost."""


class JdbcConfigurationError(JdbcSinkError):
    """The database cannot serve this sink as configured; restarting will not help."""

    recoverable = False


# -- transaction ids ------------------------------------------------------------------------

def _gid_part(value: str) -> str:
    if _SAFE_PART.fullmatch(value):
        return value
    return "h" + hashlib.sha1(value.encode("utf-8")).hexdigest()[:24]


class TransactionIds:
    """Names prepared transactions ``flowray:<job>:<sink>:<subtask>:<checkpoint>`` and
    picks the lingering ones a subtask rolls back (see the module docstring)."""

    def __init__(self, job_id: str, sink_uid: str) -> None:
        if not job_id or not sink_uid:
            raise ValueError("TransactionIds: the job id and the sink uid must be non-empty")
        self.prefix = f"{_GID_PREFIX}:{_gid_part(job_id)}:{_gid_part(sink_uid)}:"

    def gid(self, subtask_index: int, checkpoint_id: int) -> str:
        """The id of the transaction ``subtask_index`` prepares for ``checkpoint_id``."""
        return f"{self.prefix}{int(subtask_index)}:{int(checkpoint_id)}"

    def parse(self, gid: str) -> Optional[Tuple[int, int]]:
        """``(subtask index, checkpoint id)`` of one of this sink's ids, else ``None``."""
        if not gid.startswith(self.prefix):
            return None
        subtask, _, checkpoint = gid[len(self.prefix):].partition(":")
        if not (subtask.isdigit() and checkpoint.isdigit()):
            return None
        return int(subtask), int(checkpoint)

    def to_roll_back(self, gids: Sequence[str], subtask_index: int, parallelism: int,
                     restored_checkpoint_id: Optional[int]) -> List[str]:
        """Of ``gids`` (prepared transactions on the server), those that subtask
        ``subtask_index`` of ``parallelism`` rolls back when it starts having restored
        ``restored_checkpoint_id`` (``None``: nothing): written by its own index (or a
        former index beyond the parallelism that maps to it) for a later checkpoint."""
        out = []
        for gid in gids:
            parsed = self.parse(gid)
            if parsed is None:
                continue
            writer, checkpoint = parsed
            owner = writer if writer < parallelism else writer % parallelism
            if owner != subtask_index:
                continue
            if restored_checkpoint_id is None or checkpoint > restored_checkpoint_id:
                out.append(gid)
        return sorted(out, key=lambda g: self.parse(g))  # type: ignore[arg-type,return-value]


@dataclass
class JdbcTransaction:
    """The (picklable) handle of one epoch's transaction of one subtask.

    ``rows``: rows written into it; ``gid``: its prepared transaction's id once
    pre-committed with rows (``None``: nothing prepared, e.g. an empty epoch);
    ``checkpoint_id``: the checkpoint that pre-committed it; ``one_phase``: pre-committed at
    the end of a bounded input without checkpointing, so committed directly."""

    subtask_index: int
    rows: int = 0
    gid: Optional[str] = None
    checkpoint_id: Optional[int] = None
    one_phase: bool = False


# -- connections and batches ----------------------------------------------------------------

def _psycopg() -> Any:
    import psycopg  # imported when a subtask connects, not when a job is defined
    return psycopg


def _connection_errors() -> Tuple[type, ...]:
    pg = _psycopg()
    return (pg.OperationalError, pg.InterfaceError)


def _connect(options: JdbcConnectionOptions, autocommit: bool) -> Any:
    pg = _psycopg()
    try:
        return pg.connect(autocommit=autocommit, **options.connection_parameters())
    except pg.Error as e:
        raise JdbcConnectionError(f"JdbcSink: cannot connect to PostgreSQL at "
                                  f"{options.describe()}: {e}") from None


def _close(connection: Any) -> None:
    if connection is not None:
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


Batch = List[Tuple[Tuple[Any, ...], Any]]  # (parameters, record)


def _statement_error(statement: JdbcStatement, error: Any, record: Any = None,
                     index: Optional[int] = None, size: int = 0) -> JdbcStatementError:
    """The error naming ``statement`` and ``record`` (number ``index`` of a batch of
    ``size``); without ``index``: a batch of ``size`` with no single record at fault, or
    (``size`` 0) the prepare of the statement's transaction."""
    code = getattr(error, "sqlstate", None)
    cause = f"{type(error).__name__}{f' [{code}]' if code else ''}: {error}".rstrip()
    if index is None:
        where = (f" for a batch of {size} records (run one by one they all succeeded)"
                 if size else " when its transaction was prepared")
        return JdbcStatementError(f"JdbcSink: the statement {statement.sql!r} failed"
                                  f"{where}: {cause}", statement.sql, None, code)
    text = describe_record(record)
    return JdbcStatementError(
        f"JdbcSink: the statement {statement.sql!r} failed for the record {text} "
        f"(record {index + 1} of a batch of {size}): {cause}", statement.sql, text, code)


def _execute_batch(connection: Any, statement: JdbcStatement, batch: Batch,
                   in_savepoint: bool) -> None:
    """Run ``statement`` for every row of ``batch`` in the connection's transaction.

    A SQL error undoes the batch (``in_savepoint``: back to a savepoint taken before it,
    keeping the rows of earlier batches; else the whole transaction), runs the rows one by
    one to find the record at fault, undoes that too and raises
    :class:`JdbcStatementError`. Connection errors propagate as psycopg raised them."""
    pg = _psycopg()
    lost = _connection_errors()
    with connection.cursor() as cursor:
        if in_savepoint:
            cursor.execute("SAVEPOINT flowray_batch")
        try:
            cursor.executemany(statement.query, [params for params, _ in batch])
        except lost:
            raise
        except pg.Error as error:
            _undo(connection, cursor, in_savepoint)
            raise _find_bad_record(connection, cursor, statement, batch, error,
                                   in_savepoint) from None
        if in_savepoint:
            cursor.execute("RELEASE SAVEPOINT flowray_batch")


def _undo(connection: Any, cursor: Any, in_savepoint: bool) -> None:
    if in_savepoint:
        cursor.execute("ROLLBACK TO SAVEPOINT flowray_batch")
    else:
        connection.rollback()


def _find_bad_record(connection: Any, cursor: Any, statement: JdbcStatement, batch: Batch,
                     batch_error: Any, in_savepoint: bool) -> JdbcStatementError:
    pg = _psycopg()
    if len(batch) == 1:
        return _statement_error(statement, batch_error, batch[0][1], 0, 1)
    if in_savepoint:
        cursor.execute("SAVEPOINT flowray_batch")
    for index, (params, record) in enumerate(batch):
        try:
            cursor.execute(statement.query, params)
        except _connection_errors():
            raise
        except pg.Error as error:
            _undo(connection, cursor, in_savepoint)
            return _statement_error(statement, error, record, index, len(batch))
    _undo(connection, cursor, in_savepoint)
    return _statement_error(statement, batch_error, size=len(batch))


class _JdbcSinkBase(TwoPhaseCommitSink):
    """What both JDBC sinks share: the definition (statement and options), turning
    records into parameters, and the per-subtask state that is never pickled."""

    default_name = "JdbcSink"
    #: per-subtask attributes, left out of the pickled definition
    _RUNTIME: Tuple[str, ...] = ()

    def __init__(self, statement: JdbcStatement, connection_options: JdbcConnectionOptions,
                 execution_options: Optional[JdbcExecutionOptions] = None) -> None:
        if not isinstance(statement, JdbcStatement):
            raise TypeError(f"JdbcSink: expected a JdbcStatement, got {statement!r}")
        if not isinstance(connection_options, JdbcConnectionOptions):
            raise TypeError(f"JdbcSink: jdbc_connection_options must be JdbcConnectionOptions "
                            f"(JdbcConnectionOptions.JdbcConnectionOptionsBuilder()...build()), "
                            f"got {connection_options!r}")
        if execution_options is None:
            execution_options = JdbcExecutionOptions.defaults()
        if not isinstance(execution_options, JdbcExecutionOptions):
            raise TypeError(f"JdbcSink: jdbc_execution_options must be JdbcExecutionOptions "
                            f"(JdbcExecutionOptions.builder()...build()), got "
                            f"{execution_options!r}")
        self.statement = statement
        self.connection_options = connection_options
        self.execution_options = execution_options

    def __getstate__(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in self._RUNTIME}

    def _to_batch(self, records: List[Any]) -> Batch:
        parameters = self.statement.parameters
        batch: Batch = []
        for record in records:
            try:
                batch.append((parameters(record), record))
            except RecordTypeError as e:
                raise JdbcStatementError(
                    f"JdbcSink: the record {describe_record(record)} does not fit the row "
                    f"type of the statement {self.statement.sql!r}: {e}",
                    self.statement.sql, describe_record(record)) from None
        return batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.statement!r}, {self.connection_options!r})"


# -- at-least-once --------------------------------------------------------------------------

class _PeriodicFlusher:
    """Calls ``flush`` every ``interval_s`` in a daemon thread until stopped or ``flush``
    raises (kept in ``error`` for the task thread to raise)."""

    def __init__(self, interval_s: float, flush: Callable[[], None], name: str) -> None:
        self.error: Optional[BaseException] = None
        self._interval_s = interval_s
        self._flush = flush
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._flush()
            except BaseException as e:  # noqa: BLE001 - handed to the task thread
                self.error = e
                return

    def stop(self, timeout_s: Optional[float] = None) -> None:
        """Stop; wait up to ``timeout_s`` for a flush under way to end."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class JdbcAtLeastOnceSink(_JdbcSinkBase):
    """At-least-once batches (see the module docstring). ``retry_backoff_ms`` is the
    back-off unit between retries of a batch (Flink: 1000)."""

    _RUNTIME = ("_connection", "_lock", "_buffer", "_flusher", "_closing", "_last_flush",
                "_subtask")

    def __init__(self, statement: JdbcStatement, connection_options: JdbcConnectionOptions,
                 execution_options: Optional[JdbcExecutionOptions] = None,
                 retry_backoff_ms: int = 1000) -> None:
        super().__init__(statement, connection_options, execution_options)
        self.retry_backoff_ms = retry_backoff_ms

    def open(self, context: SinkWriterContext) -> None:
        self._subtask = context.subtask_index
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._buffer: Batch = []
        self._last_flush = time.monotonic()
        self._connection = _connect(self.connection_options, autocommit=False)
        self._flusher: Optional[_PeriodicFlusher] = None
        interval_ms = self.execution_options.get_batch_interval_ms()
        if interval_ms > 0:
            self._flusher = _PeriodicFlusher(interval_ms / 1000.0, self._flush_if_due,
                                             f"jdbc-sink-flush-{self._subtask}")

    def begin_transaction(self) -> JdbcTransaction:
        return JdbcTransaction(self._subtask)

    def write(self, transaction: JdbcTransaction, records: List[Any]) -> None:
        self._raise_flush_error()
        batch = self._to_batch(records)
        size = self.execution_options.get_batch_size()
        with self._lock:
            self._buffer.extend(batch)
            transaction.rows += len(batch)
            while len(self._buffer) >= size:  # full batches now, the rest later
                self._send(self._buffer[:size])
                del self._buffer[:size]

    def pre_commit(self, transaction: JdbcTransaction) -> None:
        """Send and commit every row held (at a checkpoint and at the end of input)."""
        self._raise_flush_error()
        with self._lock:
            self._flush_locked()

    def commit(self, transaction: JdbcTransaction) -> None:
        """Nothing: the rows were committed when sent."""

    def abort(self, transaction: JdbcTransaction) -> None:
        """Drop the rows not sent yet (the job replays them from its last checkpoint)."""
        with self._lock:
            self._buffer.clear()

    def recover_and_commit(self, transaction: JdbcTransaction) -> None:
        """Nothing: the restored checkpoint's rows were committed before it completed."""

    def recover_and_abort(self, transaction: JdbcTransaction) -> None:
        """Nothing: unsent rows died with the failed attempt; they are replayed."""

    def close(self) -> None:
        closing = getattr(self, "_closing", None)
        if closing is not None:
            closing.set()
        flusher = getattr(self, "_flusher", None)
        if flusher is not None:
            flusher.stop(self.connection_options.get_connection_check_timeout_seconds())
        _close(getattr(self, "_connection", None))
        self._connection = None

    # -- sending ---------------------------------------------------------------------------
    def _raise_flush_error(self) -> None:
        flusher = self._flusher
        if flusher is not None and flusher.error is not None:
            raise flusher.error

    def _flush_if_due(self) -> None:
        interval_s = self.execution_options.get_batch_interval_ms() / 1000.0
        with self._lock:
            if self._buffer and time.monotonic() - self._last_flush >= interval_s:
                self._flush_locked()

    def _flush_locked(self) -> None:
        size = self.execution_options.get_batch_size()
        while self._buffer:
            self._send(self._buffer[:size])
            del self._buffer[:size]

    def _send(self, batch: Batch) -> None:
        """One batch in one transaction, retried on connection errors."""
        retries = self.execution_options.get_max_retries()
        lost = _connection_errors()
        for attempt in range(retries + 1):
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = _connect(self.connection_options, autocommit=False)
                _execute_batch(self._connection, self.statement, batch, in_savepoint=False)
                self._connection.commit()
                self._last_flush = time.monotonic()
                return
            except (JdbcConnectionError,) + lost as e:
                _close(self._connection)
                self._connection = None
                if attempt >= retries:
                    raise JdbcConnectionError(
                        f"JdbcSink: a batch of {len(batch)} records for "
                        f"{self.statement.sql!r} failed {attempt + 1} times on connection "
                        f"errors ({self.connection_options.describe()}); last: "
                        f"{type(e).__name__}: {e}") from None
                if self._closing.wait(self.retry_backoff_ms * attempt / 1000.0):
                    raise JdbcConnectionError("JdbcSink: closed while retrying a batch") \
                        from None


# -- exactly-once ---------------------------------------------------------------------------

class JdbcExactlyOnceSink(_JdbcSinkBase):
    """Exactly-once by PostgreSQL's two-phase commit (see the module docstring).

    ``sink_id`` stands in for the job id and uid in transaction ids when the sink is driven
    without a task (``open`` given an empty ``job_id``/``operator_uid``)."""

    _RUNTIME = ("_data", "_control", "_buffer", "_ids", "_subtask", "_current",
                "_commit_attempts")

    def __init__(self, statement: JdbcStatement, connection_options: JdbcConnectionOptions,
                 execution_options: Optional[JdbcExecutionOptions] = None,
                 exactly_once_options: Optional[JdbcExactlyOnceOptions] = None,
                 retry_backoff_ms: int = 1000, sink_id: Optional[str] = None) -> None:
        if execution_options is None:
            execution_options = JdbcExecutionOptions(max_retries=0)
        super().__init__(statement, connection_options, execution_options)
        if self.execution_options.get_max_retries() != 0:
            raise ValueError(
                f"JdbcSink.exactly_once_sink requires max_retries == 0 (as Flink's "
                f"exactly-once JDBC sink): a batch cannot be retried on another connection "
                f"inside a transaction that is not prepared yet, the job restarts from its "
                f"last checkpoint instead. Use JdbcExecutionOptions.builder()"
                f".with_max_retries(0), got {self.execution_options!r}")
        if exactly_once_options is None:
            exactly_once_options = JdbcExactlyOnceOptions.defaults()
        if not isinstance(exactly_once_options, JdbcExactlyOnceOptions):
            raise TypeError(f"JdbcSink: exactly_once_options must be JdbcExactlyOnceOptions "
                            f"(JdbcExactlyOnceOptions.builder()...build()), got "
                            f"{exactly_once_options!r}")
        self.exactly_once_options = exactly_once_options
        self.retry_backoff_ms = retry_backoff_ms
        self.sink_id = sink_id or uuid.uuid4().hex[:16]

    # -- per subtask -----------------------------------------------------------------------
    def open(self, context: SinkWriterContext) -> None:
        """Connect, check that the server allows prepared transactions, and roll back the
        lingering ones this subtask is responsible for."""
        self._subtask = context.subtask_index
        self._buffer: Batch = []
        self._current: Optional[JdbcTransaction] = None
        self._data: Any = None
        self._ids = TransactionIds(context.job_id or self.sink_id,
                                   context.operator_uid or "jdbc-sink")
        self._control: Any = None
        try:
            self._control = _connect(self.connection_options, autocommit=True)
            self._check_prepared_transactions_allowed(context.parallelism)
            if self.exactly_once_options.is_recovered_and_rollback():
                self.roll_back_lingering(context.parallelism, context.restored_checkpoint_id)
            self._data = _connect(self.connection_options, autocommit=False)
        except BaseException:
            self.close()  # the task does not close a sink whose open failed
            raise

    def _check_prepared_transactions_allowed(self, parallelism: int) -> None:
        row = self._control.execute("SHOW max_prepared_transactions").fetchone()
        if int(row[0]) == 0:
            raise JdbcConfigurationError(
                f"JdbcSink.exactly_once_sink: the PostgreSQL server at "
                f"{self.connection_options.describe()} has max_prepared_transactions = 0, so "
                f"it cannot PREPARE TRANSACTION (two-phase commit). Set "
                f"max_prepared_transactions in postgresql.conf to at least the sink's "
                f"parallelism x (checkpoints pending at once + 1), e.g. {parallelism * 3} "
                f"here, and restart the server; or use JdbcSink.sink (at-least-once)")

    def prepared_transactions(self) -> List[str]:
        """The ids of this job's and sink's prepared transactions on the server."""
        rows = self._control.execute(
            "SELECT gid FROM pg_prepared_xacts "
            "WHERE database = current_database() AND starts_with(gid, %s)",
            [self._ids.prefix]).fetchall()
        return sorted(r[0] for r in rows)

    def roll_back_lingering(self, parallelism: int,
                            restored_checkpoint_id: Optional[int]) -> List[str]:
        """``ROLLBACK PREPARED`` this subtask's lingering transactions
        (:meth:`TransactionIds.to_roll_back`); the ids rolled back."""
        gone = self._ids.to_roll_back(self.prepared_transactions(), self._subtask,
                                      parallelism, restored_checkpoint_id)
        for gid in gone:
            self._end_prepared("ROLLBACK", gid)
        return gone

    def begin_transaction(self) -> JdbcTransaction:
        self._current = JdbcTransaction(self._subtask)
        self._buffer = []
        return self._current

    def write(self, transaction: JdbcTransaction, records: List[Any]) -> None:
        batch = self._to_batch(records)
        self._buffer.extend(batch)
        transaction.rows += len(batch)
        size = self.execution_options.get_batch_size()
        while len(self._buffer) >= size:
            self._send(self._buffer[:size])
            del self._buffer[:size]

    def _send(self, batch: Batch) -> None:
        try:
            _execute_batch(self._data, self.statement, batch, in_savepoint=True)
        except _connection_errors() as e:
            raise JdbcConnectionError(
                f"JdbcSink: the connection to {self.connection_options.describe()} failed "
                f"inside the transaction of the current checkpoint epoch ({type(e).__name__}: "
                f"{e}); the job restarts from its last checkpoint") from None

    def pre_commit(self, transaction: JdbcTransaction) -> None:
        self.pre_commit_checkpoint(transaction, None)

    def pre_commit_checkpoint(self, transaction: JdbcTransaction,
                              checkpoint_id: Optional[int]) -> None:
        """Send the rows held and ``PREPARE TRANSACTION`` as the checkpoint's id (nothing
        for an epoch without rows). ``checkpoint_id=None`` (end of input without
        checkpointing): only send; :meth:`commit` then commits in one phase."""
        if self._buffer:
            self._send(self._buffer)
            self._buffer = []
        if transaction.rows == 0:
            return
        if checkpoint_id is None:
            transaction.one_phase = True
            return
        gid = self._ids.gid(self._subtask, checkpoint_id)
        pg = _psycopg()
        try:
            self._data.execute(pg.sql.SQL("PREPARE TRANSACTION {}").format(pg.sql.Literal(gid)))
        except _connection_errors() as e:
            raise JdbcConnectionError(
                f"JdbcSink: PREPARE TRANSACTION {gid!r} failed on a lost connection "
                f"({type(e).__name__}: {e}); the job restarts from its last checkpoint") \
                from None
        except pg.errors.DuplicateObject as e:
            raise JdbcSinkError(
                f"JdbcSink: the transaction id {gid!r} is in use by another prepared "
                f"transaction (one of an earlier attempt that was not rolled back: is "
                f"with_recovered_and_rollback(False) set?): {e}") from None
        except pg.Error as e:  # e.g. a deferred constraint
            raise _statement_error(self.statement, e) from None
        transaction.gid, transaction.checkpoint_id = gid, checkpoint_id

    def commit(self, transaction: JdbcTransaction) -> None:
        """``COMMIT PREPARED`` (retried on connection errors up to ``max_commit_attempts``);
        an id no longer prepared was committed before (see the module docstring)."""
        if transaction.one_phase:
            self._data.commit()
            return
        if transaction.gid is not None:
            self._end_prepared("COMMIT", transaction.gid)

    def abort(self, transaction: JdbcTransaction) -> None:
        """Roll back a prepared transaction, or the open one of this subtask."""
        if transaction.gid is not None:
            self._end_prepared("ROLLBACK", transaction.gid)
        elif transaction is self._current:
            self._buffer = []
            if self._data is not None and not self._data.closed:
                try:
                    self._data.rollback()
                except _connection_errors():
                    pass  # the server rolls back what a lost session left open

    def recover_and_abort(self, transaction: JdbcTransaction) -> None:
        """Nothing: the transaction open at the restored checkpoint was never prepared,
        so it ended with its session; its records are replayed."""

    def close(self) -> None:
        """Close both connections (an open, unprepared transaction is rolled back by the
        server; prepared ones stay for recovery)."""
        _close(getattr(self, "_data", None))
        _close(getattr(self, "_control", None))
        self._data = self._control = None

    # -- ending prepared transactions -------------------------------------------------------
    def _end_prepared(self, how: str, gid: str) -> None:
        """``COMMIT PREPARED`` / ``ROLLBACK PREPARED`` ``gid``; a gid that is not prepared
        (any more) counts as done. Connection errors and a busy gid are retried up to
        ``max_commit_attempts`` times on a new control connection."""
        pg = _psycopg()
        attempts = self.exactly_once_options.get_max_commit_attempts()
        statement = pg.sql.SQL(f"{how} PREPARED {{}}").format(pg.sql.Literal(gid))
        for attempt in range(attempts):
            try:
                if self._control is None or self._control.closed:
                    self._control = _connect(self.connection_options, autocommit=True)
                self._control.execute(statement)
                return
            except pg.errors.UndefinedObject:
                return  # committed (or rolled back) before: see the module docstring
            except (JdbcConnectionError, pg.errors.ObjectInUse) + _connection_errors() as e:
                if not isinstance(e, pg.errors.ObjectInUse):
                    _close(self._control)
                    self._control = None
                if attempt + 1 >= attempts:
                    raise JdbcConnectionError(
                        f"JdbcSink: {how} PREPARED {gid!r} failed {attempts} times; last: "
                        f"{type(e).__name__}: {e}") from None
                time.sleep(self.retry_backoff_ms * attempt / 1000.0)
