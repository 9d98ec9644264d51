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
