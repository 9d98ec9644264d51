"""Failover regions and strategies (Flink's FLIP-1), on hand-drawn subtask graphs.

The cases port Flink's SchedulingPipelinedRegionComputeUtilTest and
RestartPipelinedRegionFailoverStrategyTest. In the drawings ``--->`` is a pipelined exchange,
``--|-->`` a blocking one, ``-+-> X`` all-to-all between the rows.
"""

import pytest

from flowray.common.options import FAILOVER_STRATEGY
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.runtime.jobmaster.failover import (
    BLOCKING,
    PIPELINED,
    FailoverTopology,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    compute_pipelined_regions,
    failover_strategy_from_config,
)
from flowray.testing.jobmaster import TestingTopology

P, B = PIPELINED, BLOCKING


def build(names, edges, unscheduled=()):
    """A TestingTopology with ``names`` and ``edges`` = [(producer, consumer, type)]."""
    t = TestingTopology()
    for n in names.split():
        t.add_vertex(n)
    partitions = [t.connect(a, b, kind) for a, b, kind in edges]
    for n in unscheduled:
        t.set_scheduled(n, False)
    return t, partitions


def all_to_all(producers, consumers, kind):
    return [(a, b, kind) for a in producers.split() for b in consumers.split()]


def region_sets(topology):
    return sorted(sorted(r) for r in compute_pipelined_regions(topology))


def restarts(strategy, vertex, **kw):
    return set(strategy.get_tasks_needing_restart(vertex, **kw))


# -- region computation -----------------------------------------------------------------

def test_unconnected_vertices_are_one_region_each():
    """
    (v1)

    (v2)

    (v3)
    """
    t, _ = build("v1 v2 v3", [])
    assert region_sets(t) == [["v1"], ["v2"], ["v3"]]


def test_embarrassingly_parallel_job_has_one_region_per_pipeline():
    """
    (a1) --> (b1) --> (c1)

    (a2) --> (b2) --> (c2)

    (a3) --> (b3) --> (c3)

    Forward edges only: each parallel pipeline is its own region.
    """
    edges = []
    for i in (1, 2, 3):
        edges += [(f"a{i}", f"b{i}", P), (f"b{i}", f"c{i}", P)]
    t, _ = build("a1 a2 a3 b1 b2 b3 c1 c2 c3", edges)
    assert region_sets(t) == [["a1", "b1", "c1"], ["a2", "b2", "c2"], ["a3", "b3", "c3"]]
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "b2") == {"a2", "b2", "c2"}
    assert strategy.region_of("c3") == frozenset({"a3", "b3", "c3"})


def test_pipelined_all_to_all_exchanges_make_one_region():
    """
    (a1) -+-> (b1) -+-> (c1)
          X         X
    (a2) -+-> (b2) -+-> (c2)
    """
    t, _ = build("a1 a2 b1 b2 c1 c2",
                 all_to_all("a1 a2", "b1 b2", P) + all_to_all("b1 b2", "c1 c2", P))
    assert region_sets(t) == [["a1", "a2", "b1", "b2", "c1", "c2"]]


def test_cascade_of_pipelined_joins_is_one_region():
    """
    (v1)--+
          +--(v5)-+
    (v2)--+       |
                  +--(v7)
    (v3)--+       |
          +--(v6)-+
    (v4)--+
    """
    t, _ = build("v1 v2 v3 v4 v5 v6 v7",
                 [("v1", "v5", P), ("v2", "v5", P), ("v3", "v6", P), ("v4", "v6", P),
                  ("v5", "v7", P), ("v6", "v7", P)])
    assert len(compute_pipelined_regions(t)) == 1


def test_pipelined_fan_out_from_one_source_is_one_region():
    """
                  +--(v4)
          +--(v2)-+
          |       +--(v5)
    (v1)--+
          |       +--(v6)
          +--(v3)-+
                  +--(v7)
    """
    t, _ = build("v1 v2 v3 v4 v5 v6 v7",
                 [("v1", "v2", P), ("v1", "v3", P), ("v2", "v4", P), ("v2", "v5", P),
                  ("v3", "v6", P), ("v3", "v7", P)])
    assert len(compute_pipelined_regions(t)) == 1


