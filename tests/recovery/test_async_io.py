"""Async I/O exactly once on a real local Ray: an async enrichment (a slow fake service
whose calls complete out of order; some calls fail once and are retried; some never answer
and time out) between a source and a two-phase-commit sink, with two kills of async wait
subtasks mid-stream (while the source waits at a ``HOLD()``). The committed output must be
each input's enrichment exactly once: records in flight at a checkpoint are in the
operator's state and issued again after the restore.
"""

import asyncio
import functools
import random
from collections import Counter

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import Time, WatermarkStrategy
from flowray.datastream import AsyncDataStream, CheckpointingMode, async_retry_predicates
from flowray.datastream.functions import AsyncFunction, AsyncRetryStrategy
from flowray.testing import (
    HOLD,
    FaultInjector,
    Marker,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

N = 20_000
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _hangs(v):
    return v % 1009 == 0      # the service never answers: the timeout hook answers


def _flaky(v):
    return v % 101 == 0       # the first call of each attempt sequence fails: retried


def _answer(v):
    return (v, v * 2)


class SlowService(AsyncFunction):
    """A lookup taking 0-4 ms depending on the value (so calls complete out of order)."""

    def open(self, runtime_context):
        self.failed = set()

    async def async_invoke(self, value):
        if _hangs(value):
            await asyncio.sleep(3600)
        await asyncio.sleep((value * 7 % 5) / 1000.0)
        if _flaky(value) and value not in self.failed:
            self.failed.add(value)
            raise ConnectionError(f"service unavailable for {value}")
        return [_answer(value)]

    def timeout(self, value):
        # a slow machine may time out an ordinary call too: it answers the same
        return [(value, "timeout")] if _hangs(value) else [_answer(value)]


def _expected():
    return Counter((v, "timeout") if _hangs(v) else _answer(v) for v in range(N))


def _items():
    """The numbers with a ``HOLD()`` after each third: the source waits there until the
    kill's restore reads on past it, so each kill comes with the job running mid-stream."""
    third = N // 3
    return [*range(third), HOLD(), *range(third, 2 * third), HOLD(), *range(2 * third, N)]


def test_async_enrichment_is_exactly_once_across_kills(ray_session, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in RESTARTS.items():
        env.get_configuration().set_string(key, str(value))
    env.get_configuration().set_string("execution.checkpointing.dir", str(tmp_path / "checkpoints"))
    env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)
    env.set_parallelism(2)
    source = TestingSource(_items(), ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    retry = AsyncRetryStrategy.fixed_delay(
        3, 10, None, functools.partial(async_retry_predicates.exception_type_predicate,
                                       expected_error_type=ConnectionError))
    stream = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
              .set_parallelism(1).rebalance())
    enriched = AsyncDataStream.unordered_wait_with_retry(
        stream, SlowService(), Time.seconds(2), retry, capacity=50).name("enrich")
    enriched.sink_to(sink)
    client = env.execute_async("async-enrichment")

    injector = FaultInjector(client, random.Random(15))
    holds = [i for i, item in enumerate(source.items) if isinstance(item, Marker)]
    for hold, fraction in zip(holds, (0.25, 0.5)):
        names = {}

        def reached():
            nonlocal names
            status = client.get_job_status()
            if status.is_globally_terminal_state():
                raise AssertionError("the job ended before every kill happened")
            if (status is not JobStatus.RUNNING or hold not in source.fired_markers()
                    or len(sink.committed()) < fraction * N):
                return False
            names = injector.task_actor_names()
            return len({k.split(":")[0] for k in names}) == 2  # both vertices deployed
        wait_until(reached, 180, f"the HOLD at {hold} and {fraction:.0%} of the output "
                   "committed", poll_s=0.1)
        source_vertex = min(int(k.split(":")[0][1:]) for k in names)
        enrich = sorted(k for k in names if int(k.split(":")[0][1:]) != source_vertex)
        injector.kill(injector.rng.choice(enrich))  # an async wait subtask, mid-stream
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 2
    assert result.outcome.restarts >= 2
    assert source.fired_markers() == holds
    committed = Counter(sink.committed())
    expected = _expected()
    missing, extra = expected - committed, committed - expected
    assert not missing and not extra, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
        f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")
    assert sink.pending() == []
