"""TestingSource: contiguous split, exact restore, fault markers that fire once per ledger."""

import os
import pickle
import threading

import cloudpickle
import pytest

import flowray.testing.sources as testing_mod
from flowray.operators.sources import SourceReaderContext
from flowray.common.clock import ManualClock
from flowray.testing import (
    FAIL,
    KILL,
    PAUSE,
    WAIT_UNTIL,
    FailMarker,
    KillMarker,
    PauseMarker,
    SimulatedCrash,
    TestingFailure,
    TestingSource,
)
from tests.support.environments import local_env


@pytest.fixture
def make_source(tmp_path):
    made = []

    def make(items, **kwargs):
        kwargs.setdefault("ledger_dir", str(tmp_path / f"ledger-{len(made)}"))
        source = TestingSource(items, **kwargs)
        made.append(source)
        return source

    yield make
    for s in made:
        s.cleanup()


def drain(reader, max_records=3):
    """All records until the end; fails on a marker exception."""
    out = []
    while True:
        batch = reader.poll_next(max_records)
        if batch is None:
            return out
        out.extend(batch)


def ctx(i=0, p=1):
    return SourceReaderContext(subtask_index=i, parallelism=p)


def test_markers_are_small_picklable_values():
    for m in (FAIL(), KILL(), KILL(3), PAUSE(1.5)):
        assert pickle.loads(pickle.dumps(m)) == m
        assert cloudpickle.loads(cloudpickle.dumps(m)) == m
    assert isinstance(FAIL(), FailMarker) and isinstance(KILL(), KillMarker)
    assert isinstance(PAUSE(2), PauseMarker) and PAUSE(2).seconds == 2.0
    assert repr(FAIL()) == "FAIL()" and repr(PAUSE(0.5)) == "PAUSE(0.5)"
    with pytest.raises(ValueError):
        PAUSE(-1)
    assert not issubclass(SimulatedCrash, TestingFailure)
    assert not issubclass(TestingFailure, SimulatedCrash)


@pytest.mark.parametrize("parallelism", [1, 2, 3])
@pytest.mark.parametrize("max_records", [1, 2, 100])
def test_split_gives_every_item_once(make_source, parallelism, max_records):
    items = list(range(10))
    source = make_source(items)
    shares = [drain(source.create_reader(ctx(i, parallelism)), max_records)
              for i in range(parallelism)]
    assert sum(shares, []) == items  # contiguous shares, in subtask order
    assert all(shares)


def test_split_matches_collection_source_with_markers(make_source):
    from flowray.operators.sources import CollectionSource

    items = [1, 2, PAUSE(0), 3, 4, 5, 6, 7]
    source = make_source(items)
    collection = CollectionSource(items)
    for i in range(3):
        reader = collection.create_reader(ctx(i, 3))
        reader.add_splits(collection.create_splits(3)[i::3])
        expected = [x for x in drain(reader, 100) if not isinstance(x, testing_mod.Marker)]
        assert drain(source.create_reader(ctx(i, 3))) == expected


def test_no_split_gives_every_subtask_everything(make_source):
    source = make_source(["a", "b", "c"], parallelism_split=False)
    assert [drain(source.create_reader(ctx(i, 2))) for i in range(2)] == [["a", "b", "c"]] * 2


def test_exact_restore_at_every_position(make_source):
    items = list(range(7))
    source = make_source(items)
    for max_records in (1, 2, 3):
        reader = source.create_reader(ctx())
        seen = []
        while True:
            pos = reader.snapshot_state()
            fresh = pickle.loads(pickle.dumps(source)).create_reader(ctx())
            fresh.restore_state(pos)
            assert seen + drain(fresh, max_records) == items
            batch = reader.poll_next(max_records)
            if batch is None:
                break
            seen.extend(batch)
        assert seen == items


def test_batch_is_cut_at_a_marker(make_source):
    source = make_source([1, 2, 3, FAIL(), 4, 5])
    reader = source.create_reader(ctx())
    assert reader.poll_next(2) == [1, 2]
    assert reader.poll_next(100) == [3]  # stops just before the marker
    with pytest.raises(TestingFailure, match="item 3"):
        reader.poll_next(100)
    assert source.fired_markers() == [3]
    assert reader.poll_next(100) == [4, 5]  # going on polling moves past the marker
    assert reader.poll_next(100) is None


