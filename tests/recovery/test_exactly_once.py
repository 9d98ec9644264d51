"""Exactly-once recovery on a real local Ray: kill task actors mid-stream, raise in user
code, and compare the committed output with the expected output.

Faults in one run: three ``ray.kill`` of random task actors at random points of progress,
a map function that raises once (``FailOnce``), and in-band source markers (``FAIL()``
raises in the source's reader, ``KILL()`` ends the source's process).

The job is a keyed running sum of ``(key, 1)`` records, so its expected output is known
whatever the interleaving: for each key ``k`` with ``n`` records, exactly the records
``(k, 1) ... (k, n)``. A lost record removes one of them; a duplicate repeats one.
"""

import random
from collections import Counter

import pytest

from flowray import JobExecutionError, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream import CheckpointingMode
from flowray.testing import (
    FAIL,
    KILL,
    PAUSE,
    FailOnce,
    FaultInjector,
    Marker,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

N = 200_000
KEYS = 40


def _records(rng, fail_at, pause_every=2_500, pause_s=0.05, kill_at=None):
    items = []
    for i in range(N):
        if i == fail_at:
            items.append(FAIL())
        if i == kill_at:
            items.append(KILL())  # the source's own actor process exits
        if i and i % pause_every == 0:
            items.append(PAUSE(pause_s))  # keeps the job running long enough to be hit
        items.append((f"k{i % KEYS}", 1))
    return items


def _expected():
    per_key = Counter(f"k{i % KEYS}" for i in range(N))
    return Counter((k, c) for k, n in per_key.items() for c in range(1, n + 1))


def _submit(tmp_path, config, items, mode, fail_in_map_after=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in config.items():
        env.get_configuration().set_string(key, value)
    env.get_configuration().set_string("execution.checkpointing.dir", str(tmp_path / "checkpoints"))
    env.enable_checkpointing(300, mode)
    env.set_parallelism(2)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
    if fail_in_map_after is not None:  # user code that raises once, in subtask 1
        stream = stream.map(FailOnce(str(tmp_path / "map-failed"), fail_in_map_after,
                                     index=1)).name("may fail")
    (stream.key_by(lambda t: t[0]).sum(1).name("running sum")
        .sink_to(sink))
    return env.execute_async("running-sum"), source, sink


RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 10,
            "restart-strategy.fixed-delay.delay": "200 ms"}


def _kill_at(client, sink, fractions, rng):
    injector = FaultInjector(client, rng)
    for fraction in fractions:
        def reached():
            if client.get_job_status().is_globally_terminal_state():
                raise AssertionError("the job ended before every kill happened")
            return len(sink.committed()) >= fraction * N
        wait_until(reached, 180, f"{fraction:.0%} of the output to be committed", poll_s=0.2)
        injector.kill_random_task()
    return injector


def _fault_positions(items):
    return [i for i, item in enumerate(items)
            if isinstance(item, Marker) and item.is_fault]


def test_exactly_once_with_three_kills_and_a_user_failure(ray_session, tmp_path):
    rng = random.Random(20261123)
    fail_at = rng.randrange(N // 10, N - N // 10)
    kill_at = rng.randrange(N // 10, N - N // 10)
    items = _records(rng, fail_at, kill_at=kill_at)
    client, source, sink = _submit(tmp_path, RESTARTS, items, CheckpointingMode.EXACTLY_ONCE,
                                   fail_in_map_after=rng.randrange(N // 100, N // 25))
    fractions = sorted(rng.uniform(0.1, 0.8) for _ in range(3))
    injector = _kill_at(client, sink, fractions, rng)
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 3
    assert source.fired_markers() == _fault_positions(items)  # FAIL and KILL, once each
    assert (tmp_path / "map-failed").exists()                 # the map raised, once
    # three kills at distinct points of progress; the other faults may coincide with one
    # of them (a failure during a failover is part of that failover)
    assert result.outcome.restarts >= 3
    committed = Counter(sink.committed())
    assert committed == _expected(), _diff(committed, _expected())
    assert sink.pending() == []
    stats = client.get_checkpoint_stats()
    assert stats["counts"]["completed"] >= 3


def test_at_least_once_loses_nothing(ray_session, tmp_path):
    rng = random.Random(7)
    fail_at = rng.randrange(N // 10, N - N // 10)
    client, source, sink = _submit(tmp_path, RESTARTS, _records(rng, fail_at),
                                   CheckpointingMode.AT_LEAST_ONCE)
    injector = _kill_at(client, sink, sorted(rng.uniform(0.1, 0.8) for _ in range(3)), rng)
    result = client.wait(timeout_s=300)
    assert len(injector.killed) == 3
    assert result.outcome.restarts >= 3
    committed = Counter(sink.committed())
    missing = _expected() - committed
    assert not missing, f"{sum(missing.values())} records missing, e.g. {list(missing)[:5]}"


def test_no_restart_strategy_fails_the_job_with_the_cause(ray_session, tmp_path):
    rng = random.Random(3)
    client, source, sink = _submit(tmp_path, {"restart-strategy.type": "none"},
                                   _records(rng, fail_at=N // 2, pause_every=N),
                                   CheckpointingMode.EXACTLY_ONCE)
    with pytest.raises(JobExecutionError) as info:
        client.wait(timeout_s=120)
    assert info.value.cause_type == "TestingFailure"
    assert "TestingFailure" in info.value.cause_traceback
    assert info.value.outcome.restarts == 0


def _diff(got, want):
    extra, missing = got - want, want - got
    return (f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
            f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")
