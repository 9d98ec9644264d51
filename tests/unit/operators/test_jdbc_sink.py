"""The JDBC sink's pure parts, without a server: ``?`` translation, option and URL parsing,
records matched to parameters, transaction ids and which lingering transactions a subtask
rolls back, and the checks made when a sink is defined."""

import datetime as dt
import pickle
import re

import pytest

from flowray.common.time import Instant
from flowray.common.type_conversion import RecordTypeError
from flowray.common.typeinfo import Types
from flowray.common.types import Row
from flowray.datastream.connectors import DeliveryGuarantee
from flowray.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from flowray.operators.jdbc_sink import (
    JdbcAtLeastOnceSink,
    JdbcConfigurationError,
    JdbcExactlyOnceSink,
    JdbcStatementError,
    TransactionIds,
)
from flowray.operators.jdbc_statement import JdbcStatement, translate_placeholders

ROW2 = Types.ROW([Types.INT(), Types.STRING()])


def _options(url="jdbc:postgresql://localhost:5432/db"):
    return JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(url).build()


# -- placeholders ---------------------------------------------------------------------------

@pytest.mark.parametrize("sql, query, count", [
    ("insert into t values (?, ?)", "insert into t values (%s, %s)", 2),
    ("update t set a = ? where b = ?", "update t set a = %s where b = %s", 2),
    # quotes: standard strings with '' escapes, E-strings with backslash escapes
    ("select '?', 'it''s ?', ?", "select '?', 'it''s ?', %s", 1),
    ("select E'\\'?', ?", "select E'\\'?', %s", 1),
    ("select e'a\\\\', ?", "select e'a\\\\', %s", 1),
    ("select name'?'", "select name'?'", 0),            # not an E-string: a plain one
    # quoted identifiers, dollar quotes, comments
    ('select "we?rd""?" from t where x = ?', 'select "we?rd""?" from t where x = %s', 1),
    ("select $$?$$, $tag$ ? $$ ? $tag$, ?", "select $$?$$, $tag$ ? $$ ? $tag$, %s", 1),
    ("select a$b, ?", "select a$b, %s", 1),             # '$' inside an identifier
    ("select ? -- a ? comment\n, ?", "select %s -- a ? comment\n, %s", 2),
    ("select /* ? /* nested ? */ ? */ ?", "select /* ? /* nested ? */ ? */ %s", 1),
    # PgJDBC's escape for '?' operators, and '%' for psycopg everywhere
    ("select doc ?? 'k', doc ??| array['a'], ?", "select doc ? 'k', doc ?| array['a'], %s", 1),
    ("select 5 % 2, '100%', ? -- 1%", "select 5 %% 2, '100%%', %s -- 1%%", 1),
    ("insert into t values (?);  -- done", "insert into t values (%s);  -- done", 1),
])
def test_placeholders_are_translated_outside_quotes_and_comments(sql, query, count):
    assert translate_placeholders(sql) == (query, count)


@pytest.mark.parametrize("sql, message", [
    ("select 'open", "unterminated string constant"),
    ('select "open', "unterminated quoted identifier"),
    ("select $x$ open", "unterminated dollar-quoted string $x$"),
    ("select /* open /* */", "unterminated /* comment"),
    ("insert into t values (?); delete from t", "more than one statement"),
    ("   ", "non-empty SQL string"),
])
def test_malformed_statements_are_refused_naming_the_problem(sql, message):
    with pytest.raises(ValueError, match="JdbcSink: .*" + re.escape(message)):
        translate_placeholders(sql)


# -- records to parameters ------------------------------------------------------------------

def test_records_become_parameters_in_field_order():
    st = JdbcStatement("insert into t values (?, ?)",
                       Types.ROW_NAMED(["id", "title"], [Types.INT(), Types.STRING()]))
    assert st.parameters((1, "a")) == (1, "a")
    assert st.parameters([2, "b"]) == (2, "b")
    assert st.parameters(Row(title="c", id=3)) == (3, "c")       # a named Row, by name
    assert st.parameters({"title": "d", "id": 4}) == (4, "d")
    assert st.parameters((5, None)) == (5, None)
    with pytest.raises(RecordTypeError):
        st.parameters(("six", "f"))
    with pytest.raises(RecordTypeError):
        st.parameters((7,))


