"""Queryable state: query latency against a job under load.

The job reads an endless stream of numbers as fast as it can, counts them per key
(``--keys`` keys) in a value state queryable as ``counts`` (checkpoints every
``--checkpoint-ms``), and drops the output: one core stays busy with the job. The driver
meanwhile queries random keys one after another, live and committed, through
``QueryableStateClient``, and times each query. The baseline, in the same run: a Ray
actor call that returns at once, the floor of any query made over Ray calls.

    python benchmarks/queryable_state.py [--queries 2000] [--keys 1000] [--checkpoint-ms 500]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Callable, Dict, List

import ray

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream.connectors.number_seq import NumberSequenceSource
from flowray.datastream.functions import KeyedProcessFunction, RuntimeContext
from flowray.queryable_state import QueryableStateClient, with_retries
from flowray.state.descriptors import ValueStateDescriptor


class Count(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(
            ValueStateDescriptor("count").set_queryable("counts"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        return iter(())


@ray.remote(num_cpus=0)
class Echo:
    def ping(self, x):
        return x


def timed(fn: Callable[[], object], n: int) -> List[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def summary(ms: List[float]) -> Dict[str, float]:
    q = statistics.quantiles(ms, n=100)
    return {"p50": statistics.median(ms), "p99": q[98], "n": len(ms)}


def start_job(keys: int, checkpoint_ms: int, name: str):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "rest.port": "0"}))
    env.set_parallelism(1)
    env.enable_checkpointing(checkpoint_ms)
    (env.from_source(NumberSequenceSource(0, 10**12), WatermarkStrategy.no_watermarks(),
                     "numbers")
     .key_by(lambda x: x % keys).process(Count()).name("count").add_sink(lambda v: None))
    return env.execute_async(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--checkpoint-ms", type=int, default=500)
    args = ap.parse_args()

    ray.init(include_dashboard=False, log_to_driver=False, namespace="flowray")
    rng = random.Random(7)
    rows = []
    echo = Echo.remote()
    ray.get(echo.ping.remote(0))
    rows.append(("Ray actor call (baseline floor)",
                 summary(timed(lambda: ray.get(echo.ping.remote(1)), args.queries))))

    job = start_job(args.keys, args.checkpoint_ms, "queryable-under-load")
    client = QueryableStateClient()
    jid = job.get_job_id()
    descriptor = ValueStateDescriptor("count")
    with_retries(lambda: client.get_kv_state(jid, "counts", 0, descriptor), attempts=400,
                 delay_s=0.05)
    # every key counted at least once before timing (the key types are known)
    with_retries(lambda: client.get_kv_state(jid, "counts", args.keys - 1, descriptor,
                                             read_committed=True).value() or _retry(),
                 attempts=400, delay_s=0.05)
    for committed in (False, True):
        ms = timed(lambda: client.get_kv_state(jid, "counts", rng.randrange(args.keys),
                                               descriptor, read_committed=committed),
                   args.queries)
        rows.append((f"flowray {'committed' if committed else 'live'} read, job under load",
                     summary(ms)))
    stats = job.get_checkpoint_stats()["counts"]
    job.cancel()
    floor = rows[0][1]["p50"]
    print(f"\nqueryable state: {args.queries} sequential queries of random keys out of "
          f"{args.keys}; the job counted numbers as fast as it could "
          f"({stats.get('completed', 0)} checkpoints completed meanwhile)\n")
    print(f"  {'query':48} {'p50 ms':>8} {'p99 ms':>8} {'p50 vs floor':>13}")
    for name, s in rows:
        print(f"  {name:48} {s['p50']:8.2f} {s['p99']:8.2f} {s['p50'] / floor:12.1f}x")


def _retry():
    from flowray.queryable_state import UnknownKvStateLocation
    raise UnknownKvStateLocation("not counted yet")


if __name__ == "__main__":
    main()
