"""An exactly-once sink writing text part files, shaped like PyFlink's ``FileSink``.

``FileSink.for_row_format(base_path, Encoder.simple_string_encoder()).build()`` writes one
line per record (the encoder's bytes for it) into part files directly under ``base_path``
(a local path or a ``file://`` URI; no bucket subdirectories). It is a
:class:`~flowray.operators.two_phase_commit.TwoPhaseCommitSink`:

* a transaction holds the part files written between two checkpoints; a part file is
  opened on the first record (an empty transaction creates no file) and rolled by the
  :class:`RollingPolicy` (checked when a record arrives); a checkpoint always ends the
  transaction's last part;
* while a transaction is open its files are hidden in-progress files
  ``.<prefix>-<token>-<subtask>-<counter><suffix>.inprogress.<sink id>``;
* ``pre_commit`` (at the checkpoint) flushes, fsyncs and closes them; ``commit`` (when
  the checkpoint completed) renames each atomically to its visible name
  ``<prefix>-<token>-<subtask>-<counter><suffix>``; committing again is harmless (the
  in-progress file is gone and the visible one exists); if both are gone the commit fails
  with an error; ``abort`` deletes the in-progress files;
* ``<token>`` is a fresh random id per subtask instance (each attempt, each restart), so
  no name is ever used twice; ``<sink id>`` is fixed when the sink is built;
* after a restore (``finish_recovering_state``) the in-progress files the restored
  attempts left behind (written after their last checkpoint) are deleted: every file of
  the attempts whose transactions were restored, and, when this subtask restored exactly
  its own earlier state (unchanged parallelism), every in-progress file of this sink and
  subtask index but for its own;
* a restart with nothing to restore (no checkpoint had completed; attempt number above 0)
  deletes, before its first transaction, every in-progress file of this sink and subtask
  index that earlier attempts left (none of them can ever be committed).

Readers that skip hidden files (names starting with ``.``, e.g. ``FileSource``) see every
committed record exactly once and nothing else.

>>> import os, tempfile
>>> from flowray.common.serialization import Encoder
>>> from flowray.operators.sinks import SinkWriterContext
>>> folder = tempfile.mkdtemp()
>>> sink = (FileSink.for_row_format(folder, Encoder.simple_string_encoder())
...         .with_output_file_config(OutputFileConfig.builder()
...                                  .with_part_prefix("out").with_part_suffix(".txt").build())
...         .build())
>>> sink.open(SinkWriterContext(subtask_index=0, parallelism=1))
>>> txn = sink.begin_transaction()
>>> sink.write(txn, ["one", 2])
>>> [name.startswith(".out-") for name in os.listdir(folder)]
[True]
>>> sink.pre_commit(txn); sink.commit(txn); sink.commit(txn)      # commit is idempotent
>>> [name] = os.listdir(folder); name.startswith("out-") and name.endswith("-0-0.txt")
True
>>> open(os.path.join(folder, name)).read()
'one\\n2\\n'
>>> sink.close()
>>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

from flowray.common.compat import not_implemented
from flowray.common.files import fsync_dir

import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Dict, List, Optional, Set

from flowray.common.serialization import Encoder

from flowray.operators.sinks import SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSink
from flowray.operators.local_files import local_path

__all__ = [
    "FileSink",
    "RowFormatBuilder",
    "OutputFileConfig",
    "OutputFileConfigBuilder",
    "RollingPolicy",
    "PartFile",
    "FileSinkTransaction",
]

_INPROGRESS = ".inprogress."


class OutputFileConfig:
    """Prefix and suffix of part file names (``part`` and ``""`` by default)."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        for what, value in (("part prefix", part_prefix), ("part suffix", part_suffix)):
            if not isinstance(value, str):
                raise TypeError(f"OutputFileConfig: the {what} must be a string, got {value!r}")
            if "/" in value or os.sep in value or "\0" in value:
                raise ValueError(f"OutputFileConfig: the {what} {value!r} must not contain "
                                 f"a path separator")
        if not part_prefix or part_prefix.startswith("."):
            raise ValueError(f"OutputFileConfig: the part prefix must be non-empty and not "
                             f"start with '.', got {part_prefix!r}")
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> "OutputFileConfigBuilder":
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    def __repr__(self) -> str:
        return f"OutputFileConfig({self.part_prefix!r}, {self.part_suffix!r})"


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix = "part"
        self._suffix = ""

    def with_part_prefix(self, prefix: str) -> "OutputFileConfigBuilder":
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> "OutputFileConfigBuilder":
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


