"""Which state each new subtask restores (assign_task_states), pure: hand-built checkpoints
and vertex layouts."""

import pytest
from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.state_assignment import (
    OperatorRestore,
    StateAssignmentError,
    TaskRestore,
    VertexStateLayout,
    assign_task_states,
)
from flowray.state.key_groups import (
    KeyGroupRange,
    compute_key_group_range_for_operator_index,
)
from flowray.state.snapshot import (
    SPLIT_DISTRIBUTE,
    UNION,
    KeyedStateHandle,
    OperatorStateEntry,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

MAX = 128


def layout(vid, parallelism, uids, max_parallelism=MAX, name=None):
    return VertexStateLayout(vid, name or f"name-{vid}", parallelism, max_parallelism,
                             tuple(uids))


def keyed_handle(vid, index, parallelism, max_parallelism=MAX):
    kgr = compute_key_group_range_for_operator_index(max_parallelism, parallelism, index)
    return KeyedStateHandle(f"/chk/{vid}-{index}.keyed", kgr, 10 + index)


def keyed_state(vid, index, parallelism, max_parallelism=MAX):
    return OperatorSubtaskState(keyed=keyed_handle(vid, index, parallelism, max_parallelism))


def list_state(tag, mode=SPLIT_DISTRIBUTE):
    return OperatorSubtaskState({"s": OperatorStateEntry(mode, [tag.encode()])})


def checkpoint(task_states, vertices, cid=7):
    return CompletedCheckpoint("old-job", cid, 0, 0, task_states, vertices=vertices)


def keyed_checkpoint(vid, parallelism, uid="k", max_parallelism=MAX, **flags):
    """``vid`` at ``parallelism``, each subtask holding keyed state of its own key groups
    under ``uid`` (and a checksum of its file)."""
    states = {}
    for i in range(parallelism):
        h = keyed_handle(vid, i, parallelism, max_parallelism)
        states[f"{vid}:{i}"] = TaskStateSnapshot(
            {uid: OperatorSubtaskState(keyed=h)}, file_checksums={h.path: (h.size, i)},
            **flags)
    return checkpoint(states, {vid: layout(vid, parallelism, [uid], max_parallelism)})


def paths(restore, uid="k"):
    return [h.path for h in restore.operators[uid].keyed]


# ---------------------------------------------------------------------------------------
# keyed state: by key group
# ---------------------------------------------------------------------------------------

def test_rescale_1_to_3_every_new_subtask_gets_the_one_handle():
    cp = keyed_checkpoint("v", 1)
    out = assign_task_states(cp, {"v": layout("v", 3, ["k"])})
    assert sorted(out) == ["v:0", "v:1", "v:2"]
    for i in range(3):
        r = out[f"v:{i}"]
        assert isinstance(r, TaskRestore) and r.checkpoint_id == 7
        assert paths(r) == ["/chk/v-0.keyed"]
        assert r.keyed_handles() == r.operators["k"].keyed
        assert r.operators["k"].old_parallelism == 1
        assert not r.finished


def test_rescale_3_to_2_handles_go_where_key_groups_overlap():
    cp = keyed_checkpoint("v", 3)
    # old: [0, 42] [43, 85] [86, 127]; new: [0, 63] [64, 127]
    assert [compute_key_group_range_for_operator_index(MAX, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 42), KeyGroupRange(43, 85), KeyGroupRange(86, 127)]
    out = assign_task_states(cp, {"v": layout("v", 2, ["k"])})
    assert sorted(out) == ["v:0", "v:1"]
    assert paths(out["v:0"]) == ["/chk/v-0.keyed", "/chk/v-1.keyed"]
    assert paths(out["v:1"]) == ["/chk/v-1.keyed", "/chk/v-2.keyed"]
    assert out["v:0"].operators["k"].old_parallelism == 3


def test_rescale_keyed_handles_never_leave_a_key_group_uncovered():
    cp = keyed_checkpoint("v", 5)
    out = assign_task_states(cp, {"v": layout("v", 3, ["k"])})
    for i in range(3):
        mine = compute_key_group_range_for_operator_index(MAX, 3, i)
        covered = {g for h in out[f"v:{i}"].keyed_handles() for g in h.key_group_range}
        assert set(mine) <= covered
        assert all(len(h.key_group_range.intersection(mine))
                   for h in out[f"v:{i}"].keyed_handles())


def test_same_layout_restores_subtask_by_subtask_with_finished_flags():
    vertices = {"v": layout("v", 2, ["k"])}
    states = {
        "v:0": TaskStateSnapshot({"k": keyed_state("v", 0, 2)}, finished=True,
                                 file_checksums={"/chk/v-0.keyed": (10, 1)}),
        "v:1": TaskStateSnapshot({"k": keyed_state("v", 1, 2)},
                                 file_checksums={"/chk/v-1.keyed": (11, 2)}),
    }
    out = assign_task_states(checkpoint(states, vertices), dict(vertices))
    assert paths(out["v:0"]) == ["/chk/v-0.keyed"]
    assert paths(out["v:1"]) == ["/chk/v-1.keyed"]  # its own handle only
    assert out["v:0"].finished and not out["v:1"].finished  # per subtask, not per operator
    # operator states of every subtask, to be dealt again
    assert out["v:1"].operators["k"].operator_states == [
        states["v:0"].operators["k"], states["v:1"].operators["k"]]
    assert out["v:0"].file_checksums == out["v:1"].file_checksums == {
        "/chk/v-0.keyed": (10, 1), "/chk/v-1.keyed": (11, 2)}


def test_same_layout_direct_mapping_takes_whatever_uids_the_snapshots_hold():
    vertices = {"v": layout("v", 1, ["k"])}
    states = {"v:0": TaskStateSnapshot({"k": list_state("a"), "extra": list_state("b")})}
    out = assign_task_states(checkpoint(states, vertices), dict(vertices))
    assert sorted(out["v:0"].operators) == ["extra", "k"]


def test_a_checkpoint_without_layouts_is_restored_directly():
    states = {"v:0": TaskStateSnapshot({"k": keyed_state("v", 0, 2)}),
              "v:1": TaskStateSnapshot.finished_task()}
    out = assign_task_states(checkpoint(states, {}), {"v": layout("v", 2, ["k"])})
    assert paths(out["v:0"]) == ["/chk/v-0.keyed"]
    assert out["v:1"].finished and out["v:1"].keyed_handles() == []


# ---------------------------------------------------------------------------------------
# operator state: whole
# ---------------------------------------------------------------------------------------

def test_operator_state_is_handed_over_whole_on_rescale():
    vertices = {"src": layout("src", 3, ["s"])}
    parts = [list_state("p0"), None, list_state("p2", UNION)]
    states = {f"src:{i}": TaskStateSnapshot({"s": p} if p is not None else {})
              for i, p in enumerate(parts)}
    out = assign_task_states(checkpoint(states, vertices), {"src": layout("src", 2, ["s"])})
    for i in range(2):
        op = out[f"src:{i}"].operators["s"]
        assert isinstance(op, OperatorRestore)
        assert op.operator_states == parts  # every old subtask's part, None where none
        assert op.old_parallelism == 3 and op.keyed == []


# ---------------------------------------------------------------------------------------
# matching by uid
# ---------------------------------------------------------------------------------------

def test_state_follows_uids_across_a_renamed_and_rechained_vertex():
    # old: src(uid s) -> v1 chaining uids a, b; new: vertex x chains b, vertex y holds a
    old = {"src": layout("src", 1, ["s"]), "v1": layout("v1", 2, ["a", "b"])}
    states = {"src:0": TaskStateSnapshot({"s": list_state("offsets")})}
    for i in range(2):
        states[f"v1:{i}"] = TaskStateSnapshot(
            {"a": keyed_state("v1", i, 2), "b": list_state(f"b{i}")})
    new = {"src": layout("src", 1, ["s"]), "x": layout("x", 2, ["b"], name="renamed"),
           "y": layout("y", 1, ["a"])}
    out = assign_task_states(checkpoint(states, old), new)
    assert sorted(out) == ["src:0", "x:0", "x:1", "y:0"]
    assert sorted(out["x:0"].operators) == ["b"]
    assert out["x:1"].operators["b"].operator_states == [
        states["v1:0"].operators["b"], states["v1:1"].operators["b"]]
    assert sorted(out["y:0"].operators) == ["a"]
    assert paths(out["y:0"], "a") == ["/chk/v1-0.keyed", "/chk/v1-1.keyed"]
    # the unchanged vertex is restored directly
    assert out["src:0"].operators["s"].operator_states == [states["src:0"].operators["s"]]


def test_state_of_an_operator_the_job_no_longer_has_fails_naming_its_uid():
    old = {"v": layout("v", 1, ["keep", "gone"], name="the-chain")}
    states = {"v:0": TaskStateSnapshot({"keep": list_state("k"), "gone": list_state("g")})}
    cp = checkpoint(states, old)
    new = {"w": layout("w", 1, ["keep"])}
    with pytest.raises(StateAssignmentError, match="'gone'") as e:
        assign_task_states(cp, new)
    assert "checkpoint 7" in str(e.value) and "the-chain" in str(e.value)
    assert "ignore-unclaimed-state" in str(e.value)
    out = assign_task_states(cp, new, allow_non_restored_state=True)
    assert sorted(out["w:0"].operators) == ["keep"]


def test_keyed_state_of_a_missing_operator_fails_too():
    cp = keyed_checkpoint("v", 2, uid="gone")
    with pytest.raises(StateAssignmentError, match="'gone'"):
        assign_task_states(cp, {"v": layout("v", 2, ["other"])})
    assert assign_task_states(cp, {"v": layout("v", 2, ["other"])},
                              allow_non_restored_state=True)["v:0"].operators == {}


def test_a_missing_operator_without_state_is_fine():
    old = {"v": layout("v", 2, ["keep", "stateless", "empty-lists"])}
    states = {f"v:{i}": TaskStateSnapshot({
        "keep": list_state(f"k{i}"), "stateless": OperatorSubtaskState(),
        "empty-lists": OperatorSubtaskState({"s": OperatorStateEntry(SPLIT_DISTRIBUTE, [])})})
        for i in range(2)}
    out = assign_task_states(checkpoint(states, old), {"v": layout("v", 2, ["keep"])})
    assert sorted(out) == ["v:0", "v:1"]
    assert sorted(out["v:0"].operators) == ["keep"]


def test_a_new_operator_gets_no_operator_restore():
    old = {"v": layout("v", 1, ["a"])}
    states = {"v:0": TaskStateSnapshot({"a": list_state("a")})}
    out = assign_task_states(checkpoint(states, old),
                             {"v": layout("v", 1, ["a", "new"]), "n": layout("n", 2, ["n"])})
    assert sorted(out["v:0"].operators) == ["a"]
    assert out["n:0"].operators == {} and out["n:1"].operators == {}
    assert not out["n:0"].finished and out["n:0"].checkpoint_id == 7


# ---------------------------------------------------------------------------------------
# max parallelism
# ---------------------------------------------------------------------------------------

def test_changed_max_parallelism_with_keyed_state_fails_naming_both_values():
    cp = keyed_checkpoint("v", 2, uid="k", max_parallelism=128)
    with pytest.raises(StateAssignmentError) as e:
        assign_task_states(cp, {"v": layout("v", 2, ["k"], max_parallelism=256)})
    text = str(e.value)
    assert "'k'" in text and "128" in text and "256" in text


def test_changed_max_parallelism_without_keyed_state_is_allowed():
    old = {"v": layout("v", 2, ["s"], max_parallelism=128)}
    states = {f"v:{i}": TaskStateSnapshot({"s": list_state(f"s{i}")}) for i in range(2)}
    out = assign_task_states(checkpoint(states, old),
                             {"v": layout("v", 3, ["s"], max_parallelism=256)})
    assert sorted(out) == ["v:0", "v:1", "v:2"]
    assert out["v:2"].operators["s"].operator_states == [
        states["v:0"].operators["s"], states["v:1"].operators["s"]]


# ---------------------------------------------------------------------------------------
# finished operators
# ---------------------------------------------------------------------------------------

def test_operator_finished_in_every_old_subtask_is_finished_after_rescale():
    cp = keyed_checkpoint("v", 2, finished=True)
    out = assign_task_states(cp, {"v": layout("v", 3, ["k"])})
    assert all(out[f"v:{i}"].finished for i in range(3))


def test_input_ended_and_drained_counts_as_finished_after_rescale():
    cp = keyed_checkpoint("v", 2, input_ended=True, drained=True)
    out = assign_task_states(cp, {"v": layout("v", 1, ["k"])})
    assert out["v:0"].finished


def test_input_ended_without_drain_is_not_finished_after_rescale():
    # a stop-with-savepoint without drain: the restored operators run on
    cp = keyed_checkpoint("v", 2, input_ended=True, drained=False)
    out = assign_task_states(cp, {"v": layout("v", 3, ["k"])})
    assert not any(out[f"v:{i}"].finished for i in range(3))


def test_operator_finished_in_only_some_old_subtasks_is_not_finished_after_rescale():
    old = {"v": layout("v", 2, ["s"])}
    states = {"v:0": TaskStateSnapshot({"s": list_state("a")}, finished=True),
              "v:1": TaskStateSnapshot({"s": list_state("b")})}
    out = assign_task_states(checkpoint(states, old), {"v": layout("v", 3, ["s"])})
    assert not any(out[f"v:{i}"].finished for i in range(3))


def test_a_chain_of_finished_and_unfinished_operators_fails():
    old = {"done": layout("done", 1, ["d"]), "running": layout("running", 1, ["r"])}
    states = {"done:0": TaskStateSnapshot({"d": list_state("d")}, finished=True),
              "running:0": TaskStateSnapshot({"r": list_state("r")})}
    with pytest.raises(StateAssignmentError, match="finished") as e:
        assign_task_states(checkpoint(states, old),
                           {"chain": layout("chain", 1, ["d", "r"], name="merged")})
    assert "'merged'" in str(e.value) and "(d)" in str(e.value) and "(r)" in str(e.value)


# ---------------------------------------------------------------------------------------
# what else each restore carries
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("new_parallelism", [2, 3])  # direct and rescaled
def test_claimed_and_location_are_propagated(new_parallelism):
    cp = keyed_checkpoint("v", 2)
    out = assign_task_states(cp, {"v": layout("v", new_parallelism, ["k"])},
                             claimed=False, location="/savepoints/sp-1")
    assert len(out) == new_parallelism
    assert all(not r.claimed and r.location == "/savepoints/sp-1" for r in out.values())
    default = assign_task_states(cp, {"v": layout("v", new_parallelism, ["k"])})
    assert all(r.claimed and r.location is None for r in default.values())


def test_file_checksums_of_every_contributing_snapshot_are_included():
    old = {"v": layout("v", 2, ["k"]), "other": layout("other", 1, ["o"])}
    states = {
        "v:0": TaskStateSnapshot({"k": keyed_state("v", 0, 2)},
                                 file_checksums={"/chk/v-0.keyed": (10, 100)}),
        "v:1": TaskStateSnapshot({"k": keyed_state("v", 1, 2)},
                                 file_checksums={"/chk/v-1.keyed": (11, 101),
                                                 "/chk/v-1.op": (5, 102)}),
        "other:0": TaskStateSnapshot({"o": list_state("o")},
                                     file_checksums={"/chk/other-0.op": (3, 103)}),
    }
    out = assign_task_states(checkpoint(states, old),
                             {"v": layout("v", 3, ["k"]), "other": layout("other", 1, ["o"])})
    expected = {"/chk/v-0.keyed": (10, 100), "/chk/v-1.keyed": (11, 101),
                "/chk/v-1.op": (5, 102)}
    for i in range(3):
        assert out[f"v:{i}"].file_checksums == expected  # not the other vertex's
    assert out["other:0"].file_checksums == {"/chk/other-0.op": (3, 103)}
