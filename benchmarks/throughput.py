"""Keyed running-sum throughput: flowray (parallelism 1 and 2) vs a single-process Python
loop vs Bytewax, on the same records, in one invocation.

Pipeline: source -> map(x -> (key, x)) -> key_by(key) -> running sum -> counting sink.
Every run is checked against the same per-key sums. Prints a table and writes JSON.

    python benchmarks/throughput.py [--records 2000000] [--keys 10000]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import shutil
import sys
import tempfile
import time
from typing import Dict, List, Optional

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter


def expected_sums(n: int, keys: int) -> Dict[str, int]:
    sums: Dict[str, int] = {}
    for x in range(n):
        k = f"k{x % keys}"
        sums[k] = sums.get(k, 0) + x
    return sums


class _CountingWriter(SinkWriter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.last: Dict[str, int] = {}

    def write(self, element):
        self.count += 1
        self.last[element[0]] = element[1]

    def write_batch(self, elements):
        self.count += len(elements)
        last = self.last
        for k, v in elements:
            last[k] = v

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((self.count, self.last), f)


class CountingSink(Sink):
    """Counts records and keeps each key's latest sum; writes them to a file at the end."""

    default_name = "Counting Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context):
        return _CountingWriter(os.path.join(self.folder, f"{context.subtask_index}.pkl"))


def read_counts(folder: str):
    count, last = 0, {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            c, l = pickle.load(f)
        count += c
        last.update(l)
    return count, last


def run_flowray(n: int, keys: int, parallelism: int, transport: str, batch: int,
                extra: Optional[Dict[str, str]] = None) -> dict:
    folder = tempfile.mkdtemp(prefix="flowray-bench-")
    config = (Configuration().set_string("parallelism.default", str(parallelism))
              .set_string("flowray.channel.transport", transport)
              .set_string("flowray.channel.batch-size", str(batch)))
    for key, value in (extra or {}).items():
        config.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    (env.from_source(NumberSequenceSource(0, n - 1), source_name="numbers")
     .map(lambda x: (f"k{x % keys}", x))
     .key_by(lambda t: t[0])
     .sum(1)
     .sink_to(CountingSink(folder)))
    t0 = time.perf_counter()
    result = env.execute(f"bench-p{parallelism}")
    wall = time.perf_counter() - t0
    running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
    count, last = read_counts(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return {"wall_s": wall, "running_s": running, "count": count, "sums": last}


def run_loop(n: int, keys: int) -> dict:
    """The same work in one process: batch-at-a-time chained functions."""
    mapper = lambda x: (f"k{x % keys}", x)  # noqa: E731
    key_of = lambda t: t[0]  # noqa: E731
    state: Dict[str, tuple] = {}
    count = 0
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        batch = [mapper(x) for x in range(start, min(n, start + 1000))]
        out = []
        for r in batch:
            k = key_of(r)
            cur = state.get(k)
            if cur is not None:
                r = (cur[0], cur[1] + r[1])
            state[k] = r
            out.append(r)
        count += len(out)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "running_s": wall, "count": count,
            "sums": {k: v[1] for k, v in state.items()}}


def run_bytewax(n: int, keys: int) -> dict:
    try:
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.outputs import DynamicSink, StatelessSinkPartition
        from bytewax.testing import TestingSource, run_main
    except ImportError:
        return {"skipped": "bytewax not installed (pip install -e '.[bench]')"}

    result = {"count": 0, "sums": {}}

    class _Part(StatelessSinkPartition):
        def write_batch(self, items):
            result["count"] += len(items)
            for k, v in items:
                result["sums"][k] = v

    class _Sink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return _Part()

    def add(state, value):
        s = (state or 0) + value
        return s, s

    flow = Dataflow("bench")
    s = op.input("inp", flow, TestingSource(range(n), batch_size=1000))
    m = op.map("key", s, lambda x: (f"k{x % keys}", x))
    summed = op.stateful_map("sum", m, add)
    op.output("out", summed, _Sink())
    t0 = time.perf_counter()
    run_main(flow)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "running_s": wall, **result}


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--transports", default="socket,ray")
    ap.add_argument("--json", default="benchmarks/results/throughput.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n, keys = args.records, args.keys
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing
    expected = expected_sums(n, keys)

    runs = [("python loop (1 process)", lambda: run_loop(n, keys)),
            ("bytewax 0.21 (1 worker)", lambda: run_bytewax(n, keys))]
    for transport in args.transports.split(","):
        for p in (1, 2):
            runs.append((f"flowray p={p} ({transport})",
                         lambda p=p, t=transport: run_flowray(n, keys, p, t, args.batch)))
    rows = []
    for name, fn in runs:
        r = fn()
        if "skipped" in r:
            rows.append({"name": name, "skipped": r["skipped"]})
            continue
        ok = r["count"] == n and r["sums"] == expected
        rows.append({"name": name, "wall_s": r["wall_s"], "running_s": r["running_s"],
                     "rps_wall": n / r["wall_s"], "rps_running": n / r["running_s"],
                     "correct": ok})
    bw = next((r for r in rows if r["name"].startswith("bytewax") and "rps_wall" in r), None)
    loop = rows[0]
    print(f"\nkeyed running sum, {n:,} records, {keys:,} keys, batch {args.batch}\n")
    print(f"{'run':<28}{'records/s (tasks)':>19}{'records/s (wall)':>18}"
          f"{'vs bytewax':>12}{'vs loop':>9}{'correct':>9}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']:<28}  skipped: {r['skipped']}")
            continue
        vs_bw = f"{r['rps_running'] / bw['rps_running']:.2f}x" if bw else "-"
        vs_loop = f"{r['rps_running'] / loop['rps_running']:.2f}x"
        print(f"{r['name']:<28}{r['rps_running']:>19,.0f}{r['rps_wall']:>18,.0f}"
              f"{vs_bw:>12}{vs_loop:>9}{str(r['correct']):>9}")
    print("\nrecords/s (tasks): records / longest task run time (deploy excluded);"
          " (wall): including actor start-up.")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"records": n, "keys": keys, "batch": args.batch, "rows": rows}, f, indent=1)
    if not all(r.get("correct", True) for r in rows):
        sys.exit("a run produced wrong per-key sums")


if __name__ == "__main__":
    main()
