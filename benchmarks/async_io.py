"""Async I/O: enrichment through an ``async def`` lookup with 10 ms latency, flowray's
``AsyncDataStream`` (capacity 100) vs a sequential call loop and an ``asyncio.gather``
batch loop in one process.

Every record ``i`` is looked up by ``await asyncio.sleep(latency)`` returning
``(i, i * 2)``. Runs, each checked (count and checksum of the results):

  sequential:  one synchronous call per record (``time.sleep(latency)``), on a subset
  gather:      ``asyncio.gather`` over batches of ``--capacity`` records, one process
  flowray:     source -> unordered_wait / ordered_wait (capacity ``--capacity``) -> sink,
               on Ray, parallelism 1 (and ``--parallelisms``); once more with exactly-once
               checkpoints every ``--checkpoint-ms``

    python benchmarks/async_io.py [--records 50000] [--latency-ms 10] [--capacity 100]
                                  [--parallelisms 1,2] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from flowray.common import Configuration, Time, WatermarkStrategy
from flowray.datastream import AsyncDataStream, StreamExecutionEnvironment
from flowray.datastream.connectors.number_seq import NumberSequenceSource
from flowray.datastream.functions import AsyncFunction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import ChecksumSink, read_checksums


def expected(n: int) -> Tuple[int, int]:
    """(count, checksum) of the results of records 0..n-1."""
    return n, sum(i * 2 for i in range(n))


# -- baselines ----------------------------------------------------------------------------------
def run_sequential(n: int, latency_s: float) -> dict:
    count = checksum = 0
    t0 = time.perf_counter()
    for i in range(n):
        time.sleep(latency_s)
        r = (i, i * 2)
        count += 1
        checksum += r[1]
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "count": count, "checksum": checksum, "n": n}


def run_gather(n: int, latency_s: float, batch: int) -> dict:
    async def lookup(i: int) -> Tuple[int, int]:
        await asyncio.sleep(latency_s)
        return (i, i * 2)

    async def main() -> Tuple[int, int]:
        count = checksum = 0
        for start in range(0, n, batch):
            results = await asyncio.gather(*(lookup(i) for i in range(start,
                                                                     min(n, start + batch))))
            count += len(results)
            checksum += sum(r[1] for r in results)
        return count, checksum

    t0 = time.perf_counter()
    count, checksum = asyncio.run(main())
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "count": count, "checksum": checksum, "n": n}


# -- flowray ------------------------------------------------------------------------------------
class Lookup(AsyncFunction):
    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    async def async_invoke(self, value):
        await asyncio.sleep(self.latency_s)
        return [(value, value * 2)]


def run_flowray(n: int, latency_s: float, capacity: int, parallelism: int,
                ordered: bool, checkpoint_ms: Optional[int] = None) -> dict:
    folder = tempfile.mkdtemp(prefix="flowray-bench-async-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-async-chk-")
    try:
        config = Configuration({"parallelism.default": parallelism,
                                "execution.checkpointing.dir": checkpoints})
        if checkpoint_ms is not None:  # in-flight records go into every checkpoint
            config.set_string("execution.checkpointing.interval", f"{checkpoint_ms} ms")
            config.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
        env = StreamExecutionEnvironment.get_execution_environment(config)
        source = env.from_source(NumberSequenceSource(0, n - 1),
                                 WatermarkStrategy.no_watermarks(), "numbers")
        wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
        wait(source, Lookup(latency_s), Time.seconds(60), capacity).sink_to(
            ChecksumSink(folder))
        t0 = time.perf_counter()
        result = env.execute(f"bench-async-{'ordered' if ordered else 'unordered'}")
        wall = time.perf_counter() - t0
        running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
        count, checksum = read_checksums(folder)
        return {"wall_s": wall, "running_s": running, "count": count, "checksum": checksum,
                "n": n}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(checkpoints, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--sequential-records", type=int, default=300,
                    help="records for the sequential loop (it takes latency x records)")
    ap.add_argument("--latency-ms", type=float, default=10.0)
    ap.add_argument("--capacity", type=int, default=100)
    ap.add_argument("--parallelisms", default="1,2")
    ap.add_argument("--checkpoint-ms", type=int, default=1000,
                    help="interval of the checkpointed run (0: none)")
    ap.add_argument("--quick", action="store_true", help="5,000 records, p=1 only")
    ap.add_argument("--json", default="benchmarks/results/async_io.json")
    args = ap.parse_args(argv)
    n = 5_000 if args.quick else args.records
    parallelisms = [1] if args.quick else [int(p) for p in args.parallelisms.split(",")]
    latency = args.latency_ms / 1000.0

    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())  # start Ray before any timing

    rows: List[Dict[str, Any]] = []
    errors: List[str] = []

    def record(name: str, r: dict) -> Dict[str, Any]:
        want = expected(r["n"])
        ok = (r["count"], r["checksum"]) == want
        if not ok:
            errors.append(f"{name}: got {r['count']} results (checksum {r['checksum']}), "
                          f"expected {want[0]} (checksum {want[1]})")
        secs = r.get("running_s", r["wall_s"])
        row = {"name": name, "records": r["n"], "seconds": secs, "wall_s": r["wall_s"],
               "rps": r["n"] / secs, "rps_wall": r["n"] / r["wall_s"], "correct": ok}
        rows.append(row)
        print(f"  {name:<44} {row['rps']:>10,.0f} rec/s  {row['rps_wall']:>10,.0f} rec/s "
              f"(wall)  {'ok' if ok else 'WRONG'}", flush=True)
        return row

    seq = record("sequential sync calls (one process)",
                 run_sequential(min(args.sequential_records, n), latency))
    gather = record(f"asyncio.gather, batches of {args.capacity} (one process)",
                    run_gather(n, latency, args.capacity))
    for p in parallelisms:
        for ordered in (False, True):
            mode = "ordered_wait" if ordered else "unordered_wait"
            record(f"flowray {mode}, capacity {args.capacity}, p={p}",
                   run_flowray(n, latency, args.capacity, p, ordered))
    if args.checkpoint_ms:
        record(f"flowray unordered_wait, p=1, exactly-once every {args.checkpoint_ms} ms",
               run_flowray(n, latency, args.capacity, 1, False, args.checkpoint_ms))

    print(f"\nasync enrichment, {n:,} records, {args.latency_ms:g} ms per lookup, capacity "
          f"{args.capacity} (ceiling per subtask: {args.capacity / latency:,.0f} rec/s)\n")
    header = f"{'run':<60}{'records/s':>12}{'vs gather':>11}{'vs sequential':>15}"
    print(header)
    print("-" * len(header))
    for r in rows:
        r["vs_gather"] = r["rps"] / gather["rps"]
        r["vs_sequential"] = r["rps"] / seq["rps"]
        print(f"{r['name']:<60}{r['rps']:>12,.0f}{r['vs_gather']:>10.2f}x"
              f"{r['vs_sequential']:>14.1f}x")
    print("\nflowray records/s: records / longest task run time (deploy excluded, as in "
          "throughput.py); the baselines: wall time in this process.")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"records": n, "latency_ms": args.latency_ms, "capacity": args.capacity,
                   "rows": rows}, f, indent=1)
    if errors:
        sys.exit("wrong results:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
