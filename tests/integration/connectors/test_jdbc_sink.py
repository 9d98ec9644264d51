"""The JDBC sinks against a real PostgreSQL (the session fixture ``postgres``), driven by
hand through :class:`TwoPhaseCommitSinkOperator` as a task drives them: prepare, commit,
abort, idempotent commit, lingering transactions after crashes, concurrent recoveries,
SQL and connection errors, batching and retries; then a few small jobs on the shared
local Ray."""

import threading
import uuid

import psycopg
import pytest

from flowray import JobExecutionError
from flowray.common import WatermarkStrategy
from flowray.common.clock import ManualClock
from flowray.common.typeinfo import Types
from flowray.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from flowray.operators.base import (
    OperatorContext,
    ProcessingTimeService,
    StateInitializationContext,
    StateSnapshotContext,
    UserFunctionError,
)
from flowray.operators.jdbc_sink import (
    JdbcAtLeastOnceSink,
    JdbcConfigurationError,
    JdbcConnectionError,
    JdbcExactlyOnceSink,
    JdbcStatementError,
)
from flowray.operators.jdbc_statement import JdbcStatement
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSinkOperator
from flowray.state.key_groups import KeyGroupRange
from flowray.state.operator_state import OperatorStateStore
from flowray.testing import TestingSource, wait_until

ROW = Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()])
INSERT = "insert into {table} (id, name) values (?, ?)"


@pytest.fixture
def db(postgres):
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("set lock_timeout = '20s'")  # a lingering transaction fails, not hangs
        yield conn


@pytest.fixture
def table(db):
    name = f"t_{uuid.uuid4().hex[:10]}"
    db.execute(f"create table {name} (id int primary key, name text)")
    yield name
    # a failed test may leave sessions and prepared transactions that lock the table
    db.execute("select pg_terminate_backend(pid) from pg_locks "
               "where relation = %s::regclass and pid <> pg_backend_pid()", [name])
    for gid in _prepared(db):
        db.execute(psycopg.sql.SQL("rollback prepared {}").format(psycopg.sql.Literal(gid)))
    db.execute(f"drop table {name}")


@pytest.fixture(scope="module")
def no_2pc_postgres():
    """A second cluster, with ``max_prepared_transactions = 0``."""
    from tests.support.servers import PostgresCluster
    cluster = PostgresCluster(max_prepared_transactions=0).start()
    yield cluster
    cluster.close()


def _rows(db, table):
    return sorted(db.execute(f"select id, name from {table}").fetchall())


def _prepared(db, prefix="flowray:"):
    return sorted(r[0] for r in db.execute(
        "select gid from pg_prepared_xacts where starts_with(gid, %s)", [prefix]).fetchall())


def _options(postgres):
    url = f"jdbc:postgresql://127.0.0.1:{postgres.port}/postgres?user=postgres"
    return (JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url)
            .with_driver_name("org.postgresql.Driver").build())


def _execution(batch_size=5000, interval_ms=0, max_retries=0):
    return (JdbcExecutionOptions.builder().with_batch_size(batch_size)
            .with_batch_interval_ms(interval_ms).with_max_retries(max_retries).build())


def _eo_sink(postgres, table, batch_size=5000, **kwargs):
    return JdbcExactlyOnceSink(JdbcStatement(INSERT.format(table=table), ROW),
                               _options(postgres), _execution(batch_size), **kwargs)


class Subtask:
    """One subtask of a sink operator driven by hand: state, checkpoints, restores."""

    def __init__(self, sink, job_id, index=0, parallelism=2, restore=None, attempt=0):
        self.op = TwoPhaseCommitSinkOperator(sink)
        self.op.uid = "jdbc-sink"
        self.op.setup(OperatorContext(
            "sink", index, parallelism, 128, KeyGroupRange.empty(),
            ProcessingTimeService(ManualClock()), attempt_number=attempt, job_id=job_id),
            output=None)
        checkpoint_id, state = restore if restore is not None else (None, None)
        self.store = OperatorStateStore.restore(state) if state else OperatorStateStore()
        self.op.initialize_state(StateInitializationContext(
            self.store, restored_checkpoint_id=checkpoint_id))
        self.op.open()

    def write(self, *rows):
        self.op.process_batch(list(rows), None)

    def checkpoint(self, checkpoint_id):
        """Pre-commit; the state a restore of this checkpoint gets."""
        self.op.snapshot_state(StateSnapshotContext(checkpoint_id, 0))
        return checkpoint_id, self.store.snapshot()

    def crash(self):
        """The process dies: connections drop, nothing is aborted or committed."""
        self.op.sink.close()


