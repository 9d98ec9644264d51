"""User metrics (PyFlink's MetricGroup API) and the registry that names and labels them."""

from __future__ import annotations

import pytest

from flowray.metrics import Counter, Distribution, Meter, MetricGroup
from flowray.operators.functions import RuntimeContext
from flowray.metrics.groups import MetricRegistry, metric_name
from flowray.metrics.kinds import UPDATE_INTERVAL_S, MeterView


def _op(registry=None, operator="map"):
    registry = registry or MetricRegistry()
    task = registry.task_group(job_name="job", job_id="j1", task_name="Map", subtask_index=1)
    return registry, task, task.operator_group(operator)


def _by_name(registry):
    return {s.name: s for s in registry.snapshot()}


def test_pyflink_api_counter_gauge_meter_distribution():
    registry, _, group = _op()
    assert isinstance(group, MetricGroup)
    c = group.counter("seen")
    assert isinstance(c, Counter)
    c.inc()
    c.inc(5)
    c.dec(2)
    group.gauge("queue", lambda: 7)
    m = group.meter("rate", time_span_in_seconds=10)
    assert isinstance(m, Meter)
    m.mark_event(30)
    d = group.distribution("size")
    assert isinstance(d, Distribution)
    for v in (4, 2, 9):
        d.update(v)
    registry.update_views()
    s = _by_name(registry)
    assert s["flowray_seen"].value == 4 and s["flowray_seen"].kind == "counter"
    assert s["flowray_queue"].value == 7
    assert s["flowray_rate"].count == 30 and s["flowray_rate"].value == 3.0
    assert s["flowray_size"].value == {"count": 3, "sum": 15, "min": 2, "max": 9,
                                       "mean": 5.0}


def test_every_metric_is_labelled_with_its_scope():
    registry, _, group = _op(operator="Filter -> Map")
    group.counter("n").inc()
    (sample,) = registry.snapshot()
    assert sample.labels == {"job_name": "job", "job_id": "j1", "task_name": "Map",
                             "subtask_index": "1", "operator_name": "Filter -> Map"}


def test_groups_name_the_metric_and_key_value_groups_label_it():
    registry, _, group = _op()
    group.add_group("cache").add_group("region", "eu").counter("hits").inc(2)
    group.add_group("cache").add_group("region", "us").counter("hits").inc(3)
    samples = sorted(registry.snapshot(), key=lambda s: s.labels["region"])
    assert [(s.name, s.labels["region"], s.value) for s in samples] == [
        ("flowray_cache_hits", "eu", 2), ("flowray_cache_hits", "us", 3)]
    assert metric_name(("my group", "a.b"), "x-y") == "flowray_my_group_a_b_x_y"


def test_registering_again_gives_the_same_metric_and_another_kind_is_refused():
    _, _, group = _op()
    assert group.counter("n") is group.counter("n")
    assert group.meter("m") is group.meter("m")
    with pytest.raises(ValueError, match="already a counter, not a meter"):
        group.meter("n")
    with pytest.raises(ValueError, match="non-empty string"):
        group.counter("")
    with pytest.raises(ValueError, match="label 'job_id' is taken"):
        group.add_group("job_id", "x")
    with pytest.raises(TypeError, match="int or a float"):
        group.distribution("d").update("12")
    with pytest.raises(TypeError, match="function giving its value"):
        group.gauge("g", 5)


def test_same_name_in_two_subtasks_are_two_metrics():
    registry = MetricRegistry()
    for i in (0, 1):
        registry.task_group("job", "j1", "Map", i).operator_group("map").counter("n").inc(i + 1)
    assert sorted((s.labels["subtask_index"], s.value) for s in registry.snapshot()) == [
        ("0", 1), ("1", 2)]


def test_a_gauge_that_raises_is_left_out_and_the_others_still_report(caplog):
    registry, _, group = _op()
    group.gauge("bad", lambda: 1 / 0)
    group.counter("good").inc()
    assert [s.name for s in registry.snapshot()] == ["flowray_good"]
    assert "ZeroDivisionError" in caplog.text
    caplog.clear()
    registry.snapshot()
    assert "ZeroDivisionError" not in caplog.text  # logged once


def test_meter_rate_is_over_its_time_span_sampled_every_interval():
    m = MeterView(12)  # rounds up to 15 s: three intervals
    assert m.time_span_s == 3 * UPDATE_INTERVAL_S
    rates = []
    for events in (150, 150, 150, 0, 0, 0):
        m.mark_event(events)
        m.update()
        rates.append(m.get_rate())
    assert rates == [10.0, 20.0, 30.0, 20.0, 10.0, 0.0]
    assert m.get_count() == 450
    with pytest.raises(ValueError, match="time span must be positive"):
        MeterView(0)


def test_a_task_group_closed_takes_its_operators_metrics_with_it():
    registry, task, group = _op()
    group.counter("n")
    group.meter("m")
    other = registry.task_group("job", "j1", "Map", 2).operator_group("map")
    other.counter("n")
    task.close()
    assert [s.labels["subtask_index"] for s in registry.snapshot()] == ["2"]
    registry.update_views()  # the closed meter is no longer sampled


def test_runtime_context_gives_the_operators_group_or_one_of_its_own():
    registry, task, _ = _op()
    ctx = RuntimeContext("Map", 1, 2, 128, operator_name="map",
                         metric_group=task.operator_group("map"))
    ctx.get_metrics_group().counter("n").inc()
    assert registry.snapshot()[0].labels["operator_name"] == "map"
    alone = RuntimeContext("Map", 0, 1, 128)
    alone.get_metrics_group().counter("n").inc(3)
    assert alone.get_metrics_group().counter("n").get_count() == 3
