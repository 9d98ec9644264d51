"""Spark table -> keyed running total -> Spark table, end to end: flowray vs Spark SQL alone,
same run, same Spark session (RayDP on the local Ray).

* flowray: ``env.from_spark(table)`` -> ``key_by(user)`` -> ``reduce`` (running total per
  user, one output row per input row) -> ``SparkTableSink``, parallelism 2, exactly-once
  checkpoints every second. Timed from ``from_spark`` (includes RayDP's conversion) to the
  table being readable.
* flowray columnar: the same job on Arrow record batches:
  ``env.from_spark(table, columnar=True)`` -> ``key_by("user").sum("amount")`` (vectorized)
  -> ``map_batches`` (rename to the table's columns) -> ``SparkTableSink``, no per-row
  objects from Spark's blocks to the table's Parquet files.
* Spark SQL, the same output: ``sum(amount) OVER (PARTITION BY user ORDER BY id)`` written
  as a Parquet table (one output row per input row).
* Spark SQL, aggregation only: ``GROUP BY user`` written as a table (one row per user), the
  cheapest way to get the final totals, for scale.

Every result is checked: each user's last running total equals its SQL sum.

    python benchmarks/spark_pipeline.py [--rows 1000000] [--users 10000] [--rounds 2]
                                        [--skip-rows]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
import uuid
from typing import Any, Dict, List

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.typeinfo import Types
from flowray.datastream.connectors.spark import SparkTableSink
from flowray.spark import get_or_create_spark, release_all_blocks, stop_spark


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def run_flowray(spark: Any, config: Configuration, src: str) -> float:
    out = _name("fr_totals")
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.enable_checkpointing(1000)
    (env.from_spark(src)
        .map(lambda r: (r.user, r.id, r.amount))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], b[1], a[2] + b[2]))
        .sink_to(SparkTableSink(out, output_type=Types.ROW_NAMED(
            ["user", "id", "total"], [Types.STRING(), Types.LONG(), Types.LONG()]))))
    env.execute("bench-spark-flowray")
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    release_all_blocks()
    return elapsed


#: where the columnar line's time goes, seconds per round
PARTS: Dict[str, List[float]] = {}


def run_flowray_columnar(spark: Any, config: Configuration, src: str) -> float:
    out = _name("fr_col_totals")
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.enable_checkpointing(1000)
    source = env.from_spark(src, columnar=True)
    PARTS.setdefault("columnar: from_spark conversion (RayDP)", []).append(
        time.perf_counter() - t0)
    (source
        .key_by("user").sum("amount")
        .map_batches(lambda t: {"user": t["user"], "id": t["id"], "total": t["amount"]},
                     batch_format="pyarrow", batch_size=None)
        .sink_to(SparkTableSink(out, output_type=Types.ROW_NAMED(
            ["user", "id", "total"], [Types.STRING(), Types.LONG(), Types.LONG()]))))
    t1 = time.perf_counter()
    result = env.execute("bench-spark-flowray-columnar")
    PARTS.setdefault("columnar: execute (deploy, run, commit)", []).append(
        time.perf_counter() - t1)
    PARTS.setdefault("columnar: of which the job ran (job master's duration)", []).append(
        result.outcome.duration_ms / 1000)
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    release_all_blocks()
    return elapsed


def run_spark_window(spark: Any, src: str) -> float:
    out = _name("sql_running")
    t0 = time.perf_counter()
    spark.sql(f"""CREATE TABLE {out} USING parquet AS
                  SELECT user, id, sum(amount) OVER (PARTITION BY user ORDER BY id) AS total
                  FROM {src}""")
    elapsed = time.perf_counter() - t0
    _check(spark, src, f"select user, max(total) as total from {out} group by user")
    return elapsed


def run_spark_group_by(spark: Any, src: str) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-rows", action="store_true",
                        help="leave out the row-path flowray line")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    warehouse = tempfile.mkdtemp(prefix="flowray-bench-warehouse-")
    config = Configuration({"parallelism.default": 2,
                            "state.checkpoints.dir": tempfile.mkdtemp(prefix="flowray-bench-chk-"),
                            "spark.sql.warehouse.dir": warehouse,
                            "spark.sql.shuffle.partitions": "2",
                            "flowray.progress-interval": "0"})
    spark = get_or_create_spark(config)
    try:
        src = _name("clicks")
        (spark.range(0, args.rows)
            .selectExpr("id", f"concat('u', cast(id % {args.users} as string)) as user",
                        "cast(id % 97 as bigint) as amount")
            .repartition(4).write.option("path", os.path.join(warehouse, src))
            .saveAsTable(src))
        times: Dict[str, List[float]] = {"flowray": [], "columnar": [], "window": [],
                                         "group_by": []}
        for _ in range(args.rounds):  # alternate, so a slow moment hits every one
            if not args.skip_rows:
                times["flowray"].append(run_flowray(spark, config, src))
            times["columnar"].append(run_flowray_columnar(spark, config, src))
            times["window"].append(run_spark_window(spark, src))
            times["group_by"].append(run_spark_group_by(spark, src))
    finally:
        stop_spark()
    med = {k: statistics.median(v) for k, v in times.items() if v}
    rows = [("flowray: from_spark -> key_by/reduce -> SparkTableSink (exactly-once)",
             "flowray"),
            ("flowray columnar: from_spark(columnar=True) -> key_by/sum -> SparkTableSink "
             "(exactly-once)", "columnar"),
            ("Spark SQL: running total (window), same output rows", "window"),
            ("Spark SQL: GROUP BY only (one row per user)", "group_by")]
    print(f"\n{args.rows:,} rows, {args.users:,} users, median of {args.rounds} rounds; "
          "every result checked\n")
    print("| pipeline | rows/s | vs Spark SQL window |")
    print("|---|---|---|")
    for label, key in rows:
        if key not in med:
            continue
        print(f"| {label} | {args.rows / med[key]:,.0f} | {med['window'] / med[key]:.2f}x |")
    if PARTS:
        print("\ncolumnar line, median seconds: " + "; ".join(
            f"{k.split(': ', 1)[1]} {statistics.median(v):.2f}" for k, v in PARTS.items()))
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "spark_pipeline.json"),
              "w") as f:
        json.dump({"rows": args.rows, "users": args.users, "seconds": times}, f, indent=2)


if __name__ == "__main__":
    main()
