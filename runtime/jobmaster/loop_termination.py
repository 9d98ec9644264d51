"""When is a loop empty? Termination detection for an iteration whose input has ended
(docs/iterations.md).

Records travelling round a loop are invisible to any single task, so the job master
decides, by Mattern's double collect of counters: every task of the loop (its heads and
its body's tasks) counts the records it wrote into the loop's channels and the records it
read from them, and a head says whether it is idle (its regular input ended, its queue
empty). A *wave* reads every task's counters, each on the task's own thread between two
records. The loop has ended when two waves in a row, the second started after the first
was complete, read the same counters from every task, every head idle, and as many
records received as sent.

Why that suffices: between a task's two reads it did nothing (its counters did not move),
and both waves' reads of every task bracket the moment the first wave ended; at that
moment every head was idle, every body task between records, and no record was on a
channel (each one sent was received). A body task acts only on a record it receives and a
head only on its input or queue, so nothing can move again.

>>> from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
>>> from flowray.runtime.messages import LoopCounters
>>> head, body = SubtaskId("v2", 0), SubtaskId("v3", 0)
>>> d = LoopTerminationDetector("v2", [head, body], [head])
>>> w = d.start_wave()
>>> d.on_counters(w, head, LoopCounters(5, 4, True)), d.on_counters(w, body, LoopCounters(4, 5, True))
(None, <WaveResult.QUIET: 'quiet'>)
>>> w = d.start_wave()
>>> _ = d.on_counters(w, body, LoopCounters(4, 5, True))
>>> d.on_counters(w, head, LoopCounters(5, 4, True))
<WaveResult.TERMINATED: 'terminated'>
"""

from __future__ import annotations

import enum
from typing import Dict, Iterable, Optional

from flowray.runtime.graph.execution_graph import ExecutionGraph, SubtaskId
from flowray.runtime.messages import LoopCounters

__all__ = ["LoopTerminationDetector", "WaveResult", "loop_detectors"]


class WaveResult(enum.Enum):
    """What a complete wave found."""

    #: a head is busy, or records are on their way: wait for a head to be idle again
    BUSY = "busy"
    #: every head idle and nothing in transit: one more wave must read the same
    QUIET = "quiet"
    #: two waves in a row read the same quiet counters: the loop has ended
    TERMINATED = "terminated"


class LoopTerminationDetector:
    """The job master's side of one iteration's termination detection. Contract:
    :meth:`start_wave` when no wave is under way, then :meth:`on_counters` with every
    task's answer; answers of another wave are ignored. :meth:`reset` after a failover
    (the tasks start counting again)."""

    def __init__(self, iteration: str, tasks: Iterable[SubtaskId],
                 heads: Iterable[SubtaskId]) -> None:
        self.iteration = iteration
        self.tasks = frozenset(tasks)
        self.heads = frozenset(heads)
        self._wave = 0
        self._answers: Dict[SubtaskId, LoopCounters] = {}
        self._in_flight = False
        self._previous: Optional[Dict[SubtaskId, LoopCounters]] = None
        self.terminated = False
        #: a wave is wanted (a head said it is idle, or the last wave was quiet)
        self.wanted = False

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def start_wave(self) -> int:
        if self._in_flight:
            raise RuntimeError(f"a wave of iteration {self.iteration} is under way")
        self._wave += 1
        self._answers = {}
        self._in_flight = True
        self.wanted = False
        return self._wave

    def on_counters(self, wave: int, task: SubtaskId,
                    counters: LoopCounters) -> Optional[WaveResult]:
        """``task``'s answer to ``wave``; the result once every task answered."""
        if wave != self._wave or not self._in_flight or task not in self.tasks:
            return None
        self._answers[task] = counters
        if len(self._answers) < len(self.tasks):
            return None
        self._in_flight = False
        answers, self._answers = self._answers, {}
        quiet = (all(answers[h].idle for h in self.heads)
                 and sum(c.sent for c in answers.values())
                 == sum(c.received for c in answers.values()))
        previous, self._previous = self._previous, (answers if quiet else None)
        if not quiet:
            return WaveResult.BUSY
        if previous == answers:
            self.terminated = True
            return WaveResult.TERMINATED
        self.wanted = True   # confirm with a second wave
        return WaveResult.QUIET

    def reset(self) -> None:
        self._in_flight = False
        self._answers = {}
        self._previous = None
        self.terminated = False
        self.wanted = False


def loop_detectors(graph: ExecutionGraph) -> Dict[str, LoopTerminationDetector]:
    """A detector for each iteration whose loop goes through channels (a loop closed
    inside its head's chain ends on its own), by the head's vertex id."""
    members: Dict[str, set] = {}
    job_graph = getattr(graph, "job_graph", None)   # (a test's stand-in may have none)
    for edge in job_graph.edges.values() if job_graph is not None else ():
        if edge.loop is not None:
            members.setdefault(edge.loop, set()).update(
                (edge.source_vertex, edge.target_vertex))
    out = {}
    for head, vertices in members.items():
        tasks = [s for s in graph.subtasks() if s.vertex_id in vertices]
        out[head] = LoopTerminationDetector(
            head, tasks, [s for s in tasks if s.vertex_id == head])
    return out
