"""The job master's pure liveness logic: heartbeats, deployments on their way, and the
node blocklist (issue 14). Manual clocks, no Ray."""

import pytest

from flowray.runtime.jobmaster.deployments import DeploymentTracker
from flowray.runtime.jobmaster.heartbeats import ExpiryKind, HeartbeatMonitor
from flowray.runtime.jobmaster.placement import NodeBlocklist


# -- heartbeats ---------------------------------------------------------------------------
def test_heartbeat_requests_every_interval():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=1000)
    m.track("a", 1, now_ms=0)
    assert m.due(50) == []
    assert m.due(100) == [("a", 1)]
    assert m.due(150) == []  # asked at 100
    m.on_reply("a", 1, now_ms=160, stalled_ms=0)
    assert m.due(200) == [("a", 1)]


def test_a_task_that_answers_and_progresses_never_expires():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("a", 1, now_ms=0)
    for t in range(100, 5000, 100):
        m.due(t)
        m.on_reply("a", 1, now_ms=t, stalled_ms=0)
        assert m.expired(t) == []


def test_a_silent_task_expires_once_as_unreachable():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("a", 1, now_ms=0)
    m.on_reply("a", 1, now_ms=200, stalled_ms=0)
    assert m.expired(700) == []
    [e] = m.expired(701)
    assert (e.subtask, e.attempt, e.kind) == ("a", 1, ExpiryKind.UNREACHABLE)
    assert m.expired(5000) == []  # reported once
    assert "did not answer heartbeats" in e.reason("map (1/2)", 500)
    assert "map (1/2)" in e.reason("map (1/2)", 500)


def test_a_stalled_task_expires_though_it_answers():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("a", 1, now_ms=0)
    m.on_reply("a", 1, now_ms=300, stalled_ms=250)  # stalled since 50
    assert m.expired(550) == []
    m.on_reply("a", 1, now_ms=560, stalled_ms=510)
    [e] = m.expired(560)
    assert e.kind is ExpiryKind.STALLED and e.silent_ms == 510
    assert "made no progress" in e.reason("hang (1/1)", 500)


def test_a_stall_that_ends_resets():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("a", 1, now_ms=0)
    m.on_reply("a", 1, now_ms=400, stalled_ms=400)
    m.on_reply("a", 1, now_ms=450, stalled_ms=0)
    assert m.expired(900) == []


def test_answers_of_an_older_attempt_are_ignored():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("a", 2, now_ms=0)
    m.on_reply("a", 1, now_ms=400, stalled_ms=0)
    assert [e.attempt for e in m.expired(501)] == [2]


def test_longest_silent_first_and_untracked_tasks_never_expire():
    m = HeartbeatMonitor(interval_ms=100, timeout_ms=500)
    m.track("consumer", 1, now_ms=0)
    m.track("producer", 1, now_ms=0)
    m.track("done", 1, now_ms=0)
    m.untrack("done")
    m.on_reply("consumer", 1, now_ms=100, stalled_ms=100)   # stalled since 0
    m.on_reply("producer", 1, now_ms=100, stalled_ms=50)    # stalled since 50
    m.on_reply("consumer", 1, now_ms=560, stalled_ms=560)
    m.on_reply("producer", 1, now_ms=560, stalled_ms=510)
    assert [e.subtask for e in m.expired(560)] == ["consumer", "producer"]


def test_heartbeat_settings_must_be_positive():
    with pytest.raises(ValueError):
        HeartbeatMonitor(interval_ms=0, timeout_ms=10)


# -- deployments --------------------------------------------------------------------------
def test_a_deployment_is_ready_once_every_actor_answered():
    t = DeploymentTracker()
    t.start(1, ["a", "b"], deadline=10.0)
    t.on_address("a", "addr-a")
    assert t.take_ready() == [] and t.is_pending("b")
    t.on_address("b", "addr-b")
    [w] = t.take_ready()
    assert (w.attempt, w.start, w.lost, w.timed_out) == (
        1, {"a": "addr-a", "b": "addr-b"}, {}, [])
    assert not t.is_pending("a") and t.take_ready() == []


def test_an_actor_that_dies_before_answering_is_lost_not_raised():
    t = DeploymentTracker()
    t.start(1, ["a", "b"], deadline=10.0)
    t.on_failure("a", "ActorDiedError: its node is gone")
    t.on_address("b", "addr-b")
    [w] = t.take_ready()
    assert w.lost == {"a": "ActorDiedError: its node is gone"}
    assert w.start == {"b": "addr-b"}


def test_actors_that_do_not_answer_by_the_deadline_time_out():
    t = DeploymentTracker()
    t.start(4, ["a", "b", "c"], deadline=10.0)
    t.on_address("a", "addr-a")
    t.expire(9.9)
    assert t.take_ready() == []
    t.expire(10.1)
    [w] = t.take_ready()
    assert w.timed_out == ["b", "c"] and w.start == {"a": "addr-a"}
    t.on_address("b", "late")  # a late answer changes nothing
    assert t.take_ready() == []


def test_cancelling_a_pending_subtask_gives_its_attempt_and_never_starts_it():
    t = DeploymentTracker()
    t.start(2, ["a", "b"], deadline=10.0)
    assert t.cancel("a") == 2
    assert t.cancel("zzz") is None
    t.on_address("b", "addr-b")
    [w] = t.take_ready()
    assert w.start == {"b": "addr-b"} and w.lost == {}


def test_a_failed_then_cancelled_subtask_is_reported_once():
    t = DeploymentTracker()
    t.start(2, ["a", "b"], deadline=10.0)
    t.on_failure("a", "gone")
    assert t.cancel("b") == 2
    [w] = t.take_ready()
    assert w.lost == {"a": "gone"} and w.start == {}


def test_a_redeploy_replaces_a_pending_one():
    t = DeploymentTracker()
    t.start(1, ["a", "b"], deadline=10.0)
    t.start(2, ["a"], deadline=20.0)
    t.on_address("b", "addr-b")
    assert [w.start for w in t.take_ready()] == [{"b": "addr-b"}]
    t.on_address("a", "addr-a2")
    [w] = t.take_ready()
    assert (w.attempt, w.start) == (2, {"a": "addr-a2"})


def test_an_empty_deployment_is_ready_at_once():
    t = DeploymentTracker()
    t.start(1, [], deadline=1.0)
    [w] = t.take_ready()
    assert w.start == {} and w.lost == {}


# -- node blocklist -----------------------------------------------------------------------
def test_dead_nodes_are_always_avoided():
    b = NodeBlocklist(hold_ms=1000)
    assert b.nodes_to_avoid({"n1": True, "n2": False}, now_ms=0) == {"n2"}


def test_a_node_that_lost_tasks_is_avoided_for_a_while():
    b = NodeBlocklist(hold_ms=1000)
    b.block("n2", now_ms=0)
    alive = {"n1": True, "n2": True}
    assert b.nodes_to_avoid(alive, now_ms=999) == {"n2"}
    assert b.nodes_to_avoid(alive, now_ms=1000) == set()


def test_never_every_live_node():
    b = NodeBlocklist(hold_ms=1000)
    b.block("n1", now_ms=0)
    assert b.nodes_to_avoid({"n1": True}, now_ms=10) == set()
    b.block("n2", now_ms=0)
    assert b.nodes_to_avoid({"n1": True, "n2": True, "n3": False}, now_ms=10) == {"n3"}


def test_an_unknown_node_is_not_blocked():
    b = NodeBlocklist(hold_ms=1000)
    b.block("", now_ms=0)
    assert b.blocked(1) == set()
