"""Event-time windows: flowray against a one-process Python loop doing the same windowing
over the same events, and against an earlier flowray revision, in one invocation.

Windows: tumbling 10 s, and sliding 10 s every 5 s. Functions: ``reduce`` (sum of values,
max timestamp), ``aggregate`` (an AggregateFunction: count, sum, max timestamp) and
``process`` (a ProcessWindowFunction over the buffered events). Keyed by the event's key.

Events are ``(key, value, timestamp_ms)``, made in chunks of 10,000 from a seeded numpy
generator: timestamps advance at ``--rate`` events per event-time second, each plus a
delay below ``--disorder-ms`` (< the 1 s bounded out-of-orderness, so none is late). The
flowray source makes its chunks itself (nothing is shipped with the job); the loop and the
reference make the same chunks.

The loop is what a Python programmer would write without a stream processor: per event,
its windows' starts, a dict of panes per window start, a watermark (the latest timestamp
minus 1 s) advanced every 1,000 events, and the panes of every window the watermark
passed evaluated and dropped. Every run's results (the loop's too) are compared with a
plain-Python reference, as multisets of result tuples; a mismatch ends the benchmark with
an error.

``--before REV`` runs the same flowray jobs on git revision REV (exported, in a process of
its own), for "after / before" ratios. Rounds alternate the runs; medians are reported.

    python benchmarks/windows.py [--events 20000000] [--rounds 3] [--before REV]
                                 [--windows tumbling,sliding]
                                 [--functions reduce,aggregate,process] [--parallelism 1]
    python benchmarks/windows.py --quick          # a smoke test, 200,000 events
    python benchmarks/windows.py --profile --events 300000 --functions reduce
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from flowray.common import Configuration, Duration, Time, WatermarkStrategy
from flowray.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter
from flowray.datastream.functions import AggregateFunction
from flowray.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from flowray.operators.sources import Source, SourceReader, SourceReaderContext

WINDOW_MS = 10_000
SLIDE_MS = 5_000
OUT_OF_ORDERNESS_MS = 1_000
CHUNK = 10_000
WINDOWS = ("tumbling", "sliding")
FUNCTIONS = ("reduce", "aggregate", "process")

Event = Tuple[str, int, int]


# -- events --------------------------------------------------------------------------------
class EventSpec:
    """The events of a run: ``n`` of them over ``keys`` keys, in chunks made on demand."""

    def __init__(self, n: int, keys: int, rate: int, disorder_ms: int, seed: int) -> None:
        self.n, self.keys, self.rate, self.disorder_ms, self.seed = n, keys, rate, disorder_ms, seed

    @property
    def chunks(self) -> int:
        return (self.n + CHUNK - 1) // CHUNK

    def chunk(self, c: int) -> List[Event]:
        first = c * CHUNK
        size = min(CHUNK, self.n - first)
        rng = np.random.default_rng((self.seed, c))
        names = _names(self.keys)
        keys = rng.integers(0, self.keys, size).tolist()
        values = rng.integers(0, 100, size).tolist()
        ts = ((np.arange(first, first + size, dtype=np.int64) * 1000) // self.rate
              + rng.integers(0, self.disorder_ms, size)).tolist()
        return list(zip([names[k] for k in keys], values, ts))

    def __iter__(self) -> Iterator[List[Event]]:
        return (self.chunk(c) for c in range(self.chunks))


_NAMES: Dict[int, List[str]] = {}


def _names(keys: int) -> List[str]:
    names = _NAMES.get(keys)
    if names is None:
        names = _NAMES[keys] = [f"k{k}" for k in range(keys)]
    return names


def window_starts(window: str, ts: int) -> range:
    slide = WINDOW_MS if window == "tumbling" else SLIDE_MS
    last = ts - ts % slide
    return range(last, ts - WINDOW_MS, -slide)


# -- the reference and the loop ---------------------------------------------------------------
Results = collections.Counter


def reference(spec: EventSpec, window: str, function: str) -> Results:
    """Plain Python, no streaming: every (key, window)'s count, sum and max timestamp, as
    the function's result tuples."""
    acc: Dict[Tuple[str, int], List[int]] = {}
    for chunk in spec:
        for key, value, ts in chunk:
            for s in window_starts(window, ts):
                a = acc.get((key, s))
                if a is None:
                    acc[(key, s)] = [1, value, ts]
                else:
                    a[0] += 1
                    a[1] += value
                    if ts > a[2]:
                        a[2] = ts
    out: Results = collections.Counter()
    for (key, s), (c, v, m) in acc.items():
        out[result_tuple(function, key, s, c, v, m)] += 1
    return out


