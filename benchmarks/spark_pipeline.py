"""Spark table -> keyed running total -> Spark table, end to end: flowray vs Spark SQL alone,
same run, same Spark session (RayDP on the local Ray).

* flowray: ``env.from_spark(table)`` -> ``key_by(user)`` -> ``reduce`` (running total per
  user, one output row per input row) -> ``SparkTableSink``, parallelism 2, exactly-once
  checkpoints every second. Timed from ``from_spark`` to the table being readable.
* flowray columnar: the same job on Arrow record batches:
  ``env.from_spark(table, columnar=True)`` -> ``key_by("user").sum("amount")`` (vectorized)
  -> ``map_batches`` (rename to the table's columns) -> ``SparkTableSink``, no per-row
  objects from the table's Parquet files to the output table's.
* Spark SQL, the same output: ``sum(amount) OVER (PARTITION BY user ORDER BY id)`` written
  as a Parquet table (one output row per input row).
* Spark SQL, aggregation only: ``GROUP BY user`` written as a table (one row per user), the
  cheapest way to get the final totals, for scale.

Spark's executor gets ``--spark-cores`` cores (2, as flowray's parallelism; the machine
has 2). Two sizes (issue 16: every configuration runs at least 20 s of processing): the large one
sized so that Spark SQL's window query takes ``--min-seconds`` (20 s) or more (``--rows
auto``: calibrated by timing the window query on tables of growing size, from a guess
made from the small size's time, see :func:`calibrate_rows`), and a small one
(``--small-rows``) where the fixed costs (job deployment, Spark's startup of a query) show.
The row-path line runs at the small size only (it is ~4x slower). Each size runs its
pipelines in alternating rounds (medians); every result is checked (each user's last
running total equals its SQL sum). Where the columnar line's time goes is printed under
the table.

    python benchmarks/spark_pipeline.py [--rows auto|N] [--small-rows 1000000]
                                        [--users 10000] [--rounds 3] [--min-seconds 20]
                                        [--skip-rows] [--spark-cores 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.typeinfo import Types
from flowray.datastream.connectors.spark import SparkTableSink
from flowray.spark import get_or_create_spark, release_all_blocks, stop_spark

OUTPUT_TYPE = Types.ROW_NAMED(["user", "id", "total"],
                              [Types.STRING(), Types.LONG(), Types.LONG()])


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def run_flowray(spark: Any, config: Configuration, src: str, parts: Dict) -> float:
    out = _name("fr_totals")
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.enable_checkpointing(1000)
    (env.from_spark(src)
        .map(lambda r: (r.user, r.id, r.amount))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], b[1], a[2] + b[2]))
        .sink_to(SparkTableSink(out, output_type=OUTPUT_TYPE)))
    env.execute("bench-spark-flowray")
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    release_all_blocks()
    return elapsed


def run_flowray_columnar(spark: Any, config: Configuration, src: str,
                         parts: Dict[str, List[float]]) -> float:
    out = _name("fr_col_totals")
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.enable_checkpointing(1000)
    source = env.from_spark(src, columnar=True)
    t_source = time.perf_counter()
    (source
        .key_by("user").sum("amount")
        .map_batches(lambda t: {"user": t["user"], "id": t["id"], "total": t["amount"]},
                     batch_format="pyarrow", batch_size=None)
        .sink_to(SparkTableSink(out, output_type=OUTPUT_TYPE)))
    t1 = time.perf_counter()
    result = env.execute("bench-spark-flowray-columnar")
    elapsed = time.perf_counter() - t0
    job_s = result.outcome.duration_ms / 1000
    tasks_s = max(m["duration_ms"] for m in result.task_metrics) / 1000
    completed = [h for h in result.get_checkpoint_stats().get("history", [])
                 if h.get("status") == "COMPLETED"]
    for part, seconds in (
            ("from_spark (table -> source)", t_source - t0),
            ("sink table created", t1 - t_source),
            ("submit + refresh (execute - job)", (elapsed - (t1 - t0)) - job_s),
            ("deploy (job - longest task)", job_s - tasks_s),
            ("tasks run (longest)", tasks_s),
            ("of which final checkpoint", (completed[-1]["duration_ms"] or 0) / 1000
             if completed else 0.0)):
        parts.setdefault(part, []).append(seconds)
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    release_all_blocks()
    return elapsed


def run_spark_window(spark: Any, src: str, parts: Dict) -> float:
    out = _name("sql_running")
    t0 = time.perf_counter()
    spark.sql(f"""CREATE TABLE {out} USING parquet AS
                  SELECT user, id, sum(amount) OVER (PARTITION BY user ORDER BY id) AS total
                  FROM {src}""")
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    return elapsed


def run_spark_group_by(spark: Any, src: str, parts: Dict) -> float:
    out = _name("sql_totals")
    t0 = time.perf_counter()
    spark.sql(f"CREATE TABLE {out} USING parquet AS "
              f"SELECT user, sum(amount) AS total FROM {src} GROUP BY user")
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, total from {out}")
    return elapsed


def _check(spark: Any, src: str, query: str) -> None:
    got = {r.user: r.total for r in spark.sql(query).collect()}
    want = {r.user: r.total for r in spark.sql(
        f"select user, sum(amount) as total from {src} group by user").collect()}
    if got != want:
        raise AssertionError(f"wrong totals for {sum(got.get(k) != v for k, v in want.items())}"
                             " users")


def rows_for(min_seconds: float, measured_rows: int, measured_s: float,
             margin: float = 1.1, step: int = 1_000_000) -> int:
    """Rows for a window query of at least ``min_seconds``, extrapolated linearly through
    zero from one measured size (with ``margin``), rounded up to ``step``: a first guess,
    short of the target when the measured time includes fixed costs.

    >>> rows_for(20, 1_000_000, 3.1)
    8000000
    >>> rows_for(20, 1_000_000, 30.0)
    1000000
    """
    wanted = measured_rows * min_seconds * margin / max(measured_s, 1e-9)
    return max(step, int(math.ceil(wanted / step)) * step)


def calibrate_rows(measure: Callable[[int], float], rows: int, seconds: float,
                   min_seconds: float, margin: float = 1.1, step: int = 1_000_000,
                   tries: int = 4) -> Tuple[int, float]:
    """The first size (a multiple of ``step``) whose ``measure(rows)`` (the window query's
    seconds) reaches ``min_seconds``, and that time. Starts from :func:`rows_for` through
    ``(rows, seconds)``, then fits a line through the last two measurements (the fixed
    cost drops out) aiming at ``min_seconds * margin``; after ``tries`` measurements it
    returns the last one, short of the target."""
    points = [(rows, seconds)]
    n = rows_for(min_seconds, rows, seconds, margin, step)
    t = seconds
    for _ in range(tries):
        t = measure(n)
        points.append((n, t))
        if t >= min_seconds:
            break
        (n0, t0), (n1, t1) = points[-2], points[-1]
        slope = (t1 - t0) / (n1 - n0) if n1 != n0 and t1 > t0 else t1 / n1
        wanted = (min_seconds * margin - (t1 - slope * n1)) / slope
        n = max(n1 + step, int(math.ceil(wanted / step)) * step)
    return points[-1][0], t


PIPELINES = [  # (key, label, runner)
    ("flowray", "flowray: from_spark -> key_by/reduce -> SparkTableSink (exactly-once)",
     None),
    ("columnar", "flowray columnar: from_spark(columnar=True) -> key_by/sum -> "
     "SparkTableSink (exactly-once)", None),
    ("window", "Spark SQL: running total (window), same output rows", None),
    ("group_by", "Spark SQL: GROUP BY only (one row per user)", None),
]


def make_table(spark: Any, warehouse: str, rows: int, users: int) -> str:
    """A new Parquet table of ``rows`` clicks (4 files); its name."""
    src = _name("clicks")
    (spark.range(0, rows)
        .selectExpr("id", f"concat('u', cast(id % {users} as string)) as user",
                    "cast(id % 97 as bigint) as amount")
        .repartition(4).write.option("path", os.path.join(warehouse, src))
        .saveAsTable(src))
    return src


def run_size(spark: Any, config: Configuration, src: str, rows: int, rounds: int,
             with_rows_path: bool) -> Dict[str, Any]:
    """Every pipeline on the table ``src`` of ``rows`` rows, in ``rounds`` alternating
    rounds; seconds per pipeline and the columnar line's parts."""
    runners = {"flowray": lambda p: run_flowray(spark, config, src, p),
               "columnar": lambda p: run_flowray_columnar(spark, config, src, p),
               "window": lambda p: run_spark_window(spark, src, p),
               "group_by": lambda p: run_spark_group_by(spark, src, p)}
    if not with_rows_path:
        del runners["flowray"]
    times: Dict[str, List[float]] = {k: [] for k in runners}
    parts: Dict[str, List[float]] = {}
    for _ in range(rounds):  # alternate, so a slow moment hits every one
        for key, run in runners.items():
            times[key].append(run(parts))
    return {"rows": rows, "seconds": times, "columnar_parts": parts}


