"""Word count over a text file, made to be run by the ``flowray`` command (docs/cli.md):
detached, savepointed, stopped and resumed at another parallelism.

On a Ray cluster that outlives the shell (``ray start --head``), from the repository root
(``in.txt``: any text file, e.g. a copy of README.md)::

    flowray run -d -p 2 examples/job.py $PWD/in.txt --output $PWD/word-counts
    flowray info JOB      # JOB: the id it printed, or the job's name, "word count"
    flowray stop JOB --savepoint-path /tmp/savepoints      # prints the savepoint's path
    flowray run -d -p 4 -s SAVEPOINT examples/job.py $PWD/in.txt --output $PWD/word-counts

or attached, on an embedded local Ray (no ``ray start`` needed), waiting for the end::

    .venv/bin/python examples/job.py in.txt

Paths: on a cluster with a dashboard, ``flowray run`` submits the program through Ray's
Job Submission, and its driver runs in an uploaded copy of ``examples/``, not in your
working folder: give the input and ``--output`` as absolute paths (``$PWD/...``), on
storage the cluster's nodes share. ``flowray run --local-driver ...`` runs the driver in
your shell instead, where relative paths work (``flowray run --local-driver -d -p 2
examples/job.py in.txt``).

Arguments: ``INPUT`` (a text file or a folder of them), ``--output DIR`` (default
``word-counts`` under the working directory) and ``--lines-per-second N`` (default 50;
0: as fast as the job can). The program sets only what every run shares; parallelism,
savepoint and the rest come from the command line (``-p``, ``-s``, ``-D key=value``), as
with Flink's CLI.

The job reads the lines (a ``FileSource``, paced to ``--lines-per-second`` so that a
small file still gives you time to take a savepoint), splits them into words, keeps a
running count per word in keyed state and writes every new count, ``word<TAB>count``, to
part files under ``DIR`` (``FileSink``). Checkpoints run every second; the sink is exactly
once: a part file becomes visible when the checkpoint after its records completes, and
nothing is written twice across failures, savepoints and restores. A word's final count is
the highest count written for it, in the part files of every run that wrote there.

Every operator has a ``uid``: a savepoint's state is matched to operators by uid, so the
job can be resumed from it at another parallelism (the file positions, the counts and the
sink's pending part files move with it) or after a change to the program.

The program first prints where the counts go. Detached (``-d``), ``execute()`` returns
once the job runs and the program ends; the job goes on in the cluster. Attached, the
program waits for the end and prints the most frequent words.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any, List, Optional

from flowray import StreamExecutionEnvironment
from flowray.common import Types, WatermarkStrategy
from flowray.common.job_execution_result import JobExecutionResult
from flowray.common.serialization import Encoder
from flowray.datastream.connectors import Source, SourceReader, SourceReaderContext
from flowray.datastream.connectors.file_system import FileSink, FileSource, StreamFormat


class Paced(Source):
    """``source`` (a split-based flowray ``Source``), read at most ``per_second`` records
    per second over all subtasks. The splits, and so the checkpointed positions, are the
    wrapped source's: the job stays rescalable."""

    def __init__(self, source: Source, per_second: float) -> None:
        self.source, self.per_second = source, per_second
        self.default_name = source.default_name

    def get_boundedness(self):
        return self.source.get_boundedness()

    def create_splits(self, parallelism: int) -> Optional[List[Any]]:
        return self.source.create_splits(parallelism)

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return PacedReader(self.source.create_reader(context),
                           self.per_second / context.parallelism)


class PacedReader(SourceReader):
    def __init__(self, reader: SourceReader, per_second: float) -> None:
        self.reader, self.per_second = reader, per_second
        self.started: Optional[float] = None
        self.read = 0

    def poll_next(self, max_records: int):
        if self.per_second <= 0:
            return self.reader.poll_next(max_records)
        now = time.monotonic()
        if self.started is None:
            self.started = now
        allowed = int((now - self.started) * self.per_second) + 1 - self.read
        if allowed <= 0:
            return []  # nothing now: the task waits a little and asks again
        batch = self.reader.poll_next(min(max_records, allowed))
        if batch:
            self.read += len(batch)
        return batch

    def add_splits(self, splits: List[Any]) -> None:
        self.reader.add_splits(splits)

    def snapshot_state(self) -> Any:
        return self.reader.snapshot_state()

    def restore_state(self, state: Any) -> None:
        self.reader.restore_state(state)

    def close(self) -> None:
        self.reader.close()


def words(line: str):
    return re.findall(r"\w+", line.lower())


def final_counts(folder: str) -> dict:
    """Each word's final count in the committed part files under ``folder`` (the highest
    count written for it; in-progress files start with a dot and are skipped)."""
    counts: dict = {}
    for name in os.listdir(folder):
        if name.startswith("."):
            continue
        with open(os.path.join(folder, name)) as f:
            for line in f:
                word, _, n = line.rstrip("\n").rpartition("\t")
                counts[word] = max(counts.get(word, 0), int(n))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="a text file, or a folder of text files")
    parser.add_argument("--output", default="word-counts",
                        help="folder of the part files (default: ./word-counts)")
    parser.add_argument("--lines-per-second", type=float, default=50,
                        help="pace of the source over all subtasks (0: unpaced)")
    args = parser.parse_args()
    # absolute paths: the tasks run in other processes, maybe with another working folder
    source_path, output = os.path.abspath(args.input), os.path.abspath(args.output)
    if not os.path.exists(source_path):
        parser.error(f"no such file or folder: {source_path} (submitted to a cluster, the "
                     f"program runs in a copy of its own folder: give an absolute path)")
    os.makedirs(output, exist_ok=True)
    print(f"word counts go to {output}")

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000)
    lines = Paced(FileSource.for_record_stream_format(StreamFormat.text_line_format(),
                                                      source_path).build(),
                  args.lines_per_second)
    (env.from_source(lines, WatermarkStrategy.no_watermarks(), "lines").uid("lines")
        .flat_map(words, output_type=Types.STRING()).uid("words")
        .map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .uid("pairs")
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts")
        .map(lambda p: f"{p[0]}\t{p[1]}", output_type=Types.STRING()).uid("as-text")
        .sink_to(FileSink.for_row_format(output, Encoder.simple_string_encoder()).build())
        .uid("counts-files"))
    result = env.execute("word count")

    if not isinstance(result, JobExecutionResult):  # detached: it runs on in the cluster
        return
    counts = final_counts(output)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    print(f"{len(counts)} distinct words in {output}; the most frequent:")
    for word, n in top:
        print(f"{n:>8}  {word}")


if __name__ == "__main__":
    main()
