"""Buffer debloating (Flink's FLIP-183): size in-flight data by time, not by record count.

A consumer measures how many records per second it actually processes and asks its
producers for batches small enough that everything it may have queued, ``credits`` frames
per input channel, takes about ``target`` to process. A checkpoint barrier queued behind
that data then waits about ``target``, whatever the operator costs per record.

* :class:`ThroughputMeter`: records per second of *busy* time (time spent waiting for
  input does not count), smoothed as an exponential moving average over about ``samples``
  periods (weight 2 / (samples + 1); the plain mean of the samples so far while there are
  fewer, so the first samples do not linger). Time the consumer spends blocked on its own
  output does count: what matters is how fast it takes records off its inputs.
* :class:`BufferDebloater`: every ``period`` it turns a throughput sample into a batch size
  per channel, ``throughput * target / (credits * channels)``, in ``[1, max_batch]``, and
  returns it only when it differs from the one announced before by more than
  ``threshold_pct`` percent (so producers are not told every small wobble).

Producers start at :data:`INITIAL_BATCH` records per batch (a slow start), so the first
sample comes early, after ``first_sample_ms``: a fast consumer lifts the size to the
maximum almost at once, and a slow one never gets a backlog of full batches. A sample
without a record and with little busy time (the consumer just waited) is no sample: the
time adds to the next one.

Both are pure: the caller passes the monotonic time in milliseconds.

>>> d = BufferDebloater(target_ms=1000, period_ms=200, samples=20, threshold_pct=25,
...                     max_batch=1000, credits=8, initial=1)
>>> d.update(0.0, records=0, idle_ms=0.0, channels=1) is None   # the first call: a baseline
True
>>> d.update(10.0, records=2, idle_ms=0.0, channels=1)           # 200 records/s: 25 per batch
25
>>> d.update(210.0, records=42, idle_ms=0.0, channels=1) is None  # unchanged: nothing to say
True
"""

from __future__ import annotations

from typing import Optional

__all__ = ["ThroughputMeter", "BufferDebloater", "INITIAL_BATCH", "FIRST_SAMPLE_MS"]

#: records per batch a producer starts with on a debloated channel, until its consumer
#: announces a size (a slow start: a slow consumer gets no large backlog before it has
#: measured itself; a fast one lifts the size to the maximum after the first sample)
INITIAL_BATCH = 1
#: milliseconds before the first sample (later ones come every period)
FIRST_SAMPLE_MS = 2.0


class ThroughputMeter:
    """Records per second of busy time, as an exponential moving average of samples."""

    def __init__(self, samples: int) -> None:
        if samples < 1:
            raise ValueError(f"samples must be at least 1, got {samples}")
        self.alpha = 2.0 / (samples + 1)
        self.count = 0
        #: the smoothed records per second; None before the first sample
        self.value: Optional[float] = None

    def add(self, records: int, busy_ms: float) -> Optional[float]:
        """Add a sample of ``records`` processed in ``busy_ms``; returns the smoothed
        throughput (unchanged, possibly None, for a sample with no busy time)."""
        if busy_ms <= 0:
            return self.value
        sample = records * 1000.0 / busy_ms
        self.count += 1
        if self.value is None:
            self.value = sample
        else:
            self.value += max(self.alpha, 1.0 / self.count) * (sample - self.value)
        return self.value


class BufferDebloater:
    """Per-channel batch sizes from a consumer's throughput (see the module docstring)."""

    def __init__(self, target_ms: float, period_ms: float, samples: int, threshold_pct: int,
                 max_batch: int, credits: int, initial: int = INITIAL_BATCH,
                 first_sample_ms: float = FIRST_SAMPLE_MS) -> None:
        if target_ms <= 0 or period_ms <= 0:
            raise ValueError(f"target and period must be positive, got {target_ms} ms and "
                             f"{period_ms} ms")
        if max_batch < 1 or credits < 1:
            raise ValueError(f"max_batch and credits must be at least 1, got {max_batch} "
                             f"and {credits}")
        self.target_ms = target_ms
        self.period_ms = period_ms
        self.threshold = threshold_pct / 100.0
        self.max_batch = max_batch
        self.credits = credits
        self.meter = ThroughputMeter(samples)
        self.first_sample_ms = min(first_sample_ms, period_ms)
        #: the batch size the producers use now (announced last, or the initial one)
        self.current = max(1, min(max_batch, initial))
        self._last_ms: Optional[float] = None
        self._last_records = 0
        self._last_idle_ms = 0.0

    def desired(self, throughput: float, channels: int) -> int:
        """Records per batch so that ``credits`` batches on each of ``channels`` channels
        take about ``target_ms`` at ``throughput`` records per second."""
        n = throughput * self.target_ms / 1000.0 / (self.credits * max(1, channels))
        return max(1, min(self.max_batch, int(n)))

    def update(self, now_ms: float, records: int, idle_ms: float,
               channels: int) -> Optional[int]:
        """Feed the consumer's running totals (records processed, milliseconds spent
        waiting for input) at ``now_ms``; at most once per period this takes a sample.
        Returns a new batch size to announce to every input channel, or None."""
        last = self._last_ms
        if last is None:
            self._last_ms, self._last_records, self._last_idle_ms = now_ms, records, idle_ms
            return None
        elapsed = now_ms - last
        if elapsed < (self.period_ms if self.meter.count else self.first_sample_ms):
            return None
        busy = elapsed - (idle_ms - self._last_idle_ms)
        done = records - self._last_records
        if done == 0 and busy < elapsed / 2:
            return None  # mostly waited, nothing processed: nothing learnt yet
        self._last_ms, self._last_records, self._last_idle_ms = now_ms, records, idle_ms
        throughput = self.meter.add(done, busy)
        if throughput is None or channels <= 0:
            return None
        size = self.desired(throughput, channels)
        current = self.current
        if size == current or abs(size - current) <= current * self.threshold:
            return None
        self.current = size
        return size