# -- exactly-once, by hand ------------------------------------------------------------------

def test_rows_are_prepared_at_the_checkpoint_and_visible_once_it_completes(postgres, db,
                                                                            table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table, batch_size=2), job, index=1)
    task.write((1, "a"), (2, "b"), (3, "c"))         # one full batch sent, one row held
    assert _rows(db, table) == []
    task.checkpoint(7)
    assert _prepared(db) == [f"flowray:{job}:jdbc-sink:1:7"]
    assert _rows(db, table) == []                     # prepared: durable but invisible
    task.write((4, "d"))                              # the next epoch is open meanwhile
    task.op.notify_checkpoint_complete(7)
    assert _rows(db, table) == [(1, "a"), (2, "b"), (3, "c")]
    assert _prepared(db) == []
    task.checkpoint(8)
    task.op.notify_checkpoint_complete(8)
    assert _rows(db, table)[-1] == (4, "d")
    task.op.close()


def test_commit_is_idempotent_and_abort_rolls_back_a_prepared_transaction(postgres, db,
                                                                         table):
    sink = _eo_sink(postgres, table)
    sink.open(SinkWriterContext(0, 1, job_id=uuid.uuid4().hex, operator_uid="s"))
    first = sink.begin_transaction()
    sink.write(first, [(1, "kept")])
    sink.pre_commit_checkpoint(first, 1)
    sink.commit(first)
    sink.commit(first)                 # no longer prepared: committed before, not an error
    sink.recover_and_commit(first)
    second = sink.begin_transaction()
    sink.write(second, [(2, "dropped")])
    sink.pre_commit_checkpoint(second, 2)
    assert len(_prepared(db, second.gid)) == 1
    sink.abort(second)
    sink.abort(second)
    assert _rows(db, table) == [(1, "kept")] and _prepared(db, second.gid) == []
    sink.close()


def test_an_epoch_without_rows_prepares_nothing(postgres, db, table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table), job)
    task.checkpoint(1)
    assert task.op.pending_transactions()[0][1].gid is None
    assert _prepared(db, f"flowray:{job}") == []
    task.op.notify_checkpoint_complete(1)
    task.op.close()


def test_a_restore_commits_the_restored_checkpoint_and_rolls_back_later_ones(postgres, db,
                                                                            table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table), job, index=0)
    task.write((1, "a"))
    restored = task.checkpoint(1)       # completes, but the notification never arrives
    task.write((2, "b"))
    task.checkpoint(2)                  # prepared, never completes
    task.write((3, "c"))                # open, unprepared
    task.crash()
    assert _prepared(db, f"flowray:{job}") == [f"flowray:{job}:jdbc-sink:0:1",
                                               f"flowray:{job}:jdbc-sink:0:2"]

    again = Subtask(_eo_sink(postgres, table), job, index=0, restore=restored, attempt=1)
    assert _rows(db, table) == [(1, "a")]          # committed by the restore
    assert _prepared(db, f"flowray:{job}") == []   # checkpoint 2's was rolled back
    again.write((2, "b"), (3, "c"))                # the source replays them
    again.checkpoint(3)
    again.op.notify_checkpoint_complete(3)
    assert _rows(db, table) == [(1, "a"), (2, "b"), (3, "c")]
    again.op.close()


def test_a_restore_after_the_commit_commits_nothing_twice(postgres, db, table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table), job)
    task.write((1, "a"))
    restored = task.checkpoint(1)
    task.op.notify_checkpoint_complete(1)            # committed, then the task dies
    task.crash()
    again = Subtask(_eo_sink(postgres, table), job, restore=restored, attempt=1)
    assert _rows(db, table) == [(1, "a")]
    again.op.close()


