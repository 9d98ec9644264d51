"""Whole jobs on the in-process LocalExecutor (threads and in-process channels, no Ray)."""

import collections

import pytest

from flowray import (
    CoFlatMapFunction,
    CoMapFunction,
    JobExecutionError,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapFunction,
    NumberSequenceSource,
    ReduceFunction,
    TimeDomain,
    ValueStateDescriptor,
)
from flowray.operators.keyed import field_aggregator
from flowray.runtime.execution.client import JobExecutionError as ClientJobExecutionError
from flowray.runtime.messages import JobStatus
from tests.support.environments import local_env

pytestmark = pytest.mark.timeout(60)

LINES = ["the quick brown fox", "jumps over the lazy dog", "the dog barks", "fox and dog",
         "a b c a b a"]


def _last_per_key(pairs):
    last = {}
    for k, v in pairs:
        last[k] = v
    return last


def test_job_execution_error_is_the_client_class():
    assert JobExecutionError is ClientJobExecutionError


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_word_count(parallelism):
    env = local_env(parallelism)
    out = list(env.from_collection(LINES)
               .flat_map(lambda line: line.split())
               .map(lambda w: (w, 1))
               .key_by(lambda t: t[0])
               .sum(1)
               .execute_and_collect(f"wc-{parallelism}"))
    expected = collections.Counter(w for line in LINES for w in line.split())
    assert _last_per_key(out) == dict(expected)
    assert len(out) == sum(expected.values())  # one running count per word occurrence
    per_word = collections.defaultdict(list)
    for w, c in out:
        per_word[w].append(c)
    assert all(cs == list(range(1, len(cs) + 1)) for cs in per_word.values())


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_keyed_running_sum_preserves_per_key_order(parallelism):
    n, keys = 3000, 7
    env = local_env(parallelism, **{"flowray.channel.batch-size": "64"})
    out = list(env.from_source(NumberSequenceSource(1, n))
               .map(lambda x: (x % keys, x))
               .key_by(lambda t: t[0])
               .reduce(lambda a, b: (a[0], a[1] + b[1]))
               .execute_and_collect(f"sum-{parallelism}"))
    assert len(out) == n
    by_key = collections.defaultdict(list)
    for k, s in out:
        by_key[k].append(s)
    assert set(by_key) == set(range(keys))
    for k, sums in by_key.items():
        # running sums of positive numbers, in arrival order: strictly increasing per key
        assert all(a < b for a, b in zip(sums, sums[1:])), k
        assert sums[-1] == sum(x for x in range(1, n + 1) if x % keys == k)


def test_keyed_sum_min_max_with_reduce_function_object():
    class Concat(ReduceFunction):
        def reduce(self, a, b):
            return (a[0], a[1] + b[1])

    env = local_env(2)
    data = [("a", "x"), ("b", "y"), ("a", "z")]
    out = list(env.from_collection(data).key_by(lambda t: t[0]).reduce(Concat())
               .execute_and_collect("concat"))
    assert _last_per_key(out) == {"a": "xz", "b": "y"}

    env = local_env(2)
    nums = [("k", 5, "first"), ("k", 2, "second"), ("k", 9, "third"), ("j", 1, "only")]
    ds = env.from_collection(nums).key_by(lambda t: t[0])
    mins = list(ds.min(1).execute_and_collect("min"))
    assert _last_per_key((t[0], t[1:]) for t in mins) == {"k": (2, "first"), "j": (1, "only")}
    env = local_env(2)
    max_by = list(env.from_collection(nums).key_by(lambda t: t[0]).max_by(1)
                  .execute_and_collect("max_by"))
    assert _last_per_key((t[0], t) for t in max_by) == {"k": ("k", 9, "third"),
                                                        "j": ("j", 1, "only")}


def test_union_and_connect():
    env = local_env(2)
    a = env.from_collection([1, 2, 3])
    b = env.from_collection([10, 20])
    c = env.from_source(NumberSequenceSource(100, 104))
    assert sorted(a.union(b, c).map(lambda x: x * 2).execute_and_collect("union")) == \
        [2, 4, 6, 20, 40, 200, 202, 204, 206, 208]

    class Tag(CoMapFunction):
        def map1(self, value):
            return ("left", value)

        def map2(self, value):
            return ("right", value)

    env = local_env(2)
    out = env.from_collection([1, 2]).connect(env.from_collection(["x"])).map(Tag())
    assert sorted(out.execute_and_collect("connect")) == \
        [("left", 1), ("left", 2), ("right", "x")]


