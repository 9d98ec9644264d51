"""The first checkpoint of a small job against its later ones, in one invocation (issue
32: the first took 6-13 s on a fresh machine, 1.2-1.5 s on a warm Ray, while later ones
took tens of milliseconds).

Job, as a new user would write it: a collection source -> map -> key_by -> reduce ->
filter -> print, parallelism 2, a checkpoint every second, heap and RocksDB. Each round
runs both backends; the table shows the first checkpoint's duration beside the median of
the later ones.

    python benchmarks/first_checkpoint.py [--records 8000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
from typing import List

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.typeinfo import Types


def run(records: int, backend: str) -> List[int]:
    """Checkpoint durations (ms) of one run, in order."""
    checkpoints = tempfile.mkdtemp(prefix="flowray-bench-first-")
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "parallelism.default": 2, "execution.checkpointing.dir": checkpoints,
        "state.backend.type": backend, "execution.checkpointing.interval": "1 s"}))
    (env.from_collection(list(range(records)), type_info=Types.INT())
        .map(lambda x: (x % 100, 1))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda t: t[1] % 100_000_000 == 0)   # prints nothing
        .print())
    result = env.execute("first-checkpoint")
    shutil.rmtree(checkpoints, ignore_errors=True)
    history = sorted(result.get_checkpoint_stats()["history"],
                     key=lambda h: h["checkpoint_id"])
    return [h["duration_ms"] for h in history if h["status"] == "COMPLETED"]


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=8_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(f"\n{'backend':<10}{'round':>6}{'first ms':>10}{'later p50 ms':>14}{'first/later':>13}"
          f"{'checkpoints':>13}")
    for round_ in range(1, args.rounds + 1):
        for backend in ("hashmap", "rocksdb"):
            durations = run(args.records, backend)
            if len(durations) < 2:
                print(f"{backend:<10}{round_:>6}  too few checkpoints ({durations}): "
                      "raise --records")
                continue
            first, later = durations[0], statistics.median(durations[1:])
            print(f"{backend:<10}{round_:>6}{first:>10}{later:>14.0f}"
                  f"{first / max(later, 1):>12.1f}x{len(durations):>13}")


if __name__ == "__main__":
    main()
