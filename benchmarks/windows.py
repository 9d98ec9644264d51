"""Event-time tumbling windows: flowray vs Bytewax on the same events, in one invocation.

flowray at parallelism 1 and 2, with and without exactly-once checkpoints, against Bytewax
0.21's tumbling window (one worker), without and with recovery snapshots.

Events are ``(key, value, timestamp_ms)`` tuples generated once, in memory, from a seeded
RNG: timestamps advance at ``--rate`` events per event-time second, each plus a random
offset below ``--disorder-ms`` (< 1 s), so with a 1 s bounded out-of-orderness no event is
late for either system. Pipelines, per system:

  reduce:  key_by(key) -> tumbling 10 s event-time window -> reduce (sum of values, max ts)
  process: key_by(key) -> tumbling 10 s event-time window -> ProcessWindowFunction emitting
           (key, window start, count, sum, max ts); in Bytewax collect_window + map

Every run's per-(key, window) results are checked against a plain-Python reference (and so
against each other); a mismatch or a late event ends the benchmark with an error.

    python benchmarks/windows.py [--events 2000000] [--keys 10000] [--parallelisms 1,2]
                                 [--functions reduce,process] [--quick]
    python benchmarks/windows.py --profile --events 200000 --functions reduce --parallelisms 1
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

from flowray.common import Configuration, Duration, Time, WatermarkStrategy
from flowray.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter
from flowray.datastream.window import TumblingEventTimeWindows
from flowray.operators.sources import Source, SourceReader, SourceReaderContext

WINDOW_MS = 10_000
OUT_OF_ORDERNESS_MS = 1_000

Event = Tuple[str, int, int]
# per (key, window start): (count or None, sum, max timestamp); reduce results have no count
Results = Dict[Tuple[str, int], Tuple[Optional[int], int, int]]


# -- events and the reference ----------------------------------------------------------------
def make_events(n: int, keys: int, rate: int, disorder_ms: int, seed: int) -> List[Event]:
    """``n`` events over ``keys`` keys; event ``i`` has timestamp ``i * 1000 // rate`` plus a
    uniform delay in ``[0, disorder_ms)``: increasing, out of order by less than
    ``disorder_ms``."""
    rng = random.Random(seed)
    names = [f"k{k}" for k in range(keys)]
    rand = rng.random
    return [(names[int(rand() * keys)], int(rand() * 100),
             i * 1000 // rate + int(rand() * disorder_ms)) for i in range(n)]


def reference(events: List[Event]) -> Dict[Tuple[str, int], List[int]]:
    """Plain Python: per (key, window start) [count, sum, max timestamp]."""
    acc: Dict[Tuple[str, int], List[int]] = {}
    for key, value, ts in events:
        w = (key, ts - ts % WINDOW_MS)
        a = acc.get(w)
        if a is None:
            acc[w] = [1, value, ts]
        else:
            a[0] += 1
            a[1] += value
            if ts > a[2]:
                a[2] = ts
    return acc


def expected_results(ref: Dict[Tuple[str, int], List[int]], function: str) -> Results:
    if function == "reduce":
        return {w: (None, s, m) for w, (c, s, m) in ref.items()}
    return {w: (c, s, m) for w, (c, s, m) in ref.items()}


def check(name: str, got: Results, count: int, expected: Results) -> Optional[str]:
    """``None`` if ``got`` equals ``expected`` (and every result was emitted once), else why."""
    if count != len(got):
        return f"{name}: {count} results for {len(got)} distinct (key, window) pairs"
    if got == expected:
        return None
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    wrong = [w for w in expected.keys() & got.keys() if expected[w] != got[w]]
    sample = ", ".join(f"{w}: got {got[w]} expected {expected[w]}" for w in sorted(wrong)[:3])
    return (f"{name}: {len(missing)} (key, window) results missing, {len(extra)} unexpected, "
            f"{len(wrong)} wrong of {len(expected)}" + (f" (e.g. {sample})" if sample else "")
            + (f"; missing e.g. {sorted(missing)[:3]}" if missing else ""))


# -- flowray -----------------------------------------------------------------------------------
class _StridedReader(SourceReader):
    """Every ``parallelism``-th event from ``index``, so that all subtasks advance through
    event time together (contiguous shares would hold subtask 1's windows open until
    subtask 0 ended)."""

    def __init__(self, events: List[Event], index: int, parallelism: int) -> None:
        self._events = events
        self._pos = index
        self._step = parallelism

    def poll_next(self, max_records: int) -> Optional[List[Event]]:
        pos, step = self._pos, self._step
        if pos >= len(self._events):
            return None
        batch = self._events[pos:pos + max_records * step:step]
        self._pos = pos + len(batch) * step
        return batch

    def snapshot_state(self) -> Any:
        return self._pos

    def restore_state(self, state: Any) -> None:
        self._pos = int(state)


class EventListSource(Source):
    """The pre-generated events (in memory, shipped with the job), strided over subtasks."""

    default_name = "Event List Source"

    def __init__(self, events: List[Event]) -> None:
        self.events = events

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return _StridedReader(self.events, context.subtask_index, context.parallelism)


class CountSumMax(ProcessWindowFunction):
    """All of a window's events at once: (key, window start, count, sum, max timestamp)."""

    def process(self, key, context, elements):
        n = s = 0
        m = -1
        for e in elements:
            n += 1
            s += e[1]
            if e[2] > m:
                m = e[2]
        return [(key, context.window().start, n, s, m)]