@pytest.mark.parametrize("second_exchange", ["pointwise", "all-to-all"])
def test_blocking_exchange_is_a_region_boundary(second_exchange):
    """
    (a1) -+-> (b1) --|--> (c1)
          X
    (a2) -+-> (b2) --|--> (c2)        (pointwise)

    (a1) -+-> (b1) -+-|-> (c1)
          X         X
    (a2) -+-> (b2) -+-|-> (c2)        (all-to-all)

          ^         ^
      pipelined  blocking
    """
    edges = all_to_all("a1 a2", "b1 b2", P)
    if second_exchange == "pointwise":
        edges += [("b1", "c1", B), ("b2", "c2", B)]
    else:
        edges += all_to_all("b1 b2", "c1 c2", B)
    t, _ = build("a1 a2 b1 b2 c1 c2", edges)
    assert region_sets(t) == [["a1", "a2", "b1", "b2"], ["c1"], ["c2"]]


def test_cascade_of_joins_with_blocking_exchanges():
    """
    (1)--+
         +--(5)-+
    (2)--+      |
             (blocking)
                |
                +--(7)
                |
             (blocking)
    (3)--+      |
         +--(6)-+
    (4)--+

    Regions: {1, 2, 5}, {3, 4, 6}, {7}.
    """
    t, _ = build("1 2 3 4 5 6 7",
                 [("1", "5", P), ("2", "5", P), ("3", "6", P), ("4", "6", P),
                  ("5", "7", B), ("6", "7", B)])
    assert region_sets(t) == [["1", "2", "5"], ["3", "4", "6"], ["7"]]


def test_diamond_with_a_blocking_side_is_still_one_region():
    """
       (blocking)
           |
           v
          +|-(v2)-+
          |       |
    (v1)--+       +--(v4)
          |       |
          +--(v3)-+

    v2 is pipelined into v4, and v1 -> v3 -> v4 is pipelined: one weakly connected component.
    """
    t, _ = build("v1 v2 v3 v4",
                 [("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", P), ("v3", "v4", P)])
    assert region_sets(t) == [["v1", "v2", "v3", "v4"]]


def test_regions_depending_on_each_other_in_a_cycle_are_merged():
    """
       (blocking)(blocking)
           |      |
           v      v
          +|-(v2)-|+
          |        |
    (v1)--+        +--(v4)
          |        |
          +--(v3)--+

    Raw regions {v1, v3, v4} and {v2} feed each other through blocking partitions; neither
    could be scheduled first, so Flink merges them (FLINK-17330).
    """
    t, _ = build("v1 v2 v3 v4",
                 [("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", B), ("v3", "v4", P)])
    assert region_sets(t) == [["v1", "v2", "v3", "v4"]]


def test_regions_come_in_topology_order_and_cover_every_vertex_once():
    """
    (x) --|--> (y) ---> (z)        (w)
    """
    t, _ = build("x y z w", [("x", "y", B), ("y", "z", P)])
    regions = compute_pipelined_regions(t)
    assert regions == [frozenset({"x"}), frozenset({"y", "z"}), frozenset({"w"})]
    assert all(isinstance(r, frozenset) for r in regions)
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert strategy.regions() == regions
    assert strategy.region_of("z") == frozenset({"y", "z"})
    with pytest.raises(ValueError, match="not a vertex"):
        strategy.region_of("nope")


def test_long_chain_of_blocking_stages_needs_no_recursion():
    """
    (s0) --|--> (s1) --|--> ... --|--> (s2999)
    """
    names = [f"s{i}" for i in range(3000)]
    t, parts = build(" ".join(names), [(a, b, B) for a, b in zip(names, names[1:])])
    assert len(compute_pipelined_regions(t)) == 3000
    lost = set(parts)
    strategy = RestartPipelinedRegionFailoverStrategy(t, lambda p: p not in lost)
    assert restarts(strategy, "s2999") == set(names)
    assert restarts(RestartPipelinedRegionFailoverStrategy(t), "s2990") == set(names[2990:])


# -- the three rules --------------------------------------------------------------------

