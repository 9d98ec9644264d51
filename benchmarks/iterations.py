"""Iterations: Collatz steps per number through a flowray loop, against the same loop in
one Python process, in the same run.

Each number goes round the loop once per Collatz step (``n -> n/2`` or ``3n+1``) until it
reaches 1, then leaves with its count of steps; the loop's body is one ``process``
function that sends a record round again (main output) or out (a side output). Baselines,
in this process: the loop in plain Python, and the same loop calling the job's ``Step``
function once per step. The flowray job runs on a local Ray with checkpoints every
``--checkpoint-ms`` (0: none), its loop closed inside the head's task (a forward
feedback), and with ``--channels`` also through channels (a rebalanced feedback); its
output is checked against the baseline's.

    python benchmarks/iterations.py [--numbers 1000000] [--parallelism 2] [--checkpoint-ms 0]
                                    [--channels]
"""

from __future__ import annotations

import argparse
import time
from typing import Dict, Iterable, Tuple

import ray

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream.connectors.number_seq import NumberSequenceSource
from flowray.datastream import OutputTag
from flowray.datastream.functions import ProcessFunction

DONE = OutputTag("done")


def collatz_in_one_process(numbers: Iterable[int]) -> Dict[int, int]:
    out = {}
    for start in numbers:
        n, steps = start, 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        out[start] = steps
    return out


class Step(ProcessFunction):
    """One Collatz step: round again, or out with the count at 1."""

    def process_element(self, value: Tuple[int, int, int], ctx):
        start, n, steps = value
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        if n == 1:
            yield DONE, (start, steps + 1)
        else:
            yield start, n, steps + 1


def collatz_calling_step(numbers: Iterable[int]) -> Dict[int, int]:
    """The same loop, calling the job's function once per step."""
    step = Step()
    out = {}
    for start in numbers:
        record = (start, start, 0)
        while True:
            (result,) = step.process_element(record, None)
            if result[0] is DONE:
                out[start] = result[1][1]
                break
            record = result
    return out


def collatz_on_flowray(numbers: int, parallelism: int, checkpoint_ms: int,
                       channels: bool = False
                       ) -> Tuple[Dict[int, int], float, Dict[str, int]]:
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "rest.port": "0"}))
    env.set_parallelism(parallelism)
    if checkpoint_ms:
        env.enable_checkpointing(checkpoint_ms)
    starts = (env.from_source(NumberSequenceSource(2, numbers + 1),
                              WatermarkStrategy.no_watermarks(), "numbers")
              .map(lambda n: (n, n, 0)))
    it = starts.iterate()
    moved = it.process(Step()).name("collatz step")
    it.close_with(moved.rebalance() if channels else moved)
    results = moved.get_side_output(DONE).execute_and_collect("collatz")
    out = dict(results)
    seconds = time.perf_counter() - t0
    return out, seconds, {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numbers", type=int, default=1_000_000)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--checkpoint-ms", type=int, default=0)
    ap.add_argument("--channels", action="store_true",
                    help="also run the loop through channels (a rebalanced feedback)")
    args = ap.parse_args()
    ray.init(include_dashboard=False, log_to_driver=False, namespace="flowray")

    t0 = time.perf_counter()
    expected = collatz_in_one_process(range(2, args.numbers + 2))
    base_s = time.perf_counter() - t0
    steps = sum(expected.values())
    t0 = time.perf_counter()
    if collatz_calling_step(range(2, args.numbers + 2)) != expected:
        raise SystemExit("the Step function's loop differs from the plain loop")
    call_s = time.perf_counter() - t0
    rows = [("one Python loop (baseline)", base_s),
            ("one Python loop calling Step per step", call_s)]
    for channels in ((False, True) if args.channels else (False,)):
        got, seconds, _ = collatz_on_flowray(args.numbers, args.parallelism,
                                             args.checkpoint_ms, channels)
        if got != expected:
            missing = len(set(expected) - set(got))
            raise SystemExit(f"flowray's output differs from the baseline's ({missing} "
                             "numbers missing or wrong)")
        rows.append((f"flowray, loop {'through channels' if channels else 'in the head task'}"
                     , seconds))
    print(f"\ncollatz steps for {args.numbers:,} numbers: {steps:,} steps, each one trip "
          f"round the loop; flowray at parallelism {args.parallelism} (job start "
          f"included), checkpoints "
          f"{'every %d ms' % args.checkpoint_ms if args.checkpoint_ms else 'off'}\n")
    print(f"  {'run':44} {'seconds':>8} {'steps/s':>12} {'vs baseline':>12}")
    for name, s in rows:
        print(f"  {name:44} {s:8.2f} {steps / s:12,.0f} {base_s / s:11.2f}x")


if __name__ == "__main__":
    main()
