"""End-to-end latency against the buffer timeout: p50, p99 and p99.9 from a record's
creation to the sink, with exactly-once checkpoints every second, in one invocation.

    source -> map -> key_by -> process (a per-key count in ValueState) -> sink, p=2

For each buffer timeout (``execution.buffer-timeout.interval``: 0, 5 and 100 ms by
default) two runs:

* **throughput**: the source emits as fast as it can; records / the longest task's time;
* **latency**: the source is paced at half of the 100 ms setting's top rate (the same rate
  for every setting). Each record carries its *scheduled* creation time (start + i / rate,
  so that a source that falls behind its schedule shows up as latency, not as a slower
  rate), and the sink measures ``now - creation`` per record. The run's latencies are
  reported overall, without its first ``--warmup`` seconds, and apart for records that
  reached the sink while a checkpoint was in progress (trigger to completion).

With ``--rounds N`` each setting has N throughput runs and N latency runs, in alternating
order; the table gives their medians (one run's p99 on a 2-core machine moves by several
ms from run to run), and each latency run prints its own line.

``--stages`` splits each record's latency in three, from times the records carry (the
map and the process function stamp them, which costs some throughput, so it is off by
default): **source** (scheduled creation to the map's output: the source's lag behind its
schedule), **exchange** (the map's output to the keyed process function: the output
buffer, the channel and the keyed task's input) and **to sink** (the process function to
the sink's write, chained).

Every run's per-key counts are checked against the closed form (each key's count is the
number of records with that key); a wrong count ends the benchmark with an error.

    python benchmarks/latency.py [--seconds 20] [--timeouts 0,5,100] [--keys 1000] [--rate R]
                                 [--rounds N] [--stages]
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
from array import array
from typing import Any, Dict, List, Optional

import numpy as np

from flowray.common import Configuration, Types
from flowray.datastream import StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter
from flowray.datastream.functions import KeyedProcessFunction, RuntimeContext
from flowray.datastream.state import ValueStateDescriptor
from flowray.operators.sources import Source, SourceReader, SourceReaderContext

PARALLELISM = 2


class _PacedReader(SourceReader):
    """Records ``index, index + p, ...`` of ``total``; paced: record i is due at
    ``start + i / rate`` and carries that time (ns); unpaced: carries the time it is made."""

    def __init__(self, total: int, keys: int, rate: Optional[float], index: int,
                 parallelism: int) -> None:
        self._total, self._keys, self._rate = total, keys, rate
        self._next, self._step = index, parallelism
        self._start_ns: Optional[int] = None

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        i, step, total = self._next, self._step, self._total
        if i >= total:
            return None
        now = time.time_ns()
        if self._start_ns is None:
            self._start_ns = now
        keys = self._keys
        if self._rate is None:
            end = min(total, i + max_records * step)
            out = [(i % keys, now) for i in range(i, end, step)]
        else:
            ns_per = 1e9 / self._rate
            due = min(total, int((now - self._start_ns) / ns_per) + 1)
            end = min(due, i + max_records * step)
            start = self._start_ns
            out = [(j % keys, start + int(j * ns_per)) for j in range(i, end, step)]
        if out:
            self._next = i + len(out) * step
        return out

    def snapshot_state(self) -> Any:
        return self._next

    def restore_state(self, state: Any) -> None:
        self._next = int(state)


class PacedSource(Source):
    default_name = "Paced Source"

    def __init__(self, total: int, keys: int, rate: Optional[float]) -> None:
        self.total, self.keys, self.rate = total, keys, rate

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        # every subtask takes the same share of the rate (record j is due at j / rate)
        return _PacedReader(self.total, self.keys, self.rate, context.subtask_index,
                            context.parallelism)


class CountPerKey(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value[0], n, value[1]


class StampedCountPerKey(CountPerKey):
    """:class:`CountPerKey` for ``--stages``: passes on the map's stamp and adds its own."""

    def process_element(self, value, ctx):
        for out in super().process_element(value, ctx):
            yield out + (value[2], time.time_ns())


def _stamp(r):
    return r[0], r[1], time.time_ns()


def _unstamped(r):
    return r