def test_failed_region_and_its_consumer_regions_restart():
    """
    (v1) -+-|-> (v4)
          X
    (v2) -+-|-> (v5)

    (v3) ---|-> (v6)

    Each vertex is a region. v4 has FINISHED and v1..v3 too: a finished consumer restarts
    all the same, its input is produced again (Flink: testRegionFailoverForRegionInternalErrors).
    """
    t, _ = build("v1 v2 v3 v4 v5 v6",
                 all_to_all("v1 v2", "v4 v5", B) + [("v3", "v6", B)])
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "v1") == {"v1", "v4", "v5"}
    assert restarts(strategy, "v2") == {"v2", "v4", "v5"}
    assert restarts(strategy, "v3") == {"v3", "v6"}
    assert restarts(strategy, "v4") == {"v4"}
    assert restarts(strategy, "v5") == {"v5"}
    assert restarts(strategy, "v6") == {"v6"}


def test_a_failure_to_read_a_partition_restarts_its_producer_region():
    """
    (v1) -+-|-> (v4)
          X
    (v2) -+-|-> (v5)

    (v3) ---|-> (v6)

    A consumer that failed reading a partition (Flink's PartitionException) makes that
    partition unavailable for the decision: its producer restarts, and so do all consumers
    of the producer (Flink: testRegionFailoverForDataConsumptionErrors).
    """
    t, _ = build("v1 v2 v3 v4 v5 v6",
                 all_to_all("v1 v2", "v4 v5", B) + [("v3", "v6", B)])
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    v1_to_v4, v2_to_v4 = t.consumed_partitions("v4")
    v1_to_v5, v2_to_v5 = t.consumed_partitions("v5")
    (v3_to_v6,) = t.consumed_partitions("v6")
    assert restarts(strategy, "v4", failed_partition=v1_to_v4) == {"v1", "v4", "v5"}
    assert restarts(strategy, "v4", failed_partition=v2_to_v4) == {"v2", "v4", "v5"}
    assert restarts(strategy, "v5", failed_partition=v1_to_v5) == {"v1", "v4", "v5"}
    assert restarts(strategy, "v5", failed_partition=v2_to_v5) == {"v2", "v4", "v5"}
    assert restarts(strategy, "v6", failed_partition=v3_to_v6) == {"v3", "v6"}
    # the failed partition is forgotten after the call, as in Flink
    assert restarts(strategy, "v4") == {"v4"}


@pytest.mark.parametrize("lost, expected", [
    (set(), {"v1": {"v1", "v3"}, "v2": {"v2", "v3"}, "v3": {"v3"}}),
    ({"rp1"}, {"v1": {"v1", "v3"}, "v2": {"v1", "v2", "v3"}, "v3": {"v1", "v3"}}),
    ({"rp2"}, {"v1": {"v1", "v2", "v3"}, "v2": {"v2", "v3"}, "v3": {"v2", "v3"}}),
    ({"rp1", "rp2"}, {"v1": {"v1", "v2", "v3"}, "v2": {"v1", "v2", "v3"},
                      "v3": {"v1", "v2", "v3"}}),
])
def test_lost_blocking_inputs_restart_their_producers(lost, expected):
    """
    (v1) --rp1--|-\\
                  (v3)
    (v2) --rp2--|-/

    Each vertex is a region; rp1, rp2 are blocking partitions that may be lost
    (Flink: testRegionFailoverForVariousResultPartitionAvailabilityCombinations).
    """
    t, (rp1, rp2) = build("v1 v2 v3", [("v1", "v3", B), ("v2", "v3", B)])
    names = {"rp1": rp1, "rp2": rp2}
    gone = {names[x] for x in lost}
    strategy = RestartPipelinedRegionFailoverStrategy(t, lambda p: p not in gone)
    for failed, tasks in expected.items():
        assert restarts(strategy, failed) == tasks, failed


