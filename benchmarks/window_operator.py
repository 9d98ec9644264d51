"""The window operator alone, in one process (no Ray, no channels): what the window task
spends on windowing, against a one-process Python loop and an earlier flowray revision.

The operator gets what the window task gets: the events of ``benchmarks/windows.py``
(``(key, value, timestamp_ms)``, 10,000 keys, 20,000 events per event-time second, out of
order by < 800 ms) in batches of 1,000 unpickled from bytes as a channel delivers them,
with their key groups and timestamps, and a watermark (the latest timestamp minus 1 s)
after each batch, on the heap backend. Results are checked against the plain-Python
reference of ``windows.py``; a mismatch ends the benchmark with an error.

Two measures:

* time (default): ns per event, medians of alternating rounds (this tree, the loop, and
  ``--before REV`` in a process of its own). This machine's speed swings by 20-40%
  between minutes; compare figures of one invocation only.
* ``--instructions``: instructions per event counted by valgrind's callgrind, which do
  not depend on what else the machine does (the same count run after run). Each side is
  counted twice, with and without the measured run, and the difference divided by the
  events. Slow (about 30 s per count at 100,000 events); the loop is not counted.

    python benchmarks/window_operator.py [--events 1000000] [--rounds 3] [--before REV]
                                         [--windows tumbling,sliding]
    python benchmarks/window_operator.py --instructions --events 100000 --before REV
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
BATCH = 1_000
WINDOWS = ("tumbling", "sliding")


def _spec(args: argparse.Namespace):
    from windows import EventSpec
    return EventSpec(args.events, args.keys, args.rate, args.disorder_ms, args.seed)


def _batches(spec) -> list:
    """The events as a channel delivers them: (pickled records, timestamps, key groups)."""
    from flowray.state.key_groups import KeyGroupAssigner
    assign = KeyGroupAssigner(128)
    out = []
    for chunk in spec:
        for i in range(0, len(chunk), BATCH):
            records = chunk[i:i + BATCH]
            out.append((pickle.dumps(records, 5), [e[2] for e in records],
                        assign.assign_batch([e[0] for e in records])))
    return out


def run_operator(batches: list, window: str) -> tuple:
    """Every batch through a window operator (reduce); (seconds, result counter)."""
    import collections

    from windows import OUT_OF_ORDERNESS_MS, SLIDE_MS, WINDOW_MS, reduce_events

    from flowray.operators.window_operator import PaneContents, WindowOperator
    from flowray.operators.windowing.assigners import (
        SlidingEventTimeWindows,
        TumblingEventTimeWindows,
    )
    from flowray.operators.windowing.functions import internal_window_function
    from tests.support.operator_harness import OperatorHarness

    assigner = (TumblingEventTimeWindows.of(WINDOW_MS) if window == "tumbling"
                else SlidingEventTimeWindows.of(WINDOW_MS, SLIDE_MS))
    op = WindowOperator(assigner, assigner.get_default_trigger(),
                        PaneContents("reduce", reduce_events),
                        internal_window_function(None, keyed=True, single_value=True,
                                                 style=None),
                        lambda e: e[0], 0, None, name="window")
    h = OperatorHarness(op)
    results: collections.Counter = collections.Counter()
    latest = watermark = -(1 << 62)
    t0 = time.perf_counter()
    for body, timestamps, key_groups in batches:
        h.process(pickle.loads(body), timestamps=list(timestamps),
                  key_groups=list(key_groups))
        latest = max(latest, max(timestamps))
        if latest - OUT_OF_ORDERNESS_MS - 1 > watermark:
            watermark = latest - OUT_OF_ORDERNESS_MS - 1
            h.watermark(watermark)
        results.update(h.records)
        h.clear_output()
    h.watermark(1 << 62)
    results.update(h.records)
    seconds = time.perf_counter() - t0
    h.close()
    return seconds, results


def child(args: argparse.Namespace) -> None:
    """One measuring process: ``--child RUNS`` (0: set up only, for --instructions)."""
    sys.path.insert(0, BENCH)
    sys.path.append(ROOT)  # tests.support, after an exported revision on PYTHONPATH
    from windows import reference
    import flowray.operators.window_operator as module
    spec = _spec(args)
    batches = _batches(spec)
    expected = reference(spec, args.windows, "reduce")  # set-up: counted with 0 runs too
    run_operator(batches[:20], args.windows)  # what is imported on first use, imported
    out = {"module": module.__file__, "ns_per_event": []}
    for _ in range(args.child):
        seconds, results = run_operator(batches, args.windows)
        if results != expected:
            raise SystemExit(f"{args.windows}: results differ from the reference")
        out["ns_per_event"].append(seconds / spec.n * 1e9)
    print("RESULT " + json.dumps(out), flush=True)


def _measure(site: Optional[str], args: argparse.Namespace, window: str, runs: int,
             instructions: bool) -> dict:
    from _revision import env_for
    env = env_for(site)
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts run after run
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(runs),
           "--windows", window, "--events", str(args.events), "--keys", str(args.keys),
           "--rate", str(args.rate), "--disorder-ms", str(args.disorder_ms),
           "--seed", str(args.seed)]
    if instructions:
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), timeout=7200)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"measurement failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    r = json.loads(lines[-1][len("RESULT "):])
    if site is not None and not r["module"].startswith(site):
        raise RuntimeError(f"measured {r['module']}, not the revision at {site}")
    if instructions:
        counts = [ln for ln in proc.stderr.splitlines() if "Collected :" in ln]
        r["instructions"] = int(counts[-1].split()[-1])
    return r


def _loop_ns(args: argparse.Namespace, window: str) -> float:
    from windows import reference, run_loop
    spec = _spec(args)
    r = run_loop(spec, window, "reduce")
    if r["results"] != reference(spec, window, "reduce"):
        raise SystemExit(f"loop {window}: results differ from the reference")
    return r["running_s"] / spec.n * 1e9


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--disorder-ms", type=int, default=800)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--windows", default=",".join(WINDOWS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", default=None, help="also measure this git revision")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions with callgrind instead of timing")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return child(args)
    sys.path.insert(0, BENCH)
    windows = [w for w in args.windows.split(",") if w]
    for w in windows:
        if w not in WINDOWS:
            ap.error(f"unknown window {w!r} ({', '.join(WINDOWS)})")
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind")
    work = tempfile.mkdtemp(prefix="flowray-bench-window-operator-")
    try:
        site = None
        if args.before:
            from _revision import export_revision
            site = export_revision(args.before, work)
        sides: Dict[str, Optional[str]] = {"flowray": None}
        if site:
            sides["before"] = site
        rows = []
        for window in windows:
            figures: Dict[str, List[float]] = {name: [] for name in sides}
            if not args.instructions:
                figures["loop"] = []
            for _ in range(1 if args.instructions else args.rounds):
                for name, where in sides.items():
                    if args.instructions:
                        full = _measure(where, args, window, 1, True)["instructions"]
                        setup = _measure(where, args, window, 0, True)["instructions"]
                        figures[name].append((full - setup) / args.events)
                    else:
                        figures[name] += _measure(where, args, window, 1, False)["ns_per_event"]
                if not args.instructions:
                    figures["loop"].append(_loop_ns(args, window))
            med = {name: statistics.median(v) for name, v in figures.items()}
            rows.append((window, med))
            print(f"  {window}: " + ", ".join(f"{n} {v:,.0f}" for n, v in med.items()),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    unit = "instructions/event" if args.instructions else "ns/event"
    print(f"\nwindow operator alone (reduce, heap), {args.events:,} events, {args.keys:,} "
          f"keys; {unit}" + ("" if args.instructions else f", medians of {args.rounds} "
                              "alternating rounds"))
    head = f"{'window':<9}{'flowray':>12}"
    if not args.instructions:
        head += f"{'loop':>10}{'vs loop':>9}"
    if site:
        head += f"{'before':>12}{'vs before':>11}"
    print(head + "\n" + "-" * len(head))
    for window, med in rows:
        line = f"{window:<9}{med['flowray']:>12,.0f}"
        if not args.instructions:  # speed: the loop's time per event over ours
            line += f"{med['loop']:>10,.0f}{med['loop'] / med['flowray']:>8.2f}x"
        if site:  # fewer instructions or less time than before: above 1
            line += f"{med['before']:>12,.0f}{med['before'] / med['flowray']:>10.2f}x"
        print(line)
    if site:
        print(f"before: flowray at {args.before}; vs before: before / flowray (above 1: "
              "faster now)")


if __name__ == "__main__":
    main()
