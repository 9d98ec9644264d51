"""``flowray.datastream.connectors.jdbc``: as ``pyflink.datastream.connectors.jdbc``, for
PostgreSQL (through psycopg 3), plus Flink's exactly-once variant.

``JdbcSink.sink(sql, type_info, jdbc_connection_options, jdbc_execution_options=None)``
writes each record with a DML statement whose parameters are JDBC ``?`` placeholders,
matched to the record's fields by ``type_info`` (``Types.ROW`` / ``Types.ROW_NAMED``),
at least once: batches are committed when full, every ``batch_interval_ms``, at every
checkpoint and at the end of input. ``JdbcSink.exactly_once_sink(...,
exactly_once_options=None)`` writes each checkpoint epoch's rows in one transaction that is
prepared at the checkpoint (``PREPARE TRANSACTION``) and committed when the checkpoint
completed (``COMMIT PREPARED``). Attach either with ``DataStream.add_sink`` (or
``sink_to``). The details, guarantees and trade-offs are in
:mod:`flowray.operators.jdbc_sink` and ``docs/connectors.md``.

>>> from flowray.common.typeinfo import Types
>>> sink = JdbcSink.sink(
...     "insert into books (id, title) values (?, ?)",
...     Types.ROW([Types.INT(), Types.STRING()]),
...     JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
...         .with_url("jdbc:postgresql://localhost:5432/library")
...         .with_driver_name("org.postgresql.Driver")
...         .with_user_name("writer").with_password("secret")
...         .build(),
...     JdbcExecutionOptions.builder().with_batch_size(1000).with_batch_interval_ms(200).build())
>>> sink.get_delivery_guarantee()
<DeliveryGuarantee.AT_LEAST_ONCE: 'at-least-once'>
>>> JdbcSink.sink("insert into books values (?)", Types.ROW([Types.INT(), Types.STRING()]),
...               JdbcConnectionOptions("postgresql://localhost/library"))
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: JdbcSink: the statement has 1 '?' parameter but type_info has 2 fields ...
"""

from __future__ import annotations

from typing import Any, List, Optional

from flowray.common.optional_deps import require
from flowray.common.typeinfo import TypeInformation
from flowray.operators.jdbc_options import (
    JdbcConnectionOptions,
    JdbcExactlyOnceOptions,
    JdbcExecutionOptions,
)
from flowray.operators.jdbc_sink import JdbcAtLeastOnceSink, JdbcExactlyOnceSink
from flowray.operators.jdbc_statement import JdbcStatement
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSink

from flowray.datastream.connectors.base import DeliveryGuarantee

__all__ = ["JdbcSink", "JdbcConnectionOptions", "JdbcExecutionOptions",
           "JdbcExactlyOnceOptions"]


class JdbcSink(TwoPhaseCommitSink):
    """PyFlink's ``JdbcSink``: made by :meth:`sink` (at-least-once) or
    :meth:`exactly_once_sink`; it runs the sink it wraps (as PyFlink's wraps a Java sink)
    in each subtask, through the two-phase-commit sink contract."""

    default_name = "JdbcSink"

    def __init__(self, j_jdbc_sink: TwoPhaseCommitSink) -> None:
        if not isinstance(j_jdbc_sink, (JdbcAtLeastOnceSink, JdbcExactlyOnceSink)):
            raise TypeError(f"JdbcSink wraps a JDBC sink: use JdbcSink.sink(...) or "
                            f"JdbcSink.exactly_once_sink(...), got {j_jdbc_sink!r}")
        self._j_jdbc_sink = j_jdbc_sink

    @staticmethod
    def sink(sql: str, type_info: TypeInformation,
             jdbc_connection_options: JdbcConnectionOptions,
             jdbc_execution_options: Optional[JdbcExecutionOptions] = None) -> "JdbcSink":
        """An at-least-once sink running ``sql`` (``?`` parameters) for each record.

        :param sql: a DML statement (insert, update, upsert) with ``?`` parameters
        :param type_info: the records' row type (``Types.ROW`` / ``Types.ROW_NAMED``), one
            field per parameter, in order
        :param jdbc_connection_options: where to connect (a PostgreSQL URL)
        :param jdbc_execution_options: batch size, interval and retries (Flink's defaults:
            5000 rows, no interval, 3 retries)
        """
        require("psycopg", "postgres", "JdbcSink")
        return JdbcSink(JdbcAtLeastOnceSink(JdbcStatement(sql, type_info),
                                            jdbc_connection_options, jdbc_execution_options))

    @staticmethod
    def exactly_once_sink(sql: str, type_info: TypeInformation,
                          jdbc_connection_options: JdbcConnectionOptions,
                          jdbc_execution_options: Optional[JdbcExecutionOptions] = None,
                          exactly_once_options: Optional[JdbcExactlyOnceOptions] = None
                          ) -> "JdbcSink":
        """An exactly-once sink by PostgreSQL's two-phase commit (Flink's
        ``JdbcSink.exactlyOnceSink``). The server needs ``max_prepared_transactions > 0``;
        ``jdbc_execution_options`` must have ``max_retries == 0`` (the default here)."""
        require("psycopg", "postgres", "JdbcSink")
        return JdbcSink(JdbcExactlyOnceSink(JdbcStatement(sql, type_info),
                                            jdbc_connection_options, jdbc_execution_options,
                                            exactly_once_options))

    def get_delivery_guarantee(self) -> DeliveryGuarantee:
        """``EXACTLY_ONCE`` (with checkpointing) or ``AT_LEAST_ONCE``."""
        if isinstance(self._j_jdbc_sink, JdbcExactlyOnceSink):
            return DeliveryGuarantee.EXACTLY_ONCE
        return DeliveryGuarantee.AT_LEAST_ONCE

    def __repr__(self) -> str:
        return f"JdbcSink({self._j_jdbc_sink!r})"

    # -- the two-phase-commit contract, run by the wrapped sink ------------------------------
    def open(self, context: SinkWriterContext) -> None:
        self._j_jdbc_sink.open(context)

    def begin_transaction(self) -> Any:
        return self._j_jdbc_sink.begin_transaction()

    def write(self, transaction: Any, records: List[Any]) -> None:
        self._j_jdbc_sink.write(transaction, records)

    def pre_commit(self, transaction: Any) -> None:
        self._j_jdbc_sink.pre_commit(transaction)

    def pre_commit_checkpoint(self, transaction: Any, checkpoint_id: Optional[int]) -> None:
        self._j_jdbc_sink.pre_commit_checkpoint(transaction, checkpoint_id)

    def commit(self, transaction: Any) -> None:
        self._j_jdbc_sink.commit(transaction)

    def abort(self, transaction: Any) -> None:
        self._j_jdbc_sink.abort(transaction)

    def recover_and_commit(self, transaction: Any) -> None:
        self._j_jdbc_sink.recover_and_commit(transaction)

    def recover_and_abort(self, transaction: Any) -> None:
        self._j_jdbc_sink.recover_and_abort(transaction)

    def finish_recovering_state(self) -> None:
        self._j_jdbc_sink.finish_recovering_state()

    def close(self) -> None:
        self._j_jdbc_sink.close()
