"""What checkpoints cost: keyed running-sum throughput with a checkpoint every second vs
none (same records, same run), and checkpoint duration / alignment percentiles.

Pipeline as in throughput.py: source -> map(x -> (key, x)) -> key_by -> running sum ->
counting sink, at parallelism 2 on the socket transport; every run is checked against
the same per-key sums. Runs alternate (none, exactly-once, at-least-once, then the other
way round, ...) so a slow moment of the machine does not land on one configuration only.
The record count is sized so that a run without checkpoints processes for about
``--seconds`` (a probe run measures the rate), so each checkpointed run sees about
``--seconds`` checkpoints at the default interval; the table shows how many it saw.

    python benchmarks/checkpoints.py [--seconds 20] [--records N] [--keys 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from throughput import CountingSink, expected_sums, read_counts

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment


def run(n: int, keys: int, mode: Optional[str], interval_ms: int,
        extra: Optional[Dict[str, Any]] = None,
        job_name: str = "bench-checkpoints") -> Dict[str, Any]:
    """One run of the keyed running sum; ``extra``: more configuration (e.g. the state
    backend)."""
    folder = tempfile.mkdtemp(prefix="flowray-bench-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-chk-")
    config = Configuration({"parallelism.default": 2, "execution.checkpointing.dir": checkpoints,
                            **(extra or {})})
    if mode is not None:
        config.set_string("execution.checkpointing.interval", f"{interval_ms} ms")
        config.set_string("execution.checkpointing.mode", mode)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    (env.from_source(NumberSequenceSource(0, n - 1), source_name="numbers")
     .map(lambda x: (f"k{x % keys}", x))
     .key_by(lambda t: t[0])
     .sum(1)
     .sink_to(CountingSink(folder)))
    t0 = time.perf_counter()
    result = env.execute(job_name)
    wall = time.perf_counter() - t0
    running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
    count, last = read_counts(folder)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(checkpoints, ignore_errors=True)
    history = [h for h in result.get_checkpoint_stats().get("history", [])
               if h["status"] == "COMPLETED"]
    return {"wall_s": wall, "running_s": running, "count": count, "sums": last,
            "history": history}


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))]


def task_field(history: List[dict], field: str) -> List[float]:
    """Per checkpoint, the slowest task's value of ``field``."""
    return [max((t.get(field, 0.0) for t in h["tasks"].values()), default=0.0)
            for h in history]


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="size the input so a run without checkpoints takes about this long")
    ap.add_argument("--records", type=int, default=0,
                    help="records per run (default: sized by --seconds)")
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default="benchmarks/results/checkpoints.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n, keys = args.records, args.keys
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())
    if not n:  # a probe run without checkpoints measures the rate
        probe = 500_000
        n = max(probe, int(probe / run(probe, keys, None, args.interval_ms)["running_s"]
                           * args.seconds))
    expected = expected_sums(n, keys)
    configs = [("no checkpoints", None), ("exactly-once", "EXACTLY_ONCE"),
               ("at-least-once", "AT_LEAST_ONCE")]
    results: Dict[str, List[dict]] = {name: [] for name, _ in configs}
    for rnd in range(args.rounds):
        for name, mode in (configs if rnd % 2 == 0 else list(reversed(configs))):
            r = run(n, keys, mode, args.interval_ms)
            r["correct"] = r["count"] == n and r["sums"] == expected
            results[name].append(r)

    base = statistics.median(n / r["running_s"] for r in results["no checkpoints"])
    print(f"\nkeyed running sum, {n:,} records, {keys:,} keys, parallelism 2, "
          f"{args.rounds} alternating rounds (median), a checkpoint every "
          f"{args.interval_ms} ms\n")
    print(f"{'run':<28}{'records/s':>12}{'vs none':>9}{'ckpts':>7}{'dur p50':>9}"
          f"{'dur p99':>9}{'align p50':>11}{'align p99':>11}{'sync p50':>10}"
          f"{'async p50':>11}{'size':>10}{'correct':>9}")
    rows = []
    for name, _ in configs:
        rs = results[name]
        rps = statistics.median(n / r["running_s"] for r in rs)
        hist = [h for r in rs for h in r["history"]]
        durations = [h["duration_ms"] for h in hist]
        align = task_field(hist, "alignment_ms")
        sync = task_field(hist, "sync_ms")
        asyn = task_field(hist, "async_ms")
        size = statistics.median(h["state_size"] for h in hist) if hist else 0
        row = {"name": name, "records_per_s": rps, "vs_none": rps / base,
               "checkpoints_per_run": len(hist) / len(rs),
               "duration_ms": {"p50": pct(durations, 50), "p90": pct(durations, 90),
                               "p99": pct(durations, 99)},
               "alignment_ms": {"p50": pct(align, 50), "p99": pct(align, 99)},
               "sync_ms_p50": pct(sync, 50), "async_ms_p50": pct(asyn, 50),
               "state_bytes_p50": size, "correct": all(r["correct"] for r in rs)}
        rows.append(row)
        print(f"{name:<28}{rps:>12,.0f}{rps / base:>8.2f}x{len(hist) / len(rs):>7.1f}"
              f"{row['duration_ms']['p50']:>9.0f}{row['duration_ms']['p99']:>9.0f}"
              f"{row['alignment_ms']['p50']:>11.1f}{row['alignment_ms']['p99']:>11.1f}"
              f"{row['sync_ms_p50']:>10.1f}{row['async_ms_p50']:>11.1f}"
              f"{size / 1024:>9.0f}K{str(row['correct']):>9}")
    print("\ndurations in ms (trigger to completion); alignment, sync and async: the slowest "
          "task per checkpoint")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"records": n, "keys": keys, "rounds": args.rounds,
                   "interval_ms": args.interval_ms, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
