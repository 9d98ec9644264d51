"""What declared types cost: the keyed running sum with and without an ``output_type`` on
its map, in one invocation (rounds alternating, best of ``--rounds``).

    source (NumberSequenceSource) -> map (key, n) [output_type] -> key_by -> sum -> sink

``none`` is the baseline (no conversion, no wrapper); ``TUPLE`` checks and converts each
record as a tuple of STRING and LONG; ``ROW_NAMED`` makes each record a named ``Row``
(which the keyed sum then keeps). Every run's record count and each key's last sum are
checked against their closed forms.

The sink keeps each key's latest sum by indexing each record (``last[r[0]] = r[1]``),
which costs a row about what it costs a tuple. ``--sink update`` keeps them with
``dict.update(records)`` instead (``throughput.py``'s ``CountingSink``): CPython's dict
takes only exact tuples and lists as pairs directly and copies each other sequence, a
``Row`` included, into a new list first, about 1,200 instructions per record of the
benchmark's own sink rather than of flowray.

Two measures:

* time (default): records/s over each run's wall time (job start included), the median
  and the best of ``--rounds`` alternating rounds, each ratio against the same statistic
  of ``none``. This machine's speed swings between minutes; compare the ratios of one
  invocation.
* ``--instructions``: instructions per record counted by valgrind's callgrind (local
  target), which move by about 2% run to run whatever else the machine does (where the
  clock cuts batches moves them a little). Each type is counted in two processes, each
  running a warm-up job and then a job of ``--records`` or of a fifth of them; the
  difference over the records between them leaves job start out. About a minute per
  count at 100,000 records.

    python benchmarks/types.py [--records 1000000] [--rounds 3] [--target local|ray]
                               [--sink index|update]
    python benchmarks/types.py --instructions [--records 100000] [--before REV]
                               [--sink index|update]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import CountingSink, _CountingWriter, read_counts

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment
from flowray.common import Types

KEYS = 10_000
TYPES: Dict[str, Any] = {
    "none": None,
    "TUPLE([STRING, LONG])": Types.TUPLE([Types.STRING(), Types.LONG()]),
    "ROW_NAMED([k, v], [STRING, LONG])": Types.ROW_NAMED(["k", "v"],
                                                        [Types.STRING(), Types.LONG()]),
}


class _IndexingWriter(_CountingWriter):
    def write_batch(self, elements):
        self.count += len(elements)
        last = self.last
        for r in elements:   # in order: the latest sum per key
            last[r[0]] = r[1]


class IndexingCountingSink(CountingSink):
    """CountingSink keeping each key's latest sum by indexing each record."""

    writer = _IndexingWriter


SINKS = {"index": IndexingCountingSink, "update": CountingSink}


def expected_sums(records: int) -> Dict[str, int]:
    """Each key's sum over 0..records-1: key j's values are j, j+KEYS, ... (m of them)."""
    out = {}
    for j in range(min(KEYS, records)):
        m = (records - j + KEYS - 1) // KEYS
        out[f"k{j}"] = m * j + KEYS * m * (m - 1) // 2
    return out


