"""The books of a driver's pool of warm task actors (ActorPoolState): what is idle, what
a job holds, what goes back and what is killed."""

import pytest

from flowray.runtime.jobmaster.actor_pool import ActorPoolState


def pool(size=2, max_idle=4, started=2):
    p = ActorPoolState(size, max_idle)
    for i in range(started):
        p.started(f"a{i}", f"h{i}", threads=40)
    return p


def names(actors):
    return [a.name for a in actors]


def test_a_job_takes_idle_actors_with_enough_threads():
    p = pool()
    assert names(p.take("j", [9, 50, 10])) == ["a1", None, "a0"]   # the latest idle first
    assert p.idle_count() == 0 and p.to_start() == 1   # the first job: one for failovers
    assert p.assigned_names("j") == ["a0", "a1"]


def test_actors_a_finished_job_gives_back_are_idle_again_after_a_good_reset():
    p = pool()
    p.take("j", [9, 9])
    back = p.give_back("j", ["a0", "a1"])
    assert names(back) == ["a0", "a1"]
    assert p.after_reset(back[0], reusable=True) is True
    assert p.after_reset(back[1], reusable=False) is False   # killed, never reused
    assert p.idle_count() == 1 and p.assigned_names() == []


def test_the_pool_keeps_at_most_max_idle():
    p = pool(size=1, max_idle=1, started=1)
    p.take("j", [9])                              # a0
    p.started_for("j", "new", "h", threads=40)   # started for the job: the pool's too
    p.started("spare", "h", threads=40)          # the pool refilled meanwhile
    back = p.give_back("j", ["a0", "new"])
    assert [p.after_reset(a, reusable=True) for a in back] == [False, False]
    assert p.idle_count() == 1


def test_a_job_gives_back_only_its_own_actors():
    p = pool()
    p.take("j", [9])
    p.take("k", [9])
    assert names(p.give_back("j", ["a0", "a1"])) == ["a1"]
    assert names(p.give_back("j", ["nobody"])) == []


def test_dropping_a_job_kills_what_it_still_holds_once():
    p = pool()
    p.take("j", [9, 9])
    assert sorted(names(p.drop_job("j"))) == ["a0", "a1"]
    assert p.drop_job("j") == []
    back = p.give_back("j", ["a0"])     # a late give-back of a dropped job: nothing
    assert back == []


def test_an_actor_reset_after_its_job_was_dropped_is_not_kept():
    p = pool()
    p.take("j", [9])
    back = p.give_back("j", ["a1"])
    p.drop_job("j")
    assert p.after_reset(back[0], reusable=True) is False


def test_forgotten_actors_are_neither_idle_nor_assigned():
    p = pool()
    p.take("j", [9])
    p.forget("a0")
    p.forget("a1")
    assert p.idle_count() == 0 and p.assigned_names() == [] and p.to_start() == 1


def test_the_pool_fills_from_the_drivers_second_job_on():
    p = ActorPoolState(3, 4)
    assert p.to_start() == 0                      # nothing started ahead of the first job
    assert names(p.take("j", [9, 9])) == [None, None]   # started for it, at once
    assert p.to_start() == 1                      # one warm actor for its failovers
    p.take("j", [9])                              # the same job again (a failover)
    assert p.to_start() == 1
    p.take("k", [9])                              # a second job: the pool fills
    assert p.to_start() == 3
    p.take("l", [9])
    assert p.to_start() == 3


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="size <= max_idle"):
        ActorPoolState(5, 2)
    with pytest.raises(ValueError):
        ActorPoolState(-1, 2)