def test_a_restart_with_nothing_to_restore_rolls_back_all_of_its_subtasks_transactions(
        postgres, db, table):
    job = uuid.uuid4().hex
    tasks = [Subtask(_eo_sink(postgres, table), job, index=i) for i in (0, 1)]
    for i, task in enumerate(tasks):
        task.write((10 + i, "x"))
        task.checkpoint(1)              # checkpoint 1 never completes
        task.crash()
    assert len(_prepared(db, f"flowray:{job}")) == 2
    again = Subtask(_eo_sink(postgres, table), job, index=0, attempt=1)
    # subtask 0 rolled back its own transaction only: subtask 1's is its own business
    assert _prepared(db, f"flowray:{job}") == [f"flowray:{job}:jdbc-sink:1:1"]
    again.op.close()
    Subtask(_eo_sink(postgres, table), job, index=1, attempt=1).op.close()
    assert _prepared(db, f"flowray:{job}") == [] and _rows(db, table) == []


def test_two_subtasks_recovering_at_once_commit_what_the_checkpoint_holds(postgres, db,
                                                                          table):
    """Both subtasks restore checkpoint 2 concurrently; each has checkpoint 2 to commit and
    a lingering checkpoint 3 to roll back. Neither may roll back what the other commits."""
    job = uuid.uuid4().hex
    restored = {}
    for i in (0, 1):
        task = Subtask(_eo_sink(postgres, table, batch_size=3), job, index=i)
        task.write(*[(100 * i + k, "epoch 2") for k in range(5)])
        restored[i] = task.checkpoint(2)
        task.write(*[(100 * i + 50 + k, "epoch 3") for k in range(5)])
        task.checkpoint(3)
        task.crash()
    assert len(_prepared(db, f"flowray:{job}")) == 4

    start, errors, recovered = threading.Barrier(2), [], {}

    def recover(i):
        try:
            start.wait()
            recovered[i] = Subtask(_eo_sink(postgres, table), job, index=i,
                                   restore=restored[i], attempt=1)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=recover, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _rows(db, table) == sorted((100 * i + k, "epoch 2") for i in (0, 1) for k in range(5))
    assert _prepared(db, f"flowray:{job}") == []
    for task in recovered.values():
        task.op.close()


def test_a_region_failover_leaves_the_running_subtasks_transactions_alone(postgres, db,
                                                                          table):
    """Subtask 0 restarts from checkpoint 1 while subtask 1 keeps running with the
    transaction of checkpoint 2, which was aborted (so it stays pending until checkpoint 3
    completes)."""
    job = uuid.uuid4().hex
    zero = Subtask(_eo_sink(postgres, table), job, index=0)
    one = Subtask(_eo_sink(postgres, table), job, index=1)
    zero.write((1, "zero"))
    one.write((2, "one"))
    restored = zero.checkpoint(1)
    one.checkpoint(1)
    for task in (zero, one):
        task.op.notify_checkpoint_complete(1)
    zero.write((3, "zero, lost"))
    one.write((4, "one"))
    zero.checkpoint(2)
    one.checkpoint(2)
    zero.crash()                        # checkpoint 2 is aborted; subtask 0 restarts alone
    one.op.notify_checkpoint_aborted(2)
    zero = Subtask(_eo_sink(postgres, table), job, index=0, restore=restored, attempt=1)
    assert _prepared(db, f"flowray:{job}") == [f"flowray:{job}:jdbc-sink:1:2"]
    zero.write((3, "zero, replayed"))
    one.write((5, "one"))
    zero.checkpoint(3)
    one.checkpoint(3)
    for task in (zero, one):
        task.op.notify_checkpoint_complete(3)
        task.op.close()
    assert _rows(db, table) == [(1, "zero"), (2, "one"), (3, "zero, replayed"), (4, "one"),
                                (5, "one")]
    assert _prepared(db, f"flowray:{job}") == []


