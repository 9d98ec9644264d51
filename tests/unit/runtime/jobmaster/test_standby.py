"""Warm standby task actors: which to start, which a failover may deploy into (pure)."""

import pytest

from flowray.runtime.jobmaster.standby import StandbyPool, reserves_nothing, resource_profile

NONE = resource_profile({})


def _ready_pool(size=1, threads=9, node="n1"):
    pool = StandbyPool(size)
    pool.learn(NONE, threads)
    for i, w in enumerate(pool.wanted()):
        pool.add(f"s{i}", w.profile, w.threads, handle=f"h{i}")
        pool.on_ready(f"s{i}", node)
    return pool


def test_nothing_is_wanted_before_a_task_was_deployed_or_with_size_zero():
    assert StandbyPool(2).wanted() == []
    pool = StandbyPool(0)
    pool.learn(NONE, 9)
    assert pool.wanted() == []


def test_size_standbys_per_profile_with_the_most_threads_a_task_needed():
    pool = StandbyPool(2)
    pool.learn(NONE, 9)
    pool.learn(NONE, 12)
    gpu = resource_profile({"num_gpus": 0})
    pool.learn(gpu, 8)
    assert sorted((w.profile, w.threads) for w in pool.wanted()) == \
        [(NONE, 12), (NONE, 12), (gpu, 8), (gpu, 8)]


def test_standbys_being_started_count_and_a_lost_one_is_wanted_again():
    pool = StandbyPool(1)
    pool.learn(NONE, 9)
    pool.add("s0", NONE, 9, handle="h0")
    assert pool.wanted() == []
    assert pool.on_lost("s0").handle == "h0"
    assert len(pool.wanted()) == 1
    assert pool.on_lost("s0") is None  # reported twice: once is enough


def test_a_standby_with_too_few_threads_does_not_count_nor_host():
    pool = _ready_pool(threads=9)
    pool.learn(NONE, 10)  # a task with two more input channels
    assert len(pool.wanted()) == 1
    assert pool.take(NONE, 10, set()) is None
    assert pool.take(NONE, 9, set()).name == "s0"


def test_take_removes_the_standby_and_the_pool_wants_a_new_one():
    pool = _ready_pool()
    assert pool.take(NONE, 9, set()).name == "s0"
    assert len(pool) == 0
    assert len(pool.wanted()) == 1


def test_never_a_standby_on_a_node_to_avoid():
    pool = _ready_pool(node="lost")
    assert pool.take(NONE, 9, {"lost"}) is None
    assert pool.take(NONE, 9, {"other"}).name == "s0"


def test_a_starting_standby_only_when_no_node_is_avoided():
    pool = StandbyPool(1)
    pool.learn(NONE, 9)
    pool.add("s0", NONE, 9, handle="h0")  # its node is not known yet
    assert pool.take(NONE, 9, {"n2"}) is None
    assert pool.take(NONE, 9, set()).name == "s0"


def test_a_running_standby_goes_before_a_starting_one():
    pool = StandbyPool(2)
    pool.learn(NONE, 9)
    pool.add("starting", NONE, 9, handle="h0")
    pool.add("running", NONE, 9, handle="h1")
    pool.on_ready("running", "n1")
    assert pool.ready_names() == ["running"]
    assert pool.take(NONE, 9, set()).name == "running"


def test_a_standby_hosts_only_its_own_profile():
    pool = _ready_pool()
    assert pool.take(resource_profile({"num_cpus": 0, "memory": 0}), 9, set()) is None


def test_drain_returns_every_standby_and_empties_the_pool():
    pool = _ready_pool(size=2)
    assert sorted(s.name for s in pool.drain()) == ["s0", "s1"]
    assert len(pool) == 0 and pool.ready_names() == []


@pytest.mark.parametrize("resources, idle_ok", [
    ({}, True),
    ({"num_cpus": 0}, True),
    ({"num_cpus": 0.5}, False),
    ({"num_gpus": 1}, False),
    ({"memory": 1 << 30}, False),
    ({"resources": {"accelerator": 0}}, True),
    ({"resources": {"accelerator": 1}}, False),
    ({"placement_group": "pg"}, False),  # an option we do not know
])
def test_only_profiles_reserving_nothing_get_standbys(resources, idle_ok):
    assert reserves_nothing(resources) is idle_ok


def test_negative_size_is_refused():
    with pytest.raises(ValueError, match="must not be negative"):
        StandbyPool(-1)