def test_typed_fields_are_converted_as_pyflink_does():
    st = JdbcStatement("insert into t values (?, ?, ?)",
                       Types.ROW([Types.BIG_DEC(), Types.SQL_DATE(), Types.INSTANT()]))
    params = st.parameters((1.5, dt.date(2024, 1, 2), Instant.of_epoch_milli(1_500)))
    assert str(params[0]) == "1.5" and params[1] == dt.date(2024, 1, 2)
    assert params[2] == dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=dt.timezone.utc)


def test_the_statement_must_match_the_row_type():
    with pytest.raises(ValueError, match="3 '\\?' parameters but type_info has 2 fields"):
        JdbcStatement("insert into t values (?, ?, ?)", ROW2)
    with pytest.raises(TypeError, match="type_info must be a row type"):
        JdbcStatement("insert into t values (?)", Types.INT())


def test_a_statement_pickles_without_its_compiled_converter():
    st = JdbcStatement("insert into t values (?, ?)", ROW2)
    st.parameters((1, "x"))
    copy = pickle.loads(pickle.dumps(st))
    assert copy.query == st.query and copy.parameters((2, "y")) == (2, "y")


# -- connection options ---------------------------------------------------------------------

@pytest.mark.parametrize("url, expected", [
    ("jdbc:postgresql://h:6543/shop",
     {"host": "h", "port": "6543", "dbname": "shop"}),
    ("jdbc:postgresql://h/shop?user=u&password=p&sslmode=require&connectTimeout=5",
     {"host": "h", "port": "5432", "dbname": "shop", "user": "u", "password": "p",
      "sslmode": "require", "connect_timeout": "5"}),
    ("jdbc:postgresql://a:1,b:2/db?ssl=true&ApplicationName=etl",
     {"host": "a,b", "port": "1,2", "dbname": "db", "sslmode": "verify-full",
      "application_name": "etl"}),
    ("jdbc:postgresql://[::1]:5433/db", {"host": "::1", "port": "5433", "dbname": "db"}),
    ("jdbc:postgresql:shop", {"host": "localhost", "port": "5432", "dbname": "shop"}),
    ("jdbc:postgresql:/", {"host": "localhost", "port": "5432"}),
    ("jdbc:postgresql://h/db?currentSchema=sales",
     {"host": "h", "port": "5432", "dbname": "db", "options": "-c search_path=sales"}),
    ("postgresql://u:p@h:7/db?sslmode=disable",
     {"host": "h", "port": "7", "dbname": "db", "user": "u", "password": "p",
      "sslmode": "disable"}),
    ("postgres://h/db", {"host": "h", "dbname": "db"}),
])
def test_urls_become_libpq_parameters(url, expected):
    params = _options(url).connection_parameters()
    assert params.pop("connect_timeout") == expected.pop("connect_timeout", "60")
    assert params == expected


def test_user_and_password_fill_what_the_url_leaves_out():
    opts = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url("jdbc:postgresql://h/db?user=from_url")
            .with_user_name("builder").with_password("pw")
            .with_connection_check_timeout_seconds(9).build())
    params = opts.connection_parameters()
    assert params["user"] == "from_url"            # as PgJDBC: the URL wins
    assert params["password"] == "pw" and params["connect_timeout"] == "9"
    assert (opts.get_db_url(), opts.get_user_name(), opts.get_password(),
            opts.get_driver_name(), opts.get_connection_check_timeout_seconds()) == \
        ("jdbc:postgresql://h/db?user=from_url", "builder", "pw", None, 9)
    assert "pw" not in repr(opts)