class _LatencyWriter(SinkWriter):
    """Per record ``now - creation`` (ns) and each key's highest count; per batch its
    arrival time and first index (to tell records that arrived during a checkpoint);
    with ``--stages`` also each record's three stage times (ns).

    The latencies are kept one small array per batch: a single array grown to tens of MB
    is copied to new pages now and then (60 ms on 2026-12-07, seen with ``perf``), a
    stall in the sink's task that showed up as the run's worst latency."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.latencies: List[array] = []
        self.recorded = 0
        self.stages: List[array] = []
        self.arrivals = array("q")
        self.firsts = array("q")
        self.counts: Dict[int, int] = {}

    def write(self, element):
        self.write_batch([element])

    def write_batch(self, elements):
        now = time.time_ns()
        self.arrivals.append(now)
        self.firsts.append(self.recorded)
        self.recorded += len(elements)
        counts = self.counts
        self.latencies.append(array("q", [now - e[2] for e in elements]))
        if elements and len(elements[0]) == 5:   # stamped (--stages)
            self.stages.append(array("q", [x for _, _, c, m, p in elements
                                           for x in (m - c, p - m, now - p)]))
        for k, n, *_ in elements:
            if n > counts.get(k, 0):
                counts[k] = n

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((b"".join(a.tobytes() for a in self.latencies),
                             self.arrivals.tobytes(), self.firsts.tobytes(), self.counts,
                             b"".join(a.tobytes() for a in self.stages)), f)


class LatencySink(Sink):
    default_name = "Latency Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context):
        return _LatencyWriter(os.path.join(self.folder, f"{context.subtask_index}.pkl"))


def expected_counts(total: int, keys: int) -> Dict[int, int]:
    return {k: (total - k + keys - 1) // keys for k in range(min(keys, total))}


def run(total: int, keys: int, rate: Optional[float], timeout_ms: int,
        checkpoint_ms: int, stages: bool = False) -> dict:
    folder = tempfile.mkdtemp(prefix="flowray-bench-latency-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-latency-chk-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(Configuration({
            "parallelism.default": PARALLELISM,
            "execution.checkpointing.dir": checkpoints,
            "execution.checkpointing.interval": f"{checkpoint_ms} ms",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
        }))
        env.set_buffer_timeout(timeout_ms)
        (env.from_source(PacedSource(total, keys, rate), source_name="paced")
            .map(_stamp if stages else _unstamped).key_by(lambda r: r[0])
            .process(StampedCountPerKey() if stages else CountPerKey())
            .sink_to(LatencySink(folder)))
        result = env.execute(f"bench-latency-{timeout_ms}ms")
        running = max(m["duration_ms"] for m in result.task_metrics) / 1000.0
        lat, arrivals, firsts, counts, stage_times = [], [], [], {}, []
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "rb") as f:
                lb, ab, fb, c, sb = pickle.load(f)
            stage_times.append(np.frombuffer(sb, dtype=np.int64).reshape(-1, 3))
            base = sum(len(x) for x in lat)
            lat.append(np.frombuffer(lb, dtype=np.int64))
            arrivals.append(np.frombuffer(ab, dtype=np.int64))
            firsts.append(np.frombuffer(fb, dtype=np.int64) + base)
            counts.update(c)
        latencies = np.concatenate(lat)
        # each record's arrival time: its batch's
        batch_arrivals = np.concatenate(arrivals)
        batch_firsts = np.concatenate(firsts)
        sizes = np.diff(np.append(batch_firsts, len(latencies)))
        record_arrivals = np.repeat(batch_arrivals, sizes)
        checkpoints_done = [h for h in result.get_checkpoint_stats().get("history", [])
                            if h["status"] == "COMPLETED"]
        return {"running_s": running, "latencies_ns": latencies, "arrivals_ns": record_arrivals,
                "counts": counts, "checkpoints": checkpoints_done,
                "stages_ns": np.concatenate(stage_times) if stages else None}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(checkpoints, ignore_errors=True)


def latency_summary(r: dict, warmup_s: float) -> dict:
    lat, arr = r["latencies_ns"], r["arrivals_ns"]
    if not len(lat):
        return {}
    keep = arr >= arr.min() + int(warmup_s * 1e9)
    lat, arr = lat[keep], arr[keep]
    during = np.zeros(len(arr), dtype=bool)
    for h in r["checkpoints"]:
        if h.get("end_ms") is None:
            continue
        during |= (arr >= h["trigger_ms"] * 1_000_000) & (arr <= h["end_ms"] * 1_000_000)

    def pct(values: np.ndarray) -> Dict[str, Optional[float]]:
        if not len(values):
            return {"p50": None, "p99": None, "p999": None}
        ms = values / 1e6
        return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
                "p999": float(np.percentile(ms, 99.9))}

    out = {"all": pct(lat), "outside_checkpoints": pct(lat[~during]),
           "during_checkpoints": pct(lat[during]), "records": int(len(lat)),
           "during_share": float(during.mean()) if len(during) else 0.0}
    if r.get("stages_ns") is not None:
        stages = r["stages_ns"][keep]
        tail = stages[lat >= np.percentile(lat, 99)]
        out["stages"] = {name: {**pct(stages[:, i]),
                                "mean_in_tail": float(tail[:, i].mean() / 1e6)}
                         for i, name in enumerate(STAGES)}
    return out


STAGES = ("source", "exchange", "to sink")
SUMMARY_FIGURES = (("all", "p50"), ("all", "p99"), ("all", "p999"),
                   ("outside_checkpoints", "p99"), ("during_checkpoints", "p99"))


def median_summary(rounds: List[dict]) -> dict:
    """The median over a setting's latency runs of each figure the table shows, and each
    run's p99 (``p99_runs``)."""
    out: Dict[str, Any] = {"runs": rounds, "p99_runs": [r["all"]["p99"] for r in rounds]}
    for part, q in SUMMARY_FIGURES:
        values = [r[part][q] for r in rounds if r[part][q] is not None]
        out.setdefault(part, {})[q] = statistics.median(values) if values else None
    if all("stages" in r for r in rounds):
        out["stages"] = {name: {f: statistics.median(r["stages"][name][f] for r in rounds)
                                for f in ("p50", "p99", "mean_in_tail")}
                         for name in STAGES}
    return out


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="each run lasts about this long")
    ap.add_argument("--timeouts", default="0,5,100", help="buffer timeouts (ms) to compare")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--checkpoint-ms", type=int, default=1000)
    ap.add_argument("--warmup", type=float, default=3.0,
                    help="seconds at the start of each latency run left out")
    ap.add_argument("--rounds", type=int, default=1,
                    help="throughput and latency runs per timeout (alternating; medians)")
    ap.add_argument("--stages", action="store_true",
                    help="split each record's latency into source, exchange and to-sink "
                         "from stamps the records carry (costs some throughput)")
    ap.add_argument("--rate", type=float, default=None,
                    help="pace the latency runs at this many records/s (default: half of "
                         "the 100 ms setting's top rate in this invocation)")
    ap.add_argument("--json", default="benchmarks/results/latency.json")
    args = ap.parse_args(argv)
    timeouts = [int(t) for t in args.timeouts.split(",") if t]
    if 100 not in timeouts:
        ap.error("--timeouts must include 100 (the latency runs are paced at half of its "
                 "top rate)")
    logging.basicConfig(level=logging.WARNING)
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())
    errors: List[str] = []

    def checked(name: str, total: int, r: dict) -> dict:
        if r["counts"] != expected_counts(total, args.keys):
            errors.append(f"{name}: wrong per-key counts")
        return r

    # throughput: size a run for --seconds from a probe at 100 ms
    probe_n = 1_000_000
    probe = checked("probe", probe_n, run(probe_n, args.keys, None, 100, args.checkpoint_ms))
    total = max(probe_n, int(probe_n / probe["running_s"] * args.seconds))
    rates: Dict[int, List[float]] = {t: [] for t in timeouts}
    for rnd in range(args.rounds):
        for t in (timeouts if rnd % 2 == 0 else list(reversed(timeouts))):
            r = checked(f"throughput {t} ms", total, run(total, args.keys, None, t,
                                                         args.checkpoint_ms))
            rates[t].append(total / r["running_s"])
            print(f"  throughput  buffer timeout {t:>4} ms  {total:>11,} records "
                  f"{r['running_s']:6.1f} s  {total / r['running_s']:>11,.0f} rec/s", flush=True)
    top = {t: statistics.median(v) for t, v in rates.items()}
    rate = args.rate or top[100] / 2
    paced_by = "--rate" if args.rate else "half of the 100 ms setting's top rate"
    paced_total = int(rate * args.seconds)
    runs: Dict[int, List[dict]] = {t: [] for t in timeouts}
    for rnd in range(args.rounds):
        for t in (timeouts if rnd % 2 == 0 else list(reversed(timeouts))):
            r = checked(f"latency {t} ms", paced_total,
                        run(paced_total, args.keys, rate, t, args.checkpoint_ms,
                            stages=args.stages))
            one = latency_summary(r, args.warmup)
            one["checkpoints"] = len(r["checkpoints"])
            runs[t].append(one)
            s = one["all"]
            line = (f"  latency     buffer timeout {t:>4} ms  {paced_total:>11,} records at "
                    f"{rate:,.0f}/s: p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms, "
                    f"p99.9 {s['p999']:.1f} ms")
            if "stages" in one:
                line += "; p99 " + ", ".join(f"{n} {one['stages'][n]['p99']:.1f}"
                                             for n in STAGES)
            print(line, flush=True)
    summaries = {t: median_summary(v) for t, v in runs.items()}

    def ms(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:.1f}"

    print(f"\nsource -> map -> key_by -> process -> sink, p={PARALLELISM}, {args.keys:,} keys, "
          f"exactly-once checkpoints every {args.checkpoint_ms} ms; latency runs paced at "
          f"{rate:,.0f} records/s ({paced_by}), "
          f"{args.seconds:.0f} s each, first {args.warmup:.0f} s left out"
          + (f"; medians of {args.rounds} alternating rounds" if args.rounds > 1 else "")
          + "\n")
    header = (f"{'buffer timeout':<16}{'records/s':>12}{'vs 100 ms':>11}{'p50 ms':>9}"
              f"{'p99 ms':>9}{'p99.9 ms':>10}{'p99 outside ckpt':>18}{'p99 during ckpt':>17}")
    print(header)
    print("-" * len(header))
    for t in timeouts:
        s = summaries[t]
        print(f"{str(t) + ' ms':<16}{top[t]:>12,.0f}{top[t] / top[100]:>10.2f}x"
              f"{ms(s['all']['p50']):>9}{ms(s['all']['p99']):>9}{ms(s['all']['p999']):>10}"
              f"{ms(s['outside_checkpoints']['p99']):>18}"
              f"{ms(s['during_checkpoints']['p99']):>17}")
    if args.rounds > 1:
        print("\np99 of each latency run (ms): " + "; ".join(
            f"{t} ms: " + ", ".join(ms(v) for v in summaries[t]["p99_runs"]) for t in timeouts))
    if args.stages:
        print("\nwhere the time goes (ms; the records' own stamps): p50 / p99 of each stage, "
              "and its mean among the records at or above the run's p99")
        header = f"{'buffer timeout':<16}" + "".join(f"{n:>26}" for n in STAGES)
        print(header)
        print("-" * len(header))
        for t in timeouts:
            st = summaries[t]["stages"]
            cells = [f"{ms(st[n]['p50'])} / {ms(st[n]['p99'])} (tail "
                     f"{ms(st[n]['mean_in_tail'])})" for n in STAGES]
            print(f"{str(t) + ' ms':<16}" + "".join(f"{c:>26}" for c in cells))
    if 5 in summaries:
        p99 = summaries[5]["all"]["p99"]
        ratio = top[5] / top[100]
        print(f"\ngoal at 5 ms: p99 <= 25 ms ({p99:.1f} ms: {'met' if p99 <= 25 else 'NOT MET'}), "
              f"throughput >= 0.7x of 100 ms ({ratio:.2f}x: "
              f"{'met' if ratio >= 0.7 else 'NOT MET'})")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"seconds": args.seconds, "keys": args.keys, "paced_rate": rate,
                   "checkpoint_ms": args.checkpoint_ms, "throughput": top,
                   "latency": summaries}, f, indent=1)
    if errors:
        sys.exit("wrong results:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
