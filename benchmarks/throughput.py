"""Keyed running-sum throughput: flowray (parallelism 1 and 2) vs a single-process Python
loop vs Bytewax, on the same records, in one invocation.

Pipeline: source -> map(x -> (key, x)) -> key_by(key) -> running sum -> counting sink.
Every run is checked against the same reference: its record count and the sum of every
running sum it emitted (each key's sums in order, so a lost, repeated or misrouted record
changes it), both in closed form. The sink and the loop pay the same per batch for that
(one C-level sum over the batch). Prints a table and writes JSON. The
"flowray p=1 no metrics" row runs with ``flowray.metrics.enabled=false``: the cost of
exporting metrics is the p=1 row against it.

    python benchmarks/throughput.py [--keys 10000,100000,1000000] [--seconds 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from operator import itemgetter
from typing import Dict, List, Optional

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter


def expected_sums(n: int, keys: int) -> Dict[str, int]:
    """Each key's sum over ``x in range(n)`` with key ``f"k{x % keys}"``, in closed form."""
    sums: Dict[str, int] = {}
    for i in range(min(n, keys)):
        m = (n - i + keys - 1) // keys  # how many x < n have x % keys == i
        sums[f"k{i}"] = m * i + keys * m * (m - 1) // 2
    return sums


def expected_checksum(n: int, keys: int) -> int:
    """The sum of every running sum emitted for ``x in range(n)`` keyed ``x % keys``: key
    ``i``'s values are ``i + keys * j`` for ``j < m``, and value ``j`` is in ``m - j`` of
    its running sums."""
    total = 0
    for i in range(min(n, keys)):
        m = (n - i + keys - 1) // keys
        total += i * m * (m + 1) // 2 + keys * (m * m * (m - 1) // 2
                                                 - (m - 1) * m * (2 * m - 1) // 6)
    return total


_SECOND = itemgetter(1)


class _ChecksumWriter(SinkWriter):
    """Counts the records and sums their second field (a C-level sum per batch)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.checksum = 0

    def write(self, element):
        self.count += 1
        self.checksum += element[1]

    def write_batch(self, elements):
        self.count += len(elements)
        self.checksum += sum(map(_SECOND, elements))

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((self.count, self.checksum), f)


class _PerSubtaskFileSink(Sink):
    """A sink whose writers (``writer``) each write one file into ``folder`` at the end."""

    writer: type = SinkWriter

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context):
        return self.writer(os.path.join(self.folder, f"{context.subtask_index}.pkl"))


class ChecksumSink(_PerSubtaskFileSink):
    """Counts records and sums their second fields; writes both to a file at the end."""

    default_name = "Checksum Sink"
    writer = _ChecksumWriter


def read_checksums(folder: str):
    count = checksum = 0
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            c, s = pickle.load(f)
        count += c
        checksum += s
    return count, checksum


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
        self.last.update(elements)   # each (key, sum) in order: the latest sum per key

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((self.count, self.last), f)


class CountingSink(_PerSubtaskFileSink):
    """Counts records and keeps each key's latest sum; writes them to a file at the end."""

    default_name = "Counting Sink"
    writer = _CountingWriter


def read_counts(folder: str):
    count, last = 0, {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            c, part = pickle.load(f)
        count += c
        last.update(part)
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
     .sink_to(ChecksumSink(folder)))
    t0 = time.perf_counter()
    result = env.execute(f"bench-p{parallelism}")
    wall = time.perf_counter() - t0
    running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
    count, checksum = read_checksums(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return {"wall_s": wall, "running_s": running, "count": count, "checksum": checksum}


def run_loop(n: int, keys: int) -> dict:
    """The same work in one process: batch-at-a-time chained functions."""
    mapper = lambda x: (f"k{x % keys}", x)  # noqa: E731
    key_of = lambda t: t[0]  # noqa: E731
    state: Dict[str, tuple] = {}
    count = checksum = 0
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
        checksum += sum(map(_SECOND, out))   # what the sink does with a batch
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "running_s": wall, "count": count, "checksum": checksum}


def run_bytewax(n: int, keys: int) -> dict:
    try:
        import bytewax.operators as op
        from bytewax.dataflow import Dataflow
        from bytewax.outputs import DynamicSink, StatelessSinkPartition
        from bytewax.testing import TestingSource, run_main
    except ImportError:
        return {"skipped": "bytewax not installed (pip install -e '.[bench]')"}

    result = {"count": 0, "checksum": 0}

    class _Part(StatelessSinkPartition):
        def write_batch(self, items):
            result["count"] += len(items)
            result["checksum"] += sum(map(_SECOND, items))

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


METRICS_OFF = "flowray p=1 no metrics"
SYSTEMS = ("loop", "bytewax", "flowray p=1", "flowray p=2", METRICS_OFF)