def test_lingering_transactions_stay_when_recovered_and_rollback_is_off(postgres, db,
                                                                       table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table), job)
    task.write((1, "a"))
    task.checkpoint(1)
    task.crash()
    keep = JdbcExactlyOnceOptions.builder().with_recovered_and_rollback(False).build()
    again = Subtask(_eo_sink(postgres, table, exactly_once_options=keep), job, attempt=1)
    assert _prepared(db, f"flowray:{job}") == [f"flowray:{job}:jdbc-sink:0:1"]
    again.op.close()
    Subtask(_eo_sink(postgres, table), job, attempt=2).op.close()
    assert _prepared(db, f"flowray:{job}") == []


def test_a_bounded_run_without_checkpoints_commits_in_one_phase(postgres, db, table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table), job)
    task.write((1, "a"), (2, "b"))
    task.op.commit_on_end_of_input()
    task.op.close()
    assert _rows(db, table) == [(1, "a"), (2, "b")] and _prepared(db, f"flowray:{job}") == []


def test_quotes_percent_and_question_marks_reach_the_server_intact(postgres, db, table):
    sql = (f"insert into {table} (id, name) values (?, "
           f"'100% sure? ' || ? || $$ and ?$$) -- a comment with ? and %")
    sink = JdbcExactlyOnceSink(JdbcStatement(sql, ROW), _options(postgres), _execution())
    task = Subtask(sink, uuid.uuid4().hex)
    task.write((1, "50%?"))
    task.checkpoint(1)
    task.op.notify_checkpoint_complete(1)
    task.op.close()
    assert _rows(db, table) == [(1, "100% sure? 50%? and ?")]


# -- errors ---------------------------------------------------------------------------------

def test_a_sql_error_names_the_statement_and_the_record_and_loses_nothing(postgres, db,
                                                                         table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table, batch_size=4), job)
    task.write((1, "a"))
    restored = task.checkpoint(1)                  # pending, not yet committed
    task.write((2, "b"), (3, "c"), (4, "d"), (5, "e"))   # one batch, sent fine
    with pytest.raises(UserFunctionError) as info:
        # the duplicate of 3 fails against an earlier batch of the same epoch
        task.write((6, "f"), (3, "again"), (7, "g"), (8, "h"))
    text = str(info.value)
    assert INSERT.format(table=table) in text and "the record (3, 'again')" in text
    assert "record 2 of a batch of 4" in text and "UniqueViolation" in text
    assert info.value.cause_type == "JdbcStatementError"
    task.op.close()                                # the task fails; nothing is committed
    assert _rows(db, table) == []
    again = Subtask(_eo_sink(postgres, table), job, restore=restored, attempt=1)
    assert _rows(db, table) == [(1, "a")]          # the restored checkpoint's rows
    again.op.close()


def test_a_record_that_does_not_fit_the_row_type_is_named(postgres, table):
    task = Subtask(_eo_sink(postgres, table), uuid.uuid4().hex)
    with pytest.raises(UserFunctionError) as info:
        task.write((1, "ok"), ("two", "bad"))
    assert "the record ('two', 'bad') does not fit the row type" in str(info.value)
    assert INSERT.format(table=table) in str(info.value)
    task.op.close()


def test_a_bad_value_in_a_batch_is_found_row_by_row(postgres, db, table):
    sink = JdbcExactlyOnceSink(
        JdbcStatement(f"insert into {table} (id, name) values (?, ?::int::text)", ROW),
        _options(postgres), _execution(batch_size=3))
    sink.open(SinkWriterContext(0, 1, job_id=uuid.uuid4().hex, operator_uid="s"))
    txn = sink.begin_transaction()
    with pytest.raises(JdbcStatementError) as info:
        sink.write(txn, [(1, "1"), (2, "x2"), (3, "3")])
    assert info.value.record == "(2, 'x2')" and info.value.sqlstate == "22P02"
    sink.close()


