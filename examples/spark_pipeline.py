"""The main example: Spark table -> flowray (keyed state, checkpoints) -> Spark table.

1. Starts Ray and Spark on it (RayDP) and writes a Spark table of synthetic click events.
2. A checkpointed flowray job reads the table, keys the clicks by user and keeps per-user
   state: a running total and sessions (a click more than 30 minutes after the previous one
   starts a new session). Each click, enriched with its session number, goes to a second
   Spark table through the exactly-once ``SparkTableSink``.
3. Spark SQL queries the result; the job's summary line is logged when it ends.

Run: ``make run`` (or ``python examples/spark_pipeline.py [--events 200000]``).
"""

import argparse
import logging
import tempfile

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.typeinfo import Types
from flowray.datastream import KeyedProcessFunction, RuntimeContext, ValueStateDescriptor
from flowray.datastream.connectors.spark import SparkTableSink
from flowray.spark import get_or_create_spark, stop_spark

SESSION_GAP_S = 30 * 60
OUTPUT = Types.ROW_NAMED(
    ["user", "ts", "amount", "session", "session_clicks", "total"],
    [Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.INT(), Types.LONG()])


class Sessionize(KeyedProcessFunction):
    """Per user: running total of amounts, and sessions split by a gap of inactivity.
    Clicks of one user arrive in time order (the table is sorted by user and time)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(
            ValueStateDescriptor("session", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, click, ctx):
        last_ts, session, clicks, total = self.state.value() or (None, 0, 0, 0)
        if last_ts is None or click.ts - last_ts > SESSION_GAP_S:
            session, clicks = session + 1, 0
        clicks, total = clicks + 1, total + click.amount
        self.state.update((click.ts, session, clicks, total))
        yield (click.user, click.ts, click.amount, session, clicks, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=2_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("flowray").setLevel(logging.INFO)

    warehouse = tempfile.mkdtemp(prefix="flowray-warehouse-")
    checkpoints = tempfile.mkdtemp(prefix="flowray-checkpoints-")
    config = Configuration({"parallelism.default": 2,
                            "execution.checkpointing.dir": checkpoints,
                            "spark.sql.warehouse.dir": warehouse,
                            "spark.sql.shuffle.partitions": "4"})
    spark = get_or_create_spark(config)
    try:
        # synthetic clicks: user, event time (s), amount; one user's clicks in one block,
        # in time order
        (spark.range(0, args.events)
            .selectExpr(f"concat('user-', cast(id % {args.users} as string)) as user",
                        # a click every ~5 min; every 20th click of a user after an hour
                        f"1700000000 + cast(id / {args.users} as bigint) * 300"
                        f" + cast(id / ({args.users} * 20) as bigint) * 3600"
                        " + cast(rand(42) * 60 as bigint) as ts",
                        "cast(rand(7) * 100 as bigint) as amount")
            .repartition(4, "user").sortWithinPartitions("user", "ts")
            .write.mode("overwrite").option("path", f"{warehouse}/clicks")
            .saveAsTable("clicks"))

        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.enable_checkpointing(1000)
        # uids: a savepoint's state is matched to operators by them (docs/savepoints.md)
        (env.from_spark("clicks").uid("clicks")
            .key_by(lambda click: click.user)
            .process(Sessionize()).uid("sessionize")
            .sink_to(SparkTableSink("click_sessions", mode="overwrite", output_type=OUTPUT))
            .uid("click-sessions"))
        env.execute("clicks to sessions")  # logs the job's summary line

        print(f"\n{spark.table('click_sessions').count():,} enriched clicks in "
              f"click_sessions; busiest users:")
        spark.sql("""
            SELECT user, max(session) AS sessions, count(*) AS clicks, max(total) AS total
            FROM click_sessions GROUP BY user ORDER BY clicks DESC, user LIMIT 5
        """).show(truncate=False)
    finally:
        stop_spark()


if __name__ == "__main__":
    main()