def test_regions_of_several_vertices_in_a_chain_of_blocking_stages():
    """
    (v1) ---> (v2) --|--> (v3) ---> (v4) --|--> (v5) ---> (v6)

    Regions {v1, v2}, {v3, v4}, {v5, v6}
    (Flink: testRegionFailoverForMultipleVerticesRegions).
    """
    t, (_, v2_out, _, _, _) = build(
        "v1 v2 v3 v4 v5 v6",
        [("v1", "v2", P), ("v2", "v3", B), ("v3", "v4", P), ("v4", "v5", B), ("v5", "v6", P)])
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "v3") == {"v3", "v4", "v5", "v6"}
    assert restarts(strategy, "v3", failed_partition=v2_out) == {
        "v1", "v2", "v3", "v4", "v5", "v6"}
    assert restarts(strategy, "v6") == {"v5", "v6"}


def test_lost_partitions_are_followed_upstream_over_two_stages():
    """
    (a) --pa--|--> (b) --pb--|--> (c) --pc--|--> (d)

    Each vertex is a region. When d fails and pc and pb are gone, c must run again, so b
    must run again, which needs pb... and pa: the producers are followed upstream as long as
    their inputs are lost (rule 2 applied to a region that rule 2 brought in). Rule 3 then
    brings in the consumers of everything restarted: here only d.
    """
    t, (pa, pb, pc) = build("a b c d", [("a", "b", B), ("b", "c", B), ("c", "d", B)])

    def strategy(*lost):
        return RestartPipelinedRegionFailoverStrategy(t, lambda p: p not in lost)

    assert restarts(strategy(pc, pb), "d") == {"b", "c", "d"}
    assert restarts(strategy(pc, pb, pa), "d") == {"a", "b", "c", "d"}
    # pb lost but pc still there: c need not run, so neither does b
    assert restarts(strategy(pb), "d") == {"d"}
    assert [sorted(r) for r in strategy(pc, pb).regions_to_restart("d")] == [
        ["d"], ["c"], ["b"]]


def test_a_consumer_region_still_running_restarts_when_its_producer_restarts():
    """
    (src) ---> (map) --|--> (agg) ---> (sink)
      running   running      running    running
    """
    t, _ = build("src map agg sink",
                 [("src", "map", P), ("map", "agg", B), ("agg", "sink", P)])
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "src") == {"src", "map", "agg", "sink"}


def test_a_finished_consumer_region_is_left_out_of_rule_3():
    r"""A region that finished read every input to its end and committed its output: it
    does not run again because a producer of it does (Flink's strategy would restart it,
    and its sink would commit a second time). A region with one vertex still running
    restarts whole.

        (src0) --|--> (sum0) -> (sink0)     finished
                  \/
                  /\
        (src1) --|--> (sum1) -> (sink1)     sum1 finished, sink1 running
    """
    t, _ = build("src0 src1 sum0 sink0 sum1 sink1",
                 [("src0", "sum0", B), ("src0", "sum1", B), ("src1", "sum0", B),
                  ("src1", "sum1", B), ("sum0", "sink0", P), ("sum1", "sink1", P)])
    for v in ("src0", "src1", "sum0", "sink0", "sum1"):
        t.set_finished(v)
    lost = RestartPipelinedRegionFailoverStrategy(t, is_partition_available=lambda p: False)
    # sink1 fails and src0's, src1's files are gone: both run again, sum0/sink0 do not
    assert restarts(lost, "sink1") == {"src0", "src1", "sum1", "sink1"}


def test_a_finished_region_still_restarts_for_a_partition_needed_again():
    """Rule 2 is not changed: a finished producer whose partition is lost runs again
    (the scheduler then tells its sinks they committed already)."""
    t, _ = build("a b c", [("a", "b", B), ("b", "c", B)])
    t.set_finished("a")
    t.set_finished("b")
    strategy = RestartPipelinedRegionFailoverStrategy(
        t, is_partition_available=lambda p: not p.startswith("b"))
    assert restarts(strategy, "c") == {"b", "c"}


