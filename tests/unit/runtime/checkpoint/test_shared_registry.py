"""SharedStateRegistry: reference counts of files shared by incremental checkpoints."""

import logging

import pytest

from flowray.runtime.checkpoint.shared_registry import (
    FileHandle,
    SharedStateRegistry,
    parse_shared_state_key,
    shared_state_key,
)


def key(name, uid="agg", subtask=0):
    return shared_state_key(uid, subtask, name)


def fh(chk, name, size=10):
    return FileHandle(f"chk-{chk}/shared/{name}", size)


class Recorder:
    def __init__(self, fail_on=()):
        self.deleted = []
        self.fail_on = set(fail_on)

    def __call__(self, handle):
        if handle in self.fail_on:
            raise OSError(f"cannot delete {handle.path}")
        self.deleted.append(handle)


@pytest.fixture
def rec():
    return Recorder()


@pytest.fixture
def reg(rec):
    return SharedStateRegistry(discard=rec)


def test_keys_identify_operator_subtask_and_sst():
    assert key("000001.sst") == "agg/0/000001.sst"
    assert key("000001.sst", subtask=1) != key("000001.sst")
    assert key("000001.sst", uid="other") != key("000001.sst")
    assert parse_shared_state_key(shared_state_key("a/b", 7, "x.sst")) == ("a/b", 7, "x.sst")
    for bad in (("", 0, "x"), ("a", -1, "x"), ("a", True, "x"), ("a", 0, ""), ("a", 0, "d/x")):
        with pytest.raises(ValueError):
            shared_state_key(*bad)
    with pytest.raises(ValueError):
        parse_shared_state_key("no-subtask")


def test_file_handles_compare_by_path_and_size():
    assert FileHandle("p", 1) == FileHandle("p", 1)
    assert FileHandle("p", 1) != FileHandle("q", 1)
    assert len({FileHandle("p", 1), FileHandle("p", 1)}) == 1


def test_retention_two_over_a_sequence_of_checkpoints(reg, rec):
    """Each checkpoint adds one new SST and keeps all earlier ones live (no compaction);
    with retention 2 the subsumed checkpoint is released each time and nothing is deleted,
    because every file is still referenced by a retained checkpoint."""
    files = {}
    for n in range(1, 6):
        files[key(f"{n:06}.sst")] = fh(n, f"{n:06}.sst")
        kept = reg.register_checkpoint(n, files)
        assert kept == files
        if n > 2:
            assert reg.retain(2) == [n - 2]
        assert reg.checkpoint_ids() == list(range(max(1, n - 1), n + 1))
    assert rec.deleted == []
    # file k is referenced by every retained checkpoint >= k: checkpoints 4 and 5 remain
    assert [reg.count(key(f"{n:06}.sst")) for n in range(1, 6)] == [2, 2, 2, 2, 1]
    assert reg.release_checkpoint(4) == []
    assert rec.deleted == []
    assert sorted(h.path for h in reg.release_checkpoint(5)) == sorted(
        h.path for h in files.values())
    assert sorted(rec.deleted, key=lambda h: h.path) == sorted(files.values(), key=lambda h: h.path)
    assert reg.registered_keys() == [] and reg.handles() == [] and len(reg) == 0


def test_compaction_replaces_files_and_discards_each_exactly_once(reg, rec):
    a, b, c, d = (key(n) for n in ("a.sst", "b.sst", "c.sst", "d.sst"))
    A, B, C, D = fh(1, "a"), fh(1, "b"), fh(2, "c"), fh(3, "d")
    reg.register_checkpoint(1, {a: A, b: B})
    reg.register_checkpoint(2, {a: A, b: B, c: C})
    # compaction: a, b and c merged into d; checkpoint 3 references only d
    reg.register_checkpoint(3, {d: D})
    assert (reg.count(a), reg.count(b), reg.count(c), reg.count(d)) == (2, 2, 1, 1)

    assert reg.retain(2) == [1]
    assert rec.deleted == []
    assert (reg.count(a), reg.count(b), reg.count(c)) == (1, 1, 1)

    reg.register_checkpoint(4, {d: D})
    assert reg.retain(2) == [2]
    assert sorted(rec.deleted, key=lambda h: h.path) == [A, B, C]
    assert (reg.count(a), reg.count(b), reg.count(c), reg.count(d)) == (0, 0, 0, 2)
    assert reg.registered_keys() == [d] and reg.handles() == [D]

    reg.register_checkpoint(5, {d: D})
    assert reg.retain(2) == [3]
    reg.release_checkpoint(4)
    reg.release_checkpoint(5)
    assert sorted(rec.deleted, key=lambda h: h.path) == [A, B, C, D]   # each exactly once
    assert len(rec.deleted) == len(set(rec.deleted))