def test_connect_flat_map_with_generators():
    class Split(CoFlatMapFunction):
        def flat_map1(self, value):
            for ch in value:
                yield ch

        def flat_map2(self, value):
            return [value] * value

    env = local_env(1)
    out = env.from_collection(["ab", "c"]).connect(env.from_collection([2, 1])).flat_map(Split())
    assert sorted(map(str, out.execute_and_collect("coflat"))) == ["1", "2", "2", "a", "b", "c"]


def test_generator_flat_map_and_keyed_process_function_with_value_state():
    class CountPerKey(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))

        def process_element(self, value, ctx):
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield ctx.get_current_key(), c

    def words(line):
        for w in line.split():
            yield w

    env = local_env(2)
    out = list(env.from_collection(LINES).flat_map(words)
               .key_by(lambda w: w).process(CountPerKey()).execute_and_collect("gen"))
    expected = collections.Counter(w for line in LINES for w in line.split())
    assert _last_per_key(out) == dict(expected)
    assert len(out) == sum(expected.values())


def test_keyed_map_function_with_list_state():
    class History(MapFunction):
        def open(self, runtime_context):
            self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))

        def map(self, value):
            self.seen.add(value[1])
            return value[0], list(self.seen.get())

    env = local_env(3)
    data = [(k, i) for i in range(20) for k in ("a", "b", "c", "d")]
    out = list(env.from_collection(data).key_by(lambda t: t[0]).map(History())
               .execute_and_collect("history"))
    assert _last_per_key(out) == {k: list(range(20)) for k in "abcd"}


def test_event_time_timer_fires_at_end_of_input():
    class TimerPerKey(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))

        def process_element(self, value, ctx):
            key, ts = value
            self.count.update((self.count.value() or 0) + 1)
            ctx.timer_service().register_event_time_timer(ts)
            ctx.timer_service().register_event_time_timer(ts)  # one timer per (key, ts)
            ctx.timer_service().register_event_time_timer(ts + 1)
            ctx.timer_service().delete_event_time_timer(ts + 1)  # deleted: never fires
            yield ("element", key, ctx.timer_service().current_watermark())

        def on_timer(self, timestamp, ctx):
            assert ctx.time_domain() is TimeDomain.EVENT_TIME
            assert ctx.timestamp() == timestamp
            yield ("timer", ctx.get_current_key(), timestamp, self.count.value())

    env = local_env(2)
    data = [("a", 1000), ("b", 2000), ("a", 1500), ("c", 500)]
    out = list(env.from_collection(data).key_by(lambda t: t[0]).process(TimerPerKey())
               .execute_and_collect("timers"))
    elements = [r for r in out if r[0] == "element"]
    timers = sorted(r for r in out if r[0] == "timer")
    assert len(elements) == 4
    # before the end of input there is no watermark yet
    assert all(r[2] == -(1 << 63) for r in elements)
    # at the end every timer fires once, with its key current and the key's final state
    assert timers == [("timer", "a", 1000, 2), ("timer", "a", 1500, 2),
                      ("timer", "b", 2000, 1), ("timer", "c", 500, 1)]
    # timers of one key fire in timestamp order, after all of that key's elements
    for key in "abc":
        mine = [r for r in out if r[1] == key]
        kinds = [r[0] for r in mine]
        assert kinds == sorted(kinds)  # "element" < "timer"
        ts = [r[2] for r in mine if r[0] == "timer"]
        assert ts == sorted(ts)


def test_user_exception_surfaces_with_operator_and_traceback():
    def explode(x):
        if x == 3:
            raise ZeroDivisionError(f"bad record {x}")
        return x

    env = local_env(1)
    env.from_collection([1, 2, 3, 4]).map(explode).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("failing job")
    err = info.value
    assert isinstance(err, ClientJobExecutionError)
    assert err.operator == "Map"
    assert err.cause_type == "ZeroDivisionError"
    text = str(err)
    assert "bad record 3" in text
    assert "Traceback (most recent call last)" in text
    assert "explode" in text and "explode" in err.cause_traceback
    assert err.outcome.status is JobStatus.FAILED