@pytest.mark.parametrize("copy", [pickle, cloudpickle], ids=["pickle", "cloudpickle"])
def test_fail_fires_once_across_restore(make_source, copy):
    items = ["a", "b", FAIL(), "c", "d"]
    source = make_source(items)
    reader = copy.loads(copy.dumps(source)).create_reader(ctx())
    assert reader.poll_next(1) == ["a"]
    checkpoint = reader.snapshot_state()
    assert reader.poll_next(10) == ["b"]
    with pytest.raises(TestingFailure):
        reader.poll_next(10)
    assert source.fired_markers() == [2]

    # recovery: a new copy of the source (as deployed anew), rewound to the checkpoint
    for _ in range(2):
        recovered = copy.loads(copy.dumps(source)).create_reader(ctx())
        recovered.restore_state(checkpoint)
        assert drain(recovered, 10) == ["b", "c", "d"]
    assert source.fired_markers() == [2]


def test_each_marker_fires_once_in_order(make_source):
    items = [0, FAIL(), 1, FAIL(), 2]
    source = make_source(items)
    failures = 0
    position = 0
    out = []
    while True:  # restart from the last position after each failure, as a job would
        reader = cloudpickle.loads(cloudpickle.dumps(source)).create_reader(ctx())
        reader.restore_state(position)
        try:
            while (batch := reader.poll_next(10)) is not None:
                out.extend(batch)
                position = reader.snapshot_state()
            break
        except TestingFailure:
            failures += 1
    assert failures == 2
    assert out == [0, 1, 2]
    assert source.fired_markers() == [1, 3]


def test_marker_fires_in_one_subtask_only(make_source):
    source = make_source(list(range(5)) + [FAIL()] + list(range(5)), parallelism_split=False)
    n = 8
    readers = [cloudpickle.loads(cloudpickle.dumps(source)).create_reader(ctx(i, n))
               for i in range(n)]
    errors = []
    barrier = threading.Barrier(n)

    def run(reader):
        barrier.wait()
        try:
            drain(reader)
        except TestingFailure as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 1
    assert source.fired_markers() == [5]


def test_kill_in_a_thread_raises_simulated_crash_once(make_source):
    source = make_source([1, KILL(), 2])
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == [1]
    with pytest.raises(SimulatedCrash):
        reader.poll_next(10)
    assert source.fired_markers() == [1]
    recovered = pickle.loads(pickle.dumps(source)).create_reader(ctx())
    assert drain(recovered) == [1, 2]


def test_kill_in_a_ray_actor_exits_after_recording(make_source, monkeypatch):
    source = make_source([1, KILL(exit_code=7), 2])
    exits = []

    class Exited(BaseException):
        pass

    def fake_exit(code):
        exits.append((code, source.fired_markers()))  # recorded before exiting
        raise Exited

    monkeypatch.setattr(testing_mod, "_in_ray_actor", lambda: True)
    monkeypatch.setattr(os, "_exit", fake_exit)
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == [1]
    with pytest.raises(Exited):
        reader.poll_next(10)
    assert exits == [(7, [1])]
    recovered = pickle.loads(pickle.dumps(source)).create_reader(ctx())
    assert drain(recovered) == [1, 2]
    assert len(exits) == 1


def test_not_in_a_ray_actor_here():
    assert testing_mod._in_ray_actor() is False


def test_pause_returns_nothing_until_the_clock_passes(make_source):
    clock = ManualClock(1_000)
    source = make_source(["a", PAUSE(2), "b"], clock=clock)
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == ["a"]
    assert reader.poll_next(10) == []  # reached the marker at t=1000
    clock.advance(1_999)
    assert reader.poll_next(10) == []
    assert reader.snapshot_state() == 1  # still at the marker
    clock.advance(1)
    assert reader.poll_next(10) == ["b"]
    assert reader.poll_next(10) is None
    assert source.fired_markers() == []  # a pause is not a fault


def test_pause_timer_starts_when_the_marker_is_reached(make_source):
    clock = ManualClock(0)
    source = make_source([PAUSE(1), "x"], clock=clock)
    reader = source.create_reader(ctx())
    clock.advance(5_000)  # time before reaching the marker does not count
    assert reader.poll_next(10) == []
    clock.advance(999)
    assert reader.poll_next(10) == []
    clock.advance(1)
    assert reader.poll_next(10) == ["x"]


def test_pause_again_after_restore(make_source):
    clock = ManualClock(0)
    source = make_source(["a", PAUSE(1), "b"], clock=clock)
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == ["a"]
    checkpoint = reader.snapshot_state()
    assert reader.poll_next(10) == []
    clock.advance(1_000)
    assert reader.poll_next(10) == ["b"]
    again = source.create_reader(ctx())
    again.restore_state(checkpoint)
    assert again.poll_next(10) == []  # documented: PAUSE may pause again
    clock.advance(1_000)
    assert again.poll_next(10) == ["b"]