class RollingPolicy:
    """When a transaction starts a new part file (besides at every checkpoint).

    ``default_rolling_policy(part_size, rollover_interval, inactivity_interval)`` (bytes,
    milliseconds): roll before a record once the part file holds ``part_size`` bytes, was
    opened ``rollover_interval`` ago, or was last written ``inactivity_interval`` ago.
    ``on_checkpoint_rolling_policy()``: one part file per checkpoint.
    """

    def __init__(self, part_size: Optional[int], rollover_interval: Optional[int],
                 inactivity_interval: Optional[int]) -> None:
        for what, value in (("part_size", part_size), ("rollover_interval", rollover_interval),
                            ("inactivity_interval", inactivity_interval)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"RollingPolicy: {what} must be a positive int, got {value!r}")
        self.part_size = part_size
        self.rollover_interval = rollover_interval
        self.inactivity_interval = inactivity_interval

    @staticmethod
    def default_rolling_policy(part_size: int = 1024 * 1024 * 128,
                               rollover_interval: int = 60 * 1000,
                               inactivity_interval: int = 60 * 1000) -> "RollingPolicy":
        return RollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> "RollingPolicy":
        return RollingPolicy(None, None, None)

    @property
    def rolls_on_checkpoint_only(self) -> bool:
        return self.part_size is None and self.rollover_interval is None \
            and self.inactivity_interval is None

    def should_roll(self, size: int, opened_ms: float, last_write_ms: float,
                    now_ms: float) -> bool:
        return ((self.part_size is not None and size >= self.part_size)
                or (self.rollover_interval is not None
                    and now_ms - opened_ms >= self.rollover_interval)
                or (self.inactivity_interval is not None
                    and now_ms - last_write_ms >= self.inactivity_interval))

    def __repr__(self) -> str:
        if self.rolls_on_checkpoint_only:
            return "RollingPolicy.on_checkpoint_rolling_policy()"
        return (f"RollingPolicy.default_rolling_policy({self.part_size}, "
                f"{self.rollover_interval}, {self.inactivity_interval})")


@dataclass(frozen=True)
class PartFile:
    """One part file of a transaction: where it is written and its visible name."""

    in_progress_path: str
    final_path: str


@dataclass
class FileSinkTransaction:
    """The (picklable) handle of one transaction: the writing attempt and its part files."""

    token: str
    subtask_index: int
    parts: List[PartFile] = field(default_factory=list)


class _OpenPart:
    __slots__ = ("file", "size", "opened_ms", "last_write_ms")

    def __init__(self, file: BinaryIO, now_ms: float) -> None:
        self.file = file
        self.size = 0
        self.opened_ms = now_ms
        self.last_write_ms = now_ms


def _local_path(path: str) -> str:
    return local_path(path, "FileSink")


