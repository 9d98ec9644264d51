"""The async wait operator without Ray or sleeps: attempts run on an event loop this test
drives by hand, awaiting futures the test resolves in a chosen order; time is a manual
clock behind the ProcessingTimeService."""

import asyncio
import functools

import pytest

from flowray.common import Time
from flowray.common.clock import ManualClock
from flowray.datastream import AsyncDataStream, StreamExecutionEnvironment
from flowray.datastream import async_retry_predicates, async_retry_strategies
from flowray.datastream.functions import AsyncFunction, AsyncRetryStrategy
from flowray.operators.async_wait import (
    ORDERED,
    UNORDERED,
    AsyncExecutor,
    AsyncioThreadExecutor,
    AsyncTaskCancelled,
    AsyncWaitOperator,
    AsyncWaitQueue,
    run_attempt,
)
from flowray.operators.base import (
    OperatorContext,
    ProcessingTimeService,
    StateInitializationContext,
    StateSnapshotContext,
    UserFunctionError,
)
from flowray.state.key_groups import KeyGroupRange
from flowray.state.operator_state import OperatorStateStore
from tests.support.operator_harness import OrderedOutput


class LoopExecutor(AsyncExecutor):
    """Attempts as tasks of an event loop that runs only in :meth:`step`."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.tasks = {}
        self.on_wait = None  # called when the operator blocks; must make progress

    def start(self, function, on_done):
        self.function, self.on_done = function, on_done

    def invoke(self, calls):
        for entry, attempt in calls:
            self.tasks[id(entry)] = self.loop.create_task(
                run_attempt(self.function, entry, attempt, self.on_done))
        self.step()

    def cancel(self, entry):
        task = self.tasks.pop(id(entry), None)
        if task is not None:
            task.cancel()

    def step(self):
        for _ in range(3):
            self.loop.run_until_complete(asyncio.sleep(0))

    def wait(self, timeout_s):
        if self.on_wait is None:
            raise AssertionError("the operator blocked with nothing to unblock it")
        self.on_wait()
        self.step()

    def stop(self):
        for t in self.tasks.values():
            t.cancel()
        self.step()
        self.loop.close()


class Service(AsyncFunction):
    """Each call awaits a future the test resolves: ``reply(value, result)`` or
    ``fail(value, error)`` (the oldest open call for ``value``)."""

    def __init__(self):
        self.calls = []
        self.open_calls = {}
        self.in_flight = 0
        self.max_in_flight = 0

    async def async_invoke(self, value):
        self.calls.append(value)
        fut = asyncio.get_running_loop().create_future()
        self.open_calls.setdefault(value, []).append(fut)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await fut
        finally:
            self.in_flight -= 1

    def reply(self, value, result):
        self.open_calls[value].pop(0).set_result(result)

    def fail(self, value, error):
        self.open_calls[value].pop(0).set_exception(error)


class Defaulting(Service):
    def timeout(self, value):
        return [("timeout", value)]


_RIGS = []


@pytest.fixture(autouse=True)
def _close_rigs():
    yield
    while _RIGS:
        _RIGS.pop().op.close()


class Rig:
    """One operator, its executor, clock, output and operator state store."""

    def __init__(self, fn=None, mode=ORDERED, capacity=10, timeout_ms=1000,
                 strategy=async_retry_strategies.NO_RETRY_STRATEGY, restore=None,
                 mailbox=None):
        self.fn = fn if fn is not None else Service()
        self.executor = LoopExecutor()
        self.clock = ManualClock(0)
        self.pts = ProcessingTimeService(self.clock)
        self.op = AsyncWaitOperator(self.fn, timeout_ms, capacity, strategy, mode,
                                    executor_factory=lambda: self.executor)
        services = {} if mailbox is None else {"mailbox": mailbox.append}
        ctx = OperatorContext("t", 0, 1, 128, KeyGroupRange(0, 127), self.pts,
                              services=services)
        self.out = OrderedOutput()
        self.op.setup(ctx, self.out)
        self.store = OperatorStateStore.restore(restore)
        self.op.initialize_state(StateInitializationContext(
            self.store, None, 1 if restore is not None else None))
        self.op.open()
        _RIGS.append(self)

    def process(self, *records, timestamps=None):
        self.op.process_batch(list(records), None, timestamps)

    def reply(self, value, result):
        self.fn.reply(value, result)
        self.executor.step()
        self.op.drain()

    def fail(self, value, error):
        self.fn.fail(value, error)
        self.executor.step()
        self.op.drain()

    def advance(self, ms):
        self.clock.advance(ms)
        self.pts.fire_due()
        self.executor.step()
        self.op.drain()

    def snapshot(self):
        self.op.snapshot_state(StateSnapshotContext(1, 0))
        return self.store.snapshot()

    @property
    def records(self):
        return self.out.records


def test_ordered_emits_in_input_order_whatever_the_completion_order():
    r = Rig(mode=ORDERED)
    r.process(1, 2, 3)
    assert r.fn.calls == [1, 2, 3]
    r.reply(3, ["c"])
    assert r.records == []
    r.reply(1, ["a"])
    assert r.records == ["a"]
    r.reply(2, ["b", "b2"])
    assert r.records == ["a", "b", "b2", "c"]


def test_unordered_emits_as_results_complete():
    r = Rig(mode=UNORDERED)
    r.process(1, 2, 3)
    r.reply(3, ["c"])
    r.reply(1, ["a"])
    assert r.records == ["c", "a"]
    r.reply(2, [])
    assert r.records == ["c", "a"]


def test_results_keep_their_input_timestamps():
    r = Rig(mode=UNORDERED)
    r.process(1, 2, timestamps=[10, 20])
    r.reply(2, ["b"])
    r.reply(1, ["a", "a"])
    assert r.out.timestamps == [20, 10, 10]


def test_unordered_never_emits_across_a_watermark():
    r = Rig(mode=UNORDERED)
    r.process(1, 2)
    r.op.process_watermark(10)
    r.process(3)
    r.reply(3, ["c"])  # after the watermark: held back
    r.reply(2, ["b"])
    assert r.out.events == [("records", ["b"], None)]
    r.reply(1, ["a"])
    assert r.out.events[1:] == [("records", ["a"], None), ("watermark", 10),
                                ("records", ["c"], None)]


def test_ordered_emits_watermarks_in_position():
    r = Rig(mode=ORDERED)
    r.process(1)
    r.op.process_watermark(5)
    r.op.process_watermark(5)  # not an advance: ignored
    r.process(2)
    assert r.out.events == []
    r.reply(2, ["b"])
    r.reply(1, ["a"])
    assert r.out.events == [("records", ["a"], None), ("watermark", 5),
                            ("records", ["b"], None)]


def test_a_watermark_with_nothing_in_flight_goes_out_at_once():
    r = Rig(mode=UNORDERED)
    r.op.process_watermark(7)
    assert r.out.watermarks == [7]


def test_capacity_bounds_the_records_in_flight():
    r = Rig(mode=ORDERED, capacity=2)
    replies = iter([1, 2, 3, 4])

    def unblock():  # the service answers the oldest call when the operator waits
        v = next(replies)
        r.fn.reply(v, [v * 10])
    r.executor.on_wait = unblock
    r.process(1, 2, 3, 4)
    assert r.fn.max_in_flight == 2
    assert r.records == [10, 20]  # emitted while waiting for room
    assert len(r.op._queue) == 2
    r.executor.on_wait = lambda: [r.fn.reply(v, [v * 10]) for v in next_open(r.fn)]
    r.op.finish()
    assert r.records == [10, 20, 30, 40]


def next_open(service):
    return [v for v, futs in service.open_calls.items() if futs][:1]


def test_default_timeout_fails_the_job():
    r = Rig(timeout_ms=100)
    r.process("x")
    r.advance(99)
    assert r.records == []
    with pytest.raises(UserFunctionError) as e:
        r.advance(1)
    assert e.value.cause_type == "TimeoutError" and "x" in e.value.cause_message


def test_timeout_hook_gives_the_results_and_a_late_reply_is_ignored():
    r = Rig(fn=Defaulting(), mode=UNORDERED, timeout_ms=100)
    r.process("x")
    r.advance(50)
    r.process("y")
    r.advance(50)
    assert r.records == [("timeout", "x")]
    r.reply("y", ["Y"])
    assert r.records == [("timeout", "x"), "Y"]
    r.advance(1000)
    assert r.records == [("timeout", "x"), "Y"]


def test_retry_on_result_after_the_fixed_delay():
    strategy = AsyncRetryStrategy.fixed_delay(
        2, 30, async_retry_predicates.empty_result_predicate, None)
    r = Rig(strategy=strategy)
    r.process("k")
    r.reply("k", [])
    assert r.fn.calls == ["k"]
    r.advance(29)
    assert r.fn.calls == ["k"]
    r.advance(1)
    assert r.fn.calls == ["k", "k"]
    r.reply("k", ["found"])
    assert r.records == ["found"]


def test_retries_run_out_and_the_last_result_counts():
    strategy = AsyncRetryStrategy.fixed_delay(
        1, 10, async_retry_predicates.empty_result_predicate, None)
    r = Rig(strategy=strategy)
    r.process("k")
    r.reply("k", [])
    r.advance(10)
    r.reply("k", [])
    assert r.fn.calls == ["k", "k"] and r.op._queue.is_empty()
    assert r.records == []


def test_retry_on_exception_with_exponential_backoff():
    strategy = AsyncRetryStrategy.exponential_backoff(
        3, 10, 1000, 2.0, None,
        functools.partial(async_retry_predicates.exception_type_predicate,
                          expected_error_type=ConnectionError))
    r = Rig(strategy=strategy, timeout_ms=10_000)
    r.process("k")
    r.fail("k", ConnectionError("down"))
    r.advance(10)
    r.fail("k", ConnectionError("down"))
    r.advance(19)
    assert r.fn.calls == ["k", "k"]
    r.advance(1)
    assert r.fn.calls == ["k", "k", "k"]
    r.reply("k", ["ok"])
    assert r.records == ["ok"]


def test_an_exception_the_predicate_does_not_retry_fails_the_job():
    strategy = AsyncRetryStrategy.fixed_delay(
        5, 10, None, functools.partial(async_retry_predicates.exception_type_predicate,
                                       expected_error_type=ConnectionError))
    r = Rig(strategy=strategy)
    r.process("k")
    with pytest.raises(UserFunctionError) as e:
        r.fail("k", KeyError("bad"))
    assert e.value.cause_type == "KeyError"


def test_the_timeout_covers_the_retries():
    strategy = AsyncRetryStrategy.fixed_delay(
        100, 40, async_retry_predicates.empty_result_predicate, None)
    r = Rig(fn=Defaulting(), strategy=strategy, timeout_ms=100)
    r.process("k")
    r.reply("k", [])
    r.advance(40)
    r.reply("k", [])
    r.advance(40)
    assert r.fn.calls == ["k", "k", "k"]
    r.advance(20)
    assert r.records == [("timeout", "k")]


def test_a_result_that_is_not_a_list_fails_clearly():
    r = Rig()
    r.process(1)
    with pytest.raises(UserFunctionError, match="must return a list"):
        r.reply(1, "abc")


def test_snapshot_keeps_unemitted_records_and_restore_issues_them_again():
    r = Rig(mode=ORDERED)
    r.process(1, 2, timestamps=[100, 200])
    r.op.process_watermark(150)
    r.process(3, timestamps=[300])
    r.reply(1, ["a"])   # emitted: not in the snapshot
    r.reply(3, ["c"])   # complete but held back behind 2: in the snapshot
    entries = r.snapshot()
    assert r.records == ["a"]

    s = Rig(mode=ORDERED, restore=entries)
    assert s.fn.calls == [2, 3]
    s.reply(3, ["c'"])
    s.reply(2, ["b'"])
    assert s.out.events == [("records", ["b'"], [200]), ("watermark", 150),
                            ("records", ["c'"], [300])]


def test_snapshot_in_unordered_mode_keeps_the_watermarks_between():
    r = Rig(mode=UNORDERED)
    r.process(1)
    r.op.process_watermark(10)
    r.process(2)
    r.reply(2, ["b"])  # held back behind the watermark
    s = Rig(mode=UNORDERED, restore=r.snapshot())
    assert s.fn.calls == [1, 2]
    s.reply(2, ["b"])
    s.reply(1, ["a"])
    assert s.out.events == [("records", ["a"], None), ("watermark", 10),
                            ("records", ["b"], None)]


def test_finish_waits_for_every_result():
    r = Rig(mode=UNORDERED)
    r.process(1, 2)
    r.executor.on_wait = lambda: [r.fn.reply(v, [v]) for v in next_open(r.fn)]
    r.op.finish()
    assert sorted(r.records) == [1, 2]


def test_completions_reach_the_task_through_its_mailbox_once_per_burst():
    mailbox = []
    r = Rig(mode=UNORDERED, mailbox=mailbox)
    r.process(1, 2)
    r.fn.reply(1, ["a"])
    r.fn.reply(2, ["b"])
    r.executor.step()
    assert len(mailbox) == 1 and r.records == []
    mailbox.pop()()
    assert r.records == ["a", "b"]


def test_a_cancelled_task_stops_waiting():
    r = Rig(capacity=1)
    r.op._cancelled = lambda: True
    r.process(1)
    with pytest.raises(AsyncTaskCancelled):
        r.process(2)


def test_the_asyncio_thread_executor_runs_coroutines():
    class Upper(AsyncFunction):
        async def async_invoke(self, value):
            await asyncio.sleep(0)
            return [value.upper()]

    op = AsyncWaitOperator(Upper(), 0, 2, async_retry_strategies.NO_RETRY_STRATEGY,
                           ORDERED)
    out = OrderedOutput()
    op.setup(OperatorContext("t", 0, 1, 128, KeyGroupRange(0, 127),
                             ProcessingTimeService(ManualClock(0))), out)
    op.initialize_state(StateInitializationContext(OperatorStateStore()))
    op.open()
    assert isinstance(op._executor, AsyncioThreadExecutor)
    op.process_batch(list("abcde"), None)
    op.finish()
    op.close()
    assert out.records == list("ABCDE")


def test_queue_rejects_bad_settings():
    with pytest.raises(ValueError, match="capacity"):
        AsyncWaitQueue(ORDERED, 0)
    with pytest.raises(ValueError, match="output mode"):
        AsyncWaitQueue("sorted", 3)


def test_api_validation():
    class NotAsync(AsyncFunction):
        def async_invoke(self, value):
            return [value]

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1, 2])
    with pytest.raises(TypeError, match="async def"):
        AsyncDataStream.unordered_wait(ds, NotAsync(), Time.seconds(1))
    retry = AsyncRetryStrategy.fixed_delay(3, 10, None, None)
    with pytest.raises(ValueError, match="Timeout should be configured"):
        AsyncDataStream.ordered_wait_with_retry(ds, Service(), Time.seconds(0), retry)
    with pytest.raises(ValueError, match="capacity"):
        AsyncDataStream.ordered_wait(ds, Service(), Time.seconds(1), capacity=0)
    with pytest.raises(ValueError, match="max_attempts"):
        AsyncRetryStrategy.fixed_delay(0, 10, None, None)
    out = AsyncDataStream.unordered_wait(ds, Service(), Time.seconds(1), 5)
    assert out.get_type() is not None


def test_the_event_loop_thread_ends_with_a_task_thread_that_died(monkeypatch):
    import threading

    from flowray.operators import async_wait
    monkeypatch.setattr(async_wait, "_OWNER_CHECK_S", 0.001)
    executor = AsyncioThreadExecutor()
    started = threading.Thread(target=lambda: executor.start(Service(), lambda *a: None))
    started.start()
    started.join()
    executor._thread.join(30)  # the loop notices its owner is gone
    assert not executor._thread.is_alive()