def test_a_lost_connection_fails_the_epoch_but_not_the_prepared_transactions(postgres, db,
                                                                            table):
    job = uuid.uuid4().hex
    task = Subtask(_eo_sink(postgres, table, batch_size=1), job)
    task.write((1, "a"))
    restored = task.checkpoint(1)
    db.execute("select pg_terminate_backend(%s)", [task.op.sink._data.info.backend_pid])
    with pytest.raises(UserFunctionError) as info:
        task.write((2, "b"))
    assert info.value.cause_type == "JdbcConnectionError"
    assert "restarts from its last checkpoint" in str(info.value)
    task.op.close()
    Subtask(_eo_sink(postgres, table), job, restore=restored, attempt=1).op.close()
    assert _rows(db, table) == [(1, "a")]


def test_a_commit_after_a_lost_control_connection_is_retried(postgres, db, table):
    sink = _eo_sink(postgres, table, retry_backoff_ms=0)
    sink.open(SinkWriterContext(0, 1, job_id=uuid.uuid4().hex, operator_uid="s"))
    txn = sink.begin_transaction()
    sink.write(txn, [(1, "a")])
    sink.pre_commit_checkpoint(txn, 1)
    db.execute("select pg_terminate_backend(%s)", [sink._control.info.backend_pid])
    sink.commit(txn)
    assert _rows(db, table) == [(1, "a")]
    sink.close()


def test_a_server_without_prepared_transactions_fails_at_open(no_2pc_postgres):
    sink = JdbcExactlyOnceSink(
        JdbcStatement("insert into t values (?, ?)", ROW), _options(no_2pc_postgres))
    with pytest.raises(JdbcConfigurationError, match="max_prepared_transactions = 0") as info:
        sink.open(SinkWriterContext(0, 2, job_id="j", operator_uid="s"))
    assert "JdbcSink.sink (at-least-once)" in str(info.value)
    assert info.value.recoverable is False
    assert sink._control is None                   # nothing left open


def test_an_unreachable_server_is_named(postgres):
    from tests.support.servers import free_port
    opts = JdbcConnectionOptions(f"jdbc:postgresql://127.0.0.1:{free_port()}/postgres"
                                 f"?user=postgres&password=secret")
    sink = JdbcExactlyOnceSink(JdbcStatement("insert into t values (?, ?)", ROW), opts)
    with pytest.raises(JdbcConnectionError, match="cannot connect to PostgreSQL at "
                                                  "127.0.0.1:") as info:
        sink.open(SinkWriterContext(0, 1, job_id="j", operator_uid="s"))
    assert "secret" not in str(info.value)


# -- at-least-once, by hand -----------------------------------------------------------------

def _alo_sink(postgres, table, retry_backoff_ms=0, **execution):
    return JdbcAtLeastOnceSink(JdbcStatement(INSERT.format(table=table), ROW),
                               _options(postgres), _execution(**execution),
                               retry_backoff_ms=retry_backoff_ms)


def test_at_least_once_sends_full_batches_and_everything_at_a_checkpoint(postgres, db,
                                                                        table):
    task = Subtask(_alo_sink(postgres, table, batch_size=2), uuid.uuid4().hex)
    task.write((1, "a"), (2, "b"), (3, "c"))
    assert _rows(db, table) == [(1, "a"), (2, "b")]     # a full batch is committed at once
    task.checkpoint(1)
    assert _rows(db, table) == [(1, "a"), (2, "b"), (3, "c")]
    task.write((4, "d"))
    task.op.commit_on_end_of_input()
    task.op.close()
    assert len(_rows(db, table)) == 4


def test_at_least_once_sends_on_the_batch_interval(postgres, db, table):
    task = Subtask(_alo_sink(postgres, table, interval_ms=20), uuid.uuid4().hex)
    task.write((1, "a"))
    wait_until(lambda: _rows(db, table) == [(1, "a")], 30, "the periodic flush")
    task.op.close()


def test_at_least_once_retries_a_batch_on_a_new_connection(postgres, db, table):
    sink = _alo_sink(postgres, table, batch_size=1, max_retries=2)
    task = Subtask(sink, uuid.uuid4().hex)
    db.execute("select pg_terminate_backend(%s)", [sink._connection.info.backend_pid])
    task.write((1, "a"))
    assert _rows(db, table) == [(1, "a")]
    task.op.close()