@pytest.mark.parametrize("url, message", [
    ("jdbc:mysql://h:3306/db", "is a jdbc:mysql URL"),
    ("jdbc:oracle:thin:@h:1521:db", "is a jdbc:oracle URL"),
    ("mysql://h/db", "is not a PostgreSQL URL"),
    ("jdbc:postgresql://h/db?prepareThreshold=0", "URL parameter 'prepareThreshold'"),
    ("jdbc:postgresql://h:port/db", "bad port 'port'"),
    ("jdbc:postgresql://h/db?ssl=maybe", "ssl='maybe'"),
    ("", "a JDBC URL is required"),
])
def test_other_urls_are_refused_naming_them(url, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _options(url)


def test_other_drivers_are_refused_naming_them_and_passwords_never_shown():
    builder = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
               .with_url("jdbc:postgresql://h/db").with_driver_name("com.mysql.cj.jdbc.Driver"))
    with pytest.raises(ValueError, match="driver 'com.mysql.cj.jdbc.Driver' is not supported"):
        builder.build()
    for driver in ("org.postgresql.Driver", "psycopg"):
        assert builder.with_driver_name(driver).build().get_driver_name() == driver
    with pytest.raises(ValueError) as info:
        _options("jdbc:mysql://h/db?password=s3cret")
    assert "s3cret" not in str(info.value)
    with pytest.raises(ValueError) as info:
        _options("jdbc:postgresql://h/db?password=s3cret&nope=1")
    assert "s3cret" not in str(info.value) and "'nope'" in str(info.value)
    with pytest.raises(ValueError, match="positive number of seconds"):
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(
            "jdbc:postgresql://h/db").with_connection_check_timeout_seconds(0).build()


# -- execution and exactly-once options -----------------------------------------------------

def test_execution_options_have_flinks_defaults_and_checks():
    d = JdbcExecutionOptions.defaults()
    assert (d.get_batch_size(), d.get_batch_interval_ms(), d.get_max_retries()) == (5000, 0, 3)
    o = (JdbcExecutionOptions.builder().with_batch_size(10).with_batch_interval_ms(50)
         .with_max_retries(0).build())
    assert (o.get_batch_size(), o.get_batch_interval_ms(), o.get_max_retries()) == (10, 50, 0)
    for bad in (JdbcExecutionOptions.builder().with_batch_size(0),
                JdbcExecutionOptions.builder().with_batch_interval_ms(-1),
                JdbcExecutionOptions.builder().with_max_retries(-1),
                JdbcExecutionOptions.builder().with_batch_size(True)):
        with pytest.raises(ValueError):
            bad.build()


def test_exactly_once_options_keep_flinks_names():
    d = JdbcExactlyOnceOptions.defaults()
    assert (d.get_max_commit_attempts(), d.is_recovered_and_rollback(),
            d.is_allow_out_of_order_commits(), d.get_timeout_sec(),
            d.is_transaction_per_connection()) == (3, True, False, None, False)
    o = (JdbcExactlyOnceOptions.builder().with_max_commit_attempts(5)
         .with_recovered_and_rollback(False).with_allow_out_of_order_commits(True)
         .with_timeout_sec(30).with_transaction_per_connection(True).build())
    assert (o.get_max_commit_attempts(), o.is_recovered_and_rollback(),
            o.is_allow_out_of_order_commits(), o.get_timeout_sec(),
            o.is_transaction_per_connection()) == (5, False, True, 30, True)
    with pytest.raises(ValueError):
        JdbcExactlyOnceOptions.builder().with_max_commit_attempts(0).build()


# -- transaction ids ------------------------------------------------------------------------

def test_transaction_ids_round_trip_and_ignore_other_sinks():
    ids = TransactionIds("0123abcd", "jdbc-out")
    gid = ids.gid(3, 42)
    assert gid == "flowray:0123abcd:jdbc-out:3:42" and ids.parse(gid) == (3, 42)
    other = TransactionIds("0123abcd", "jdbc-other")
    assert other.parse(gid) is None
    assert ids.parse("flowray:0123abcd:jdbc-out:3:x") is None
    assert ids.parse("flowray:0123abcd:jdbc-out:3") is None


def test_unsafe_or_long_names_are_hashed_into_a_short_gid():
    ids = TransactionIds("job", "my sink: 'quoted' uid" + "x" * 300)
    gid = ids.gid(1, 2)
    assert len(gid) < 200 and "'" not in gid and gid.count(":") == 4
    assert ids.parse(gid) == (1, 2)
    assert TransactionIds("job", "my sink: 'quoted' uid" + "x" * 300).prefix == ids.prefix


