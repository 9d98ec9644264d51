"""From DataStream calls to graphs: chaining, partitioners, validation, execution channels."""

import threading

import pytest

from flowray import (
    CoMapFunction,
    FunctionSerializationError,
    GraphError,
    KeyedProcessFunction,
    MapFunction,
    NumberSequenceSource,
    ValueStateDescriptor,
)
from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId, channel_id
from flowray.runtime.graph.transformations import ChainingStrategy
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.network.partitioners import (
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
)
from tests.support.environments import local_env, stream_graph_of


@pytest.fixture
def env():
    return local_env()


def _job_graph(env):
    return build_job_graph(stream_graph_of(env))


def _stream_graph(env):
    return stream_graph_of(env)


def _vertex_ops(jg):
    """Operator names per vertex, in topological order."""
    return [[v.plan.operators[n].name for n in v.node_ids] for v in jg.topological_order()]


def _edge_kinds(jg):
    return sorted((jg.vertices[e.source_vertex].name, e.partitioner.name,
                   jg.vertices[e.target_vertex].name) for e in jg.edges.values())


# ---------------------------------------------------------------------------------------
# chaining
# ---------------------------------------------------------------------------------------

def test_source_map_filter_sink_chain_at_equal_parallelism(env):
    env.from_collection([1, 2]).map(lambda x: x).filter(lambda x: True).add_sink(lambda v: None)
    jg = _job_graph(env)
    assert _vertex_ops(jg) == [["Source: Collection Source", "Map", "Filter", "Sink: Unnamed"]]
    assert jg.edges == {}
    (v,) = jg.vertices.values()
    assert v.name == "Source: Collection Source -> Map -> Filter -> Sink: Unnamed"
    assert v.is_source and v.parallelism == 1 and not v.plan.keyed


def test_key_by_breaks_the_chain_with_a_hash_edge(env):
    env.from_collection([("a", 1)]).map(lambda x: x).key_by(lambda t: t[0]).sum(1) \
        .add_sink(lambda v: None)
    jg = _job_graph(env)
    assert _vertex_ops(jg) == [["Source: Collection Source", "Map"],
                               ["Keyed Aggregation (sum)", "Sink: Unnamed"]]
    (e,) = jg.edges.values()
    assert isinstance(e.partitioner, KeyGroupStreamPartitioner) and e.partitioner.name == "HASH"
    first, second = jg.topological_order()
    assert not first.plan.keyed and second.plan.keyed
    assert first.outputs == [e] and second.inputs == [e]
    assert first.plan.network_outputs[e.source_node] == [e.id]


def test_different_parallelism_gives_rebalance_edge_not_chained(env):
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).map(lambda x: x).add_sink(lambda v: None)
    jg = _job_graph(env)
    assert _vertex_ops(jg) == [["Source: Collection Source"], ["Map", "Sink: Unnamed"]]
    (e,) = jg.edges.values()
    assert isinstance(e.partitioner, RebalancePartitioner)
    assert [v.parallelism for v in jg.topological_order()] == [1, 2]


def test_equal_explicit_parallelism_chains_with_forward(env):
    env.from_source(NumberSequenceSource(1, 10)).set_parallelism(3) \
        .map(lambda x: x).set_parallelism(3).add_sink(lambda v: None).set_parallelism(3)
    jg = _job_graph(env)
    assert _vertex_ops(jg) == [["Source: Sequence Source", "Map", "Sink: Unnamed"]]
    assert jg.topological_order()[0].parallelism == 3


def test_disable_chaining_isolates_the_operator(env):
    env.from_collection([1]).map(lambda x: x).disable_chaining().add_sink(lambda v: None)
    jg = _job_graph(env)
    assert _vertex_ops(jg) == [["Source: Collection Source"], ["Map"], ["Sink: Unnamed"]]
    assert all(isinstance(e.partitioner, ForwardPartitioner) for e in jg.edges.values())
    assert len(jg.edges) == 2


