"""Flink's fraud detection walkthrough, in flowray.

Run from the repository root (an embedded local Ray starts and stops with the program)::

    .venv/bin/python examples/fraud_detection.py [--transactions 400] [--seed 7]

The rule (Flink's "Fraud Detection with the DataStream API"): a *small* transaction
(under ``SMALL_AMOUNT``, 1.00) followed by a *large* one (over ``LARGE_AMOUNT``, 500.00)
on the same account within one minute raises an alert. Scammers test a stolen card with
a tiny purchase and then spend big.

``FraudDetector`` is a ``KeyedProcessFunction`` over the transactions keyed by account,
with two ``ValueState``s per account, as in Flink's walkthrough:

- ``flag``: the account's last transaction was small;
- ``timer``: when the flag expires. A small transaction registers a timer one minute
  later; ``on_timer`` clears both states, so an account's flag never outlives its minute
  and state does not grow with the number of accounts that ever paid something small.

Any transaction after a small one clears the flag (and deletes its timer) once it has been
checked: only a large transaction *directly* after a small one is an alert.

The source is deterministic and bounded: ``transactions(count, seed)`` makes the same
transactions on every run (with stolen-card attempts mixed in), in timestamp order. Flink's walkthrough uses a processing-time
timer on a rate-limited source; here the timer is an **event-time** timer on each
transaction's own timestamp (watermarks for ascending timestamps), so "within one minute"
means one minute of transaction time and the alerts are the same on every run, however
fast the job reads. Because watermarks lag behind the records, a transaction can arrive
before the timer of the flag it meets has fired; ``process_element`` therefore also checks
the flag's expiry time itself.

The alerts are collected to the driver and printed in time order, one line each::

    ALERT account=3 time=2024-05-01T00:41:07Z amount=812.40
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timezone
from typing import List, Tuple

from flowray import StreamExecutionEnvironment
from flowray.common import Types, WatermarkStrategy
from flowray.common.watermark_strategy import TimestampAssigner
from flowray.datastream.functions import KeyedProcessFunction, RuntimeContext
from flowray.datastream.state import ValueStateDescriptor

SMALL_AMOUNT = 1.00
LARGE_AMOUNT = 500.00
ONE_MINUTE = 60 * 1000
START = int(datetime(2024, 5, 1, tzinfo=timezone.utc).timestamp() * 1000)

#: (account id, timestamp in epoch milliseconds, amount)
Transaction = Tuple[int, int, float]


def transactions(count: int = 400, seed: int = 7, accounts: int = 5) -> List[Transaction]:
    """About ``count`` transactions over ``accounts`` accounts, a few seconds apart, in
    timestamp order. Some are stolen-card attempts: a small transaction and, 10 to 90 s
    later, a large one on the same account (an alert if nothing else came in between on
    that account and it is within the minute)."""
    rng = random.Random(seed)
    out, ts = [], START
    while len(out) < count:
        ts += rng.randint(1, 15) * 1000
        account = rng.randint(1, accounts)
        dice = rng.random()
        if dice < 0.06:  # a stolen card: tested, then used
            out.append((account, ts, round(rng.uniform(0.01, 0.99), 2)))
            out.append((account, ts + rng.randint(10, 90) * 1000,
                        round(rng.uniform(500.01, 2000.0), 2)))
        elif dice < 0.10:
            out.append((account, ts, round(rng.uniform(0.01, 0.99), 2)))
        elif dice < 0.15:
            out.append((account, ts, round(rng.uniform(500.01, 2000.0), 2)))
        else:
            out.append((account, ts, round(rng.uniform(1.0, 500.0), 2)))
    return sorted(out[:count], key=lambda t: t[1])


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class TransactionTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[1]


class FraudDetector(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.flag = runtime_context.get_state(ValueStateDescriptor("flag", Types.BOOLEAN()))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        account, ts, amount = value
        if self.flag.value() is not None:
            # the last transaction was small: a large one within its minute is an alert
            if amount > LARGE_AMOUNT and ts <= self.timer.value():
                yield account, ts, amount
            self.clean_up(ctx)
        if amount < SMALL_AMOUNT:
            self.flag.update(True)
            expires = ts + ONE_MINUTE
            ctx.timer_service().register_event_time_timer(expires)
            self.timer.update(expires)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        # a minute passed since the small transaction: forget it
        self.flag.clear()
        self.timer.clear()

    def clean_up(self, ctx: KeyedProcessFunction.Context) -> None:
        ctx.timer_service().delete_event_time_timer(self.timer.value())
        self.flag.clear()
        self.timer.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    txns = transactions(args.transactions, args.seed)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    transaction_type = Types.TUPLE([Types.INT(), Types.LONG(), Types.DOUBLE()])
    # the collection source runs at parallelism 1; the timestamps are assigned there too
    # (chained to it), so that each account's transactions reach the detector in
    # timestamp order: a rebalance to two assigners could reorder them
    alerts = (env.from_collection(txns, type_info=transaction_type).uid("transactions")
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_monotonous_timestamps()
                  .with_timestamp_assigner(TransactionTime()))
              .set_parallelism(1).uid("transaction-time")
              .key_by(lambda t: t[0], key_type=Types.INT())
              .process(FraudDetector(), output_type=transaction_type).uid("fraud-detector")
              .name("fraud detector"))
    found = sorted(alerts.execute_and_collect("fraud detection"), key=lambda a: (a[1], a[0]))
    for account, ts, amount in found:
        print(f"ALERT account={account} time={iso(ts)} amount={amount:.2f}")
    print(f"{len(txns)} transactions, {len(found)} alerts")


if __name__ == "__main__":
    main()
