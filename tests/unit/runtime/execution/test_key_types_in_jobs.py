"""Keys in running jobs (in-process executor): keys that are one key share their state on
both backends, across a keyed exchange; a key of an unsupported type fails the job once,
naming the type, however many restarts the strategy allows."""

import datetime as dt
from decimal import Decimal

import pytest

from flowray import JobExecutionError
from tests.support.environments import local_env

RESTARTING = {"restart-strategy.type": "fixed-delay",
              "restart-strategy.fixed-delay.attempts": "50",
              "restart-strategy.fixed-delay.delay": "0 ms"}


def _records():
    nan = float("nan")
    return [
        (1, 1), (1.0, 1), (True, 1), (Decimal("1.00"), 1),
        (nan, 1), (float("-nan"), 1), (Decimal("NaN"), 1),
        (dt.date(2024, 1, 1), 1), (dt.datetime(2024, 1, 1), 1),
        (Decimal("9.99"), 1), (Decimal("9.990"), 1),
        (("a", 1), 1), (("a", 1.0), 1),
        (dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc), 1),
        (dt.datetime(2024, 1, 1, 7, tzinfo=dt.timezone(dt.timedelta(hours=-5))), 1),
    ]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("parallelism", [1, 3])
def test_equal_keys_share_state(backend, parallelism, tmp_path):
    env = local_env(parallelism, **{"state.backend.type": backend,
                                    "state.backend.rocksdb.localdir": str(tmp_path)})
    totals = list(env.from_collection(_records()).key_by(lambda r: r[0])
                  .reduce(lambda a, b: (a[0], a[1] + b[1]))
                  .execute_and_collect("equal keys"))
    final = {}  # each key's running total carries its first record's key (reduce keeps a[0])
    for key, total in totals:
        final[repr(key)] = max(final.get(repr(key), 0), total)
    assert final == {"1": 4, "nan": 3, "datetime.date(2024, 1, 1)": 1,
                     "datetime.datetime(2024, 1, 1, 0, 0)": 1, "Decimal('9.99')": 2,
                     "('a', 1)": 2,
                     "datetime.datetime(2024, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)": 2}
    assert len(totals) == len(_records())


def test_an_unsupported_key_fails_the_job_once_naming_it():
    env = local_env(2, **RESTARTING)
    env.from_collection([1, 2, 3]).key_by(lambda x: {x}).sum(0).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("set keys")
    err = info.value
    assert err.cause_type == "UnsupportedKeyError"
    assert "'set'" in str(err) and "not restarted" in str(err)
    assert err.outcome.restarts == 0


def test_an_unsupported_key_inside_a_keyed_function_fails_once():
    from flowray.datastream.functions import KeyedProcessFunction
    from flowray.state.descriptors import ValueStateDescriptor

    class Count(KeyedProcessFunction):
        def open(self, ctx):
            self.count = ctx.get_state(ValueStateDescriptor("n"))

        def process_element(self, value, ctx):
            self.count.update((self.count.value() or 0) + 1)
            yield value

    env = local_env(1, **RESTARTING)
    env.from_collection([[1], [2]]).key_by(lambda x: x, key_type=None) \
        .process(Count()).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("list keys")
    assert info.value.cause_type == "UnsupportedKeyError"
    assert info.value.outcome.restarts == 0