def test_start_new_chain_starts_a_chain_that_later_operators_join(env):
    env.from_collection([1]).map(lambda x: x).start_new_chain().filter(lambda x: True) \
        .add_sink(lambda v: None)
    sg = _stream_graph(env)
    assert [n.chaining for n in sg.topological_order()][1] is ChainingStrategy.HEAD
    jg = build_job_graph(sg)
    assert _vertex_ops(jg) == [["Source: Collection Source"], ["Map", "Filter", "Sink: Unnamed"]]


def test_sink_disable_chaining(env):
    env.from_collection([1]).map(lambda x: x).add_sink(lambda v: None).disable_chaining()
    assert _vertex_ops(_job_graph(env)) == [["Source: Collection Source", "Map"],
                                            ["Sink: Unnamed"]]


def test_branching_chain(env):
    ds = env.from_collection([1]).map(lambda x: x).name("M")
    ds.filter(lambda x: True).name("F1").add_sink(lambda v: None).name("S1")
    ds.filter(lambda x: False).name("F2").add_sink(lambda v: None).name("S2")
    jg = _job_graph(env)
    assert len(jg.vertices) == 1 and not jg.edges
    (v,) = jg.vertices.values()
    names = {n: v.plan.operators[n].name for n in v.node_ids}
    chained = {names[n]: sorted(names[c] for c in cs) for n, cs in v.plan.chained.items()}
    assert chained["M"] == ["F1", "F2"]
    assert chained["F1"] == ["S1"] and chained["F2"] == ["S2"]


def test_union_gives_in_degree_two_and_is_not_chained(env):
    a = env.from_collection([1]).name("A")
    b = env.from_collection([2]).name("B")
    a.union(b).map(lambda x: x).name("After Union").add_sink(lambda v: None)
    sg = _stream_graph(env)
    node = next(n for n in sg.nodes.values() if n.name == "After Union")
    assert len(node.in_edges) == 2
    assert all(isinstance(e.partitioner, ForwardPartitioner) for e in node.in_edges)
    jg = _job_graph(env)
    assert sorted(map(tuple, _vertex_ops(jg))) == sorted(
        [("A",), ("B",), ("After Union", "Sink: Unnamed")])
    target = next(v for v in jg.vertices.values() if v.name.startswith("After Union"))
    assert len(target.inputs) == 2
    assert {jg.vertices[e.source_vertex].name for e in target.inputs} == {"A", "B"}


def test_connect_gives_two_input_vertex(env):
    class Co(CoMapFunction):
        def map1(self, v):
            return v

        def map2(self, v):
            return v

    a = env.from_collection([1]).name("A")
    b = env.from_collection(["x"]).name("B")
    a.connect(b).map(Co()).add_sink(lambda v: None)
    jg = _job_graph(env)
    co = next(v for v in jg.vertices.values() if v.name.startswith("Co-Map"))
    assert co.num_inputs == 2
    assert sorted((jg.vertices[e.source_vertex].name, e.input_index) for e in co.inputs) == \
        [("A", 0), ("B", 1)]


# ---------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------

def test_forward_with_unequal_parallelism_names_both_operators(env):
    env.from_collection([1]).name("Little Source").forward().map(lambda x: x).name("Wide Map") \
        .set_parallelism(2).add_sink(lambda v: None)
    with pytest.raises(GraphError) as info:
        env._prepare("x")
    text = str(info.value)
    assert "'Little Source'" in text and "'Wide Map'" in text
    assert "forward" in text


def test_forward_with_equal_parallelism_is_accepted(env):
    env.from_collection([1]).forward().map(lambda x: x).add_sink(lambda v: None)
    assert len(_job_graph(env).vertices) == 1


def test_duplicate_uid_raises(env):
    env.from_collection([1]).uid("same").map(lambda x: x).name("Second").uid("same") \
        .add_sink(lambda v: None)
    with pytest.raises(GraphError) as info:
        env._prepare("x")
    assert "'same'" in str(info.value) and "'Second'" in str(info.value)


