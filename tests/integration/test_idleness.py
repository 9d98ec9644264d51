"""Idle source splits (``WatermarkStrategy.with_idleness``) end to end on the in-process
executor: an idle split does not stall event time, and once it is active again it holds the
watermark back as any other split. Every step waits on an event (a window in the output, a
gate file, a count of polls), never on elapsed time.

Split 0 and split 1 are the two subtasks of one source. Records of key ``"hb"`` are
heartbeats that keep a split active; they are filtered out before the windows.
"""

import os
import threading
from collections import Counter

import pytest

from flowray.common import Configuration, Duration, Time, WatermarkStrategy
from flowray.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from flowray.datastream.window import TumblingEventTimeWindows
from flowray.operators.sources import Source, SourceReader
from flowray.testing import wait_until

pytestmark = pytest.mark.timeout(120)

HEARTBEAT_EVERY_MS = 20


class _GatedReader(SourceReader):
    def __init__(self, gates: str, index: int, clock_ms) -> None:
        self.gates, self.index, self.now = gates, index, clock_ms
        self.phase = 0
        self.last_beat = 0.0
        self.beats = 0

    def _open(self, name: str) -> bool:
        return os.path.exists(os.path.join(self.gates, name))

    def _beat(self, ts: int):
        # the count is written one poll late: a beat counted has been emitted downstream
        with open(os.path.join(self.gates, f"beats-{self.index}"), "w") as f:
            f.write(str(self.beats))
        now = self.now()
        if now - self.last_beat < HEARTBEAT_EVERY_MS:
            return []
        self.last_beat = now
        self.beats += 1
        return [("hb", ts, 0)]

    def poll_next(self, max_records):
        if self._open("stop"):
            return None
        if self.index == 0:
            if self.phase == 0:
                self.phase = 1
                return [("a", ts, 1) for ts in range(0, 10_000, 10)]
            if self.phase == 1:
                if not self._open("go0"):
                    return []                      # idle
                self.phase = 2
                return [("a", ts, 1) for ts in range(10_000, 30_000, 10)]
            return self._beat(29_999)
        if not self._open("go1"):
            return []                              # idle from the start
        return self._beat(10_500)


class GatedSplits(Source):
    def __init__(self, gates: str) -> None:
        self.gates = gates

    def create_reader(self, context):
        import time

        return _GatedReader(self.gates, context.subtask_index,
                            lambda: time.monotonic() * 1000.0)


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, context.window().start, len(list(elements)))


def _beats(gates, index):
    try:
        with open(os.path.join(gates, f"beats-{index}")) as f:
            return int(f.read() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def test_an_idle_split_does_not_stall_windows_and_holds_them_again_when_active(tmp_path):
    gates = str(tmp_path)
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("execution.target", "local")
        .set_string("pipeline.auto-watermark-interval", "50 ms"))
    env.set_parallelism(2)
    strategy = (WatermarkStrategy.for_monotonous_timestamps()
                .with_timestamp_assigner(lambda e, ts: e[1])
                .with_idleness(Duration.of_seconds(1)))
    windows = (env.from_source(GatedSplits(gates), strategy, "gated")
               .filter(lambda e: e[0] != "hb")
               .key_by(lambda e: e[0])
               .window(TumblingEventTimeWindows.of(Time.seconds(5)))
               .process(CountWindow()))
    collected = []
    results = windows.execute_and_collect("idleness")
    reader = threading.Thread(target=lambda: collected.extend(results), daemon=True)
    reader.start()
    try:
        # split 1 has sent nothing yet: once idle, split 0 alone moves event time
        wait_until(lambda: ("a", 0, 500) in collected, 60, "window [0, 5 s) while split 1 is idle")
        assert ("a", 5_000, 500) not in collected   # split 0's watermark is 9,999 - 1

        # split 1 wakes up with event time 10,500 while split 0 is idle: it alone decides
        open(os.path.join(gates, "go1"), "w").close()
        wait_until(lambda: ("a", 5_000, 500) in collected, 60,
                   "window [5 s, 10 s) from split 1's watermark")

        # split 0 runs ahead to 29,999; split 1, active at 10,500, holds the watermark back
        open(os.path.join(gates, "go0"), "w").close()
        beats_at_go = _beats(gates, 1)
        wait_until(lambda: _beats(gates, 0) >= 100 and _beats(gates, 1) >= beats_at_go + 100,
                   60, "both splits active for 100 heartbeats each")
        early = [w for w in collected if w[1] >= 10_000]
        assert early == [], f"windows fired past split 1's watermark: {early}"
    finally:
        open(os.path.join(gates, "stop"), "w").close()
    reader.join(60)
    assert not reader.is_alive()
    expected = Counter(("a", start, 500) for start in range(0, 30_000, 5_000))
    assert Counter(collected) == expected
