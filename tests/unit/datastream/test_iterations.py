"""Cyclic dataflows on the in-process LocalExecutor (no Ray): Collatz steps, connected
components by label propagation over a keyed feedback (against a plain-Python search),
a connected iteration whose feedback has its own type, a loop under back-pressure that
only finishes because its head spills, and the misuse caught when the graph is built."""

from __future__ import annotations

import pytest

from flowray import GraphError
from flowray.common.typeinfo import Types
from flowray.datastream import ConnectedIterativeStreams, IterativeStream
from flowray.datastream.functions import CoMapFunction
from tests.support.environments import local_env, stream_graph_of
from tests.support.loops import (MinLabel, check_label_updates, collatz_step, collatz_steps,
                                 components, random_graph)

pytestmark = pytest.mark.timeout(120)


def collatz_job(env, numbers, across_channels=False, **iterate_args):
    """Collatz steps per number; the loop is closed inside the head's chain, or (with
    ``across_channels``) through a rebalanced feedback, so every round crosses channels."""
    it = env.from_collection(list(numbers)).map(lambda n: (n, n, 0)).iterate(**iterate_args)
    step = it.map(collatz_step)
    feedback = step.filter(lambda r: r[1] != 1)
    it.close_with(feedback.rebalance() if across_channels else feedback)
    return step.filter(lambda r: r[1] == 1).map(lambda r: (r[0], r[2]))


@pytest.mark.parametrize("across_channels", [False, True], ids=["chained", "channels"])
@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_collatz_steps_per_number(parallelism, across_channels):
    env = local_env(parallelism)
    out = list(collatz_job(env, range(1, 400), across_channels)
               .execute_and_collect("collatz"))
    # 1 is already at 1: it goes round once, as the loop does one step before the test
    expected = {n: collatz_steps(n) for n in range(2, 400)}
    got = dict(out)
    assert len(out) == len(got)               # each number leaves the loop once
    assert {n: s for n, s in got.items() if n != 1} == expected


# -- connected components --------------------------------------------------------------
def connected_components_job(env, adjacency):
    it = env.from_collection([(v, v) for v in adjacency]).map(tuple).iterate()
    updates = it.key_by(lambda r: r[0]).process(MinLabel(adjacency))
    it.close_with(updates.filter(lambda r: r[0] == "loop").map(lambda r: (r[1], r[2]))
                  .key_by(lambda r: r[0]))          # keyed feedback
    return updates.filter(lambda r: r[0] == "out").map(lambda r: (r[1], r[2]))


def test_connected_components_over_a_keyed_feedback_equal_union_find():
    adjacency = random_graph(300, 260, seed=7)
    env = local_env(2)
    out = list(connected_components_job(env, adjacency).execute_and_collect("cc"))
    check_label_updates(out, adjacency)
    assert len(set(components(adjacency).values())) > 20  # many components


# -- a connected iteration ---------------------------------------------------------------
class Shorten(CoMapFunction):
    def map1(self, value):      # the input: a number becomes a word that long
        return "x" * value

    def map2(self, value):      # the feedback: a word one shorter
        return value[1:]


def test_a_connected_iteration_takes_feedback_of_its_own_type_on_the_second_input():
    env = local_env(2)
    it = env.from_collection([3, 1, 5, 0]).map(int).iterate()
    connected = it.with_feedback_type(Types.STRING())
    assert isinstance(connected, ConnectedIterativeStreams)
    words = connected.map(Shorten())
    connected.close_with(words.filter(lambda w: w != ""))
    out = list(words.execute_and_collect("connected"))
    assert sorted(out) == sorted(["x" * i for n in [3, 1, 5, 0] for i in range(n + 1)])


def test_a_forward_feedback_closes_the_loop_inside_the_heads_task():
    from flowray.runtime.graph.job_graph import build_job_graph
    for across_channels in (False, True):
        env = local_env(2)
        collatz_job(env, range(2, 10), across_channels).print()
        graph = build_job_graph(stream_graph_of(env))
        head = next(v for v in graph.vertices.values() if v.iteration_head)
        back = [e for e in graph.edges.values() if e.is_feedback]
        if across_channels:   # the head alone; a back edge from the body's task
            assert head.name == "Iteration" and len(back) == 1
            assert back[0].target_vertex == head.id and back[0].loop == head.id
        else:                 # head and body one chain: no back edge, no channel
            assert head.name.startswith("Iteration -> Map") and not back
            assert sum(len(t) for t in head.plan.local_feedback.values()) == 1