def test_at_least_once_gives_up_after_max_retries(postgres, table):
    sink = _alo_sink(postgres, table, batch_size=1, max_retries=1)
    task = Subtask(sink, uuid.uuid4().hex)
    sink.connection_options = JdbcConnectionOptions(
        "jdbc:postgresql://127.0.0.1:1/postgres?connectTimeout=2")   # nowhere to reconnect
    sink._connection.close()
    with pytest.raises(UserFunctionError) as info:
        task.write((1, "a"))
    assert "failed 2 times on connection errors" in str(info.value)
    task.op.close()


def test_at_least_once_names_the_record_of_a_sql_error(postgres, db, table):
    task = Subtask(_alo_sink(postgres, table, batch_size=3), uuid.uuid4().hex)
    task.write((1, "a"), (2, "b"), (3, "c"))
    with pytest.raises(UserFunctionError) as info:
        task.write((4, "d"), (1, "dup"), (5, "e"))
    assert "the record (1, 'dup')" in str(info.value)
    task.op.close()
    assert _rows(db, table) == [(1, "a"), (2, "b"), (3, "c")]


# -- jobs on Ray ----------------------------------------------------------------------------

def _source(n, tmp_path):
    return TestingSource([(i, f"n{i}") for i in range(n)], ledger_dir=str(tmp_path / "faults"))


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_bounded_job_writes_every_record_once(env, postgres, db, table, tmp_path,
                                                exactly_once):
    env.set_parallelism(2)
    env.get_configuration().set_string("execution.checkpointing.dir", str(tmp_path / "chk"))
    env.enable_checkpointing(100)
    make = JdbcSink.exactly_once_sink if exactly_once else JdbcSink.sink
    options = _execution(batch_size=100) if exactly_once else None
    (env.from_source(_source(2_000, tmp_path), WatermarkStrategy.no_watermarks(), "rows")
        .add_sink(make(INSERT.format(table=table), ROW, _options(postgres), options)))
    result = env.execute("jdbc-bounded")
    assert _rows(db, table) == [(i, f"n{i}") for i in range(2_000)]
    assert _prepared(db, f"flowray:{result.get_job_id()}") == []


def test_a_sql_error_in_a_job_names_statement_and_record(env, postgres, db, table, tmp_path):
    env.set_parallelism(1)
    env.get_configuration().set_string("restart-strategy.type", "none")
    items = [(i, f"n{i}") for i in range(50)] + [(7, "duplicate")]
    (env.from_source(TestingSource(items, ledger_dir=str(tmp_path / "f")),
                     WatermarkStrategy.no_watermarks(), "rows")
        .add_sink(JdbcSink.exactly_once_sink(INSERT.format(table=table), ROW,
                                             _options(postgres))))
    with pytest.raises(JobExecutionError) as info:
        env.execute("jdbc-sql-error")
    assert info.value.cause_type == "JdbcStatementError"
    assert "the record (7, 'duplicate')" in str(info.value.cause_traceback)
    assert INSERT.format(table=table) in str(info.value.cause_traceback)
    assert _rows(db, table) == []


def test_a_server_without_prepared_transactions_fails_the_job_without_restarts(
        env, no_2pc_postgres, tmp_path):
    env.set_parallelism(1)
    for key, value in {"restart-strategy.type": "fixed-delay",
                       "restart-strategy.fixed-delay.attempts": "5",
                       "restart-strategy.fixed-delay.delay": "100 ms"}.items():
        env.get_configuration().set_string(key, value)
    (env.from_source(_source(10, tmp_path), WatermarkStrategy.no_watermarks(), "rows")
        .add_sink(JdbcSink.exactly_once_sink("insert into t values (?, ?)", ROW,
                                             _options(no_2pc_postgres))))
    with pytest.raises(JobExecutionError) as info:
        env.execute("jdbc-no-2pc")
    assert info.value.cause_type == "JdbcConfigurationError"
    assert "max_prepared_transactions = 0" in str(info.value.cause_traceback)
    assert info.value.outcome.restarts == 0