def result_tuple(function: str, key: str, start: int, count: int, total: int,
                 latest: int) -> tuple:
    if function == "reduce":
        return (key, total, latest)
    if function == "aggregate":
        return (key, count, total, latest)
    return (key, start, count, total, latest)


def run_loop(spec: EventSpec, window: str, function: str) -> dict:
    """The same windowing in one Python process (see the module docstring)."""
    slide = WINDOW_MS if window == "tumbling" else SLIDE_MS
    size = WINDOW_MS
    panes: Dict[int, Dict[str, Any]] = {}   # window start -> key -> contents
    results: Results = collections.Counter()
    watermark = -(1 << 62)
    latest = watermark

    def fire(up_to: int) -> None:
        for s in sorted(st for st in panes if st + size - 1 <= up_to):
            for key, contents in panes.pop(s).items():
                if function == "reduce":
                    results[(key, contents[1], contents[2])] += 1
                elif function == "aggregate":
                    results[tuple(contents)] += 1
                else:
                    n = t = 0
                    m = -1
                    for e in contents:
                        n += 1
                        t += e[1]
                        if e[2] > m:
                            m = e[2]
                    results[(key, s, n, t, m)] += 1

    chunks = list(spec)  # made before the clock starts, as flowray's source makes its own
    t0 = time.perf_counter()
    for chunk in chunks:
        for i in range(0, len(chunk), 1000):
            for e in chunk[i:i + 1000]:
                ts = e[2]
                if ts > latest:
                    latest = ts
                last = ts - ts % slide
                for s in range(last, ts - size, -slide):
                    by_key = panes.get(s)
                    if by_key is None:
                        by_key = panes[s] = {}
                    cur = by_key.get(e[0])
                    if function == "reduce":
                        by_key[e[0]] = e if cur is None else reduce_events(cur, e)
                    elif function == "aggregate":
                        if cur is None:
                            cur = by_key[e[0]] = [e[0], 0, 0, -1]
                        cur[1] += 1
                        cur[2] += e[1]
                        if ts > cur[3]:
                            cur[3] = ts
                    elif cur is None:
                        by_key[e[0]] = [e]
                    else:
                        cur.append(e)
            wm = latest - OUT_OF_ORDERNESS_MS - 1
            if wm > watermark:
                watermark = wm
                fire(watermark)
    fire(1 << 62)
    wall = time.perf_counter() - t0
    return {"running_s": wall, "wall_s": wall, "results": results}


# -- flowray ---------------------------------------------------------------------------------
class _ChunkReader(SourceReader):
    """Chunks ``index``, ``index + parallelism``, ... so that all subtasks advance through
    event time together."""

    def __init__(self, spec: EventSpec, index: int, parallelism: int) -> None:
        self._spec, self._next, self._step = spec, index, parallelism
        self._pending: List[Event] = []

    def poll_next(self, max_records: int) -> Optional[List[Event]]:
        if not self._pending:
            if self._next >= self._spec.chunks:
                return None
            self._pending = self._spec.chunk(self._next)
            self._next += self._step
        out, self._pending = self._pending[:max_records], self._pending[max_records:]
        return out

    def snapshot_state(self) -> Any:
        return (self._next, len(self._pending))

    def restore_state(self, state: Any) -> None:
        nxt, pending = state
        self._next = nxt
        self._pending = self._spec.chunk(nxt - self._step)[-pending:] if pending else []


