"""Exactly-once Parquet files in one directory (the files of a Spark table), on the
two-phase-commit base.

Each transaction (one per checkpoint epoch and subtask) stages its records
(:class:`~flowray.operators.staged_records.StagedRecords`: in memory up to
``flowray.sink.spill-threshold`` bytes, past it in a spill file in the local temp folder);
``pre_commit`` writes them, piece by piece and in order, as one Parquet file under
``<dir>/_flowray_staging/`` (Spark ignores names starting with ``_``); ``commit`` renames
it to ``<dir>/part-<sink>-<token>-<subtask>-<n>.parquet``.
A commit retried after a failure finds the file already in place and changes nothing; an
aborted or never-committed epoch's staging file is deleted. Records become rows by the
Arrow ``schema`` (named fields for :class:`~flowray.common.types.Row` and dicts, positions
for tuples); without a schema the first written epoch's records (its first piece of about
the spill threshold, when it spilled) fix it. Staged records are never checkpointed: a
transaction enters a checkpoint only after its pre-commit wrote them to its staging
file, and one still staging at a failure is aborted (its records are replayed).

>>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
>>> from flowray.operators.sinks import SinkWriterContext
>>> folder = tempfile.mkdtemp()
>>> sink = ParquetFilesSink(folder, pa.schema([("user", pa.string()), ("n", pa.int64())]))
>>> sink.open(SinkWriterContext(0, 1))
>>> txn = sink.begin_transaction()
>>> sink.write(txn, [("a", 1), {"user": "b", "n": 2}])
>>> sink.pre_commit(txn); sink.commit(txn); sink.commit(txn)  # the retry changes nothing
>>> sorted(pq.read_table(folder).to_pylist(), key=lambda r: r["user"])
[{'user': 'a', 'n': 1}, {'user': 'b', 'n': 2}]
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from flowray.common.options import SINK_SPILL_THRESHOLD
from flowray.operators.columnar.sink import batches_to_table
from flowray.operators.sinks import SinkWriterContext
from flowray.operators.staged_records import StagedRecords, spill_threshold_of
from flowray.operators.two_phase_commit import TwoPhaseCommitSink

__all__ = ["ParquetFilesSink", "ParquetTransaction", "SchemaMismatchError", "STAGING_DIR",
           "records_to_table"]

STAGING_DIR = "_flowray_staging"


class SchemaMismatchError(ValueError):
    """A record does not fit the table's schema."""


@dataclass
class ParquetTransaction:
    """One epoch's Parquet file: staged at ``staging_path``, committed to ``final_path``.
    ``records``: the staged records until ``pre_commit`` (never checkpointed)."""

    staging_path: str
    final_path: str
    records: Optional[StagedRecords] = None

    def __getstate__(self) -> Dict[str, Any]:
        return {"staging_path": self.staging_path, "final_path": self.final_path,
                "records": None}


def _as_dict(record: Any, names: List[str]) -> Dict[str, Any]:
    if isinstance(record, dict):
        return record
    fields = getattr(record, "_fields", None)
    if fields:  # a named Row (or a namedtuple)
        return dict(zip(fields, record))
    if isinstance(record, (tuple, list)):
        if len(record) != len(names):
            raise SchemaMismatchError(f"record {record!r} has {len(record)} fields, the "
                                      f"schema has {len(names)}: {names}")
        return dict(zip(names, record))
    if len(names) == 1:
        return {names[0]: record}
    raise SchemaMismatchError(f"record {record!r} is not a Row, tuple or dict; the schema "
                              f"has fields {names}")


def records_to_table(records: List[Any], schema: Any, where: str = "") -> Any:
    """An Arrow table of ``records`` in ``schema`` (inferred when ``None``), or
    :class:`SchemaMismatchError` naming the first record that does not fit."""
    import pyarrow as pa

    if records and isinstance(records[0], pa.RecordBatch):  # a columnar stream's elements
        return batches_to_table(records, schema, where, SchemaMismatchError)
    if schema is None:
        first = records[0]
        fields = getattr(first, "_fields", None)
        if isinstance(first, dict):
            names = list(first)
        elif fields:
            names = list(fields)
        elif isinstance(first, (tuple, list)):
            names = [f"f{i}" for i in range(len(first))]
        else:
            names = ["f0"]
    else:
        names = list(schema.names)
    rows = [_as_dict(r, names) for r in records]
    for r in rows:
        if set(r) != set(names):
            raise SchemaMismatchError(f"record {r!r} has fields {sorted(r)}, the schema of "
                                      f"{where or 'the table'} has {sorted(names)}")
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        bad = _first_bad(rows, schema) if schema is not None else None
        raise SchemaMismatchError(
            f"records do not match the schema of {where or 'the table'} "
            f"({schema if schema is not None else 'inferred'}): {e}"
            + (f"; first bad record: {bad!r}" if bad is not None else "")) from e


def _first_bad(rows: List[Dict[str, Any]], schema: Any) -> Optional[Dict[str, Any]]:
    import pyarrow as pa

    for r in rows:
        try:
            pa.Table.from_pylist([r], schema=schema)
        except Exception:  # noqa: BLE001 - looking for the culprit
            return r
    return None


