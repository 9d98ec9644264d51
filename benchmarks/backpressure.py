"""Checkpoints under back-pressure: buffer debloating off vs on, aligned vs unaligned
checkpoints, beside the same job without the slow operator, in one invocation.

Pipeline: a sequence source that runs for ``--seconds`` -> rebalance -> map costing
``--cost-ms`` per record (a sleep) -> counting sink, at parallelism 1 on the socket
transport, a checkpoint every ``--interval-ms``. The map is slow for ``--seconds`` from its
first record, then free, so a backlog left in the channels drains at once and every run
ends soon after its slow phase; a checkpoint that is still waiting behind the backlog then
completes early, so the figures for "debloating off" are a lower bound. Only checkpoints
triggered before the end of the slow phase count. records/s: the free map's throughput
(records / source run time), to see what debloating costs a job without back-pressure.
Runs alternate (off, on, unaligned, free off, free on, free unaligned, off, ...).
"unaligned": execution.checkpointing.unaligned.enabled with debloating off (issue 32's
goal: p50 <= 1 s behind the 5 ms map, and the free map's records/s within 3% of aligned;
the ratio printed is the median of each round's unaligned/aligned pair).

    python benchmarks/backpressure.py [--seconds 20] [--cost-ms 5] [--interval-ms 500]
        [--rounds 2] [--only REGEX]   (e.g. --only "free map, (debloat off|unaligned)")
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter
from flowray.operators.functions import MapFunction
from flowray.operators.sources import IndexRangeReader


class _TimedReader(IndexRangeReader):
    """Numbers until ``seconds`` after the first poll, then the end of input."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.deadline: Optional[float] = None

    def read(self, start: int, stop: int) -> List[Any]:
        return list(range(start, stop))

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds
        if now >= self.deadline:
            return None
        return super().poll_next(max_records)


class TimedSequenceSource(NumberSequenceSource):
    def __init__(self, seconds: float) -> None:
        super().__init__(0, 10**15)
        self.seconds = seconds

    def create_reader(self, context: Any) -> Any:
        return _TimedReader(self.seconds)


class SlowMap(MapFunction):
    """Costs ``cost_ms`` per record for ``seconds`` after its first record, then nothing;
    writes the slow phase's wall-clock window (ms) to ``window_file``."""

    def __init__(self, cost_ms: float, seconds: float, window_file: str) -> None:
        self.cost_s = cost_ms / 1000.0
        self.seconds = seconds
        self.window_file = window_file
        self.until: Optional[float] = None

    def map(self, value: Any) -> Any:
        if self.until is None:
            self.until = time.monotonic() + self.seconds
            start = time.time() * 1000
            with open(self.window_file, "w") as f:
                json.dump({"start_ms": start, "end_ms": start + self.seconds * 1000}, f)
        if self.cost_s and time.monotonic() < self.until:
            time.sleep(self.cost_s)
        return value