class EventSource(Source):
    default_name = "Event Source"

    def __init__(self, spec: EventSpec) -> None:
        self.spec = spec

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return _ChunkReader(self.spec, context.subtask_index, context.parallelism)


def reduce_events(a: Event, b: Event) -> Event:
    return (a[0], a[1] + b[1], a[2] if a[2] > b[2] else b[2])


class CountSumMax(AggregateFunction):
    """(key, count, sum, max timestamp) with a list accumulator."""

    def create_accumulator(self):
        return [None, 0, 0, -1]

    def add(self, value, accumulator):
        accumulator[0] = value[0]
        accumulator[1] += 1
        accumulator[2] += value[1]
        if value[2] > accumulator[3]:
            accumulator[3] = value[2]
        return accumulator

    def get_result(self, accumulator):
        return tuple(accumulator)

    def merge(self, a, b):
        return [a[0] or b[0], a[1] + b[1], a[2] + b[2], max(a[3], b[3])]


class CountSumMaxProcess(ProcessWindowFunction):
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


class _CountingWriter(SinkWriter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.results: Results = collections.Counter()

    def write(self, element):
        self.results[tuple(element)] += 1

    def write_batch(self, elements):
        results = self.results
        for e in elements:
            results[tuple(e)] += 1

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump(self.results, f)


class CountingSink(Sink):
    default_name = "Counting Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context):
        return _CountingWriter(os.path.join(self.folder, f"{context.subtask_index}.pkl"))


def run_flowray(spec: EventSpec, window: str, function: str, parallelism: int,
                checkpoint_ms: int = 0, local: bool = False) -> dict:
    folder = tempfile.mkdtemp(prefix="flowray-bench-windows-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-windows-chk-")
    try:
        config = Configuration({"parallelism.default": parallelism,
                                "execution.checkpointing.dir": checkpoints})
        if local:
            config.set_string("execution.target", "local")
        if checkpoint_ms:
            config.set_string("execution.checkpointing.interval", f"{checkpoint_ms} ms")
            config.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
        env = StreamExecutionEnvironment.get_execution_environment(config)
        strategy = (WatermarkStrategy
                    .for_bounded_out_of_orderness(Duration.of_millis(OUT_OF_ORDERNESS_MS))
                    .with_timestamp_assigner(lambda e, ts: e[2]))
        assigner = (TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS))
                    if window == "tumbling" else
                    SlidingEventTimeWindows.of(Time.milliseconds(WINDOW_MS),
                                               Time.milliseconds(SLIDE_MS)))
        windowed = (env.from_source(EventSource(spec), strategy, "events")
                    .key_by(lambda e: e[0]).window(assigner))
        if function == "reduce":
            out = windowed.reduce(reduce_events)
        elif function == "aggregate":
            out = windowed.aggregate(CountSumMax())
        else:
            out = windowed.process(CountSumMaxProcess())
        out.sink_to(CountingSink(folder))
        t0 = time.perf_counter()
        result = env.execute(f"bench-windows-{window}-{function}-p{parallelism}")
        wall = time.perf_counter() - t0
        running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
        results: Results = collections.Counter()
        for name in os.listdir(folder):
            with open(os.path.join(folder, name), "rb") as f:
                results.update(pickle.load(f))
        return {"wall_s": wall, "running_s": running, "results": results}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(checkpoints, ignore_errors=True)


_MEASURE = r"""
import json, pickle, sys
sys.path.insert(0, {bench!r})
import ray
from windows import EventSpec, run_flowray
from flowray.runtime.execution.cluster import ensure_ray
from flowray.common.configuration import Configuration
ensure_ray(Configuration())

@ray.remote(num_cpus=0)
def where():
    import flowray.operators.window_operator as m
    return m.__file__

r = run_flowray(EventSpec(*{spec!r}), {window!r}, {function!r}, {p}, {ckpt})
with open({out!r}, "wb") as f:
    pickle.dump(r["results"], f)
print("RESULT " + json.dumps({{"running_s": r["running_s"], "wall_s": r["wall_s"],
                              "worker_module": ray.get(where.remote())}}))
"""