class ParquetFilesSink(TwoPhaseCommitSink):
    """Parquet files under ``directory``, each checkpoint epoch's committed exactly once
    (see the module doc). ``schema``: a ``pyarrow.Schema``, or ``None`` to infer it.
    ``spill_threshold``: bytes of staged records held in memory (``None``: the job's
    ``flowray.sink.spill-threshold``); ``spill_dir``: where they spill (``None``: the
    local temp folder)."""

    default_name = "ParquetFilesSink"
    _RUNTIME = ("_subtask", "_token", "_counter", "_schema_in_use", "_threshold")

    def __init__(self, directory: str, schema: Any = None, sink_id: Optional[str] = None,
                 description: str = "", spill_threshold: Optional[int] = None,
                 spill_dir: Optional[str] = None) -> None:
        self.directory = os.path.abspath(str(directory))
        self.schema = schema
        self.sink_id = sink_id or uuid.uuid4().hex[:12]
        if not re.fullmatch(r"[0-9A-Za-z]+", self.sink_id):
            raise ValueError(f"the sink id must be alphanumeric, got {self.sink_id!r}")
        self.description = description or self.directory
        if spill_threshold is not None and spill_threshold < 0:
            raise ValueError(f"the spill threshold must not be negative, got {spill_threshold}")
        self.spill_threshold = spill_threshold
        self.spill_dir = spill_dir

    def __getstate__(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in self._RUNTIME}

    @property
    def staging_dir(self) -> str:
        return os.path.join(self.directory, STAGING_DIR)

    def open(self, context: SinkWriterContext) -> None:
        self._subtask = context.subtask_index
        self._token = uuid.uuid4().hex[:12]
        self._counter = 0
        self._schema_in_use = self.schema
        self._threshold = (self.spill_threshold if self.spill_threshold is not None else
                           spill_threshold_of(context.config))
        os.makedirs(self.staging_dir, exist_ok=True)

    def _staged(self) -> StagedRecords:
        threshold = getattr(self, "_threshold", None)
        return StagedRecords(SINK_SPILL_THRESHOLD.default if threshold is None else threshold,
                             self.spill_dir)

    def begin_transaction(self) -> ParquetTransaction:
        name = f"part-{self.sink_id}-{self._token}-{self._subtask}-{self._counter}.parquet"
        self._counter += 1
        return ParquetTransaction(os.path.join(self.staging_dir, name),
                                  os.path.join(self.directory, name), self._staged())

    def write(self, transaction: ParquetTransaction, records: List[Any]) -> None:
        if transaction.records is None:
            transaction.records = self._staged()
        transaction.records.append(records)

    def pre_commit(self, transaction: ParquetTransaction) -> None:
        """Write the staged records, in order, as the transaction's staging file: piece by
        piece (one row group or more each) when they spilled, at once otherwise."""
        staged, transaction.records = transaction.records, None
        if staged is None:
            return
        try:
            if len(staged):
                self._write_staging_file(staged, transaction.staging_path)
        finally:
            staged.discard()

    def _write_staging_file(self, staged: StagedRecords, path: str) -> None:
        import pyarrow.parquet as pq

        tmp = f"{path}.tmp"
        writer = None
        try:
            for records in staged.batches():
                table = records_to_table(records, self._schema_in_use, self.description)
                if writer is None:
                    self._schema_in_use = table.schema
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
            if writer is not None:
                writer.close()
                writer = None
                os.replace(tmp, path)
        except BaseException:
            if writer is not None:
                writer.close()
            try:
                os.remove(tmp)
            except FileNotFoundError:
                pass
            raise

    def commit(self, transaction: ParquetTransaction) -> None:
        try:
            os.replace(transaction.staging_path, transaction.final_path)
        except FileNotFoundError:
            pass  # committed before, or an empty epoch: nothing to do

    def abort(self, transaction: ParquetTransaction) -> None:
        staged, transaction.records = transaction.records, None
        if staged is not None:
            staged.discard()
        for path in (transaction.staging_path, f"{transaction.staging_path}.tmp"):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def recover_and_commit(self, transaction: ParquetTransaction) -> None:
        self.commit(transaction)

    def recover_and_abort(self, transaction: ParquetTransaction) -> None:
        self.abort(transaction)

    def finish_recovering_state(self) -> None:
        """Staging files of this subtask's earlier attempts that no checkpoint names are
        never committed: delete them (other subtasks' files are theirs to handle)."""
        pattern = re.compile(rf"part-{self.sink_id}-[0-9a-f]+-{self._subtask}-\d+\.parquet"
                             rf"(\.tmp)?")
        try:
            names = os.listdir(self.staging_dir)
        except FileNotFoundError:
            return
        for name in names:
            if pattern.fullmatch(name) and f"-{self._token}-" not in name:
                try:
                    os.remove(os.path.join(self.staging_dir, name))
                except FileNotFoundError:
                    pass