def test_user_exception_in_named_keyed_operator_at_parallelism_two():
    class Fails(KeyedProcessFunction):
        def process_element(self, value, ctx):
            if value == 42:
                raise RuntimeError("the answer is not allowed")
            yield value

    env = local_env(2)
    env.from_source(NumberSequenceSource(1, 100)).key_by(lambda x: x % 3) \
        .process(Fails()).name("Picky").add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("failing keyed job")
    assert info.value.operator == "Picky"
    assert "the answer is not allowed" in str(info.value)
    assert "process_element" in info.value.cause_traceback


def test_failing_job_with_collect_raises_from_the_iterator():
    env = local_env(1)
    it = env.from_collection([1, 0, 2]).map(lambda x: 10 // x).execute_and_collect("div")
    with pytest.raises(JobExecutionError) as info:
        list(it)
    assert info.value.operator == "Map" and "ZeroDivisionError" in str(info.value)


def test_key_selector_failure_names_key_by():
    env = local_env(2)
    env.from_collection([{"k": 1}, {"j": 2}]).key_by(lambda d: d["k"]).sum("k") \
        .add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("bad key")
    assert info.value.operator == "key_by key selector"
    assert info.value.cause_type == "KeyError"


def test_open_failure_is_reported():
    class BadOpen(MapFunction):
        def open(self, runtime_context):
            raise ValueError("cannot connect to the database")

        def map(self, value):
            return value

    env = local_env(1)
    env.from_collection([1]).map(BadOpen()).name("Opener").add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("bad open")
    assert info.value.operator == "Opener"
    assert "cannot connect to the database" in str(info.value)


def test_execute_result_metrics_count_records():
    env = local_env(2)
    env.from_source(NumberSequenceSource(1, 1000)).map(lambda x: x) \
        .key_by(lambda x: x % 10).reduce(lambda a, b: a + b).add_sink(lambda v: None)
    result = env.execute("metrics")
    assert result.job_name == "metrics"
    assert result.source_records == 1000
    keyed = [m for m in result.task_metrics if m["task"].startswith("Keyed Reduce")]
    assert len(keyed) == 2 and sum(m["records_in"] for m in keyed) == 1000
    assert all(m["state"] == "FINISHED" for m in result.task_metrics)


def test_the_summary_counts_the_source_records_of_every_attempt(tmp_path, caplog):
    """A job restarted after a failure: its sources read part of the input twice, and
    the summary counts what every attempt read, not only the last one's."""
    from flowray.common import WatermarkStrategy
    from flowray.testing import FAIL, TestingSource, TransactionalTestingSink
    n = 20_000
    items = list(range(n))
    items.insert(n // 2, FAIL())
    env = local_env(1, **{"execution.checkpointing.interval": "10 ms",
                          "execution.checkpointing.dir": str(tmp_path / "chk"),
                          "restart-strategy.type": "fixed-delay",
                          "restart-strategy.fixed-delay.delay": "10 ms"})
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    env.from_source(TestingSource(items, ledger_dir=str(tmp_path / "faults")),
                    WatermarkStrategy.no_watermarks(), "numbers").sink_to(sink)
    result = env.execute("counted")
    assert result.outcome.restarts == 1
    last = sum(m["records_in"] for m in result.task_metrics if m["is_source"])
    earlier = result.outcome.earlier_attempts["source_records"]
    # the first attempt read up to the FAIL; the last one from the restored position on
    assert n // 4 <= earlier <= n // 2, earlier
    assert result.source_records == last + earlier >= n
    assert f"{result.source_records:,} source records" in result.summary()
    assert sorted(sink.committed()) == list(range(n))
    # the restart is told once on the console: the scheduler runs in this process and
    # says it itself; the client does not repeat it
    told = [r.getMessage() for r in caplog.records if "restarting" in r.getMessage()]
    assert len(told) == 1 and "failed" in told[0], told


def test_execute_clears_the_program():
    env = local_env(1)
    assert env.from_collection([1, 2]).execute_and_collect("first", limit=2) == [1, 2]
    assert env.from_collection([3]).execute_and_collect("second", limit=5) == [3]


def test_slow_sink_bounds_in_flight_batches():
    credits = 2

    def slow_sink(value):
        # a little work per record; the producer is faster, so credits run out
        total = 0
        for i in range(20):
            total += i * value

    env = local_env(1, **{"flowray.channel.credits": str(credits),
                          "flowray.channel.batch-size": "10"})
    env.from_source(NumberSequenceSource(1, 20_000)).rebalance().map(lambda x: x) \
        .add_sink(slow_sink)
    result = env.execute("slow sink")
    channels = [c for m in result.task_metrics for c in m["channels"].values()]
    assert channels
    assert all(c["max_in_flight"] <= credits for c in channels)
    assert max(c["max_in_flight"] for c in channels) == credits
    assert sum(c["records"] for c in channels) == 20_000
    assert all(c["frames"] >= 20_000 // 10 for c in channels)  # batches of at most 10
    assert any(c["blocked"] > 0 for c in channels)  # back-pressure engaged


def test_batch_bytes_bounds_channel_batches_of_large_records():
    # 4 kb records, 16 kb batches: about 3 records a batch, although batch-size is 1000
    env = local_env(1, **{"flowray.channel.batch-bytes": "16 kb",
                          "execution.buffer-timeout.interval": "10 min"})
    env.from_source(NumberSequenceSource(1, 300)).map(lambda x: x.to_bytes(4, "big") * 1024) \
        .rebalance().add_sink(lambda value: None)
    result = env.execute("large records")
    channels = [c for m in result.task_metrics for c in m["channels"].values()]
    assert channels and sum(c["records"] for c in channels) == 300
    for c in channels:
        assert c["frames"] >= 300 // 3
        assert c["bytes"] / c["frames"] <= 16 * 1024


# ---------------------------------------------------------------------------------------
# field aggregations
# ---------------------------------------------------------------------------------------

def test_field_aggregator_positions():
    assert field_aggregator("sum", 1)(("a", 1), ("a", 2)) == ("a", 3)
    assert field_aggregator("sum", 0)(3, 4) == 7
    assert field_aggregator("sum", "n")({"k": "a", "n": 1}, {"k": "a", "n": 5}) == \
        {"k": "a", "n": 6}
    assert field_aggregator("max", -1)(("a", 1), ("a", 2)) == ("a", 2)
    assert field_aggregator("min", 1)(["a", 4], ["a", 2]) == ["a", 2]
    Row = collections.namedtuple("Row", "k n")
    assert field_aggregator("sum", "n")(Row("a", 1), Row("a", 2)) == Row("a", 3)
    with pytest.raises(ValueError):
        field_aggregator("median", 0)


def test_field_aggregator_sum_negative_position():
    assert field_aggregator("sum", -1)(("a", 1), ("a", 2)) == ("a", 3)


def test_keyed_sum_of_last_field():
    env = local_env(1)
    out = list(env.from_collection([("a", 1), ("a", 2), ("b", 5)]).key_by(lambda t: t[0])
               .sum(-1).execute_and_collect("sum-last"))
    assert sorted(out) == [("a", 1), ("a", 3), ("b", 5)]


def test_row_records_sum_by_field_name():
    from flowray import Row

    env = local_env()
    rows = [Row(user="a", n=1), Row(user="b", n=5), Row(user="a", n=2)]
    out = env.from_collection(rows).key_by(lambda r: r.user).sum("n").execute_and_collect(limit=3)
    assert out == [Row(user="a", n=1), Row(user="b", n=5), Row(user="a", n=3)]
    assert out[-1].n == 3 and out[-1].user == "a"


def test_an_unserializable_record_fails_once_naming_the_operator_and_the_record():
    import threading

    env = local_env(2, **{"restart-strategy.type": "fixed-delay",
                          "restart-strategy.fixed-delay.attempts": "20",
                          "restart-strategy.fixed-delay.delay": "0 ms"})
    env.from_collection([1, 2, 3]).map(lambda x: threading.Lock() if x == 2 else x) \
        .name("make locks").key_by(lambda x: 1).map(lambda x: x).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("unpicklable")
    err = info.value
    assert err.cause_type == "RecordSerializationError"
    assert "'make locks'" in str(err) and "of type lock" in str(err)
    assert err.outcome.restarts == 0