class _CountingWriter(SinkWriter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0

    def write(self, element: Any) -> None:
        self.count += 1

    def write_batch(self, elements: List[Any]) -> None:
        self.count += len(elements)

    def flush(self, end_of_input: bool) -> None:
        if end_of_input:
            with open(self.path, "w") as f:
                f.write(str(self.count))


class CountingSink(Sink):
    default_name = "Counting Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context: Any) -> Any:
        return _CountingWriter(os.path.join(self.folder, f"{context.subtask_index}.count"))


def run(seconds: float, cost_ms: float, interval_ms: int, debloat: bool,
        unaligned: bool = False) -> Dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="flowray-bench-bp-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-bp-chk-")
    window_file = os.path.join(folder, "window.json")
    config = Configuration({
        "parallelism.default": 1, "execution.checkpointing.dir": checkpoints,
        "execution.checkpointing.interval": f"{interval_ms} ms",
        "flowray.channel.debloat.enabled": "true" if debloat else "false",
        "execution.checkpointing.unaligned.enabled": "true" if unaligned else "false"})
    env = StreamExecutionEnvironment.get_execution_environment(config)
    (env.from_source(TimedSequenceSource(seconds), source_name="numbers").uid("numbers")
     .rebalance()
     .map(SlowMap(cost_ms, seconds, window_file)).uid("map")
     .sink_to(CountingSink(folder)).uid("sink"))
    result = env.execute("bench-backpressure")
    with open(window_file) as f:
        window = json.load(f)
    count = sum(int(open(os.path.join(folder, n)).read())
                for n in os.listdir(folder) if n.endswith(".count"))
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(checkpoints, ignore_errors=True)
    history = result.get_checkpoint_stats().get("history", [])
    slow = [h for h in history if h["trigger_ms"] < window["end_ms"]]
    done = [h for h in slow if h["status"] == "COMPLETED"]
    return {"records": count, "records_per_s": count / seconds,
            "durations": [h["duration_ms"] for h in done],
            "not_completed": len(slow) - len(done)}


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--cost-ms", type=float, default=5.0)
    ap.add_argument("--interval-ms", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default="benchmarks/results/backpressure.json")
    ap.add_argument("--only", default="",
                    help="run only the rows whose name matches this regular expression")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())
    configs = [
        (f"{args.cost_ms:g} ms map, debloat off", args.cost_ms, False, False),
        (f"{args.cost_ms:g} ms map, debloat on", args.cost_ms, True, False),
        (f"{args.cost_ms:g} ms map, unaligned", args.cost_ms, False, True),
        ("free map, debloat off", 0.0, False, False),
        ("free map, debloat on", 0.0, True, False),
        ("free map, unaligned", 0.0, False, True),
    ]
    configs = [c for c in configs if re.search(args.only, c[0])]
    results: Dict[str, List[dict]] = {name: [] for name, *_ in configs}
    for _ in range(args.rounds):
        for name, cost, debloat, unaligned in configs:
            results[name].append(run(args.seconds, cost, args.interval_ms, debloat,
                                     unaligned))

    free_runs = results.get("free map, debloat on", [])
    free_durations = [d for r in free_runs for d in r["durations"]]
    free = statistics.median(free_durations) if free_durations else None
    print(f"\ncheckpoint every {args.interval_ms} ms, {args.seconds:g} s of processing per run, "
          f"{args.rounds} rounds; durations: trigger to completion, over the checkpoints "
          "triggered while the map was slow\n")
    print(f"{'run':<28}{'ckpts/run':>10}{'not done':>9}{'dur p50':>9}{'dur max':>9}"
          f"{'p50 vs free map':>16}{'records/s':>11}")
    rows = []
    for name, cost, debloat, unaligned in configs:
        rs = results[name]
        durations = [d for r in rs for d in r["durations"]]
        p50 = statistics.median(durations) if durations else float("nan")
        mx = max(durations) if durations else float("nan")
        rps = statistics.median(r["records_per_s"] for r in rs)
        row = {"name": name, "cost_ms": cost, "debloat": debloat, "unaligned": unaligned,
               "checkpoints_per_run": len(durations) / len(rs),
               "not_completed_per_run": sum(r["not_completed"] for r in rs) / len(rs),
               "duration_ms_p50": p50, "duration_ms_max": mx,
               "p50_vs_free_map": p50 / free if free else None,
               "records_per_s": rps}
        rows.append(row)
        ratio = f"{p50 / free:.1f}x" if free else "-"
        shown = f"{rps:,.0f}" if not cost else "-"
        print(f"{name:<28}{row['checkpoints_per_run']:>10.1f}"
              f"{row['not_completed_per_run']:>9.1f}{p50:>9.0f}{mx:>9.0f}{ratio:>16}"
              f"{shown:>11}")
    unaligned_runs = results.get("free map, unaligned")
    aligned_runs = results.get("free map, debloat off")
    if unaligned_runs and aligned_runs:
        # each round's pair ran back to back: the median of the per-round ratios
        ratios = [u["records_per_s"] / a["records_per_s"]
                  for u, a in zip(unaligned_runs, aligned_runs)]
        print(f"\nunaligned without back-pressure: {statistics.median(ratios):.3f}x the "
              "records/s of aligned (debloating off both; median of the rounds' ratios "
              f"{', '.join(f'{r:.3f}' for r in ratios)}; goal >= 0.97x)")
    print("\nnot done: triggered while the map was slow, not completed (declined or left "
          "waiting); with debloating off the backlog drains when the map turns free, so "
          "its durations are a lower bound")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"seconds": args.seconds, "cost_ms": args.cost_ms,
                   "interval_ms": args.interval_ms, "rounds": args.rounds, "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