def reduce_events(a: Event, b: Event) -> Event:
    return (a[0], a[1] + b[1], a[2] if a[2] > b[2] else b[2])


class _CollectingWriter(SinkWriter):
    """Keeps each (key, window)'s result and the number of results; pickles them to a file
    at the end of input."""

    def __init__(self, path: str, function: str) -> None:
        self.path = path
        self.function = function
        self.count = 0
        self.results: Results = {}

    def write(self, element):
        self.write_batch([element])

    def write_batch(self, elements):
        self.count += len(elements)
        results = self.results
        if self.function == "reduce":
            for key, s, m in elements:  # the window is the one holding the latest event
                results[(key, m - m % WINDOW_MS)] = (None, s, m)
        else:
            for key, start, c, s, m in elements:
                results[(key, start)] = (c, s, m)

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((self.count, self.results), f)


class CollectingSink(Sink):
    default_name = "Collecting Sink"

    def __init__(self, folder: str, function: str) -> None:
        self.folder = folder
        self.function = function

    def create_writer(self, context):
        return _CollectingWriter(os.path.join(self.folder, f"{context.subtask_index}.pkl"),
                                 self.function)


def read_results(folder: str) -> Tuple[int, Results]:
    count, results = 0, {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            c, r = pickle.load(f)
        count += c
        results.update(r)
    return count, results


def flowray_config(parallelism: int, checkpoint_ms: Optional[int], checkpoints_dir: str,
                   local: bool = False) -> Configuration:
    config = Configuration({"parallelism.default": parallelism,
                            "execution.checkpointing.dir": checkpoints_dir})
    if local:
        config.set_string("execution.target", "local")
    if checkpoint_ms is not None:
        config.set_string("execution.checkpointing.interval", f"{checkpoint_ms} ms")
        config.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    return config


def build_flowray(env: StreamExecutionEnvironment, events: List[Event], function: str,
                  folder: str) -> None:
    strategy = (WatermarkStrategy
                .for_bounded_out_of_orderness(Duration.of_millis(OUT_OF_ORDERNESS_MS))
                .with_timestamp_assigner(lambda e, ts: e[2]))
    windowed = (env.from_source(EventListSource(events), strategy, "events")
                .key_by(lambda e: e[0])
                .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS))))
    if function == "reduce":
        out = windowed.reduce(reduce_events)
    else:
        out = windowed.process(CountSumMax())
    out.sink_to(CollectingSink(folder, function))