def run_system(system: str, n: int, keys: int, transport: str, batch: int) -> dict:
    if system == "loop":
        return run_loop(n, keys)
    if system == "bytewax":
        return run_bytewax(n, keys)
    if system == METRICS_OFF:  # what exporting the metrics costs (issue 30: <= 3%)
        return run_flowray(n, keys, 1, transport, batch, {"flowray.metrics.enabled": "false"})
    return run_flowray(n, keys, int(system[-1]), transport, batch)


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="10000,100000,1000000",
                    help="comma-separated key counts, one table row group each")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="each run processes records for at least about this long")
    ap.add_argument("--records", type=int, default=0,
                    help="records per run for every system (default: sized by --seconds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--transport", default="socket")
    ap.add_argument("--json", default="benchmarks/results/throughput.json")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma-separated subset of: " + ", ".join(SYSTEMS))
    args = ap.parse_args(argv)
    systems = tuple(x for x in SYSTEMS if x in {t.strip() for t in args.systems.split(",")})
    logging.basicConfig(level=logging.WARNING)
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing
    results = []
    for keys in (int(k) for k in args.keys.split(",")):
        sizes = {s: args.records for s in systems}
        if not args.records:  # calibrate: records for --seconds at each system's rate
            for system in systems:  # a probe undercounts (start-up, fewer keys): +30%
                if system == METRICS_OFF and "flowray p=1" in systems:
                    continue  # the same records as with metrics (set below)
                probe = 1_000_000 if system != "bytewax" else 400_000
                r = run_system(system, probe, keys, args.transport, args.batch)
                if "skipped" not in r:
                    sizes[system] = max(probe, int(probe / r["running_s"] * args.seconds * 1.3))
            if METRICS_OFF in systems and "flowray p=1" in systems:
                sizes[METRICS_OFF] = sizes["flowray p=1"]
        rates: Dict[str, List[float]] = {s: [] for s in systems}
        expected = {n: expected_checksum(n, keys) for n in set(sizes.values())}
        skipped: Dict[str, str] = {}
        for rnd in range(args.rounds):  # alternate systems within each round
            order = systems if rnd % 2 == 0 else tuple(reversed(systems))
            for system in order:
                n = sizes[system]
                r = run_system(system, n, keys, args.transport, args.batch)
                if "skipped" in r:
                    skipped[system] = r["skipped"]
                    continue
                if r["count"] != n or r["checksum"] != expected[n]:
                    sys.exit(f"{system}: wrong running sums ({keys:,} keys, {n:,} records: "
                             f"{r['count']:,} records, sum {r['checksum']} against "
                             f"{expected[n]})")
                rates[system].append(n / r["running_s"])
                print(f"  {keys:>9,} keys  round {rnd + 1}  {system:<22} {n:>11,} records "
                      f"{r['running_s']:6.1f} s  {n / r['running_s']:>12,.0f} rec/s", flush=True)
        med = {s: statistics.median(v) for s, v in rates.items() if v}
        results.append({"keys": keys, "records": sizes, "rounds": args.rounds,
                        "records_per_s": rates, "median": med, "skipped": skipped})
    print(f"\nkeyed running sum, medians of {args.rounds} alternating rounds, each run at "
          f"least ~{args.seconds:.0f} s of processing, {args.transport} channels\n")
    print(f"{'keys':>10}  {'run':<24}{'records/s':>12}{'vs loop':>9}{'vs bytewax':>12}")
    for res in results:
        med = res["median"]
        for system in systems:
            if system not in med:
                print(f"{res['keys']:>10,}  {system:<24}  skipped: {res['skipped'].get(system)}")
                continue
            vs_loop = f"{med[system] / med['loop']:.2f}x" if "loop" in med else "-"
            vs_bw = f"{med[system] / med['bytewax']:.2f}x" if "bytewax" in med else "-"
            print(f"{res['keys']:>10,}  {system:<24}{med[system]:>12,.0f}{vs_loop:>9}{vs_bw:>12}")
    for res in results:
        med = res["median"]
        if "flowray p=1" in med and METRICS_OFF in med:
            ratio = med["flowray p=1"] / med[METRICS_OFF]
            print(f"metrics cost at {res['keys']:,} keys: flowray p=1 with metrics exported runs "
                  f"at {ratio:.3f}x of {METRICS_OFF!r} (goal: >= 0.97x): "
                  f"{'met' if ratio >= 0.97 else 'NOT MET'}")
    print("\nrecords/s: records / longest task run time (actor start-up excluded);"
          " loop: the same work in one Python process; 'no metrics': "
          "flowray.metrics.enabled=false (nothing exported).")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"seconds": args.seconds, "batch": args.batch, "transport": args.transport,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