def print_table(results: List[Dict[str, Any]], users: int, rounds: int,
                min_seconds: float, spark_cores: int) -> None:
    print(f"\n{users:,} users, flowray parallelism 2, Spark executor cores {spark_cores}, "
          f"median of {rounds} alternating rounds; every result checked\n")
    print("| rows | pipeline | rows/s | vs Spark SQL window |")
    print("|---|---|---|---|")
    for res in results:
        med = {k: statistics.median(v) for k, v in res["seconds"].items() if v}
        for key, label, _ in PIPELINES:
            if key in med:
                print(f"| {res['rows']:,} | {label} | {res['rows'] / med[key]:,.0f} | "
                      f"{med['window'] / med[key]:.2f}x |")
    for i, res in enumerate(results):
        window = statistics.median(res["seconds"]["window"])
        note = ("" if window >= min_seconds else " (the small size: fixed costs show)"
                if i < len(results) - 1 else f" (below {min_seconds:g} s)")
        print(f"\n{res['rows']:,} rows: Spark SQL window median {window:.1f} s{note}; "
              "columnar line, median s: " + "; ".join(
                  f"{k} {statistics.median(v):.2f}" for k, v in res["columnar_parts"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="auto",
                        help="rows of the large size, or 'auto' (window >= --min-seconds)")
    parser.add_argument("--small-rows", type=int, default=1_000_000,
                        help="rows of the small size (0: leave it out, needs --rows N)")
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=20.0)
    parser.add_argument("--skip-rows", action="store_true",
                        help="leave out the row-path flowray line")
    parser.add_argument("--spark-cores", type=int, default=2,
                        help="cores of Spark's executor (default 2: flowray's parallelism)")
    args = parser.parse_args()
    if args.rows != "auto" and not args.rows.isdigit():
        parser.error(f"--rows must be 'auto' or a number, got {args.rows!r}")
    if args.rows == "auto" and args.small_rows <= 0:
        parser.error("--rows auto extrapolates from the small size: give --small-rows")
    logging.basicConfig(level=logging.WARNING)
    warehouse = tempfile.mkdtemp(prefix="flowray-bench-warehouse-")
    config = Configuration({"parallelism.default": 2,
                            "execution.checkpointing.dir":
                                tempfile.mkdtemp(prefix="flowray-bench-chk-"),
                            "spark.sql.warehouse.dir": warehouse,
                            "spark.sql.shuffle.partitions": "2",
                            "flowray.spark.executor-cores": args.spark_cores,
                            # its Ray actor holds 1 CPU: RayDP's conversion tasks need one
                            "spark.ray.raydp_spark_executor.actor.resource.cpu": "1",
                            "flowray.progress-interval": "0"})
    spark = get_or_create_spark(config)
    results: List[Dict[str, Any]] = []
    tables: Dict[int, str] = {}

    def window_seconds(rows: int) -> float:  # a calibration run: a table of that size
        tables[rows] = make_table(spark, warehouse, rows, args.users)
        seconds = run_spark_window(spark, tables[rows], {})
        print(f"calibrating: {rows:,} rows, Spark SQL window {seconds:.1f} s", flush=True)
        return seconds

    try:
        if args.small_rows > 0:
            small = make_table(spark, warehouse, args.small_rows, args.users)
            results.append(run_size(spark, config, small, args.small_rows, args.rounds,
                                    not args.skip_rows))
        if args.rows == "auto":
            rows, _ = calibrate_rows(window_seconds, args.small_rows, statistics.median(
                results[0]["seconds"]["window"]), args.min_seconds)
        else:
            rows = int(args.rows)
        if rows != args.small_rows:
            src = tables.get(rows) or make_table(spark, warehouse, rows, args.users)
            results.append(run_size(spark, config, src, rows, args.rounds, False))
    finally:
        stop_spark()
    print_table(results, args.users, args.rounds, args.min_seconds, args.spark_cores)
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "spark_pipeline.json"),
              "w") as f:
        json.dump({"users": args.users, "rounds": args.rounds, "spark_cores": args.spark_cores,
                   "sizes": results}, f, indent=2)


if __name__ == "__main__":
    main()