# -- back-pressure --------------------------------------------------------------------
@pytest.mark.parametrize("across_channels", [False, True], ids=["chained", "channels"])
def test_a_loop_that_outgrows_every_buffer_spills_instead_of_deadlocking(across_channels):
    # one credit per channel, one record per batch, a 1-byte spill threshold: each
    # record comes back twice per round for 9 rounds, far more than the channels hold,
    # so without the head taking its feedback while its output waits, the loop stops
    env = local_env(2, **{"flowray.channel.credits": "1", "flowray.channel.batch-size": "1",
                          "flowray.iteration.spill-threshold": "1b"})
    it = env.from_collection(list(range(8))).map(lambda n: (n, 9)).iterate()
    body = it.flat_map(lambda r: [(r[0], r[1] - 1), (r[0], r[1] - 1)] if r[1] else [])
    it.close_with(body.rebalance() if across_channels else body)
    leaves = body.filter(lambda r: r[1] == 0)
    client = env.execute_async("spill")
    result = client.get_job_execution_result()
    heads = [m["iteration"] for m in result.task_metrics if "iteration" in m]
    assert heads and sum(h["spilled_batches"] for h in heads) > 0
    assert sum(h["feedback_records"] for h in heads) == 8 * (2 ** 10 - 2)
    del leaves


# -- misuse --------------------------------------------------------------------------
def test_misuse_is_named_when_the_graph_is_built():
    env = local_env(2)
    numbers = env.from_collection([1, 2, 3])
    it = numbers.iterate()
    assert isinstance(it, IterativeStream)
    body = it.map(lambda n: n - 1)
    with pytest.raises(GraphError, match="does not come from iteration"):
        it.close_with(numbers.map(lambda n: n))
    with pytest.raises(GraphError, match="is the iteration itself"):
        it.close_with(it)
    it.close_with(body.filter(lambda n: n > 0))
    with pytest.raises(GraphError, match="already closed"):
        it.close_with(body)
    with pytest.raises(ValueError, match="max_wait_time_ms must be"):
        numbers.iterate(max_wait_time_ms=-1)

    open_loop = local_env(2)
    open_loop.from_collection([1]).iterate().map(lambda n: n).print()
    with pytest.raises(GraphError, match="never closed: call close_with"):
        stream_graph_of(open_loop)

    mismatch = local_env(2)
    it2 = mismatch.from_collection([1]).iterate()
    it2.close_with(it2.map(lambda n: n).set_parallelism(3))
    with pytest.raises(GraphError, match="parallelism 3, but the iteration head has 1.*input.s parallelism"):
        stream_graph_of(mismatch)


def test_an_iteration_cannot_run_as_batch_nor_nest():
    batch = local_env(1, **{"execution.runtime-mode": "BATCH"})
    collatz_job(batch, [3]).print()
    with pytest.raises(GraphError, match="needs STREAMING execution mode"):
        batch.execute("batch-loop")

    nested = local_env(1)
    outer = nested.from_collection([5]).iterate()
    inner = outer.map(lambda n: n).iterate()
    inner_body = inner.map(lambda n: n - 1)
    inner.close_with(inner_body.filter(lambda n: n % 2 == 1))
    outer.close_with(inner_body.filter(lambda n: n % 2 == 0 and n > 0))
    with pytest.raises(GraphError, match="nested iterations are not supported"):
        nested.execute("nested")


def test_a_bounded_loop_in_automatic_mode_runs_streaming():
    env = local_env(2, **{"execution.runtime-mode": "AUTOMATIC"})
    out = dict(collatz_job(env, range(2, 50)).execute_and_collect("auto"))
    assert out == {n: collatz_steps(n) for n in range(2, 50)}


def test_max_wait_time_keeps_flinks_meaning_for_a_loop_that_ends_on_its_own():
    env = local_env(2)
    out = dict(collatz_job(env, range(2, 60), max_wait_time_ms=2_000)
               .execute_and_collect("max-wait"))
    assert out == {n: collatz_steps(n) for n in range(2, 60)}
