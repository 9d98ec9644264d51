"""The scheduler's termination detection of a loop that goes through channels: an idle
head asks for a wave, two quiet waves end the loop's heads, a busy wave waits for the next
idle head, and a failover starts the count again."""

from __future__ import annotations

from flowray.runtime.graph.execution_graph import ExecutionGraph
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.messages import LoopCounters, TaskResult, TaskState
from flowray.testing.jobmaster import RecordingDeployer
from tests.support.environments import local_env, stream_graph_of
from tests.support.scheduler import SchedulerHarness, scheduler_config


def _loop_graph():
    env = local_env(2)
    it = env.from_collection([1, 2]).map(lambda n: (n, 3)).iterate()
    body = it.map(lambda r: (r[0], r[1] - 1))
    it.close_with(body.filter(lambda r: r[1] > 0).rebalance())   # through channels
    body.filter(lambda r: r[1] == 0).print()
    return ExecutionGraph(build_job_graph(stream_graph_of(env)))


class Harness(SchedulerHarness):
    def result(self, subtask, state, failure=None, attempt=None, metrics=None):
        self.sched.on_task_result(self.sched.attempt if attempt is None else attempt,
                                  TaskResult(subtask, state, failure, metrics or {}))


def _answer(h, wave, counters):
    tasks, iteration, wave_id = wave
    for t in tasks:
        h.sched.on_loop_counters(h.sched.attempt, t, iteration, wave_id, counters(t))


def test_two_quiet_waves_end_the_heads_and_a_busy_one_waits_for_an_idle_head():
    eg = _loop_graph()
    h = Harness(eg, scheduler_config(), RecordingDeployer(), "loops")
    (detector,) = h.sched.loops.values()
    heads = sorted(detector.heads)
    assert len(heads) == 2 and len(detector.tasks) == 4   # heads and the body's tasks
    quiet = lambda t: LoopCounters(6, 6, True)                        # noqa: E731
    h.sched.on_loop_idle(h.sched.attempt, heads[0])
    (wave,) = h.deployer.loop_waves
    # a head still busy: no second wave until a head says it is idle again
    _answer(h, wave, lambda t: LoopCounters(6, 6, t != heads[1]))
    assert len(h.deployer.loop_waves) == 1 and not h.deployer.loop_ends
    h.sched.on_loop_idle(h.sched.attempt, heads[1])
    _answer(h, h.deployer.loop_waves[-1], quiet)          # quiet: confirm with another
    assert len(h.deployer.loop_waves) == 3 and not h.deployer.loop_ends
    _answer(h, h.deployer.loop_waves[-1], quiet)
    assert h.deployer.loop_ends == [heads]


def test_answers_of_an_attempt_before_a_failover_are_not_counted():
    eg = _loop_graph()
    h = Harness(eg, scheduler_config(), RecordingDeployer(), "loops-failover")
    (detector,) = h.sched.loops.values()
    heads = sorted(detector.heads)
    h.sched.on_loop_idle(h.sched.attempt, heads[0])
    stale = h.deployer.loop_waves[-1]
    old_attempt = h.sched.attempt
    h.fail(heads[1])
    h.advance(10_000)                                     # the restart's delay
    assert h.sched.attempt > old_attempt and not detector.in_flight
    for t in stale[0]:
        h.sched.on_loop_counters(old_attempt, t, stale[1], stale[2], LoopCounters(1, 1, True))
    assert not h.deployer.loop_ends
    assert h.sched.states[heads[0]] is TaskState.RUNNING
