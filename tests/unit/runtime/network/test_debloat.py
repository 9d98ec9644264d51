"""Buffer debloating (issue 16): the throughput meter and batch size calculator on a
manual clock, the announcement on every transport that lives in one process, and the
RecordWriter following it."""

import pytest

from flowray.common.clock import ManualClock
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.common.options import (
    DEBLOAT_ENABLED,
    DEBLOAT_PERIOD,
    DEBLOAT_SAMPLES,
    DEBLOAT_TARGET,
    DEBLOAT_THRESHOLD,
)
from flowray.runtime.network.debloat import BufferDebloater, ThroughputMeter
from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.network.in_process import InProcessChannel
from flowray.runtime.network.partitioners import (
    BroadcastPartitioner,
    ForwardPartitioner,
    RebalancePartitioner,
    RecordWriter,
)
from tests.unit.runtime.network.test_channels import _socket


def _debloater(**kw):
    args = dict(target_ms=1000, period_ms=200, samples=20, threshold_pct=25,
                max_batch=1000, credits=8, initial=1, first_sample_ms=10)
    args.update(kw)
    return BufferDebloater(**args)


class _Consumer:
    """A consumer's running totals on a manual clock: processing records takes time at
    ``ms_per_record``; waiting for input is idle time."""

    def __init__(self, debloater, channels=1):
        self.clock = ManualClock(0)
        self.d = debloater
        self.channels = channels
        self.records = 0
        self.idle_ms = 0.0
        self.announced = []
        self.tick()

    def tick(self):
        size = self.d.update(self.clock.monotonic_ms(), self.records, self.idle_ms,
                             self.channels)
        if size is not None:
            self.announced.append(size)
        return size

    def process(self, n, ms_per_record):
        return self.process_over(n, int(n * ms_per_record))

    def process_over(self, n, ms):
        self.clock.advance(ms)
        self.records += n
        return self.tick()

    def wait(self, ms):
        self.clock.advance(ms)
        self.idle_ms += ms
        return self.tick()


# -- the meter ---------------------------------------------------------------------------

def test_meter_averages_the_first_samples_then_moves_by_its_weight():
    m = ThroughputMeter(samples=3)  # weight 2 / 4 = 0.5
    assert m.value is None
    assert m.add(100, 1000) == 100.0
    assert m.add(300, 1000) == 200.0  # the mean of two samples (weight 1/2)
    assert m.add(500, 1000) == 350.0  # weight 1/2 from here: 200 + (500 - 200) / 2
    assert m.add(350, 1000) == 350.0


def test_meter_ignores_a_sample_without_busy_time():
    m = ThroughputMeter(samples=20)
    assert m.add(10, 0) is None and m.count == 0
    m.add(10, 100)
    assert m.add(0, 0) == 100.0 and m.count == 1


def test_meter_needs_a_sample_count():
    with pytest.raises(ValueError, match="samples must be at least 1"):
        ThroughputMeter(0)


# -- the calculator ----------------------------------------------------------------------

def test_the_first_call_is_a_baseline_and_the_first_sample_comes_early():
    c = _Consumer(_debloater())
    assert c.announced == []
    assert c.process(1, 5) is None  # 5 ms: before the first sample
    assert c.process(1, 5) == 25  # 200 records/s * 1 s / 8 credits
    assert c.d.current == 25


def test_a_slow_consumer_gets_batches_it_drains_in_the_target_time():
    c = _Consumer(_debloater())
    for _ in range(200):  # 2 s at 5 ms per record
        c.process(2, 5)
    assert c.announced == [25]
    # everything in flight: 8 credits of 25 records at 5 ms = the 1 s target
    assert 8 * c.d.current * 5 == 1000


def test_a_fast_consumer_goes_to_the_maximum_at_once():
    c = _Consumer(_debloater())
    assert c.process(1000, 0.01) == 1000  # 100,000 records/s: capped at the batch size


def test_the_batch_is_shared_by_the_channels_and_the_credits():
    c = _Consumer(_debloater(credits=4), channels=5)
    assert c.process(40, 0.25) == 200  # 4,000 records/s over 4 credits x 5 channels
    assert _debloater().desired(0.0, 3) == 1  # never below one record


def test_time_spent_waiting_for_input_does_not_count():
    c = _Consumer(_debloater())
    c.wait(8)
    assert c.process_over(4, 2) == 250  # 4 records in 2 busy ms: 2,000/s (not 400/s)


def test_a_wait_without_records_is_no_sample():
    c = _Consumer(_debloater())
    assert c.wait(500) is None
    assert c.d.meter.count == 0
    # the next sample spans the wait too, but counts only the busy time
    assert c.process(4, 5) == 25
    assert c.d.meter.count == 1


def test_a_consumer_busy_without_records_shrinks_to_one():
    c = _Consumer(_debloater(initial=1000))
    c.clock.advance(10)  # busy (blocked on its own output), nothing taken
    assert c.tick() == 1


def test_small_changes_are_not_announced():
    c = _Consumer(_debloater(samples=1))  # every sample counts fully
    assert c.process(2, 5) == 25
    assert c.process_over(44, 200) is None  # 220 records/s: 27, within 25 %
    assert c.process_over(60, 200) == 37  # 300 records/s: 37, beyond 25 %
    assert c.d.current == 37


def test_samples_come_once_per_period_after_the_first():
    c = _Consumer(_debloater(samples=1))
    assert c.process(2, 5) == 25
    assert c.process(10, 10) is None  # 100 ms: no sample yet
    assert c.d.meter.count == 1
    assert c.process(10, 10) == 12  # 200 ms at 100 records/s
    assert c.d.meter.count == 2