def test_wait_until_returns_nothing_until_its_condition_holds(make_source):
    events = []
    source = make_source(["a", WAIT_UNTIL(lambda: "go" in events), "b", "c"])
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == ["a"]
    checkpoint = reader.snapshot_state()
    assert reader.poll_next(10) == [] and reader.poll_next(10) == []
    assert reader.snapshot_state() == checkpoint  # still at the marker
    events.append("go")
    assert reader.poll_next(10) == ["b", "c"]
    assert reader.poll_next(10) is None
    assert source.fired_markers() == []  # not a fault
    events.clear()
    again = source.create_reader(ctx())
    again.restore_state(checkpoint)
    assert again.poll_next(10) == []  # it waits again after a restore
    events.append("go")
    assert again.poll_next(10) == ["b", "c"]


def test_wait_until_needs_a_callable():
    with pytest.raises(TypeError, match="WAIT_UNTIL: expected a callable"):
        WAIT_UNTIL(True)


def test_zero_pause_and_markers_at_the_end(make_source):
    source = make_source([1, PAUSE(0), 2, FAIL()])
    reader = source.create_reader(ctx())
    assert reader.poll_next(10) == [1]
    assert reader.poll_next(10) == [2]
    with pytest.raises(TestingFailure):
        reader.poll_next(10)
    assert reader.poll_next(10) is None
    again = source.create_reader(ctx())
    assert drain(again) == [1, 2]


def test_only_markers_and_empty(make_source):
    assert make_source([]).create_reader(ctx()).poll_next(5) is None
    source = make_source([FAIL()])
    with pytest.raises(TestingFailure):
        source.create_reader(ctx()).poll_next(5)
    assert source.create_reader(ctx()).poll_next(5) is None


def test_restore_outside_share_is_an_error(make_source):
    reader = make_source(list(range(10))).create_reader(ctx(1, 2))
    reader.restore_state(5)
    reader.restore_state(10)
    with pytest.raises(ValueError):
        reader.restore_state(4)


def test_default_ledger_and_cleanup():
    source = TestingSource([FAIL()])
    try:
        assert os.path.basename(source.ledger_dir).startswith("flowray-faults-")
        assert os.path.isdir(source.ledger_dir)
        copy = cloudpickle.loads(cloudpickle.dumps(source))
        assert copy.ledger_dir == source.ledger_dir  # copies share the ledger, no new dir
        with pytest.raises(TestingFailure):
            copy.create_reader(ctx()).poll_next(1)
        assert source.fired_markers() == [0]
    finally:
        source.cleanup()
    assert not os.path.exists(source.ledger_dir)
    assert source.fired_markers() == []


def test_shared_ledger_dir_argument(tmp_path):
    ledger = str(tmp_path / "shared")
    a = TestingSource([FAIL(), 1], ledger_dir=ledger)
    b = TestingSource([FAIL(), 1], ledger_dir=ledger)
    with pytest.raises(TestingFailure):
        a.create_reader(ctx()).poll_next(5)
    assert drain(b.create_reader(ctx())) == [1]
    assert a.fired_markers() == b.fired_markers() == [0]


_CHILD = r"""
import pickle, sys
import flowray.testing.sources as t
from flowray.operators.sources import SourceReaderContext
t._in_ray_actor = lambda: True  # behave as inside a Ray actor: really exit
source = pickle.loads(bytes.fromhex(sys.argv[1]))
reader = source.create_reader(SourceReaderContext(0, 1))
out = []
while (batch := reader.poll_next(10)) is not None:
    out.extend(batch)
print(out)
"""


def test_kill_really_exits_a_process_once(make_source):
    """Two processes in turn: the first dies at KILL (after recording it), the second reads on."""
    import subprocess
    import sys

    source = make_source(["a", KILL(exit_code=9), "b"])
    arg = pickle.dumps(source).hex()
    first = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 9, first.stderr
    assert first.stdout == ""
    assert source.fired_markers() == [1]
    second = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "['a', 'b']"


def test_local_job_over_a_testing_source(make_source):
    from flowray import WatermarkStrategy

    env = local_env(3)
    source = make_source(list(range(20)) + [PAUSE(0)] + list(range(20, 30)))
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "testing-source")
    assert sorted(stream.map(lambda x: x * 2).execute_and_collect()) == \
        [x * 2 for x in range(30)]


@pytest.mark.parametrize("marker, error", [(FAIL(), "TestingFailure"), (KILL(), "SimulatedCrash")])
def test_local_job_fails_at_a_marker_without_restarts(make_source, marker, error):
    from flowray import JobExecutionError, WatermarkStrategy

    env = local_env(**{"restart-strategy.type": "none"})
    source = make_source([1, 2, marker, 3])
    env.from_source(source, WatermarkStrategy.no_watermarks()).print()
    with pytest.raises(JobExecutionError, match=error):
        env.execute("fails-once")
    assert source.fired_markers() == [2]