def test_uids_are_assigned_and_unique(env):
    env.from_collection([1]).map(lambda x: x).uid("my-map").add_sink(lambda v: None)
    sg = _stream_graph(env)
    uids = [n.uid for n in sg.topological_order()]
    assert "my-map" in uids and len(set(uids)) == len(uids)
    assert all(n.operator.uid == n.uid for n in sg.nodes.values())


def test_parallelism_above_max_parallelism_raises(env):
    env.set_max_parallelism(4)
    env.from_collection([1]).map(lambda x: x).name("TooWide").set_parallelism(5)
    with pytest.raises(GraphError, match="TooWide"):
        env._prepare("x")


def test_empty_program_raises(env):
    with pytest.raises(GraphError, match="no operators"):
        env._prepare("x")


def test_keyed_stream_settings_rejected(env):
    keyed = env.from_collection([1]).key_by(lambda x: x)
    with pytest.raises(GraphError):
        keyed.name("x")
    with pytest.raises(GraphError):
        keyed.set_parallelism(2)
    with pytest.raises(GraphError):
        env.from_collection([1]).rebalance().uid("u")


class UsesState(MapFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))

    def map(self, value):
        return value


def test_keyed_state_on_non_keyed_stream_rejected_at_map_time(env):
    ds = env.from_collection([1, 2])
    with pytest.raises(GraphError) as info:
        ds.map(UsesState())
    text = str(info.value)
    assert "'Map'" in text and "get_state" in text and "key_by" in text
    with pytest.raises(GraphError, match="get_list_state"):
        ds.flat_map(lambda x, ctx=None: ctx.get_list_state(None))


def test_keyed_state_on_keyed_stream_accepted(env):
    out = env.from_collection([1, 2]).key_by(lambda x: x).map(UsesState())
    out.add_sink(lambda v: None)
    jg = _job_graph(env)
    keyed_vertex = jg.topological_order()[-1]
    assert keyed_vertex.plan.keyed  # gets a keyed state backend
    env._prepare("x")  # and serializes fine


def test_keyed_process_function_on_keyed_stream_accepted(env):
    class P(KeyedProcessFunction):
        def open(self, ctx):
            self.s = ctx.get_state(ValueStateDescriptor("s"))

        def process_element(self, value, ctx):
            yield value

    env.from_collection([1]).key_by(lambda x: x).process(P()).add_sink(lambda v: None)
    env._prepare("x")


def test_unpicklable_function_fails_in_prepare_naming_the_operator(env):
    lock = threading.Lock()
    env.from_collection([1]).map(lambda x: (lock, x)).add_sink(lambda v: None)
    with pytest.raises(FunctionSerializationError) as info:
        env._prepare("x")
    text = str(info.value)
    assert "'Map'" in text and "lock" in text.lower()


def test_unpicklable_key_selector_fails_in_prepare(env):
    lock = threading.Lock()
    env.from_collection([1]).key_by(lambda x: (lock, x)[1]).sum(0).add_sink(lambda v: None)
    with pytest.raises(FunctionSerializationError):
        env._prepare("x")


# ---------------------------------------------------------------------------------------
# partitioner details and execution graph
# ---------------------------------------------------------------------------------------

def test_key_by_partitioner_uses_target_max_parallelism_and_is_copied(env):
    env.set_max_parallelism(128)
    keyed = env.from_collection([1]).key_by(lambda x: x)
    original = keyed._t.partitioner
    keyed.sum(0).set_max_parallelism(64).add_sink(lambda v: None)
    jg = _job_graph(env)
    (e,) = [e for e in jg.edges.values() if isinstance(e.partitioner, KeyGroupStreamPartitioner)]
    assert e.partitioner.max_parallelism == 64
    assert e.partitioner is not original and original.max_parallelism == 128


def test_unequal_max_parallelism_prevents_chaining(env):
    env.from_collection([1]).map(lambda x: x).set_max_parallelism(64).add_sink(lambda v: None)
    # the map differs in max parallelism from both neighbours (the sink keeps 128)
    assert _vertex_ops(_job_graph(env)) == [["Source: Collection Source"], ["Map"],
                                            ["Sink: Unnamed"]]