@pytest.mark.parametrize("kw,message", [
    (dict(target_ms=0), "target and period must be positive"),
    (dict(period_ms=-1), "target and period must be positive"),
    (dict(max_batch=0), "max_batch and credits must be at least 1"),
    (dict(credits=0), "max_batch and credits must be at least 1"),
])
def test_bad_arguments_are_named(kw, message):
    with pytest.raises(ValueError, match=message):
        _debloater(**kw)


# -- configuration -----------------------------------------------------------------------

def test_configuration_keys_and_defaults():
    c = Configuration()
    assert c.get(DEBLOAT_ENABLED) is True
    assert (c.get(DEBLOAT_TARGET), c.get(DEBLOAT_PERIOD)) == (1000, 200)
    assert (c.get(DEBLOAT_SAMPLES), c.get(DEBLOAT_THRESHOLD)) == (20, 25)
    c.set_string("flowray.channel.debloat.target", "2 s")
    c.set_string("flowray.channel.debloat.enabled", "false")
    assert c.get(DEBLOAT_TARGET) == 2000 and c.get(DEBLOAT_ENABLED) is False


@pytest.mark.parametrize("key,value,message", [
    ("flowray.channel.debloat.target", "0 ms", "allowed range"),
    ("flowray.channel.debloat.samples", "0", "allowed range [1, 1000]"),
    ("flowray.channel.debloat.threshold-percentages", "-5", "must not be negative"),
    ("flowray.channel.debloat.enabled", "perhaps", "perhaps"),
])
def test_bad_configuration_values_are_rejected(key, value, message):
    with pytest.raises(ConfigurationError) as e:
        Configuration().set_string(key, value)
    assert message in str(e.value)


# -- the RecordWriter follows the announcement ---------------------------------------------

def _drain(ch):
    frames = []
    while (f := ch.reader.poll()) is not None:
        frames.append(f)
    return frames


def test_record_writer_starts_small_and_follows_the_announcement():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=100,
                      debloat_initial=1)
    assert ch.writer.batch_limit == 1 and rw.capacity() == 1
    rw.emit([0, 1, 2])
    assert [f.records for f in _drain(ch)] == [[0], [1], [2]]
    ch.reader.announce_batch_size(4)
    rw.emit(list(range(10)))  # the announcement applies from the next write on
    rw.flush()
    assert [len(f) for f in _drain(ch)] == [4, 4, 2]
    assert rw.capacity() == 4
    ch.reader.announce_batch_size(1_000_000)  # never above the batch size
    rw.emit(list(range(250)))
    rw.flush()
    assert [len(f) for f in _drain(ch)] == [100, 100, 50]


def test_record_writer_without_debloating_ignores_no_announcement_and_has_no_limit():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=100)
    assert ch.writer.batch_limit is None and rw.capacity() == 100
    rw.emit(list(range(100)))
    assert [len(f) for f in _drain(ch)] == [100]


def test_capacity_sums_channels_and_takes_the_smallest_for_a_broadcast():
    chans = [InProcessChannel(f"e/0->{i}", 1000) for i in range(3)]
    rw = RecordWriter(RebalancePartitioner(), [c.writer for c in chans], 0, batch_size=100,
                      debloat_initial=1)
    for c, n in zip(chans, (5, 10, 20)):
        c.reader.announce_batch_size(n)
    rw.flush()  # nothing pending: limits update on writes
    rw.emit(list(range(30)))
    rw.flush()
    assert rw.capacity() == 35
    b = RecordWriter(BroadcastPartitioner(), [c.writer for c in chans], 0, batch_size=100,
                     debloat_initial=1)
    b.emit([1])
    assert b.capacity() == 5


def test_bytes_still_bound_a_debloated_batch():
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000,
                      batch_bytes=64 << 10, debloat_initial=1)
    ch.reader.announce_batch_size(500)
    rw.emit([i.to_bytes(4, "big") + bytes(9996) for i in range(20)])
    rw.flush()
    assert max(len(f) for f in _drain(ch)) <= 6  # 10 kb records, 64 kb batches


# -- the socket transport carries the announcement with the credits --------------------------

@pytest.mark.parametrize("tcp", [False, True], ids=["unix-socket", "tcp-socket"])
def test_socket_writer_learns_the_announced_batch_size_with_its_credits(tcp):
    pair = _socket(1, credits=1, tcp=tcp)
    try:
        w, r = pair.writer, pair.reader
        assert w.carries_batch_limit and w.batch_limit is None
        w.write(RecordBatch([1]))  # its only credit
        r.announce_batch_size(30)  # sent before the credit that taking frame 1 returns
        assert pair.next_frame().records == [1]
        w.write(RecordBatch([2]))  # waits for that credit, reading the announcement first
        assert w.batch_limit == 30
        assert pair.next_frame().records == [2]
    finally:
        pair.close()


def test_socket_announcements_are_no_credits():
    pair = _socket(1, credits=2, tcp=False)
    try:
        w, r = pair.writer, pair.reader
        w.write(RecordBatch([1]))
        w.write(RecordBatch([2]))
        for n in (7, 8, 9):
            r.announce_batch_size(n)
        assert pair.next_frame().records == [1]  # returns one credit
        w.write(RecordBatch([3]))  # waits for it, reading the announcements before it
        assert w.batch_limit == 9
        assert w.in_flight() == 2  # frames 2 and 3: the announcements released nothing
        assert [pair.next_frame().records for _ in range(2)] == [[2], [3]]
    finally:
        pair.close()