def test_every_consumer_region_of_a_restarted_region_restarts_recursively():
    """
                      +--|--> (c1) --|--> (d1)
                      |
    (a) ---> (b) -----+--|--> (c2) ---> (c2x)
                      |
                      +--|--> (c3)

    (e) --|--> (d1)

    b's one blocking partition has three consumers. A failure in {a, b} restarts all three
    consumer regions and, recursively, d1's region; e (a producer of d1) stays.
    """
    t = TestingTopology()
    for n in ("a", "b", "c1", "c2", "c2x", "c3", "d1", "e"):
        t.add_vertex(n)
    t.connect("a", "b", P)
    out = t.connect("b", "c1", B)
    t.connect("b", "c2", B, partition=out)
    t.connect("b", "c3", B, partition=out)
    t.connect("c2", "c2x", P)
    t.connect("c1", "d1", B)
    t.connect("e", "d1", B)
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert region_sets(t) == [["a", "b"], ["c1"], ["c2", "c2x"], ["c3"], ["d1"], ["e"]]
    assert restarts(strategy, "a") == {"a", "b", "c1", "c2", "c2x", "c3", "d1"}
    assert restarts(strategy, "c2x") == {"c2", "c2x"}
    assert restarts(strategy, "e") == {"e", "d1"}


def test_consumer_regions_not_yet_scheduled_are_left_alone():
    """
    (v1) --|--> (v2) --|--> (v3)
    scheduled   CREATED      CREATED

    v2 and v3 never ran (the batch job is still in its first stage): restarting v1 does not
    touch them; they start when their inputs are ready (Flink filters CREATED vertices).
    """
    t, (p12, _) = build("v1 v2 v3", [("v1", "v2", B), ("v2", "v3", B)],
                        unscheduled=("v2", "v3"))
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "v1") == {"v1"}
    # the regions are still involved; only the result leaves them out
    assert len(strategy.regions_to_restart("v1")) == 3
    # once v2 has been scheduled it restarts with its producer
    t.set_scheduled("v2", True)
    assert restarts(strategy, "v1") == {"v1", "v2"}


def test_nothing_restarts_when_every_involved_vertex_is_still_created():
    """
    (v1) --|--> (v2)
    CREATED     CREATED

    (Flink: testRegionFailoverDoesNotRestartCreatedExecutions.)
    """
    t = TestingTopology(default_scheduled=False)
    t.add_vertex("v1")
    t.add_vertex("v2")
    p = t.connect("v1", "v2", B)
    strategy = RestartPipelinedRegionFailoverStrategy(t)
    assert restarts(strategy, "v2") == set()
    assert restarts(strategy, "v2", failed_partition=p) == set()


def test_full_and_region_on_the_same_graph():
    """
    (s1) ---> (m1) --+-|-> (k1) ---> (out1)
                     X
    (s2) ---> (m2) --+-|-> (k2) ---> (out2)

    region: a sink failure restarts its own pipeline only; full: everything.
    """
    edges = [("s1", "m1", P), ("s2", "m2", P), ("k1", "out1", P), ("k2", "out2", P)]
    t, _ = build("s1 s2 m1 m2 k1 k2 out1 out2", edges + all_to_all("m1 m2", "k1 k2", B))
    region = RestartPipelinedRegionFailoverStrategy(t)
    full = RestartAllFailoverStrategy(t)
    everything = {"s1", "s2", "m1", "m2", "k1", "k2", "out1", "out2"}
    assert restarts(region, "out1") == {"k1", "out1"}
    assert restarts(region, "s2") == {"s2", "m2", "k1", "out1", "k2", "out2"}
    for v in everything:
        assert restarts(full, v) == everything
    assert (region.name, full.name) == ("region", "full")
    with pytest.raises(ValueError, match="not a vertex"):
        full.get_tasks_needing_restart("ghost")


def test_unknown_failed_vertex_is_an_error():
    """
    (a)          and (b) is no vertex of it
    """
    t, _ = build("a", [])
    with pytest.raises(ValueError, match="not a vertex"):
        RestartPipelinedRegionFailoverStrategy(t).get_tasks_needing_restart("b")


def test_pipelined_partitions_never_count_as_available_inputs():
    """
    (a) ---> (b)

    Even if the availability check says yes, a pipelined input is re-produced by its
    region (which is the consumer's own region): same answer, and the check is not asked.
    """
    asked = []
    t, _ = build("a b", [("a", "b", P)])
    strategy = RestartPipelinedRegionFailoverStrategy(t, lambda p: asked.append(p) or True)
    assert restarts(strategy, "b") == {"a", "b"}
    assert asked == []


# -- the topology interface -------------------------------------------------------------