def test_duplicate_upload_returns_the_original_and_discards_the_copy(reg, rec):
    a = key("000007.sst")
    original, copy = fh(1, "u-1"), fh(2, "u-2")
    assert reg.register_checkpoint(1, {a: original}) == {a: original}
    kept = reg.register_checkpoint(2, {a: copy})
    assert kept == {a: original}
    assert rec.deleted == [copy]                     # immediately, during registration
    assert reg.count(a) == 2 and reg.handle(a) == original
    assert reg.checkpoint_files(2) == {a: original}

    # referencing the registered handle itself (or by placeholder) is not a duplicate
    same = FileHandle(original.path, original.size)
    assert reg.register_checkpoint(3, {a: same}) == {a: original}
    assert reg.register_checkpoint(4, {a: None}) == {a: original}
    assert rec.deleted == [copy] and reg.count(a) == 4
    assert reg.last_checkpoint_id(a) == 4

    for n in (1, 2, 3):
        reg.release_checkpoint(n)
    assert rec.deleted == [copy]
    reg.release_checkpoint(4)
    assert rec.deleted == [copy, original]


def test_placeholder_for_an_unknown_key_is_an_error_and_changes_nothing(reg, rec):
    a, b = key("a.sst"), key("b.sst")
    with pytest.raises(KeyError, match="b.sst"):
        reg.register_checkpoint(1, {a: fh(1, "a"), b: None})
    assert reg.checkpoint_ids() == [] and reg.count(a) == 0 and rec.deleted == []


def test_rebuild_after_restart_discards_nothing_then_releases_correctly(rec):
    a, b, c = key("a.sst"), key("b.sst"), key("c.sst")
    A, B, C = fh(4, "a"), fh(4, "b"), fh(5, "c")
    # the retained checkpoints' metadata, as written before the JobMaster died (any order)
    retained = [(5, {b: B, c: C}), (4, {a: A, b: B})]
    reg = SharedStateRegistry.rebuild(retained, discard=rec)
    assert rec.deleted == []
    assert reg.checkpoint_ids() == [4, 5]
    assert (reg.count(a), reg.count(b), reg.count(c)) == (1, 2, 1)
    assert reg.handles() == [A, B, C]

    # a conflicting handle in the metadata is kept out without deleting anything
    other = SharedStateRegistry(discard=rec)
    other.restore([(1, {a: A}), (2, {a: fh(2, "a-copy")})])
    assert other.handle(a) == A and other.count(a) == 2 and rec.deleted == []

    reg.register_checkpoint(6, {c: C})
    assert reg.retain(2) == [4]
    assert rec.deleted == [A]
    assert reg.retain(2) == []
    reg.register_checkpoint(7, {c: C})
    assert reg.retain(2) == [5]
    assert rec.deleted == [A, B]
    with pytest.raises(ValueError, match="checkpoint 6"):
        reg.restore([(6, {c: C})])


def test_release_is_idempotent_and_unknown_ids_are_ignored(reg, rec):
    a = key("a.sst")
    assert reg.release_checkpoint(99) == []
    reg.register_checkpoint(1, {a: fh(1, "a")})
    assert reg.release_checkpoint(1) == [fh(1, "a")]
    assert reg.release_checkpoint(1) == []
    assert rec.deleted == [fh(1, "a")]
    assert reg.count(a) == 0


def test_registering_an_id_twice_is_an_error_naming_it(reg, rec):
    a, b = key("a.sst"), key("b.sst")
    reg.register_checkpoint(3, {a: fh(3, "a")})
    with pytest.raises(ValueError, match="checkpoint 3"):
        reg.register_checkpoint(3, {a: fh(3, "a"), b: fh(3, "b")})
    assert reg.count(a) == 1 and reg.count(b) == 0 and rec.deleted == []
    # after a release the id may be registered again
    reg.release_checkpoint(3)
    reg.register_checkpoint(3, {b: fh(3, "b")})
    assert reg.checkpoint_files(3) == {b: fh(3, "b")}
    with pytest.raises(KeyError):
        reg.checkpoint_files(4)


def test_empty_checkpoint_registers(reg):
    assert reg.register_checkpoint(1, {}) == {}
    assert reg.checkpoint_ids() == [1]
    assert reg.release_checkpoint(1) == []


def test_discard_failure_is_logged_and_counts_stay_consistent(caplog):
    a, b, c = key("a.sst"), key("b.sst"), key("c.sst")
    A, B, C = fh(1, "a"), fh(1, "b"), fh(1, "c")
    dup = fh(2, "c-again")
    rec = Recorder(fail_on={A, dup})
    reg = SharedStateRegistry(discard=rec)
    reg.register_checkpoint(1, {a: A, b: B, c: C})
    with caplog.at_level(logging.WARNING, logger="flowray.runtime.checkpoint.shared_registry"):
        assert reg.register_checkpoint(2, {c: dup}) == {c: C}     # duplicate delete fails
        assert reg.release_checkpoint(1) == [A, B]                 # A's delete fails
    assert "Could not discard" in caplog.text and "c-again" in caplog.text
    # the failing file is forgotten (like Flink) and reported; the others proceed
    assert rec.deleted == [B]
    assert reg.failed_discards == [dup, A]
    assert (reg.count(a), reg.count(b), reg.count(c)) == (0, 0, 1)
    assert reg.registered_keys() == [c] and reg.checkpoint_ids() == [2]
    assert reg.release_checkpoint(1) == []
    assert reg.release_checkpoint(2) == [C] and rec.deleted == [B, C]


def test_bad_arguments():
    with pytest.raises(TypeError):
        SharedStateRegistry(discard=None)
    reg = SharedStateRegistry(discard=lambda h: None)
    with pytest.raises(TypeError):
        reg.register_checkpoint("1", {})
    with pytest.raises(ValueError):
        reg.retain(0)
