"""The broadcast state pattern's API: broadcast(descriptors) -> BroadcastStream,
connect -> BroadcastConnectedStream, process -> the graph (input 2 BROADCAST), and a small
job on the in-process LocalExecutor whose output does not depend on how the two inputs
interleave."""

from collections import Counter

import pytest

from flowray import GraphError
from flowray.datastream import BroadcastConnectedStream, BroadcastStream, DataStream
from flowray.datastream.functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from flowray.datastream.state import (
    BroadcastState,
    ListStateDescriptor,
    MapStateDescriptor,
    ReadOnlyBroadcastState,
    ValueStateDescriptor,
)
from flowray.operators.broadcast import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from flowray.runtime.network.partitioners import BroadcastPartitioner, KeyGroupStreamPartitioner
from tests.support.environments import local_env, stream_graph_of

RULES = MapStateDescriptor("rules")
SEEN = ListStateDescriptor("seen")


class Join(KeyedBroadcastProcessFunction):
    """Records ``(key, n)``, rules ``(rule_id, divisor)``: emits ``(key, n, rule_id)`` once
    for every record and rule with ``n % divisor == 0``, whichever arrives first."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(SEEN)

    def process_element(self, value, ctx):
        key, n = value
        self.seen.add(n)
        for rule_id, divisor in ctx.get_broadcast_state(RULES).items():
            if n % divisor == 0:
                yield key, n, rule_id

    def process_broadcast_element(self, value, ctx):
        rule_id, divisor = value
        ctx.get_broadcast_state(RULES).put(rule_id, divisor)

        def matches(key, state):
            for n in state.get():
                if n % divisor == 0:
                    yield key, n, rule_id
        ctx.apply_to_keyed_state(SEEN, matches)


class Plain(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, value)


class UsesKeyedState(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        self.runtime_context.get_state(ValueStateDescriptor("v"))

    def process_broadcast_element(self, value, ctx):
        pass


def test_broadcast_without_descriptors_is_still_a_partitioning():
    env = local_env()
    out = env.from_collection([1]).broadcast()
    assert isinstance(out, DataStream)
    assert isinstance(out._t.partitioner, BroadcastPartitioner)


def test_broadcast_with_descriptors_and_connect():
    env = local_env(parallelism=2)
    b = env.from_collection([("r", 2)]).broadcast(RULES, MapStateDescriptor("other"))
    assert isinstance(b, BroadcastStream)
    assert [d.name for d in b.broadcast_state_descriptors] == ["rules", "other"]
    with pytest.raises(AttributeError, match="connect it from another stream"):
        b.map(lambda x: x)
    with pytest.raises(TypeError, match="MapStateDescriptor"):
        env.from_collection([1]).broadcast(SEEN)
    keyed = env.from_collection([("a", 1)]).key_by(lambda t: t[0])
    connected = keyed.connect(b)
    assert isinstance(connected, BroadcastConnectedStream)
    connected.process(Join()).name("join").print()
    graph = stream_graph_of(env)
    node = next(n for n in graph.nodes.values() if n.name == "join")
    assert isinstance(node.operator, KeyedBroadcastProcessOperator)
    by_input = {e.input_index: type(e.partitioner) for e in node.in_edges}
    assert by_input == {0: KeyGroupStreamPartitioner, 1: BroadcastPartitioner}


def test_function_kind_must_match_the_stream():
    env = local_env()
    b = env.from_collection([1]).broadcast(RULES)
    plain = env.from_collection([1])
    keyed = plain.key_by(lambda x: x)
    with pytest.raises(TypeError, match="BroadcastProcessFunction should be applied to a "
                                        "non-keyed"):
        keyed.connect(b).process(Plain())
    with pytest.raises(TypeError, match="KeyedBroadcastProcessFunction should be applied"):
        plain.connect(b).process(Join())
    with pytest.raises(GraphError, match="uses keyed state \\(get_state\\)"):
        plain.connect(b).process(UsesKeyedState())
    op = plain.connect(b).process(Plain())._t.operator
    assert isinstance(op, BroadcastProcessOperator)


def test_exports():
    assert issubclass(BroadcastState, ReadOnlyBroadcastState)


@pytest.mark.parametrize("parallelism", [1, 3])
def test_join_on_the_local_executor(parallelism):
    env = local_env(parallelism=parallelism)
    records = [(f"k{i % 5}", i) for i in range(60)]
    rules = [("by2", 2), ("by3", 3), ("by7", 7)]
    b = env.from_collection(rules).broadcast(RULES)
    out = env.from_collection(records).key_by(lambda t: t[0]).connect(b).process(Join())
    with out.execute_and_collect() as results:
        got = Counter(results)
    want = Counter((k, n, r) for k, n in records for r, d in rules if n % d == 0)
    assert got == want


class EverySubtask(BroadcastProcessFunction):
    """Records pass through; each subtask reports each rule it stored."""

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, self.index)
        yield "stored", value, self.index


def test_every_subtask_gets_every_broadcast_element():
    env = local_env(parallelism=3)
    b = env.from_collection(["r1", "r2"]).broadcast(RULES)
    out = env.from_collection(list(range(10))).rebalance().connect(b).process(EverySubtask())
    with out.execute_and_collect() as results:
        got = Counter(results)
    want = Counter(range(10))
    want.update(("stored", r, i) for r in ("r1", "r2") for i in range(3))
    assert got == want


def test_broadcast_with_none_first_is_refused():
    with pytest.raises(TypeError, match="first broadcast state descriptor is None"):
        local_env().from_collection([1]).broadcast(None, RULES)


class CountRules(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value, len(list(ctx.get_broadcast_state(RULES).keys()))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, True)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_batch_mode_reads_the_broadcast_side_first(parallelism):
    env = local_env(parallelism=parallelism, **{"execution.runtime-mode": "BATCH",
                                                "flowray.channel.batch-size": 10})
    rules = env.from_collection([f"r{i}" for i in range(300)]).broadcast(RULES)  # 30 frames
    records = env.from_collection(list(range(300))).rebalance()
    with records.connect(rules).process(CountRules()).execute_and_collect() as results:
        got = list(results)
    assert sorted(got) == [(n, 300) for n in range(300)]  # every record saw every rule