def run_flowray_at(site: str, spec: EventSpec, window: str, function: str, parallelism: int,
                   checkpoint_ms: int) -> dict:
    """:func:`run_flowray` in a fresh process on the exported revision at ``site``."""
    from _revision import env_for
    out = tempfile.mktemp(prefix="flowray-bench-windows-before-", suffix=".pkl")
    code = _MEASURE.format(bench=os.path.dirname(os.path.abspath(__file__)), out=out,
                           spec=(spec.n, spec.keys, spec.rate, spec.disorder_ms, spec.seed),
                           window=window, function=function, p=parallelism, ckpt=checkpoint_ms)
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env_for(site),
                              capture_output=True, text=True, cwd=tempfile.gettempdir(),
                              timeout=3600)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"measurement failed:\n{proc.stdout[-2000:]}\n"
                               f"{proc.stderr[-4000:]}")
        r = json.loads(lines[-1][len("RESULT "):])
        if not r["worker_module"].startswith(site):
            raise RuntimeError(f"workers ran {r['worker_module']}, not the revision at {site}")
        with open(out, "rb") as f:
            r["results"] = pickle.load(f)
        return r
    finally:
        if os.path.exists(out):
            os.remove(out)


def profile_flowray(spec: EventSpec, window: str, function: str, top: int) -> None:
    """One flowray run on the local executor (one process, a thread per subtask) with a
    cProfile per thread; prints the busiest thread's top entries."""
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
        r = run_flowray(spec, window, function, 1, local=True)
    finally:
        threading.Thread.run = original_run
    ok = r["results"] == reference(spec, window, function)
    print(f"profiled flowray {window} {function} p=1, {spec.n:,} events (local executor, "
          f"cProfile on): {spec.n / r['running_s']:,.0f} ev/s, {'ok' if ok else 'WRONG'}")
    waits = ("threading.py", "queue.py", "acquire", "sleep", "select", "poll")
    busiest = None
    for name, prof in profiles:
        st = pstats.Stats(prof, stream=io.StringIO())
        busy = sum(v[2] for k, v in st.stats.items()
                   if not any(w in f"{k[0]}{k[2]}" for w in waits))
        if busiest is None or busy > busiest[0]:
            busiest = (busy, name, st)
    _, name, stats = busiest
    idle = r"^(?!.*(threading\.py|queue\.py|acquire|sleep|select|poll))"
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats.stream = buf
        stats.sort_stats(order).print_stats(idle, top)
        text = buf.getvalue()
        print(f"\n-- {name}: top {top} by {order} --")
        print(text[text.find("   ncalls"):].rstrip())


