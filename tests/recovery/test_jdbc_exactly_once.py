"""The JDBC sink on a real local Ray and a real PostgreSQL, with failures: task actors that
hold the sink are killed mid-stream (``ray.kill``, as a crashed worker), and the job master
is killed; the committed rows are compared with the expected rows.

The job is a keyed running count of ``(key, 1)`` records at parallelism 2 with checkpoints
every 150 ms, written with ``insert into <table> (k, c) values (?, ?)`` into a table
without keys, so its committed output is known exactly whatever the interleaving: for each
key ``k`` with ``n`` records, the rows ``(k, 1) ... (k, n)`` once each. A lost record
removes a row; a duplicate repeats one. Each kill happens once enough rows are committed
and a checkpoint completed since the last restore (events the test waits for, never
elapsed time); a ``KILL()`` marker in the source's items ends a source's process in-band,
once; ``PAUSE`` markers only keep the job running long enough to be hit.
"""

import uuid
from collections import Counter

import psycopg
import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.common.typeinfo import Types
from flowray.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from flowray.testing import KILL, PAUSE, FaultInjector, KillMarker, TestingSource, wait_until

N = 24_000
KEYS = 60
ROW = Types.ROW_NAMED(["k", "c"], [Types.STRING(), Types.LONG()])
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


@pytest.fixture
def db(postgres):
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table(db):
    name = f"counts_{uuid.uuid4().hex[:10]}"
    db.execute(f"create table {name} (k text not null, c bigint not null)")
    yield name
    db.execute("set lock_timeout = '20s'")
    db.execute(f"drop table {name}")


def _records(pause_every=300, pause_s=0.04, kill_at=None):
    items = []
    for i in range(N):
        if i and i % pause_every == 0:
            items.append(PAUSE(pause_s))
        if i == kill_at:
            items.append(KILL())  # the source's own actor process exits here, once
        items.append((f"k{i % KEYS}", 1))
    return items


def _expected():
    per_key = Counter(f"k{i % KEYS}" for i in range(N))
    return Counter((k, c) for k, n in per_key.items() for c in range(1, n + 1))


def _submit(tmp_path, postgres, table, exactly_once=True, items=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS,
                       "execution.checkpointing.dir": str(tmp_path / "checkpoints")}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(150)
    env.set_parallelism(2)
    options = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
               .with_url(f"jdbc:postgresql://127.0.0.1:{postgres.port}/postgres")
               .with_user_name("postgres").build())
    sql = f"insert into {table} (k, c) values (?, ?)"
    if exactly_once:
        sink = JdbcSink.exactly_once_sink(
            sql, ROW, options, JdbcExecutionOptions.builder().with_batch_size(500)
            .with_max_retries(0).build())
    else:
        sink = JdbcSink.sink(sql, ROW, options,
                             JdbcExecutionOptions.builder().with_batch_size(500).build())
    source = TestingSource(items or _records(), ledger_dir=str(tmp_path / "faults"))
    (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda t: t[0]).sum(1).name("running count")
        .add_sink(sink).name("jdbc"))
    return env.execute_async("jdbc-running-count"), source


def _committed(db, table):
    return Counter(db.execute(f"select k, c from {table}").fetchall())


def _count(db, table):
    return db.execute(f"select count(*) from {table}").fetchone()[0]


def _completed_checkpoints(client):
    try:
        return client.get_checkpoint_stats()["counts"].get("completed", 0)
    except Exception:  # noqa: BLE001 - the job master is being restarted
        return 0


def _wait_progress(client, db, table, rows_at_least, checkpoints_after):
    def reached():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended before the fault could be injected")
        return (_count(db, table) >= rows_at_least
                and _completed_checkpoints(client) > checkpoints_after)
    wait_until(reached, 120, f"{rows_at_least} committed rows and a checkpoint after "
                             f"#{checkpoints_after}", poll_s=0.05)


def _sink_tasks(injector):
    """The two running-count subtasks, once both run (a restart may be under way)."""
    wait_until(lambda: len(injector.subtasks("running count")) == 2, 120,
               "both running-count subtasks to run")
    return injector.subtasks("running count")


def _prepared(db, job_id):
    return db.execute("select gid from pg_prepared_xacts where starts_with(gid, %s)",
                      [f"flowray:{job_id}:"]).fetchall()


def _diff(got, want):
    extra, missing = got - want, want - got
    return (f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
            f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")


def test_killed_sink_tasks_leave_exactly_the_expected_rows(ray_session, postgres, db, table,
                                                          tmp_path):
    items = _records(kill_at=N * 3 // 4)   # and the source of subtask 1 dies in-band
    client, source = _submit(tmp_path, postgres, table, items=items)
    injector = FaultInjector(client)
    for fraction in (0.2, 0.5):
        _wait_progress(client, db, table, int(fraction * N), _completed_checkpoints(client))
        sinks = _sink_tasks(injector)
        injector.kill(sinks[len(injector.killed) % 2])   # subtask 0, then subtask 1
    result = client.wait(timeout_s=180)

    assert result.outcome.status is JobStatus.FINISHED and result.outcome.restarts >= 2
    assert source.fired_markers() == [i for i, item in enumerate(items)
                                      if isinstance(item, KillMarker)]
    committed = _committed(db, table)
    assert committed == _expected(), _diff(committed, _expected())
    assert _prepared(db, client.get_job_id()) == []      # nothing lingers


def test_a_killed_job_master_leaves_exactly_the_expected_rows(ray_session, postgres, db,
                                                             table, tmp_path):
    client, _ = _submit(tmp_path, postgres, table)
    _wait_progress(client, db, table, N // 3, 1)
    FaultInjector(client).kill_job_master()
    result = client.wait(timeout_s=180)

    assert result.outcome.status is JobStatus.FINISHED
    assert result.outcome.job_master_restarts == 1
    committed = _committed(db, table)
    assert committed == _expected(), _diff(committed, _expected())
    assert _prepared(db, client.get_job_id()) == []


def test_at_least_once_loses_no_row_when_a_sink_task_is_killed(ray_session, postgres, db,
                                                               table, tmp_path):
    client, _ = _submit(tmp_path, postgres, table, exactly_once=False)
    injector = FaultInjector(client)
    _wait_progress(client, db, table, N // 3, _completed_checkpoints(client))
    injector.kill(_sink_tasks(injector)[0])
    result = client.wait(timeout_s=180)

    assert result.outcome.status is JobStatus.FINISHED and result.outcome.restarts >= 1
    missing = _expected() - _committed(db, table)
    assert not missing, f"{sum(missing.values())} rows missing, e.g. {list(missing)[:5]}"
