"""Word count, a keyed running sum, and an exactly-once file sink that survives a failure,
on an embedded local Ray.

Run from the repository root::

    .venv/bin/python examples/word_count.py

(``make run`` runs another example, ``examples/spark_pipeline.py``.)
"""

import os
import tempfile

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common import RestartStrategies, WatermarkStrategy
from flowray.common.serialization import Encoder
from flowray.datastream.connectors.file_system import FileSink
from flowray.datastream.connectors.number_seq import NumberSequenceSource
from flowray.testing import FAIL, PAUSE, TestingSource

TEXT = [
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune,",
    "Or to take arms against a sea of troubles",
    "And by opposing end them.",
]


def main() -> None:
    config = Configuration().set_string("parallelism.default", "2")
    env = StreamExecutionEnvironment.get_execution_environment(config)

    words = (env.from_collection(TEXT)
             .flat_map(lambda line: (w.strip(",.:'").lower() for w in line.split()))
             .filter(lambda w: w != "")
             .map(lambda w: (w, 1))
             .key_by(lambda t: t[0])
             .sum(1))
    final = {}
    for word, count in words.execute_and_collect("word count"):
        final[word] = count
    top = sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print("top words:", ", ".join(f"{w}={c}" for w, c in top))

    # a keyed running sum over a parallel source, printed by the tasks
    (env.from_source(NumberSequenceSource(1, 1000), source_name="numbers")
     .map(lambda n: (n % 3, n))
     .key_by(lambda t: t[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1]))
     .filter(lambda t: t[1] > 166_000)
     .print())
    env.execute("running sum")  # logs a one-line summary when it ends

    # exactly once across a failure: checkpoints every 200 ms, a source that raises once
    # (a FAIL() marker) halfway, a restart from the latest checkpoint, and a file sink
    # whose part files become visible only when their checkpoint completes
    out = tempfile.mkdtemp(prefix="flowray-example-")
    items = []
    for n in range(20_000):
        if n % 1_000 == 0:
            items.append(PAUSE(0.05))  # slow the source down so checkpoints happen
        if n == 10_000:
            items.append(FAIL())
        items.append(n)
    env.enable_checkpointing(200)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    (env.from_source(TestingSource(items), WatermarkStrategy.no_watermarks(), "numbers")
     .map(lambda n: n * n)
     .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build()))
    result = env.execute("exactly-once file sink")
    lines = [line for name in os.listdir(out) if not name.startswith(".")
             for line in open(os.path.join(out, name))]
    exact = sorted(int(x) for x in lines) == [n * n for n in range(20_000)]
    print(f"file sink: {len(lines):,} lines in {out} after {result.outcome.restarts} restart(s), "
          f"{result.outcome.checkpoints} checkpoints; exactly once: {exact}")


if __name__ == "__main__":
    main()