# -- main --------------------------------------------------------------------------------------
def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rate", type=int, default=20_000,
                    help="events per event-time second (default 20000: 10 s windows of "
                         "20 events per key)")
    ap.add_argument("--disorder-ms", type=int, default=800)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--windows", default=",".join(WINDOWS))
    ap.add_argument("--functions", default=",".join(FUNCTIONS))
    ap.add_argument("--parallelism", type=int, default=1)
    ap.add_argument("--checkpoint-ms", type=int, default=0,
                    help="exactly-once checkpoints this often in every flowray run (0: none)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--before", default=None,
                    help="also run every flowray job on this git revision")
    ap.add_argument("--before-events", type=int, default=0,
                    help="events of the --before runs (default: --events)")
    ap.add_argument("--quick", action="store_true", help="200,000 events, one round")
    ap.add_argument("--profile", action="store_true",
                    help="instead: profile one flowray run (the first window and function) "
                         "on the local executor")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--json", default="benchmarks/results/windows.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.rounds = 200_000, 1
    if not 0 < args.disorder_ms < OUT_OF_ORDERNESS_MS:
        ap.error(f"--disorder-ms must be in 1..{OUT_OF_ORDERNESS_MS - 1}")
    windows = [w for w in args.windows.split(",") if w]
    functions = [f for f in args.functions.split(",") if f]
    for w in windows:
        if w not in WINDOWS:
            ap.error(f"unknown window {w!r} ({', '.join(WINDOWS)})")
    for f in functions:
        if f not in FUNCTIONS:
            ap.error(f"unknown function {f!r} ({', '.join(FUNCTIONS)})")
    logging.basicConfig(level=logging.WARNING)
    spec = EventSpec(args.events, args.keys, args.rate, args.disorder_ms, args.seed)
    if args.profile:
        profile_flowray(spec, windows[0], functions[0], args.profile_top)
        return
    before_spec = EventSpec(args.before_events or args.events, args.keys, args.rate,
                            args.disorder_ms, args.seed)

    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing
    work = tempfile.mkdtemp(prefix="flowray-bench-windows-rev-")
    site = None
    if args.before:
        from _revision import export_revision
        site = export_revision(args.before, work)
    systems = ["loop", "flowray"] + (["before"] if site else [])
    rows: List[dict] = []
    errors: List[str] = []
    try:
        for window in windows:
            for function in functions:
                expected = reference(spec, window, function)
                before_expected = (expected if before_spec.n == spec.n
                                   else reference(before_spec, window, function))
                rates: Dict[str, List[float]] = {s: [] for s in systems}
                for rnd in range(args.rounds):
                    order = systems if rnd % 2 == 0 else list(reversed(systems))
                    for system in order:
                        n = before_spec.n if system == "before" else spec.n
                        if system == "loop":
                            r = run_loop(spec, window, function)
                        elif system == "flowray":
                            r = run_flowray(spec, window, function, args.parallelism,
                                            args.checkpoint_ms)
                        else:
                            r = run_flowray_at(site, before_spec, window, function,
                                               args.parallelism, args.checkpoint_ms)
                        want = before_expected if system == "before" else expected
                        ok = r["results"] == want
                        if not ok:
                            errors.append(f"{window} {function} {system}: "
                                          f"{sum(r['results'].values())} results, "
                                          f"{sum(want.values())} expected, "
                                          f"{sum((want - r['results']).values())} missing")
                        rates[system].append(n / r["running_s"])
                        print(f"  {window:<9} {function:<10} round {rnd + 1} {system:<8}"
                              f"{n:>12,} events {r['running_s']:7.1f} s "
                              f"{n / r['running_s']:>12,.0f} ev/s  "
                              f"{'ok' if ok else 'WRONG'}", flush=True)
                med = {s: statistics.median(v) for s, v in rates.items()}
                rows.append({"window": window, "function": function, "rates": rates,
                             "median": med, "results": sum(expected.values())})
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nevent-time windows (10 s; sliding every 5 s), {spec.n:,} events, {args.keys:,} "
          f"keys, {args.rate:,} events per event-time s, flowray p={args.parallelism}"
          + (f", exactly-once checkpoints every {args.checkpoint_ms} ms"
             if args.checkpoint_ms else "")
          + f"; medians of {args.rounds} alternating round(s)\n")
    header = (f"{'window':<10}{'function':<11}{'loop ev/s':>12}{'flowray ev/s':>14}"
              f"{'vs loop':>9}" + (f"{'before ev/s':>13}{'vs before':>11}" if site else ""))
    print(header)
    print("-" * len(header))
    for row in rows:
        med = row["median"]
        line = (f"{row['window']:<10}{row['function']:<11}{med['loop']:>12,.0f}"
                f"{med['flowray']:>14,.0f}{med['flowray'] / med['loop']:>8.2f}x")
        if site:
            line += f"{med['before']:>13,.0f}{med['flowray'] / med['before']:>10.2f}x"
        print(line)
    print("\nev/s: events / the longest task's run time (actor start-up excluded); loop: "
          "the same windowing in one Python process" +
          (f"; before: flowray at {args.before}" if site else "") + ".")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"events": spec.n, "keys": args.keys, "rate": args.rate,
                   "parallelism": args.parallelism, "checkpoint_ms": args.checkpoint_ms,
                   "before": args.before, "rounds": args.rounds, "rows": rows}, f, indent=1)
    if errors:
        sys.exit("wrong results:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
