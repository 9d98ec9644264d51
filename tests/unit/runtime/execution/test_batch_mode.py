"""BATCH mode end to end on the in-process LocalExecutor: which exchanges become blocking
(BATCH, AUTOMATIC) and results that equal STREAMING's."""

import collections
import os

import pytest

from flowray import NumberSequenceSource
from flowray.operators.sources import Boundedness
from flowray.datastream.execution_mode import RuntimeExecutionMode
from tests.support.environments import local_env

pytestmark = pytest.mark.timeout(60)


class _Unbounded(NumberSequenceSource):
    """A bounded sequence that says it is unbounded (for AUTOMATIC's choice only)."""

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED


def _env(tmp_path, mode=None, parallelism=3):
    env = local_env(parallelism,
                    **{"flowray.blocking-partitions.dir": str(tmp_path / "partitions")})
    if mode is not None:
        env.set_runtime_mode(mode)
    return env


def _residue(n):
    return (n % 7, n)


def _key(t):
    return t[0]


def _pipeline(env, source=None):
    """numbers -> (n % 7, n) -> key_by -> running sum -> key_by(residue % 3) -> count.

    Which running sums the first stage emits depends on the order its inputs interleave;
    the second stage's output (counts 1..N per key) does not."""
    source = source or NumberSequenceSource(1, N)
    return env.from_source(source, source_name="numbers") \
        .map(_residue) \
        .key_by(_key).sum(1) \
        .map(lambda t: (t[0] % 3, 1)) \
        .key_by(_key).sum(1)


N = 3000


def _edge_types(env, source=None):
    stream = _pipeline(env, source)
    stream.add_sink(lambda r: None)
    job = env._prepare("edges")
    env._transformations.clear()
    return sorted(e.result_type for e in job.job_graph.edges.values())


def test_set_runtime_mode_writes_the_config_key(tmp_path):
    env = _env(tmp_path, RuntimeExecutionMode.BATCH)
    assert env._config.get_string("execution.runtime-mode", None) == "BATCH"
    assert _edge_types(env) == ["blocking", "blocking"]


@pytest.mark.parametrize("mode, source, expected", [
    (None, None, ["pipelined", "pipelined"]),                              # STREAMING
    (RuntimeExecutionMode.STREAMING, None, ["pipelined", "pipelined"]),
    (RuntimeExecutionMode.AUTOMATIC, None, ["blocking", "blocking"]),      # all bounded
    (RuntimeExecutionMode.AUTOMATIC, _Unbounded(1, 10), ["pipelined", "pipelined"]),
])
def test_which_exchanges_are_blocking(tmp_path, mode, source, expected):
    assert _edge_types(_env(tmp_path, mode), source) == expected


def test_forward_exchanges_stay_pipelined_in_batch(tmp_path):
    env = _env(tmp_path, RuntimeExecutionMode.BATCH)
    env.from_source(NumberSequenceSource(1, 10), source_name="numbers") \
        .map(_residue).disable_chaining() \
        .key_by(_key).sum(1) \
        .add_sink(lambda r: None)
    job = env._prepare("forward")
    env._transformations.clear()
    by_partitioner = {e.partitioner.name: e.result_type for e in job.job_graph.edges.values()}
    assert by_partitioner == {"FORWARD": "pipelined", "HASH": "blocking"}


def test_batch_emits_the_final_value_per_key_that_streaming_ends_with(tmp_path):
    streaming = collections.Counter(_pipeline(_env(tmp_path)).execute_and_collect("s"))
    batch = list(_pipeline(_env(tmp_path, RuntimeExecutionMode.BATCH))
                 .execute_and_collect("b"))
    # STREAMING: every running sum goes on, so the second stage counts N records
    per_key = collections.Counter((n % 7) % 3 for n in range(1, N + 1))
    assert streaming == collections.Counter((k, c) for k, total in per_key.items()
                                            for c in range(1, total + 1))
    # BATCH: one final value per key (Flink's behaviour): the first stage's 7 final sums
    # reach the second stage, which emits one count per key
    assert sorted(batch) == sorted(collections.Counter(r % 3 for r in range(7)).items())
    assert os.listdir(tmp_path / "partitions") == []   # every partition released


def test_batch_final_values_equal_streaming_final_values(tmp_path):
    def final_sums(env, name):
        last = {}
        for k, total in env.from_source(NumberSequenceSource(1, N), source_name="numbers") \
                .map(_residue).key_by(_key).sum(1).execute_and_collect(name):
            last[k] = total
        return last

    streaming = final_sums(_env(tmp_path), "s")
    batch = final_sums(_env(tmp_path, RuntimeExecutionMode.BATCH), "b")
    assert batch == streaming == {
        r: sum(n for n in range(1, N + 1) if n % 7 == r) for r in range(7)}
