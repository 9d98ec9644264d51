"""Event-time sliding windows over a CSV file, with late data.

Run from the repository root (an embedded local Ray starts and stops with the program)::

    .venv/bin/python examples/sliding_windows_csv.py [readings.csv] [--periodic]

The CSV has a header line and the columns ``event_time,sensor,temperature``, for example::

    event_time,sensor,temperature
    2024-05-01T12:00:01Z,sensor-1,20.0
    2024-05-01T12:00:02Z,sensor-2,18.5

``event_time`` is ISO 8601 (UTC when it names no zone). **Without a path** the example
writes a small sample (``SAMPLE_CSV`` below: two sensors, records out of order, some of
them late) to ``readings.csv`` in a fresh temporary folder, says where, and reads that.

What the job does:

1. reads the file line by line (``FileSource``) and parses the CSV (header and blank lines
   are skipped);
2. takes each reading's ``event_time`` as its timestamp and derives watermarks with
   *bounded out-of-orderness*: readings may come up to ``OUT_OF_ORDERNESS`` (2 s) late
   without being late, so the watermark is the highest event time seen - 2 s - 1 ms;
3. keys by sensor and puts each reading into ``SlidingEventTimeWindows`` of 10 s sliding
   every 5 s (each reading is in two windows);
4. aggregates each window incrementally (``AggregateFunction``: count, mean, max) and
   labels the result with its window (``ProcessWindowFunction``); a window fires when the
   watermark passes its end;
5. keeps each window ``ALLOWED_LATENESS`` (5 s) longer: a reading for a window that has
   fired but is still kept fires it again with the reading added (printed as a *late
   update*); a reading whose windows are all gone goes to the late-data side output
   (``OutputTag``) and is printed as *late*.

Both outputs are collected to the driver and printed in a fixed order. Stateful
operators have uids, so a savepoint of this job would restore into a changed version.

Watermarks: ``WatermarkStrategy.for_bounded_out_of_orderness(...)`` emits its watermark
*periodically* (every ``pipeline.auto-watermark-interval``, 200 ms); a file this small is
read in far less time, so the only watermark would be the one at the end of the input and
nothing would ever be late. The example therefore emits the same watermark (highest event
time - out-of-orderness - 1 ms) after *every* reading (``EveryEventBoundedOutOfOrderness``,
given to ``WatermarkStrategy.for_generator``), which makes the output the same on every
run. ``--periodic`` uses the built-in periodic strategy instead, as a long-running job
would; then which readings are late depends on timing.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from datetime import datetime, timezone
from typing import Iterable

from flowray import StreamExecutionEnvironment
from flowray.common import Duration, Time, Types, WatermarkStrategy
from flowray.common.watermark_strategy import TimestampAssigner, WatermarkGenerator
from flowray.datastream import OutputTag
from flowray.datastream.connectors.file_system import FileSource, StreamFormat
from flowray.datastream.functions import AggregateFunction, ProcessWindowFunction
from flowray.datastream.state import ValueStateDescriptor
from flowray.datastream.window import SlidingEventTimeWindows

WINDOW_SIZE = Time.seconds(10)
WINDOW_SLIDE = Time.seconds(5)
OUT_OF_ORDERNESS = Duration.of_seconds(2)
ALLOWED_LATENESS = Time.seconds(5)

LATE = OutputTag("late-readings")

SAMPLE_CSV = """\
event_time,sensor,temperature
2024-05-01T12:00:01Z,sensor-1,20.0
2024-05-01T12:00:02Z,sensor-2,18.5
2024-05-01T12:00:04Z,sensor-1,20.4
2024-05-01T12:00:03Z,sensor-2,18.7
2024-05-01T12:00:07Z,sensor-1,21.0
2024-05-01T12:00:06Z,sensor-2,19.0
2024-05-01T12:00:09Z,sensor-1,21.3
2024-05-01T12:00:12Z,sensor-2,19.4
2024-05-01T12:00:08Z,sensor-1,21.1
2024-05-01T12:00:14Z,sensor-1,21.6
2024-05-01T12:00:17Z,sensor-2,19.8
2024-05-01T12:00:11Z,sensor-1,21.2
2024-05-01T12:00:21Z,sensor-1,22.0
2024-05-01T12:00:23Z,sensor-2,20.1
2024-05-01T12:00:03Z,sensor-2,18.9
2024-05-01T12:00:26Z,sensor-1,22.4
2024-05-01T12:00:19Z,sensor-2,20.0
2024-05-01T12:00:31Z,sensor-2,20.5
2024-05-01T12:00:13Z,sensor-1,21.4
2024-05-01T12:00:33Z,sensor-1,22.9
2024-05-01T12:00:36Z,sensor-2,20.7
"""


def parse_time(text: str) -> int:
    """ISO 8601 -> epoch milliseconds (UTC when the text names no zone)."""
    t = datetime.fromisoformat(text.strip())
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return round(t.timestamp() * 1000)


def show_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


def parse_line(line: str) -> Iterable[tuple]:
    """One CSV line -> ``(event_time_ms, sensor, temperature)``; nothing for the header
    and blank lines."""
    fields = next(csv.reader([line]), [])
    if len(fields) < 3 or fields[0].strip() == "event_time":
        return
    yield parse_time(fields[0]), fields[1].strip(), float(fields[2])


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[0]


class EveryEventBoundedOutOfOrderness(WatermarkGenerator):
    """Bounded out-of-orderness (watermark = highest timestamp - bound - 1 ms), emitted
    after each record instead of periodically."""

    def __init__(self, max_out_of_orderness: Duration = OUT_OF_ORDERNESS) -> None:
        self.bound_ms = max_out_of_orderness.to_milliseconds()
        self.highest = None

    def on_event(self, event, event_timestamp, output) -> None:
        if self.highest is None or event_timestamp > self.highest:
            self.highest = event_timestamp
            output.emit_watermark(self.highest - self.bound_ms - 1)

    def on_periodic_emit(self, output) -> None:
        pass


class CountMeanMax(AggregateFunction):
    """Accumulator ``(count, sum, max)`` -> ``(count, mean, max)``."""

    def create_accumulator(self):
        return 0, 0.0, float("-inf")

    def add(self, value, accumulator):
        count, total, highest = accumulator
        return count + 1, total + value[2], max(highest, value[2])

    def get_result(self, accumulator):
        count, total, highest = accumulator
        return count, round(total / count, 2), highest

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1], max(a[2], b[2])


class LabelWindow(ProcessWindowFunction):
    """``(sensor, window start, window end, count, mean, max, firing)``; ``firing`` counts
    the window's evaluations (1: when the watermark passed its end, 2+: late updates),
    kept in per-window state that ``clear`` drops when the window is cleaned up."""

    firings = ValueStateDescriptor("firings", Types.INT())

    def process(self, key, context, elements):
        count, mean, highest = next(iter(elements))
        firing = context.window_state().get_state(self.firings)
        n = (firing.value() or 0) + 1
        firing.update(n)
        window = context.window()
        yield key, window.start, window.end, count, mean, highest, n

    def clear(self, context):
        context.window_state().get_state(self.firings).clear()


def sample_csv() -> str:
    folder = tempfile.mkdtemp(prefix="flowray-sliding-windows-")
    path = os.path.join(folder, "readings.csv")
    with open(path, "w") as f:
        f.write(SAMPLE_CSV)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", help="the readings (default: a sample CSV)")
    parser.add_argument("--periodic", action="store_true",
                        help="periodic watermarks (WatermarkStrategy."
                             "for_bounded_out_of_orderness): late data depends on timing")
    args = parser.parse_args()
    path = args.csv
    if path is None:
        path = sample_csv()
        print(f"no CSV given: wrote a sample to {path}")
    path = os.path.abspath(path)

    if args.periodic:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(OUT_OF_ORDERNESS)
    else:
        strategy = WatermarkStrategy.for_generator(EveryEventBoundedOutOfOrderness)
    strategy = strategy.with_timestamp_assigner(EventTime())

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
    # one reader, one parser and one watermark generator: event time is decided in one
    # place, in file order, so every window subtask sees the same watermarks at the same
    # records (with several, a window's watermark is the minimum over its inputs)
    readings = (env.from_source(source, WatermarkStrategy.no_watermarks(), "readings")
                .set_parallelism(1).uid("readings")
                .flat_map(parse_line).set_parallelism(1).uid("parse")
                .assign_timestamps_and_watermarks(strategy).set_parallelism(1)
                .uid("event-time"))
    windows = (readings
               .key_by(lambda r: r[1])
               .window(SlidingEventTimeWindows.of(WINDOW_SIZE, WINDOW_SLIDE))
               .allowed_lateness(ALLOWED_LATENESS.to_milliseconds())
               .side_output_late_data(LATE)
               .aggregate(CountMeanMax(), LabelWindow())
               .uid("sliding-windows"))
    late = windows.get_side_output(LATE)
    results = sorted(windows.map(lambda w: ("window", w))
                     .union(late.map(lambda r: ("late", r)))
                     .execute_and_collect("sliding windows over a CSV"))

    print(f"{'window':21} {'sensor':9} {'count':>5} {'mean':>6} {'max':>6}")
    for _, (sensor, start, end, count, mean, highest, firing) in sorted(
            (r for r in results if r[0] == "window"), key=lambda r: (r[1][1], r[1][0], r[1][6])):
        update = f"  late update {firing - 1}" if firing > 1 else ""
        print(f"[{show_time(start)}, {show_time(end)}) {sensor:9} {count:>5} {mean:>6.2f} "
              f"{highest:>6.1f}{update}")
    for _, (ts, sensor, temperature) in sorted(
            (r for r in results if r[0] == "late"), key=lambda r: (r[1][0], r[1][1])):
        print(f"late: {show_time(ts)} {sensor} {temperature}")


if __name__ == "__main__":
    main()
