"""A custom source and an exactly-once custom sink, and a failure that changes nothing.

Run from the repository root (an embedded local Ray starts and stops with the program)::

    .venv/bin/python examples/custom_source_sink.py [OUTPUT_DIR] [--sensors 4]
        [--readings 300] [--fail-after 300]

``OUTPUT_DIR`` defaults to a fresh temporary folder. The job reads simulated sensors
with ``SensorSource``, turns each reading into a CSV line and writes the lines into files
under ``OUTPUT_DIR`` with ``CsvFilesSink``. Halfway through, a map function raises once
(``--fail-after``, 0: never); the job restarts from its last checkpoint and still every
reading ends up in the output exactly once, which the program checks and prints.

**The source** (``flowray.datastream.connectors.Source``). Reading ``seq`` of sensor
``s`` is ``(s, seq, 20 + ((s * 37 + seq * 11) % 100) / 10)``, for ``seq`` in
``0..readings - 1``. flowray's source API is Flink's FLIP-27 shape without a separate
enumerator process:

- ``Source.create_splits(parallelism)`` cuts the input into *splits* (here one per sensor)
  when a job starts without state; split ``j`` goes to subtask ``j % parallelism``. It
  plays the split enumerator's part.
- ``Source.create_reader(context)`` makes each subtask's ``SourceReader``: ``add_splits``
  gives it its splits, ``poll_next(max_records)`` returns up to that many records (``[]``:
  none right now, the task waits a little and asks again; ``None``: all its splits ended).
- ``SourceReader.snapshot_state()`` returns the splits it has not finished, each with its
  progress (``SensorSplit.next``). That list is the source's state in a checkpoint; a
  restore deals the split states out again over the subtasks, at any parallelism, and
  hands them to the new readers through ``add_splits``: nothing is read twice or lost.

**The sink** (``TwoPhaseCommitSink``, Flink's ``TwoPhaseCommitSinkFunction``; ``sink_to``
takes it). Exactly once needs the sink to take part in checkpoints:

- the records between two checkpoints go into one *transaction*
  (``begin_transaction``/``write``): here a hidden file ``.readings-….csv.pending``;
- at a checkpoint the transaction is *pre-committed* (``pre_commit``: flushed, fsynced,
  closed; from then on the commit cannot fail) and its handle is stored in the checkpoint;
- when the checkpoint completes, the transaction is *committed* (``commit``: the file is
  renamed to its visible name ``readings-….csv``, atomically);
- after a failure, the transactions of the restored checkpoint are committed again
  (``recover_and_commit``: ``commit`` must be idempotent, the rename may have happened
  already) and the one that was open is discarded (``recover_and_abort``): the source
  replays its records from the checkpointed positions.

A plain ``flowray.datastream.connectors.Sink`` with a ``SinkWriter`` (``write``, ``flush``,
``close``) is simpler and at least once: after a restore, records since the last
checkpoint are written again.

Hidden ``.pending`` files that a failure cut short before any checkpoint took them may
stay behind; they are never visible output (``committed_lines`` skips them).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, List, Optional

from flowray import StreamExecutionEnvironment
from flowray.common import RestartStrategies, Types, WatermarkStrategy
# TwoPhaseCommitSink: the exactly-once sink interface FileSink and the JDBC sink implement
from flowray.datastream.connectors import (
    Source,
    SourceReader,
    SourceReaderContext,
    TwoPhaseCommitSink,
)
from flowray.datastream.functions import MapFunction, RuntimeContext


def reading(sensor: int, seq: int) -> tuple:
    return sensor, seq, 20 + ((sensor * 37 + seq * 11) % 100) / 10


# -- the source ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SensorSplit:
    """Readings ``next .. end - 1`` of sensor ``sensor``; ``next`` is the progress."""

    sensor: int
    next: int
    end: int


class SensorSource(Source):
    """``sensors`` sensors with ``readings`` readings each, at most ``per_second``
    readings per second per subtask (so that checkpoints happen while it runs)."""

    default_name = "Sensors"

    def __init__(self, sensors: int, readings: int, per_second: float = 800) -> None:
        self.sensors, self.readings, self.per_second = sensors, readings, per_second

    def create_splits(self, parallelism: int) -> List[SensorSplit]:
        return [SensorSplit(s, 0, self.readings) for s in range(self.sensors)]

    def create_reader(self, context: SourceReaderContext) -> "SensorReader":
        return SensorReader(self.per_second)


class SensorReader(SourceReader):
    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.splits: List[List[int]] = []  # [sensor, next, end] per split not finished
        self.turn = 0
        self.started: Optional[float] = None
        self.emitted = 0

    def add_splits(self, splits: List[Any]) -> None:
        self.splits.extend([s.sensor, s.next, s.end] for s in splits if s.next < s.end)

    def poll_next(self, max_records: int) -> Optional[List[tuple]]:
        if not self.splits:
            return None
        now = time.monotonic()
        if self.started is None:
            self.started = now
        allowed = min(max_records,
                      int((now - self.started) * self.per_second) + 1 - self.emitted)
        batch = []
        while len(batch) < allowed and self.splits:
            # round-robin over the splits, one reading at a time
            self.turn %= len(self.splits)
            split = self.splits[self.turn]
            batch.append(reading(split[0], split[1]))
            split[1] += 1
            if split[1] >= split[2]:
                self.splits.pop(self.turn)
            else:
                self.turn += 1
        self.emitted += len(batch)
        return batch

    def snapshot_state(self) -> List[SensorSplit]:
        return [SensorSplit(sensor, nxt, end) for sensor, nxt, end in self.splits]


# -- the sink -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FileTransaction:
    """A transaction's handle (it goes into checkpoints, so it is plain data): the hidden
    file its records are written to, and the name that file gets when committed."""

    pending: str
    final: str


class CsvFilesSink(TwoPhaseCommitSink):
    """Exactly-once CSV files under ``directory``: one file per subtask and checkpoint
    interval that had records, visible once its checkpoint completed."""

    default_name = "CSV files"

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, context) -> None:
        self.subtask = context.subtask_index
        self.files = {}  # pending path -> open file, in this process only
        os.makedirs(self.directory, exist_ok=True)

    def begin_transaction(self) -> FileTransaction:
        name = f"readings-{self.subtask}-{uuid.uuid4().hex[:12]}.csv"
        return FileTransaction(os.path.join(self.directory, f".{name}.pending"),
                               os.path.join(self.directory, name))

    def write(self, transaction: FileTransaction, records: List[str]) -> None:
        f = self.files.get(transaction.pending)
        if f is None:  # opened at the first record: no file for an empty transaction
            f = self.files[transaction.pending] = open(transaction.pending, "a")
        f.writelines(r + "\n" for r in records)

    def pre_commit(self, transaction: FileTransaction) -> None:
        f = self.files.pop(transaction.pending, None)
        if f is not None:
            f.flush()
            os.fsync(f.fileno())
            f.close()

    def commit(self, transaction: FileTransaction) -> None:
        if os.path.exists(transaction.pending):  # else committed already (or empty)
            os.replace(transaction.pending, transaction.final)

    def abort(self, transaction: FileTransaction) -> None:
        f = self.files.pop(transaction.pending, None)
        if f is not None:
            f.close()
        if os.path.exists(transaction.pending):
            os.remove(transaction.pending)

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


# -- the job ------------------------------------------------------------------------------

class FailOnce(MapFunction):
    """Formats a reading as a CSV line; raises once, in the first attempt of subtask 0,
    at its ``fail_after``-th reading (0: never)."""

    def __init__(self, fail_after: int) -> None:
        self.fail_after = fail_after

    def open(self, runtime_context: RuntimeContext) -> None:
        self.first_attempt = runtime_context.get_attempt_number() == 0
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.seen = 0

    def map(self, value) -> str:
        self.seen += 1
        if self.first_attempt and self.subtask == 0 and self.seen == self.fail_after:
            raise RuntimeError(f"injected failure at reading {value}")
        sensor, seq, temperature = value
        return f"{sensor},{seq},{temperature}"


def committed_lines(directory: str) -> List[str]:
    """The lines of the committed (visible) files."""
    return [line.rstrip("\n") for name in sorted(os.listdir(directory))
            if not name.startswith(".")
            for line in open(os.path.join(directory, name))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", help="folder of the CSV files (default: temp)")
    parser.add_argument("--sensors", type=int, default=4)
    parser.add_argument("--readings", type=int, default=300, help="per sensor")
    parser.add_argument("--fail-after", type=int, default=300,
                        help="fail once at this reading of subtask 0 (0: never)")
    args = parser.parse_args()
    output = os.path.abspath(args.output or tempfile.mkdtemp(prefix="flowray-sensors-"))

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    (env.from_source(SensorSource(args.sensors, args.readings),
                     WatermarkStrategy.no_watermarks(), "sensors").uid("sensors")
        .map(FailOnce(args.fail_after), output_type=Types.STRING()).uid("as-csv")
        .sink_to(CsvFilesSink(output)).uid("csv-files"))
    result = env.execute("custom source and sink")

    lines = Counter(committed_lines(output))
    expected = Counter(",".join(map(str, reading(s, q)))
                       for s in range(args.sensors) for q in range(args.readings))
    files = [n for n in os.listdir(output) if not n.startswith(".")]
    print(f"{sum(lines.values())} readings in {len(files)} committed files under {output}")
    print(f"restarts: {result.outcome.restarts}, checkpoints: {result.outcome.checkpoints}")
    print(f"missing: {sum((expected - lines).values())}, "
          f"duplicated: {sum((lines - expected).values())}")
    print("exactly once:", "yes" if lines == expected else "NO")


if __name__ == "__main__":
    main()