class TupleTopology(FailoverTopology):
    """A minimal adapter with tuple vertices and no is_scheduled override."""

    def __init__(self, edges):
        self.edges = edges  # partition id -> (producer, [consumers], type)
        self._vertices = []
        for producer, consumers, _ in edges.values():
            for v in [producer, *consumers]:
                if v not in self._vertices:
                    self._vertices.append(v)

    def vertices(self):
        return self._vertices

    def consumed_partitions(self, vertex):
        return [p for p, (_, cs, _) in self.edges.items() if vertex in cs]

    def produced_partitions(self, vertex):
        return [p for p, (prod, _, _) in self.edges.items() if prod == vertex]

    def partition_producer(self, partition):
        return self.edges[partition][0]

    def partition_consumers(self, partition):
        return self.edges[partition][1]

    def partition_type(self, partition):
        return self.edges[partition][2]


def test_any_hashable_vertices_through_the_abstract_topology():
    """
    ("src", 0) ---> ("map", 0) --|--> ("sink", 0)
    """
    t = TupleTopology({1: (("src", 0), [("map", 0)], "pipelined"),
                       2: (("map", 0), [("sink", 0)], "blocking")})
    strategy = failover_strategy_from_config(None, t)
    assert restarts(strategy, ("src", 0)) == {("src", 0), ("map", 0), ("sink", 0)}
    assert restarts(strategy, ("sink", 0)) == {("sink", 0)}


def test_an_unknown_partition_type_is_rejected():
    """
    (a) --?--> (b)      ("hybrid" is neither pipelined nor blocking)
    """
    t = TupleTopology({1: ("a", ["b"], "hybrid")})
    with pytest.raises(ValueError, match="'hybrid'"):
        compute_pipelined_regions(t)


def test_testing_topology_builder():
    """
    (v1) --|--> (x)
          \
           `-|--> (y)   one blocking partition, two consumers; (y) not scheduled
    """
    t = TestingTopology()
    assert t.add_vertex() == "v1"
    assert t.add_vertex("x") == "x"
    with pytest.raises(ValueError, match="already exists"):
        t.add_vertex("x")
    with pytest.raises(ValueError, match="result_type"):
        t.connect("v1", "x", "PIPELINED_BOUNDED")
    with pytest.raises(ValueError, match="unknown vertex"):
        t.connect("v1", "nope", "blocking")
    p = t.connect("v1", "x", "blocking")
    assert t.add_vertex("y", scheduled=False) == "y"
    assert t.connect("v1", "y", "blocking", partition=p) == p
    with pytest.raises(ValueError, match="not pipelined"):
        t.connect("v1", "y", "pipelined", partition=p)
    with pytest.raises(ValueError, match="not a partition of"):
        t.connect("x", "y", "blocking", partition=p)
    assert list(t.partition_consumers(p)) == ["x", "y"]
    assert list(t.produced_partitions("v1")) == [p]
    assert (t.is_scheduled("x"), t.is_scheduled("y")) == (True, False)
    with pytest.raises(ValueError, match="unknown result partition"):
        t.partition_type("zzz")


# -- configuration ----------------------------------------------------------------------

def test_failover_strategy_from_config():
    """
    (a) --|--> (b)
    """
    t, (p,) = build("a b", [("a", "b", B)])
    assert isinstance(failover_strategy_from_config(None, t),
                      RestartPipelinedRegionFailoverStrategy)
    assert isinstance(failover_strategy_from_config({}, t),
                      RestartPipelinedRegionFailoverStrategy)
    key = "jobmanager.execution.failover-strategy"
    assert isinstance(failover_strategy_from_config({key: "full"}, t),
                      RestartAllFailoverStrategy)
    assert isinstance(failover_strategy_from_config(Configuration({key: "Region"}), t),
                      RestartPipelinedRegionFailoverStrategy)
    lost = failover_strategy_from_config({key: "region"}, t, lambda q: q != p)
    assert restarts(lost, "b") == {"a", "b"}
    with pytest.raises(ConfigurationError, match="region, full"):
        failover_strategy_from_config({key: "individual"}, t)
    assert FAILOVER_STRATEGY.key == key
    assert Configuration().get(FAILOVER_STRATEGY) == "region"
