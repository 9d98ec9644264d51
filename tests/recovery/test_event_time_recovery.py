"""Timers and windows are state: kill task actors of event-time jobs on a real local Ray and
compare the committed output with a reference computed in plain Python.

* Timers: a keyed process function registers event-time timers (many records share one,
  de-duplicated per key and timestamp) and one processing-time timer per key. The task
  holding them is killed after a completed checkpoint; every timer must fire exactly once.
  On the heap backend and on RocksDB with incremental checkpoints.
* Windows: tumbling, sliding and session windows over out-of-order input (disorder below
  the bounded out-of-orderness, so nothing is late), three random task kills; each
  window's committed output must equal the reference exactly.
* Late data: records far behind the watermark go to the late-data side output, exactly
  once across kills (a punctuated watermark makes "late" the same in every replay).
"""

import random
from collections import Counter

import pytest

from flowray import JobStatus, StreamExecutionEnvironment
from flowray.common import Duration, Time, WatermarkStrategy
from flowray.common.watermark_strategy import WatermarkGenerator
from flowray.datastream import KeyedProcessFunction, OutputTag, ProcessWindowFunction
from flowray.datastream.state import ValueStateDescriptor
from flowray.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from flowray.testing import (
    PAUSE,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

pytestmark = pytest.mark.timeout(400)

RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms"}
ROCKSDB_INCREMENTAL = {"state.backend.type": "rocksdb",
                       "execution.checkpointing.incremental": "true"}


def _env(tmp_path, extra=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    for key, value in {**RESTARTS, "execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
                       "pipeline.auto-watermark-interval": "50 ms",
                       **(extra or {})}.items():
        conf.set_string(key, value)
    env.enable_checkpointing(200)
    env.set_parallelism(2)
    return env


def _event_time(strategy_bound_ms):
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(strategy_bound_ms)).with_timestamp_assigner(_timestamp_of)


def _timestamp_of(event, record_timestamp):
    return event[1]


def _key_of(event):
    return event[0]


def _completed_checkpoints(client):
    try:
        return client.get_checkpoint_stats()["counts"].get("completed", 0)
    except Exception:  # noqa: BLE001 - the job master is busy with a failover
        return 0


def _kill_keyed_task_after_checkpoint(client, sink, injector, committed_at_least, vertices):
    """Wait for committed output, a completed checkpoint and all ``vertices`` deployed,
    then kill a subtask that is not a source (the keyed operators with their timers and
    windows)."""
    names = {}

    def reached():
        nonlocal names
        status = client.get_job_status()
        if status.is_globally_terminal_state():
            raise AssertionError("the job ended before the kill")
        if status is not JobStatus.RUNNING or not (
                len(sink.committed()) >= committed_at_least and _completed_checkpoints(client)):
            return False
        names = injector.task_actor_names()
        return len({k.split(":")[0] for k in names}) == vertices
    wait_until(reached, 180, f"{committed_at_least} committed records and a checkpoint",
               poll_s=0.1)
    first_vertex = min(int(k.split(":")[0][1:]) for k in names)
    keyed = sorted(k for k in names if int(k.split(":")[0][1:]) != first_vertex)
    return injector.kill(injector.rng.choice(keyed))


# -- timers ------------------------------------------------------------------------------

KEYS = 20
N_TIMER_EVENTS = 30_000


class TimersEverywhere(KeyedProcessFunction):
    """Per record: an event-time timer at the next full second (shared by the key's
    records of that second). Per key, once: a processing-time timer 300 ms ahead."""

    def open(self, runtime_context):
        self.proc_registered = runtime_context.get_state(ValueStateDescriptor("proc"))

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer((value[1] // 1000 + 1) * 1000)
        if self.proc_registered.value() is None:
            self.proc_registered.update(True)
            ctx.timer_service().register_processing_time_timer(
                ctx.timer_service().current_processing_time() + 300)

    def on_timer(self, timestamp, ctx):
        if ctx.time_domain().name == "EVENT_TIME":
            yield ("event", ctx.get_current_key(), timestamp)
        else:
            yield ("processing", ctx.get_current_key())


def _timer_items():
    rng = random.Random(12)
    items = []
    for i in range(N_TIMER_EVENTS):
        if i and i % 500 == 0:
            items.append(PAUSE(0.05))   # a few seconds of run time to be killed in
        ts = i * 10 + rng.randrange(0, 400)  # disorder below the 500 ms bound
        items.append((f"k{i % KEYS}", ts))
    return items


def _timer_reference(items):
    events = [e for e in items if isinstance(e, tuple)]
    fired = {("event", k, (ts // 1000 + 1) * 1000) for k, ts in events}
    fired |= {("processing", k) for k, _ in events}
    return Counter(fired)


@pytest.mark.parametrize("backend", [{}, ROCKSDB_INCREMENTAL], ids=["heap", "rocksdb-incremental"])
def test_every_timer_fires_exactly_once_across_a_kill(ray_session, tmp_path, backend):
    items = _timer_items()
    env = _env(tmp_path, backend)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.from_source(source, _event_time(500), "events")
        .key_by(_key_of).process(TimersEverywhere()).name("timers")
        .sink_to(sink))
    client = env.execute_async("timers")
    injector = FaultInjector(client, random.Random(5))
    _kill_keyed_task_after_checkpoint(client, sink, injector, committed_at_least=200,
                                      vertices=2)
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 1 and result.outcome.restarts >= 1
    committed = Counter(sink.committed())
    expected = _timer_reference(items)
    assert committed == expected, _diff(committed, expected)
    assert sink.pending() == []


# -- windows -----------------------------------------------------------------------------

N_WINDOW_EVENTS = 40_000
WINDOW_KEYS = 50


class CountPerWindow(ProcessWindowFunction):
    def __init__(self, kind):
        self.kind = kind

    def process(self, key, context, elements):
        w = context.window()
        yield (self.kind, key, w.start, w.end, len(list(elements)), sum(e[2] for e in elements))


def _window_items():
    """Events whose two halves (one per source subtask) span the same event time, so the
    watermark advances all along the run and windows fire (and commit) as it goes."""
    rng = random.Random(99)
    events, offset = [], 0
    for i in range(N_WINDOW_EVENTS):
        if rng.random() < 0.002:
            offset += 5_000                  # a gap in event time: every session ends
        key = f"k{rng.randrange(WINDOW_KEYS)}"
        ts = offset + i * 5 + rng.randrange(0, 700)  # disorder below the 1 s bound
        events.append((key, ts, rng.randrange(100)))
    items = []
    for i, event in enumerate(events[0::2] + events[1::2]):
        if i and i % 200 == 0:
            items.append(PAUSE(0.05))        # ~10 s of run time to be killed in
        items.append(event)
    return items


def _windows_reference(events):
    out = Counter()

    def add(kind, key, start, end, values):
        out[(kind, key, start, end, len(values), sum(values))] += 1

    by_window = {}
    for k, ts, v in events:
        by_window.setdefault(("tumbling", k, ts // 2000 * 2000, ts // 2000 * 2000 + 2000),
                             []).append(v)
        last = ts // 1000 * 1000
        for start in range(last, ts - 3000, -1000):
            by_window.setdefault(("sliding", k, start, start + 3000), []).append(v)
    for (kind, k, s, e), values in by_window.items():
        add(kind, k, s, e, values)
    per_key = {}
    for k, ts, v in events:
        per_key.setdefault(k, []).append((ts, v))
    for k, evs in per_key.items():
        evs.sort()
        start, end, values = evs[0][0], evs[0][0] + 400, [evs[0][1]]
        for ts, v in evs[1:]:
            if ts <= end:  # windows that touch merge, as in Flink
                end, values = max(end, ts + 400), values + [v]
            else:
                add("session", k, start, end, values)
                start, end, values = ts, ts + 400, [v]
        add("session", k, start, end, values)
    return out


def test_windows_are_exactly_once_across_three_kills(ray_session, tmp_path):
    items = _window_items()
    env = _env(tmp_path)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    keyed = env.from_source(source, _event_time(1000), "events").key_by(_key_of)
    tumbling = keyed.window(TumblingEventTimeWindows.of(Time.seconds(2))) \
        .process(CountPerWindow("tumbling")).name("tumbling")
    sliding = keyed.window(SlidingEventTimeWindows.of(Time.seconds(3), Time.seconds(1))) \
        .process(CountPerWindow("sliding")).name("sliding")
    sessions = keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(400))) \
        .process(CountPerWindow("session")).name("sessions")
    tumbling.union(sliding, sessions).sink_to(sink)
    client = env.execute_async("windows")
    injector = FaultInjector(client, random.Random(41))
    expected = _windows_reference([e for e in items if isinstance(e, tuple)])
    total = sum(expected.values())
    for fraction in (0.1, 0.3, 0.5):
        _kill_keyed_task_after_checkpoint(client, sink, injector,
                                          committed_at_least=int(fraction * total),
                                          vertices=5)
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 3 and result.outcome.restarts >= 3
    committed = Counter(sink.committed())
    assert committed == expected, _diff(committed, expected)


def _diff(got, want):
    extra, missing = got - want, want - got
    return (f"{sum(missing.values())} missing (e.g. {sorted(missing)[:5]}), "
            f"{sum(extra.values())} extra (e.g. {sorted(extra)[:5]})")


# -- late data ---------------------------------------------------------------------------

LATE = OutputTag("late")
LATE_BOUND_MS = 500


class Punctuated(WatermarkGenerator):
    """Bounded out-of-orderness, emitted after every event: with one source subtask the
    watermark a record meets downstream depends only on the records before it, so which
    records are late is the same in every run and every replay."""

    def __init__(self):
        self.highest = None

    def on_event(self, event, event_timestamp, output):
        if self.highest is None or event_timestamp > self.highest:
            self.highest = event_timestamp
            output.emit_watermark(max(0, self.highest - LATE_BOUND_MS - 1))

    def on_periodic_emit(self, output):
        pass


def _late_items():
    rng = random.Random(7)
    items = []
    for i in range(20_000):
        if i and i % 200 == 0:
            items.append(PAUSE(0.05))
        ts = 10_000 + i * 5 + rng.randrange(0, 300)
        if rng.random() < 0.01:
            ts -= 5_000                   # far behind: its window is gone
        items.append((f"k{rng.randrange(20)}", ts, rng.randrange(100)))
    return items


def _late_reference(events):
    windows, late, watermark = Counter(), Counter(), -1
    sums = {}
    for k, ts, v in events:
        start = ts // 2000 * 2000
        if start + 2000 - 1 <= watermark:
            late[(k, ts, v)] += 1
        else:
            n, s = sums.get((k, start), (0, 0))
            sums[(k, start)] = (n + 1, s + v)
        watermark = max(watermark, ts - LATE_BOUND_MS - 1)
    for (k, start), (n, s) in sums.items():
        windows[("window", k, start, n, s)] += 1
    return windows, late


class CountAndSum(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [e[2] for e in elements]
        yield ("window", key, context.window().start, len(values), sum(values))


def test_late_data_goes_to_the_side_output_exactly_once_across_kills(ray_session, tmp_path):
    items = _late_items()
    env = _env(tmp_path)
    source = TestingSource(items, ledger_dir=str(tmp_path / "faults"))
    windows_sink = TransactionalTestingSink(str(tmp_path / "windows"))
    late_sink = TransactionalTestingSink(str(tmp_path / "late"))
    strategy = WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(_timestamp_of)
    windows = (env.from_source(source, strategy, "events").set_parallelism(1)
               .key_by(_key_of)
               .window(TumblingEventTimeWindows.of(Time.seconds(2)))
               .side_output_late_data(LATE)
               .process(CountAndSum()).name("windows"))
    windows.sink_to(windows_sink)
    windows.get_side_output(LATE).sink_to(late_sink)
    client = env.execute_async("late-data")
    injector = FaultInjector(client, random.Random(3))
    expected_windows, expected_late = _late_reference(
        [e for e in items if isinstance(e, tuple)])
    for fraction in (0.2, 0.5):
        _kill_keyed_task_after_checkpoint(
            client, windows_sink, injector,
            committed_at_least=int(fraction * sum(expected_windows.values())), vertices=2)
    result = client.wait(timeout_s=300)

    assert len(injector.killed) == 2 and result.outcome.restarts >= 2
    assert sum(expected_late.values()) > 50
    committed = Counter(windows_sink.committed())
    assert committed == expected_windows, _diff(committed, expected_windows)
    late = Counter(late_sink.committed())
    assert late == expected_late, _diff(late, expected_late)
