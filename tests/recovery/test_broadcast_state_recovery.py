"""Broadcast state survives failures: on a real local Ray, rules arrive on a broadcast
stream while keyed records flow, task processes die mid-stream (a ``KILL()`` marker in the
records and a random task actor killed), and the committed output must be the expected
output exactly once.

The job joins records ``(key, n)`` with rules ``(rule_id, divisor)``: ``(key, n, rule_id)``
once for every pair with ``n % divisor == 0``. A record arriving after a rule matches it
in ``process_element`` (read-only broadcast state); a rule arriving after records matches
them in ``process_broadcast_element`` through ``apply_to_keyed_state``. So the output does
not depend on how the two inputs interleave, and a lost or replayed rule or record (or
broadcast state restored inconsistently with the keyed state) shows as missing or
duplicate pairs.
"""

import random
from collections import Counter

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream import CheckpointingMode, KeyedBroadcastProcessFunction
from flowray.datastream.state import ListStateDescriptor, MapStateDescriptor
from flowray.testing import (
    HOLD,
    KILL,
    PAUSE,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

pytestmark = pytest.mark.timeout(400)

N = 60_000
KEYS = 30
RULES = [(f"r{i}", d) for i, d in enumerate([3, 5, 7, 11, 13, 17, 4, 9])]
RULE_STATE = MapStateDescriptor("rules")
SEEN = ListStateDescriptor("seen")
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}


class RuleJoin(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(SEEN)

    def process_element(self, value, ctx):
        key, n = value
        self.seen.add(n)
        for rule_id, divisor in ctx.get_broadcast_state(RULE_STATE).items():
            if n % divisor == 0:
                yield key, n, rule_id

    def process_broadcast_element(self, value, ctx):
        rule_id, divisor = value
        ctx.get_broadcast_state(RULE_STATE).put(rule_id, divisor)

        def matches(key, state):
            for n in state.get():
                if n % divisor == 0:
                    yield key, n, rule_id
        ctx.apply_to_keyed_state(SEEN, matches)


def _records(kill_at):
    items = []
    for i in range(N):
        if i == kill_at:
            items.append(KILL())  # the records source's process exits, once
        if i and i % 1_500 == 0:
            items.append(PAUSE(0.05))  # keeps the job running long enough to be hit
        items.append((f"k{i % KEYS}", i))
    return items


def _rules():
    items = []
    for rule in RULES:  # spread over the records' lifetime
        items.extend([PAUSE(0.4), rule])
    return items


def _expected():
    return Counter((f"k{i % KEYS}", i, rule_id)
                   for i in range(N) for rule_id, d in RULES if i % d == 0)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_broadcast_rules_exactly_once_across_kills(ray_session, tmp_path, backend):
    rng = random.Random(20261125)
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, "execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "state.backend.type": backend,
                       "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb")}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200, CheckpointingMode.EXACTLY_ONCE)
    env.set_parallelism(2)
    records = TestingSource(_records(kill_at=rng.randrange(N // 2, N - N // 10)),
                            ledger_dir=str(tmp_path / "faults-records"))
    rules = TestingSource(_rules(), parallelism_split=False,
                          ledger_dir=str(tmp_path / "faults-rules"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    rule_stream = (env.from_source(rules, WatermarkStrategy.no_watermarks(), "rules")
                   .set_parallelism(1).broadcast(RULE_STATE))
    (env.from_source(records, WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda t: t[0])
        .connect(rule_stream)
        .process(RuleJoin()).name("rule join").uid("rule-join")
        .sink_to(sink))
    client = env.execute_async("broadcast-rules")

    expected = _expected()
    injector = FaultInjector(client, rng)

    def reached():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended before the kill")
        return len(sink.committed()) >= 0.25 * sum(expected.values())
    wait_until(reached, 180, "a quarter of the output to be committed", poll_s=0.2)
    # a subtask of the rule join (chained with the sink: the last vertex), which is running
    # for sure; a source may already be finished, and killing it restarts nothing
    names = injector.task_actor_names()
    last_vertex = max(int(k.split(":")[0][1:]) for k in names)
    injector.kill(rng.choice(sorted(k for k in names if int(k.split(":")[0][1:]) == last_vertex)))
    result = client.wait(timeout_s=300)

    assert records.fired_markers() != []             # the KILL marker fired, once
    assert len(injector.killed) == 1
    assert result.outcome.restarts >= 1  # the two faults may fall into one restart
    committed = Counter(sink.committed())
    extra, missing = committed - expected, expected - committed
    assert not extra and not missing, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
        f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")
    assert sink.pending() == []


PER_PHASE = 3_000


def _phased_records():
    """Three phases of records, a HOLD() after the first two."""
    items = []
    for phase in range(3):
        items.extend((f"k{i % KEYS}", i) for i in range(phase * PER_PHASE,
                                                       (phase + 1) * PER_PHASE))
        if phase < 2:
            items.append(HOLD())
    return items


def _phased_rules():
    """Rules 0-3, HOLD(), rules 4-5, HOLD(), rules 6-7."""
    return RULES[:4] + [HOLD()] + RULES[4:6] + [HOLD()] + RULES[6:]


def _holds(items):
    return [i for i, x in enumerate(items) if not isinstance(x, tuple)]


def _run_phase(tmp_path, phase, parallelism, savepoint):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    settings = {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                "restart-strategy.type": "none"}
    if savepoint is not None:
        settings["execution.savepoint.path"] = savepoint
    for key, value in settings.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(parallelism)
    records = TestingSource(_phased_records(), ledger_dir=str(tmp_path / "ledger-records"))
    rules = TestingSource(_phased_rules(), parallelism_split=False,
                          ledger_dir=str(tmp_path / "ledger-rules"))
    rule_stream = (env.from_source(rules, WatermarkStrategy.no_watermarks(), "rules")
                   .uid("rules").set_parallelism(1).broadcast(RULE_STATE))
    (env.from_source(records, WatermarkStrategy.no_watermarks(), "records").uid("records")
        .key_by(lambda t: t[0])
        .connect(rule_stream)
        .process(RuleJoin()).uid("rule-join")
        .sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink"))
    client = env.execute_async(f"broadcast-savepoints-{phase}")
    if phase == 2:
        return client.wait(300)
    hold_r, hold_b = _holds(_phased_records())[phase], _holds(_phased_rules())[phase]
    wait_until(lambda: hold_r in records.fired_markers() and hold_b in rules.fired_markers(),
               120, f"both sources of phase {phase} to reach their HOLD()")
    path = client.stop_with_savepoint(str(tmp_path / "savepoints"), timeout_s=120)
    assert client.get_job_status() is JobStatus.FINISHED
    return path


def test_broadcast_state_is_restored_at_other_parallelisms(ray_session, tmp_path):
    """Stop with a savepoint at parallelism 2, resume at 3, stop, resume at 1: every new
    subtask must hold the rules (new subtask 2 has no old subtask of its own)."""
    savepoint = None
    for phase, parallelism in enumerate((2, 3, 1)):
        savepoint = _run_phase(tmp_path, phase, parallelism, savepoint)
    result = savepoint
    assert result.outcome.restarts == 0
    committed = Counter(TransactionalTestingSink(str(tmp_path / "out")).committed())
    expected = Counter((f"k{i % KEYS}", i, rule_id) for i in range(3 * PER_PHASE)
                       for rule_id, d in RULES if i % d == 0)
    extra, missing = committed - expected, expected - committed
    assert not extra and not missing, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
        f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")