def test_execution_graph_channels(env):
    env.from_source(NumberSequenceSource(1, 100)).set_parallelism(3).name("Src") \
        .map(lambda x: x).set_parallelism(3).name("Fwd").disable_chaining() \
        .key_by(lambda x: x % 5).reduce(lambda a, b: a + b).set_parallelism(2).name("Red") \
        .add_sink(lambda v: None).set_parallelism(2)
    jg = _job_graph(env)
    src, fwd, red = jg.topological_order()
    assert (src.name, fwd.name, red.name) == ("Src", "Fwd", "Red -> Sink: Unnamed")
    fwd_edge, = fwd.inputs
    hash_edge, = red.inputs
    eg = ExecutionGraph(jg)
    chans = eg.all_channels()
    assert len(chans) == 3 + 3 * 2 == len(set(chans))
    assert sorted(c for c in chans if c.startswith(fwd_edge.id + "/")) == \
        sorted(channel_id(fwd_edge.id, i, i) for i in range(3))
    assert sorted(c for c in chans if c.startswith(hash_edge.id + "/")) == \
        sorted(channel_id(hash_edge.id, p, c) for p in range(3) for c in range(2))
    assert len(eg.subtasks()) == 3 + 3 + 2
    # each consumer subtask hears from every producer on the hash edge
    ins = eg.input_channels(SubtaskId(red.id, 1))
    assert sorted(i.producer.index for i in ins) == [0, 1, 2]
    # a forward producer writes to exactly its peer
    (out,) = eg.output_edges(SubtaskId(src.id, 2))
    assert out.channels == ((channel_id(fwd_edge.id, 2, 2), SubtaskId(fwd.id, 2)),)
    (out,) = eg.output_edges(SubtaskId(fwd.id, 0))
    assert [c for _, c in out.channels] == [SubtaskId(red.id, 0), SubtaskId(red.id, 1)]
    # key-group ranges of the keyed subtasks split [0, 128)
    d0 = eg.deployment_descriptor(SubtaskId(red.id, 0), "job", b"", {})
    d1 = eg.deployment_descriptor(SubtaskId(red.id, 1), "job", b"", {})
    assert (d0.key_group_range.start, d0.key_group_range.end) == (0, 63)
    assert (d1.key_group_range.start, d1.key_group_range.end) == (64, 127)
    assert d1.display_name == "Red -> Sink: Unnamed (2/2)"


def test_execution_plan_text(env):
    env.set_parallelism(2)
    env.from_collection(["a"]).map(lambda x: (x, 1)).key_by(lambda t: t[0]).sum(1).print()
    plan = env.get_execution_plan().splitlines()
    assert plan[0] == "Source: Collection Source (parallelism 1)"
    assert plan[1] == "Map (parallelism 2) <- Source: Collection Source [REBALANCE]"
    assert plan[2] == ("Keyed Aggregation (sum) -> Sink: Print to Std. Out (parallelism 2) "
                       "<- Map [HASH]")


def test_generated_uids_are_stable_across_builds_of_the_same_program():
    from flowray import StreamExecutionEnvironment

    def program():
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1, 2]).map(lambda x: x).key_by(lambda x: x) \
            .reduce(lambda a, b: a + b).uid("sum").add_sink(lambda v: None)
        return _stream_graph(env)

    first, second = program(), program()
    # transformation ids differ between the two builds; the uids do not
    assert sorted(first.nodes) != sorted(second.nodes)
    assert [n.uid for n in first.topological_order()] == \
        [n.uid for n in second.topological_order()]
    assert "sum" not in first.generated_uids.values()
    assert len(first.generated_uids) == 3  # source, map, sink


def test_an_operator_without_uid_in_a_checkpointed_job_is_warned_about(env, caplog):
    env.enable_checkpointing(1000)
    env.from_collection([1]).uid("src").map(lambda x: x).name("unnamed map") \
        .add_sink(lambda v: None).uid("sink")
    with caplog.at_level("WARNING"):
        env._prepare("x")
    assert "'unnamed map'" in caplog.text and ".uid(" in caplog.text
