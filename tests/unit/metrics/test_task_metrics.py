"""Task and user metrics of a job run on the in-process LocalExecutor: the values a job's
result carries per subtask (the same values the Ray exporter and, later, the REST API read)."""

from __future__ import annotations

from flowray.common.typeinfo import Types
from flowray.datastream.functions import MapFunction, RuntimeContext
from flowray.metrics.groups import MetricRegistry
from flowray.runtime.task.io_metrics import TaskIOMetrics
from tests.support.environments import local_env

TASK_METRICS = {"numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut",
                "numRecordsInPerSecond", "numRecordsOutPerSecond", "numBytesInPerSecond",
                "numBytesOutPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond",
                "busyTimeMsPerSecond"}


class CountingMap(MapFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        group = runtime_context.get_metrics_group()
        self.seen = group.counter("seen")
        self.sizes = group.add_group("parity", "odd").distribution("size")
        group.gauge("constant", lambda: 42)

    def map(self, value):
        self.seen.inc()
        if value % 2:
            self.sizes.update(value)
        return value * 2


def test_every_subtask_reports_flinks_task_metrics_and_its_users_metrics():
    n = 1000
    env = local_env(parallelism=2)
    (env.from_collection(list(range(n)), type_info=Types.LONG())
     .rebalance().map(CountingMap(), output_type=Types.LONG()).name("doubler")
     .key_by(lambda x: x % 3).reduce(lambda a, b: a + b).print())
    result = env.execute("metrics")
    by_task = {}
    for m in result.task_metrics:
        by_task.setdefault(m["task"].rsplit(" (", 1)[0], []).append(m["metrics"])
    sources = [v for k, v in by_task.items() if k.startswith("Source")]
    maps = [v for k, v in by_task.items() if "doubler" in k][0]
    assert all(TASK_METRICS <= set(m) for ms in by_task.values() for m in ms)
    assert sum(m["numRecordsOut"] for ms in sources for m in ms) == n
    assert sum(m["numRecordsIn"] for m in maps) == n
    assert sum(m["doubler.seen"] for m in maps) == n
    sizes = [m["doubler.size[parity=odd]"] for m in maps]
    assert sum(d["count"] for d in sizes) == n // 2
    assert sum(d["sum"] for d in sizes) == sum(range(1, n, 2))
    assert all(m["doubler.constant"] == 42 for m in maps)
    assert all(0.0 <= m["busyTimeMsPerSecond"] <= 1000.0 for ms in by_task.values()
               for m in ms)


def test_time_metrics_split_each_second_as_flink_does():
    totals = {"idle": 0.0, "bp": 0.0, "in": 0}
    registry = MetricRegistry()
    m = TaskIOMetrics(registry.task_group("j", "1", "Map", 0),
                      records_in=lambda: totals["in"], records_out=lambda: 0,
                      bytes_in=lambda: 0, bytes_out=lambda: 0,
                      idle_ms=lambda: totals["idle"], back_pressured_ms=lambda: totals["bp"])
    # one 5 s interval: 1 s idle, 3.5 s back-pressured
    totals["idle"] += 1000.0
    totals["bp"] += 3500.0
    totals["in"] += 6000
    registry.update_views()
    v = m.values()
    assert v["idleTimeMsPerSecond"] == 200.0
    assert v["backPressuredTimeMsPerSecond"] == 700.0
    assert v["busyTimeMsPerSecond"] == 100.0
    assert v["numRecordsIn"] == 6000 and v["numRecordsInPerSecond"] == 100.0  # over 60 s
    registry.update_views()  # a second interval with nothing: all idle time gone
    v = m.values()
    assert v["idleTimeMsPerSecond"] == 0.0 and v["busyTimeMsPerSecond"] == 1000.0


def test_accumulated_times_are_totals_since_the_task_started():
    t = {"run": 0.0, "idle": 0.0, "bp": 0.0}
    group = MetricRegistry().task_group("j", "1", "Map", 0)
    m = TaskIOMetrics(group, records_in=lambda: 0, records_out=lambda: 0,
                      bytes_in=lambda: 0, bytes_out=lambda: 0, idle_ms=lambda: t["idle"],
                      back_pressured_ms=lambda: t["bp"], running_ms=lambda: t["run"])
    t.update(run=10_000.0, idle=2_500.0, bp=4_000.0)
    v = m.values()
    assert (v["accumulateIdleTimeMs"], v["accumulateBackPressuredTimeMs"],
            v["accumulateBusyTimeMs"]) == (2_500, 4_000, 3_500)


def test_operators_report_their_watermarks_and_tasks_their_last_checkpoint():
    from flowray.common import Duration, WatermarkStrategy
    from flowray.common.constants import MAX_WATERMARK

    class _Ts:
        def extract_timestamp(self, value, record_timestamp):
            return value

    env = local_env(parallelism=1)
    (env.from_collection(list(range(100)), type_info=Types.LONG())
     .assign_timestamps_and_watermarks(
         WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
         .with_timestamp_assigner(_Ts()))
     .map(lambda x: x).name("after-watermarks").print())
    result = env.execute("watermarks")
    (values,) = [m["metrics"] for m in result.task_metrics
                 if "after-watermarks.currentInputWatermark" in m["metrics"]]
    # the input ended: the final watermark went through the map
    assert values["after-watermarks.currentInputWatermark"] == MAX_WATERMARK
    assert values["after-watermarks.currentOutputWatermark"] == MAX_WATERMARK
    assert values["checkpointAlignmentTime"] == 0  # no checkpoint was taken
    assert values["after-watermarks.stateSize"] == 0
    assert "checkpointStartDelayNanos" in values


def test_job_metrics_read_the_scheduler_and_its_checkpoint_stats():
    from flowray.common.clock import ManualClock
    from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
    from flowray.runtime.jobmaster.job_metrics import JobMetrics

    class Scheduler:
        restarts, stats, is_running = 0, CheckpointStatsTracker(), True

    sched, clock, registry = Scheduler(), ManualClock(10_000), MetricRegistry()
    m = JobMetrics(registry.job_group("job", "j1"), sched, clock)
    v = m.values()
    assert v["lastCheckpointDuration"] == -1 and v["lastCheckpointRestoreTimestamp"] == -1
    sched.stats.report_triggered(1, 20_000, False, num_tasks=1)
    sched.stats.report_completed(1, 20_150, 4096)
    sched.stats.report_triggered(2, 21_000, False, num_tasks=1)
    sched.stats.report_failed(2, 21_010, "declined")
    sched.stats.report_restored(1, False, "/chk/1", 30_000)
    sched.restarts = 1
    clock.advance(7_000)
    v = m.values()
    assert v == {"uptime": 7_000, "numRestarts": 1, "numberOfCompletedCheckpoints": 1,
                 "numberOfFailedCheckpoints": 1, "numberOfInProgressCheckpoints": 0,
                 "lastCheckpointDuration": 150, "lastCheckpointSize": 4096,
                 "lastCheckpointRestoreTimestamp": 30_000}
    sched.is_running = False
    assert m.values()["uptime"] == 0
    assert {s.labels["job_id"] for s in registry.snapshot()} == {"j1"}


def test_the_grafana_dashboard_queries_only_metrics_flowray_exports():
    import json
    import re
    from pathlib import Path

    from flowray.common.clock import ManualClock
    from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
    from flowray.runtime.jobmaster.job_metrics import JobMetrics
    from flowray.runtime.task.io_metrics import register_operator_metrics

    class Scheduler:
        restarts, stats, is_running = 0, CheckpointStatsTracker(), True

    class TwoInputOp:
        num_inputs, current_watermark = 2, 0

        def input_watermarks(self):
            return [0, 0]

    registry = MetricRegistry()
    task = registry.task_group("j", "1", "t", 0)
    zero = lambda: 0  # noqa: E731
    TaskIOMetrics(task, records_in=zero, records_out=zero, bytes_in=zero, bytes_out=zero,
                  idle_ms=zero, back_pressured_ms=zero)
    task.gauge("checkpointAlignmentTime", zero)  # (StreamTask registers these two)
    task.gauge("checkpointStartDelayNanos", zero)
    register_operator_metrics(task.operator_group("op"), TwoInputOp())
    JobMetrics(registry.job_group("j", "1"), Scheduler(), ManualClock())
    # Ray serves them as ray_<name> in lower case
    exported = {"ray_" + s.name.lower() for s in registry.snapshot()}
    dashboard = Path(__file__).parents[3] / "docs" / "grafana-flowray.json"
    used = set(re.findall(r"ray_flowray_\w+", dashboard.read_text()))
    assert used and used <= exported, used - exported
    json.loads(dashboard.read_text())  # (and it is JSON)
