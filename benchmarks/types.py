"""What declared types cost: the keyed running sum with and without an ``output_type`` on
its map, in one invocation (rounds alternating, best of ``--rounds``).

    source (NumberSequenceSource) -> map (key, n) [output_type] -> key_by -> sum -> sink

``none`` is the baseline (no conversion, no wrapper); ``TUPLE`` checks and converts each
record as a tuple of STRING and LONG; ``ROW_NAMED`` makes each record a named ``Row``
(which the keyed sum then keeps). Every run's record count is checked.

    python benchmarks/types.py [--records 1000000] [--rounds 3] [--target local|ray]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import CountingSink, read_counts

from flowray import Configuration, NumberSequenceSource, StreamExecutionEnvironment
from flowray.common import Types

KEYS = 10_000
TYPES: Dict[str, Any] = {
    "none": None,
    "TUPLE([STRING, LONG])": Types.TUPLE([Types.STRING(), Types.LONG()]),
    "ROW_NAMED([k, v], [STRING, LONG])": Types.ROW_NAMED(["k", "v"],
                                                        [Types.STRING(), Types.LONG()]),
}


def run(type_info: Any, records: int, target: str) -> float:
    folder = tempfile.mkdtemp(prefix="flowray-types-bench-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            Configuration().set_string("execution.target", target))
        env.set_parallelism(1)
        (env.from_source(NumberSequenceSource(0, records - 1), source_name="numbers")
            .map(lambda x: (f"k{x % KEYS}", x), output_type=type_info)
            .key_by(lambda r: r[0]).sum(1).sink_to(CountingSink(folder)))
        start = time.perf_counter()
        env.execute("types-bench")
        wall = time.perf_counter() - start
        count, _ = read_counts(folder)
        if count != records:
            raise SystemExit(f"expected {records} records, the sink counted {count}")
        return wall
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: List[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", choices=["local", "ray"], default="local")
    args = p.parse_args(argv)
    walls: Dict[str, List[float]] = {name: [] for name in TYPES}
    for _ in range(args.rounds):
        for name, type_info in TYPES.items():
            walls[name].append(run(type_info, args.records, args.target))
    base = args.records / min(walls["none"])
    print(f"\nkeyed running sum, {args.records:,} records, {KEYS:,} keys, p=1, "
          f"{args.target} target, best of {args.rounds} (wall time)\n")
    print(f"{'map output_type':36s}{'records/s':>12s}{'vs none':>10s}")
    print("-" * 58)
    for name, ws in walls.items():
        rate = args.records / min(ws)
        print(f"{name:36s}{rate:>12,.0f}{rate / base:>9.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
