"""Key equality (flowray.state.key_types): keys that are one key hash, encode and hold
state alike on both backends and in every process; other keys never do; unsupported key
types fail once with an error naming the type."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

from flowray.runtime.messages import TaskFailure
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import (
    KeyGroupAssigner,
    KeyGroupRange,
    assign_to_key_group,
    stable_hash,
)
from flowray.state.key_types import (
    CANONICAL_NAN,
    UnsupportedKeyError,
    canonical_key,
    identity_form,
)
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.rocksdb.layout import decode_key, encode_key
from tests.support.key_pool import all_keys, describe, key_classes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _same_key(a, b):
    """The documented equality: Python's ==, with every NaN equal to every NaN."""
    return identity_form(a) == identity_form(b) or _both_nan(a, b)


def _both_nan(a, b):
    fa, fb = identity_form(a), identity_form(b)
    if isinstance(fa, tuple) and isinstance(fb, tuple):
        return len(fa) == len(fb) and all(x == y or (x != x and y != y)
                                          for x, y in zip(fa, fb))
    return fa != fa and fb != fb


def test_the_pool_matches_python_equality():
    """The classes of the pool are what Python's == says (NaN aside): the definition."""
    classes = key_classes()
    for i, ci in enumerate(classes):
        for j, cj in enumerate(classes):
            for a in ci:
                for b in cj:
                    if i == j:
                        assert _same_key(a, b), (a, b)
                    else:
                        assert not _same_key(a, b), (a, b)
                        # Python's == (numpy scalars as the Python values they are)
                        assert canonical_key(a) != canonical_key(b), (a, b)


def test_one_key_one_hash_one_encoding_one_key_group():
    for cls in key_classes():
        assert len({stable_hash(k) for k in cls}) == 1, cls
        assert len({encode_key(k) for k in cls}) == 1, cls
        for maxp in (128, 32768):
            assert len({assign_to_key_group(k, maxp) for k in cls}) == 1, cls
            assigner = KeyGroupAssigner(maxp)
            assert {assigner(k) for k in cls} == {assign_to_key_group(cls[0], maxp)}


def test_different_keys_have_different_encodings():
    encodings = {}
    for index, cls in enumerate(key_classes()):
        encodings.setdefault(encode_key(cls[0]), index)
    assert len(encodings) == len(key_classes())


def test_every_key_decodes_to_an_equal_key():
    for cls in key_classes():
        for key in cls:
            back = decode_key(encode_key(key))
            assert _same_key(back, key), (key, back)
            assert encode_key(back) == encode_key(key)


def test_key_groups_agree_in_processes_with_other_hash_seeds():
    here = describe()
    for seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=REPO)
        out = subprocess.run([sys.executable, "-m", "tests.support.key_pool"], cwd=REPO,
                             env=env, capture_output=True, text=True, check=True, timeout=120)
        there = [tuple(row) for row in json.loads(out.stdout)]
        assert there == here


def test_nan_is_one_key_and_canonical():
    nans = key_classes()[5]
    assert {id(canonical_key(n)) for n in nans} == {id(CANONICAL_NAN)}
    assert canonical_key((1, float("nan")))[1] is CANONICAL_NAN


def test_canonical_keys_are_python_values():
    np = pytest.importorskip("numpy")
    assert type(canonical_key(np.int64(3))) is int
    assert type(canonical_key(np.float32(2.5))) is float
    assert type(canonical_key(np.str_("a"))) is str
    key = canonical_key(("a", np.int64(1)))
    assert type(key) is tuple and type(key[1]) is int
    for unsupported in (np.datetime64("2024-01-01"), np.complex128(1j)):
        with pytest.raises(UnsupportedKeyError, match="numpy"):
            canonical_key(unsupported)


@pytest.mark.parametrize("key,name", [
    ({1}, "set"), ([1], "list"), ({"a": 1}, "dict"), (object(), "object"),
    (complex(1, 1), "complex"), (("ok", {1}), "set"),
])
def test_unsupported_keys_are_refused_everywhere_naming_the_type(key, name):
    for check in (canonical_key, stable_hash, encode_key, identity_form):
        with pytest.raises(UnsupportedKeyError) as info:
            check(key)
        assert repr(name) in str(info.value)
        assert info.value.recoverable is False


def _backends(tmp):
    return {"heap": HeapKeyedStateBackend(KeyGroupRange(0, 127), 128),
            "rocksdb": RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, tmp)}


def _counts(backend, keys):
    count = backend.get_partitioned_state(ValueStateDescriptor("count"))
    for key in keys:
        backend.set_current_key(key)
        count.update((count.value() or 0) + 1)
    seen = {}
    for key in keys:
        backend.set_current_key(key)
        seen[encode_key(key)] = count.value()
    return seen


def test_both_backends_hold_one_state_per_key():
    keys = all_keys()
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: _counts(b, keys) for name, b in _backends(tmp).items()}
    expected = {encode_key(cls[0]): len(cls) for cls in key_classes()}
    assert results["heap"] == expected
    assert results["rocksdb"] == expected


def test_state_moves_between_backends_and_is_found_by_any_equal_key():
    classes = key_classes()
    with tempfile.TemporaryDirectory() as tmp:
        for source_name, target_name in (("heap", "rocksdb"), ("rocksdb", "heap")):
            source = _backends(os.path.join(tmp, "a" + source_name))[source_name]
            value = source.get_partitioned_state(ValueStateDescriptor("v"))
            for index, cls in enumerate(classes):
                source.set_current_key(cls[0])
                value.update(index)
            files = {}

            def write(path, data):
                files[path] = bytes(data)
                return len(data)

            handle = source.snapshot(1).write(write, "chk-1/keyed")
            target = _backends(os.path.join(tmp, "b" + source_name))[target_name]
            target.restore([handle], files.__getitem__)
            restored = target.get_partitioned_state(ValueStateDescriptor("v"))
            for index, cls in enumerate(classes):
                for key in cls:
                    target.set_current_key(key)
                    assert restored.value() == index, (source_name, key)
            source.dispose()
            target.dispose()


def test_an_unsupported_key_is_not_restarted():
    from flowray.common.clock import ManualClock
    from flowray.runtime.jobmaster.failover import RestartAllFailoverStrategy
    from flowray.runtime.jobmaster.failure_handler import ExecutionFailureHandler
    from flowray.runtime.jobmaster.restart_strategy import FixedDelayRestartStrategy
    from flowray.testing.jobmaster import TestingTopology

    topology = TestingTopology()
    topology.add_vertex("a")
    handler = ExecutionFailureHandler(RestartAllFailoverStrategy(topology),
                                      FixedDelayRestartStrategy(100, 0), ManualClock())
    failure = TaskFailure("a (1/1)", "key_by key selector", "UnsupportedKeyError",
                          "a key of type 'set'", "", True, recoverable=False)
    result = handler.handle_task_failure("a", failure)
    assert not result.can_restart
    assert "not restarted" in failure.describe()