def test_each_subtask_rolls_back_only_its_own_writers_after_the_restored_checkpoint():
    ids = TransactionIds("j", "s")
    gids = [ids.gid(w, c) for w in range(4) for c in (4, 5, 6)] + ["flowray:j:t:0:9", "x"]
    # same parallelism: own index only, checkpoints after the restored one
    assert ids.to_roll_back(gids, 0, 4, 5) == [ids.gid(0, 6)]
    assert ids.to_roll_back(gids, 3, 4, 5) == [ids.gid(3, 6)]
    # scaled in from 4 to 2: the former writers 2 and 3 map to subtasks 0 and 1
    assert ids.to_roll_back(gids, 0, 2, 5) == [ids.gid(0, 6), ids.gid(2, 6)]
    assert ids.to_roll_back(gids, 1, 2, 5) == [ids.gid(1, 6), ids.gid(3, 6)]
    # nothing restored: every transaction of its writers
    assert ids.to_roll_back(gids, 1, 2, None) == [ids.gid(1, c) for c in (4, 5, 6)] + \
        [ids.gid(3, c) for c in (4, 5, 6)]
    # every lingering transaction has exactly one owner whatever the parallelism
    for p in (1, 2, 3, 4, 5):
        owned = [g for i in range(p) for g in ids.to_roll_back(gids, i, p, None)]
        assert sorted(owned) == sorted(g for g in gids if ids.parse(g) is not None)


# -- defining sinks -------------------------------------------------------------------------

def test_the_facade_builds_either_guarantee_and_pickles_the_definition_only():
    sink = JdbcSink.sink("insert into t values (?, ?)", ROW2, _options())
    assert sink.get_delivery_guarantee() is DeliveryGuarantee.AT_LEAST_ONCE
    assert isinstance(sink._j_jdbc_sink, JdbcAtLeastOnceSink)
    eo = JdbcSink.exactly_once_sink("insert into t values (?, ?)", ROW2, _options())
    assert eo.get_delivery_guarantee() is DeliveryGuarantee.EXACTLY_ONCE
    inner = eo._j_jdbc_sink
    assert isinstance(inner, JdbcExactlyOnceSink)
    assert inner.execution_options.get_max_retries() == 0
    inner._data = object()  # a per-subtask attribute is never pickled
    copy = pickle.loads(pickle.dumps(eo))._j_jdbc_sink
    assert not hasattr(copy, "_data") and copy.sink_id == inner.sink_id
    with pytest.raises(TypeError, match="JdbcSink wraps a JDBC sink"):
        JdbcSink(object())


def test_exactly_once_needs_max_retries_zero_as_in_flink():
    with pytest.raises(ValueError, match="requires max_retries == 0"):
        JdbcSink.exactly_once_sink("insert into t values (?, ?)", ROW2, _options(),
                                   JdbcExecutionOptions.defaults())
    ok = JdbcSink.exactly_once_sink("insert into t values (?, ?)", ROW2, _options(),
                                    JdbcExecutionOptions.builder().with_max_retries(0)
                                    .with_batch_size(7).build())
    assert ok._j_jdbc_sink.execution_options.get_batch_size() == 7


def test_wrong_option_objects_are_refused():
    with pytest.raises(TypeError, match="jdbc_connection_options must be"):
        JdbcSink.sink("insert into t values (?, ?)", ROW2, "jdbc:postgresql://h/db")
    with pytest.raises(TypeError, match="jdbc_execution_options must be"):
        JdbcSink.sink("insert into t values (?, ?)", ROW2, _options(), {"batch_size": 1})
    with pytest.raises(TypeError, match="exactly_once_options must be"):
        JdbcSink.exactly_once_sink("insert into t values (?, ?)", ROW2, _options(), None, 3)


def test_errors_pickle_with_their_text_and_configuration_errors_do_not_restart():
    err = JdbcStatementError("JdbcSink: boom", "insert ...", "(1, 'x')", "23505")
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.statement, copy.record, copy.sqlstate) == \
        ("JdbcSink: boom", "insert ...", "(1, 'x')", "23505")
    assert JdbcConfigurationError("x").recoverable is False
