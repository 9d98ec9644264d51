"""BATCH: a finished consumer's committed output is not committed twice (issue 32, part 2).

numbers (p=2) --key_by (blocking)--> consumer (p=2) -> FileSink. Consumer 0 finishes and
commits; consumer 1 then finds its subpartition from producer 0 truncated, or deleted, and
producer 0 runs again. Consumer 0 must not: it read its input to the end and committed.
Before the fix it ran again and FileSink committed its records a second time under new
part names, and the job said FINISHED. Runs on the in-process LocalExecutor (threads, real
blocking-partition files, real part files); the Spark table sink's version runs on Ray in
tests/spark/test_spark_table_sink.py.
"""

import os
from collections import Counter

import pytest

from flowray import NumberSequenceSource
from flowray.datastream import RuntimeExecutionMode
from flowray.datastream.connectors.file_system import FileSink
from flowray.common.serialization import Encoder
from tests.support.batch_failover import DAMAGES, ConsumerOneFailsAfterConsumerZeroCommitted
from tests.support.environments import local_env

pytestmark = pytest.mark.timeout(120)

N = 20_000
RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
           "restart-strategy.fixed-delay.delay": "10 ms"}


def _key(n):
    return n % 16


def _committed(folder):
    """Every record in the committed part files of ``folder``, counted."""
    counts = Counter()
    for name in os.listdir(folder):
        if not name.startswith("."):   # in-progress files are hidden
            with open(folder / name) as f:
                counts.update(int(line) for line in f.read().splitlines())
    return counts


def _once(counts):
    assert counts == Counter(range(N)), (
        f"{sum(counts.values()) - N:+d} records, "
        f"{sum(1 for c in counts.values() if c > 1)} of them more than once")


def _file_sink(folder):
    return FileSink.for_row_format(str(folder), Encoder.simple_string_encoder()).build()


@pytest.mark.parametrize("producer_sinks_too", [False, True])
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_finished_consumers_file_sink_output_is_committed_once(tmp_path, damage,
                                                                 producer_sinks_too):
    """``producer_sinks_too``: the producers also write every number to a FileSink of
    their own (in their region). Producer 0 runs again for its lost partition; its sink
    committed at its first end and must not commit again (a stand-in drops the records)."""
    partitions, ledger = tmp_path / "partitions", tmp_path / "ledger"
    ledger.mkdir()
    env = local_env(2, **{"flowray.blocking-partitions.dir": str(partitions), **RESTART})
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    numbers = env.from_source(NumberSequenceSource(0, N - 1), source_name="numbers")
    if producer_sinks_too:
        numbers.sink_to(_file_sink(tmp_path / "stage-1"))
    (numbers.key_by(_key)
        .map(ConsumerOneFailsAfterConsumerZeroCommitted(str(ledger), str(partitions), damage))
        .name("consumer")
        .sink_to(_file_sink(tmp_path / "out")))
    result = env.execute("batch-committed-once")

    _once(_committed(tmp_path / "out"))
    if producer_sinks_too:
        _once(_committed(tmp_path / "stage-1"))
    # consumer 0 ran (and committed) once; the damage made producer 0 run again
    assert ConsumerOneFailsAfterConsumerZeroCommitted.closes_of_consumer_0(str(ledger)) == 1
    assert result.outcome.restarts == (2 if damage == "truncate" else 1)