def run_flowray(events: List[Event], function: str, parallelism: int,
                checkpoint_ms: Optional[int], local: bool = False) -> dict:
    folder = tempfile.mkdtemp(prefix="flowray-bench-windows-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-windows-chk-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            flowray_config(parallelism, checkpoint_ms, checkpoints, local))
        build_flowray(env, events, function, folder)
        t0 = time.perf_counter()
        result = env.execute(f"bench-windows-{function}-p{parallelism}")
        wall = time.perf_counter() - t0
        running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
        count, results = read_results(folder)
        checkpoints_done = None
        if checkpoint_ms is not None:
            checkpoints_done = sum(1 for h in result.get_checkpoint_stats().get("history", [])
                                   if h["status"] == "COMPLETED")
        return {"wall_s": wall, "running_s": running, "count": count, "results": results,
                "checkpoints": checkpoints_done}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(checkpoints, ignore_errors=True)


# -- Bytewax -----------------------------------------------------------------------------------
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_FIXED_NOW = datetime(2000, 1, 1, tzinfo=timezone.utc)


def run_bytewax(events: List[Event], function: str, snapshot_ms: Optional[int]) -> dict:
    """Bytewax 0.21, one worker (``run_main``). The clock is Bytewax's EventClock with a 1 s
    wait and a fixed "system" time, i.e. the watermark is the latest event time minus 1 s
    (Flink's bounded out-of-orderness) and does not also advance with the wall clock while
    the events are replayed as fast as possible. (With EventClock's defaults, the wall clock
    and window close times as wake-up times, these 1970 timestamps made ~half the events
    late and Bytewax woke every key's window logic constantly: 7-8k events/s.) With
    ``snapshot_ms``: recovery on (an
    SQLite partition in a temp folder), a state snapshot every ``snapshot_ms``."""
    try:
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.operators.windowing import (EventClock, TumblingWindower,
                                                 collect_window, reduce_window)
        from bytewax.outputs import DynamicSink, StatelessSinkPartition
        from bytewax.recovery import RecoveryConfig, init_db_dir
        from bytewax.testing import TestingSource, run_main
    except ImportError:
        return {"skipped": "bytewax not installed (pip install -e '.[bench]')"}

    out: Dict[str, Any] = {"count": 0, "results": {}, "late": 0}

    class _Part(StatelessSinkPartition):
        def write_batch(self, items):
            out["count"] += len(items)
            results = out["results"]
            for key, c, s, m, start in items:
                results[(key, start)] = (c, s, m)

    class _LatePart(StatelessSinkPartition):
        def write_batch(self, items):
            out["late"] += len(items)

    class _Sink(DynamicSink):
        def __init__(self, part):
            self.part = part

        def build(self, step_id, worker_index, worker_count):
            return self.part()

    def reduced(key_wid_e):
        key, (wid, e) = key_wid_e
        return (key, None, e[1], e[2], wid * WINDOW_MS)

    def processed(key_wid_items):
        key, (wid, items) = key_wid_items
        n = s = 0
        m = -1
        for e in items:
            n += 1
            s += e[1]
            if e[2] > m:
                m = e[2]
        return (key, n, s, m, wid * WINDOW_MS)

    clock = EventClock(lambda e: _EPOCH + timedelta(milliseconds=e[2]),
                       wait_for_system_duration=timedelta(milliseconds=OUT_OF_ORDERNESS_MS),
                       now_getter=lambda: _FIXED_NOW, to_system_utc=lambda _: None)
    windower = TumblingWindower(length=timedelta(milliseconds=WINDOW_MS), align_to=_EPOCH)
    flow = Dataflow(f"bench-windows-{function}")
    s = op.input("inp", flow, TestingSource(events, batch_size=1000))
    keyed = op.key_on("key", s, lambda e: e[0])
    if function == "reduce":
        w = reduce_window("window", keyed, clock, windower, reduce_events)
        down = op.map("result", w.down, reduced)
    else:
        # collect_window buffers the window's events as a ProcessWindowFunction does;
        # ordered=False: no sorting by timestamp (flowray does not sort either)
        w = collect_window("window", keyed, clock, windower, ordered=False)
        down = op.map("process", w.down, processed)
    op.output("out", down, _Sink(_Part))
    op.output("late", w.late, _Sink(_LatePart))

    kwargs: Dict[str, Any] = {}
    db_dir = None
    if snapshot_ms is not None:
        from pathlib import Path
        db_dir = tempfile.mkdtemp(prefix="flowray-bench-bytewax-")
        init_db_dir(Path(db_dir), 1)
        kwargs = {"epoch_interval": timedelta(milliseconds=snapshot_ms),
                  "recovery_config": RecoveryConfig(Path(db_dir))}
    try:
        t0 = time.perf_counter()
        run_main(flow, **kwargs)
        wall = time.perf_counter() - t0
    finally:
        if db_dir:
            shutil.rmtree(db_dir, ignore_errors=True)
    return {"wall_s": wall, "running_s": wall, **out}


def profile_flowray(events: List[Event], function: str, parallelism: int, top: int) -> None:
    """One flowray run on the local executor (one process, a thread per subtask) with a
    cProfile per thread, merged; prints the top entries by cumulative and by self time."""
    import cProfile
    import io
    import pstats
    import threading

    profiles: List[Tuple[str, cProfile.Profile]] = []
    original_run = threading.Thread.run

    def profiled_run(self):
        prof = cProfile.Profile()
        profiles.append((self.name, prof))
        prof.enable()
        try:
            original_run(self)
        finally:
            prof.disable()

    threading.Thread.run = profiled_run
    try:
        r = run_flowray(events, function, parallelism, None, local=True)
    finally:
        threading.Thread.run = original_run
    ref = reference(events)
    problem = check("profiled run", r["results"], r["count"], expected_results(ref, function))
    print(f"profiled flowray {function} p={parallelism}, {len(events):,} events (local executor, "
          f"cProfile on): {len(events) / r['running_s']:,.0f} ev/s (tasks), "
          f"{'ok' if problem is None else 'WRONG: ' + problem}")
    # time blocked in locks/queues/sleeps is idle, not work: leave it out of the listings
    idle = r"^(?!.*(threading\.py|queue\.py|acquire|sleep|select|poll))"
    waits = ("threading.py", "queue.py", "acquire", "sleep", "select", "poll")
    print("busy time per thread (self time outside lock/queue waits):")
    busiest = None
    for name, prof in profiles:
        st = pstats.Stats(prof, stream=io.StringIO())
        busy = sum(v[2] for k, v in st.stats.items()
                   if not any(w in f"{k[0]}{k[2]}" for w in waits))
        print(f"  {name:<50} {busy:6.2f} s")
        if busiest is None or busy > busiest[0]:
            busiest = (busy, name, st)
    _, name, stats = busiest
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats.stream = buf
        stats.sort_stats(order).print_stats(idle, top)
        text = buf.getvalue()
        print(f"\n-- {name}: top {top} by {order} (waits left out) --")
        print(text[text.find("   ncalls"):].rstrip())


def run_reference(events: List[Event]) -> dict:
    t0 = time.perf_counter()
    ref = reference(events)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "running_s": wall, "ref": ref}