def run(type_info: Any, records: int, target: str, sink: str = "index") -> float:
    folder = tempfile.mkdtemp(prefix="flowray-types-bench-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            Configuration().set_string("execution.target", target))
        env.set_parallelism(1)
        (env.from_source(NumberSequenceSource(0, records - 1), source_name="numbers")
            .map(lambda x: (f"k{x % KEYS}", x), output_type=type_info)
            .key_by(lambda r: r[0]).sum(1).sink_to(SINKS[sink](folder)))
        start = time.perf_counter()
        env.execute("types-bench")
        wall = time.perf_counter() - start
        count, last = read_counts(folder)
        if count != records:
            raise SystemExit(f"expected {records} records, the sink counted {count}")
        if last != expected_sums(records):
            raise SystemExit("the keys' last sums differ from their closed forms")
        return wall
    finally:
        shutil.rmtree(folder, ignore_errors=True)


WARM_UP = 20_000


def child(name: str, records: int, sink: str) -> None:
    """One measuring process (``--instructions``): a warm-up job, then one of ``records``."""
    import flowray.common.types as row_types
    run(TYPES[name], WARM_UP, "local", sink)
    run(TYPES[name], records, "local", sink)
    print("RESULT " + json.dumps({"c_rows": getattr(row_types, "C_ROWS", False),
                                  "module": row_types.__file__}), flush=True)


def _instructions(name: str, records: int, sink: str,
                  site: Optional[str] = None) -> Dict[str, Any]:
    from _revision import env_for
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           sys.executable, os.path.abspath(__file__), "--child", name, "--sink", sink,
           "--records"]
    env = dict(env_for(site), PYTHONHASHSEED="0")  # the same dict layouts run after run
    out: Dict[str, Any] = {}
    for n in (records, records // 5):
        proc = subprocess.run(cmd + [str(n)], env=env, capture_output=True, text=True,
                              timeout=7200)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        counts = [ln for ln in proc.stderr.splitlines() if "Collected :" in ln]
        if proc.returncode != 0 or not lines or not counts:
            raise SystemExit(f"{name}: measurement failed\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}")
        out.update(json.loads(lines[-1][len("RESULT "):]))
        if site is not None and not out["module"].startswith(site):
            raise SystemExit(f"measured {out['module']}, not the revision at {site}")
        out[n] = int(counts[-1].split()[-1])
    out["per_record"] = (out[records] - out[records // 5]) / (records - records // 5)
    return out


def main_instructions(records: int, before: Optional[str], sink: str) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind")
    counts = {name: _instructions(name, records, sink) for name in TYPES}
    earlier: Dict[str, Dict[str, Any]] = {}
    if before:
        from _revision import export_revision
        with tempfile.TemporaryDirectory(prefix="flowray-types-before-") as tmp:
            site = export_revision(before, tmp)
            earlier = {name: _instructions(name, records, sink, site) for name in TYPES}
    base = counts["none"]["per_record"]
    c_rows = counts["none"]["c_rows"]
    print(f"\nkeyed running sum, {records:,} vs {records // 5:,} records, {KEYS:,} keys, p=1, "
          f"local target, {sink} sink, instructions per record (callgrind); Row's C half: "
          f"{'yes' if c_rows else 'no'}\n")
    head = f"{'map output_type':36s}{'instr/record':>14s}{'vs none':>10s}"
    if earlier:
        head += f"{'before':>12s}{'vs none':>10s}{'fewer':>8s}"
    print(head)
    print("-" * len(head))
    for name, c in counts.items():
        per = c["per_record"]
        line = f"{name:36s}{per:>14,.0f}{base / per:>9.2f}x"
        if earlier:
            old = earlier[name]["per_record"]
            line += (f"{old:>12,.0f}{earlier['none']['per_record'] / old:>9.2f}x"
                     f"{old / per:>7.2f}x")
        print(line)
    if earlier:
        print(f"before: flowray at {before} (its C halves built, if it has any); fewer: "
              f"before / now")


def main(argv: List[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=None,
                   help="records per run (default 1,000,000; 100,000 with --instructions)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", choices=["local", "ray"], default="local")
    p.add_argument("--instructions", action="store_true",
                   help="count instructions with callgrind instead of timing")
    p.add_argument("--before", default=None,
                   help="with --instructions: also count this git revision")
    p.add_argument("--sink", choices=sorted(SINKS), default="index",
                   help="how the sink keeps each key's latest sum (see the module docstring)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.records, args.sink)
    if args.instructions:
        return main_instructions(args.records or 100_000, args.before, args.sink)
    args.records = args.records or 1_000_000
    walls: Dict[str, List[float]] = {name: [] for name in TYPES}
    for _ in range(args.rounds):
        for name, type_info in TYPES.items():
            walls[name].append(run(type_info, args.records, args.target, args.sink))
    median = {name: args.records / statistics.median(ws) for name, ws in walls.items()}
    best = {name: args.records / min(ws) for name, ws in walls.items()}
    print(f"\nkeyed running sum, {args.records:,} records, {KEYS:,} keys, p=1, "
          f"{args.target} target, {args.sink} sink, {args.rounds} rounds (wall time)\n")
    head = (f"{'map output_type':36s}{'median rec/s':>14s}{'vs none':>10s}"
            f"{'best rec/s':>14s}{'vs none':>10s}")
    print(head)
    print("-" * len(head))
    for name in walls:
        print(f"{name:36s}{median[name]:>14,.0f}{median[name] / median['none']:>9.2f}x"
              f"{best[name]:>14,.0f}{best[name] / best['none']:>9.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