class FileSink(TwoPhaseCommitSink):
    """Exactly-once row-format part files under one directory (see the module docstring).

    Build with ``FileSink.for_row_format(base_path, encoder)...build()`` and attach with
    ``DataStream.sink_to``. The definition is small and picklable; each subtask's copy
    keeps its open files to itself.
    """

    default_name = "FileSink"
    _RUNTIME = ("_subtask", "_token", "_counter", "_writers", "_recovered")

    def __init__(self, base_path: str, encoder: Encoder,
                 output_file_config: Optional[OutputFileConfig] = None,
                 rolling_policy: Optional[RollingPolicy] = None,
                 sink_id: Optional[str] = None) -> None:
        if not callable(getattr(encoder, "encode", None)):
            raise TypeError(f"FileSink: the encoder must have encode(record) -> bytes "
                            f"(e.g. Encoder.simple_string_encoder()), got {encoder!r}")
        self.base_path = _local_path(base_path)
        self.encoder = encoder
        self.output_file_config = output_file_config or OutputFileConfig()
        self.rolling_policy = rolling_policy or RollingPolicy.default_rolling_policy()
        self.sink_id = sink_id or uuid.uuid4().hex[:16]
        if not re.fullmatch(r"[0-9A-Za-z]+", self.sink_id):
            raise ValueError(f"FileSink: the sink id must be alphanumeric, got {self.sink_id!r}")

    for_bulk_format = not_implemented(
        "FileSink.for_bulk_format",
        "bulk writers are Java: use for_row_format(...), or ParquetFilesSink for Parquet")
    get_transformer = not_implemented(
        "FileSink.get_transformer",
        "transform the stream with map/process before sink_to(...)")

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "RowFormatBuilder":
        """A builder of a sink writing ``encoder.encode(record)`` per record."""
        return RowFormatBuilder(base_path, encoder)

    def __getstate__(self) -> Dict[str, Any]:  # the definition only, never open files
        return {k: v for k, v in self.__dict__.items() if k not in self._RUNTIME}

    def __repr__(self) -> str:
        return f"FileSink({self.base_path!r}, {self.output_file_config!r})"

    # -- per subtask -------------------------------------------------------------------
    def open(self, context: SinkWriterContext) -> None:
        self._subtask = context.subtask_index
        self._token = uuid.uuid4().hex
        self._counter = 0
        self._writers: Dict[str, _OpenPart] = {}
        self._recovered: List[FileSinkTransaction] = []
        # a restart that restores nothing cleans up before its first transaction
        self._leftovers_checked = context.attempt_number == 0
        os.makedirs(self.base_path, exist_ok=True)

    def _part_name(self, counter: int) -> str:
        cfg = self.output_file_config
        return f"{cfg.part_prefix}-{self._token}-{self._subtask}-{counter}{cfg.part_suffix}"

    def begin_transaction(self) -> FileSinkTransaction:
        if not self._leftovers_checked:
            self._leftovers_checked = True
            self._delete_leftovers(set(), own_subtask=True)
        return FileSinkTransaction(self._token, self._subtask)

    def _new_part(self, txn: FileSinkTransaction, now_ms: float) -> _OpenPart:
        name = self._part_name(self._counter)
        self._counter += 1
        part = PartFile(os.path.join(self.base_path, f".{name}{_INPROGRESS}{self.sink_id}"),
                        os.path.join(self.base_path, name))
        f = open(part.in_progress_path, "xb")
        txn.parts.append(part)
        writer = self._writers[part.in_progress_path] = _OpenPart(f, now_ms)
        return writer

    def _open_part(self, txn: FileSinkTransaction) -> Optional[_OpenPart]:
        if not txn.parts:
            return None
        return self._writers.get(txn.parts[-1].in_progress_path)

    def _finish_part(self, path: str) -> None:
        writer = self._writers.pop(path, None)
        if writer is not None:
            f = writer.file
            try:
                f.flush()
                os.fsync(f.fileno())
            finally:
                f.close()

    def write(self, transaction: FileSinkTransaction, records: List[Any]) -> None:
        if not records:
            return
        encode = self.encoder.encode
        policy = self.rolling_policy
        now = time.monotonic() * 1000.0
        writer = self._open_part(transaction)
        if policy.rolls_on_checkpoint_only:
            data = b"".join([encode(r) for r in records])
            if writer is None:
                writer = self._new_part(transaction, now)
            writer.file.write(data)
            writer.size += len(data)
            writer.last_write_ms = now
            return
        for r in records:
            data = encode(r)
            if writer is not None and policy.should_roll(writer.size, writer.opened_ms,
                                                         writer.last_write_ms, now):
                self._finish_part(transaction.parts[-1].in_progress_path)
                writer = None
            if writer is None:
                writer = self._new_part(transaction, now)
            writer.file.write(data)
            writer.size += len(data)
            writer.last_write_ms = now

    def pre_commit(self, transaction: FileSinkTransaction) -> None:
        for part in transaction.parts:
            self._finish_part(part.in_progress_path)
        if transaction.parts:
            fsync_dir(self.base_path)

    def commit(self, transaction: FileSinkTransaction) -> None:
        for part in transaction.parts:
            self._finish_part(part.in_progress_path)  # (only if pre_commit was skipped)
            try:
                os.replace(part.in_progress_path, part.final_path)
            except FileNotFoundError:
                if not os.path.exists(part.final_path):
                    raise FileNotFoundError(
                        f"FileSink: cannot commit part file {part.final_path!r}: neither it "
                        f"nor its in-progress file {part.in_progress_path!r} exists (was it "
                        f"deleted, or the transaction aborted?)") from None
        if transaction.parts:
            fsync_dir(os.path.dirname(transaction.parts[0].final_path))

    def abort(self, transaction: FileSinkTransaction) -> None:
        for part in transaction.parts:
            writer = self._writers.pop(part.in_progress_path, None)
            if writer is not None:
                writer.file.close()
            try:
                os.remove(part.in_progress_path)
            except FileNotFoundError:
                pass

    # -- recovery ----------------------------------------------------------------------
    def recover_and_commit(self, transaction: FileSinkTransaction) -> None:
        self._recovered.append(transaction)
        self.commit(transaction)

    def recover_and_abort(self, transaction: FileSinkTransaction) -> None:
        self._recovered.append(transaction)
        self.abort(transaction)

    def finish_recovering_state(self) -> None:
        """Delete in-progress files left by the restored attempts (see the module doc)."""
        recovered, self._recovered = self._recovered, []
        self._leftovers_checked = True
        tokens: Set[str] = {t.token for t in recovered}
        own_state = bool(recovered) and all(t.subtask_index == self._subtask for t in recovered)
        if tokens:
            self._delete_leftovers(tokens, own_state)

    def _delete_leftovers(self, tokens: Set[str], own_subtask: bool) -> None:
        """Delete the in-progress files of the attempts ``tokens`` and, if
        ``own_subtask``, every in-progress file of this sink and subtask index but for
        this attempt's."""
        cfg = self.output_file_config
        pattern = re.compile(
            rf"\.{re.escape(cfg.part_prefix)}-(?P<token>[0-9a-f]+)-(?P<subtask>\d+)-\d+"
            rf"{re.escape(cfg.part_suffix)}{re.escape(_INPROGRESS)}(?P<sink>[0-9A-Za-z]+)")
        try:
            names = os.listdir(self.base_path)
        except FileNotFoundError:
            return
        for name in names:
            m = pattern.fullmatch(name)
            if m is None or m["token"] == self._token:
                continue
            leftover = m["token"] in tokens or (
                own_subtask and m["sink"] == self.sink_id and int(m["subtask"]) == self._subtask)
            if leftover:
                try:
                    os.remove(os.path.join(self.base_path, name))
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        writers = getattr(self, "_writers", None) or {}
        for path in list(writers):
            writers.pop(path).file.close()


class RowFormatBuilder:
    """``FileSink.for_row_format(base_path, encoder)``; ``build()`` makes the sink."""

    def __init__(self, base_path: str, encoder: Encoder) -> None:
        self._base_path = base_path
        self._encoder = encoder
        self._config: Optional[OutputFileConfig] = None
        self._policy: Optional[RollingPolicy] = None

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> "RowFormatBuilder":
        if not isinstance(output_file_config, OutputFileConfig):
            raise TypeError(f"with_output_file_config expects an OutputFileConfig, "
                            f"got {output_file_config!r}")
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> "RowFormatBuilder":
        if not isinstance(rolling_policy, RollingPolicy):
            raise TypeError(f"with_rolling_policy expects a RollingPolicy, got {rolling_policy!r}")
        self._policy = rolling_policy
        return self

    def build(self) -> FileSink:
        return FileSink(self._base_path, self._encoder, self._config, self._policy)