# -- main --------------------------------------------------------------------------------------
def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rate", type=int, default=20_000,
                    help="events per event-time second (default 20000: 2M events span 100 s)")
    ap.add_argument("--disorder-ms", type=int, default=800,
                    help="events are out of order by less than this (< 1000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--parallelisms", default="1,2")
    ap.add_argument("--functions", default="reduce,process")
    ap.add_argument("--checkpoint-ms", type=int, default=1000,
                    help="interval of the checkpointed runs (flowray: exactly-once "
                         "checkpoints; Bytewax: recovery snapshots); 0: no checkpointed runs")
    ap.add_argument("--no-bytewax", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="100,000 events, parallelism 1 only (a smoke test)")
    ap.add_argument("--profile", action="store_true",
                    help="instead: profile one flowray run (the first of --functions and "
                         "--parallelisms) on the local executor with cProfile")
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--json", default="benchmarks/results/windows.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.events = min(args.events, 100_000)
        args.parallelisms = "1"
    if not 0 < args.disorder_ms < OUT_OF_ORDERNESS_MS:
        ap.error(f"--disorder-ms must be in 1..{OUT_OF_ORDERNESS_MS - 1}")
    logging.basicConfig(level=logging.WARNING)
    n, keys = args.events, args.keys
    parallelisms = [int(p) for p in args.parallelisms.split(",") if p]
    functions = [f for f in args.functions.split(",") if f]
    for f in functions:
        if f not in ("reduce", "process"):
            ap.error(f"unknown function {f!r} (reduce, process)")
    checkpointing: List[Optional[int]] = [None]
    if args.checkpoint_ms:
        checkpointing.append(args.checkpoint_ms)

    t0 = time.perf_counter()
    events = make_events(n, keys, args.rate, args.disorder_ms, args.seed)
    gen_s = time.perf_counter() - t0
    if args.profile:
        profile_flowray(events, functions[0], parallelisms[0], args.profile_top)
        return

    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing
    ref_run = run_reference(events)
    ref = ref_run["ref"]
    windows = len({w for _, w in ref})
    print(f"generated {n:,} events in {gen_s:.1f} s (not timed); {len(ref):,} (key, window) "
          f"results over {windows} windows; plain-Python reference {ref_run['wall_s']:.2f} s",
          flush=True)

    rows: List[dict] = []
    errors: List[str] = []

    def record(name: str, system: str, function: str, parallelism: Optional[int],
               ckpt: Optional[int], r: dict) -> None:
        row = {"name": name, "system": system, "function": function,
               "parallelism": parallelism, "checkpoint_ms": ckpt}
        if "skipped" in r:
            row["skipped"] = r["skipped"]
            rows.append(row)
            return
        problem = check(name, r["results"], r["count"], expected_results(ref, function))
        if r.get("late"):
            problem = f"{name}: {r['late']} late events" + (f"; {problem}" if problem else "")
        if problem:
            errors.append(problem)
        row.update({"wall_s": r["wall_s"], "running_s": r["running_s"],
                    "eps_running": n / r["running_s"], "eps_wall": n / r["wall_s"],
                    "results": r["count"], "checkpoints": r.get("checkpoints"),
                    "correct": problem is None})
        rows.append(row)
        print(f"  {name:<44} {row['eps_running']:>10,.0f} ev/s (tasks) "
              f"{row['eps_wall']:>10,.0f} ev/s (wall)  "
              f"{'ok' if problem is None else 'WRONG: ' + problem}", flush=True)

    for function in functions:
        for ckpt in checkpointing:
            suffix = f", snapshot every {ckpt} ms" if ckpt else ""
            if not args.no_bytewax:
                record(f"{function}: bytewax 0.21 (1 worker){suffix}", "bytewax", function,
                       None, ckpt, run_bytewax(events, function, ckpt))
            for p in parallelisms:
                suffix = f", exactly-once every {ckpt} ms" if ckpt else ""
                record(f"{function}: flowray p={p}{suffix}", "flowray", function, p, ckpt,
                       run_flowray(events, function, p, ckpt))

    def find(system, function, ckpt, p=None):
        return next((r for r in rows if r["system"] == system and r["function"] == function
                     and r["checkpoint_ms"] == ckpt and r["parallelism"] == p
                     and "skipped" not in r), None)

    ck = f"{args.checkpoint_ms} ms" if args.checkpoint_ms else "-"
    print(f"\ntumbling {WINDOW_MS // 1000} s event-time windows, {n:,} events, {keys:,} keys, "
          f"{args.rate:,} events per event-time s, disorder < {args.disorder_ms} ms, "
          f"1 s bounded out-of-orderness; {len(ref):,} window results\n")
    header = (f"{'function':<9}{'flowray run':<26}{'flowray ev/s':>14}{'bytewax ev/s':>14}"
              f"{'ratio':>8}{'ratio wall':>12}{'vs unchkd':>11}{'ckpts':>7}{'correct':>9}")
    print(header)
    print("-" * len(header))
    for r in rows:
        if r["system"] != "flowray" or "skipped" in r:
            continue
        bw = find("bytewax", r["function"], r["checkpoint_ms"])
        base = find("flowray", r["function"], None, r["parallelism"])
        run = f"p={r['parallelism']}" + (f", checkpoint {ck}" if r["checkpoint_ms"] else "")
        bw_eps = f"{bw['eps_running']:,.0f}" if bw else "-"
        ratio = f"{r['eps_running'] / bw['eps_running']:.2f}x" if bw else "-"
        ratio_wall = f"{r['eps_wall'] / bw['eps_wall']:.2f}x" if bw else "-"
        vs = f"{r['eps_running'] / base['eps_running']:.2f}x" if base else "-"
        r.update({"bytewax_eps": bw["eps_running"] if bw else None,
                  "vs_bytewax": r["eps_running"] / bw["eps_running"] if bw else None,
                  "vs_bytewax_wall": r["eps_wall"] / bw["eps_wall"] if bw else None,
                  "vs_unchecked": r["eps_running"] / base["eps_running"] if base else None})
        ckpts = "-" if r["checkpoints"] is None else r["checkpoints"]
        print(f"{r['function']:<9}{run:<26}{r['eps_running']:>14,.0f}{bw_eps:>14}{ratio:>8}"
              f"{ratio_wall:>12}{vs:>11}{ckpts:>7}{str(r['correct']):>9}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']}: skipped: {r['skipped']}")
    print(f"\nflowray ev/s: events / longest task run time (deploy excluded, as in "
          f"throughput.py); bytewax ev/s: events / run_main wall time (same checkpointing: "
          f"none, or recovery snapshots every {ck}); ratio wall: flowray including job "
          f"submission and actor start-up. Event generation is not timed for either.")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"events": n, "keys": keys, "rate": args.rate, "disorder_ms": args.disorder_ms,
                   "seed": args.seed, "window_results": len(ref),
                   "reference_s": ref_run["wall_s"], "rows": rows}, f, indent=1)
    if errors:
        sys.exit("wrong results:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
