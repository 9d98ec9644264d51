"""Key groups: range assignment (as Flink's KeyGroupRangeAssignment) and the stable hash."""

import collections
import enum
import json
import os
import subprocess
import sys
import zlib

import pytest

from flowray.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupAssigner,
    KeyGroupRange,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    stable_hash,
)

# ---------------------------------------------------------------------------------------
# ranges
# ---------------------------------------------------------------------------------------

MAX_PARALLELISMS = [1, 2, 3, 7, 128, 1000, 32768]
EXTRA_PARALLELISMS = {128: [64, 127, 128], 1000: [999, 1000], 32768: [127, 128, 1000, 32767, 32768]}


def _parallelisms(maxp):
    return sorted(set(range(1, min(maxp, 40) + 1)) | set(EXTRA_PARALLELISMS.get(maxp, [])))


@pytest.mark.parametrize("maxp", MAX_PARALLELISMS)
def test_ranges_partition_all_key_groups_and_agree_with_operator_index(maxp):
    for p in _parallelisms(maxp):
        ranges = [compute_key_group_range_for_operator_index(maxp, p, i) for i in range(p)]
        # contiguous, in order, non-empty (p <= maxp), covering [0, maxp) exactly once
        assert ranges[0].start == 0, (maxp, p)
        assert ranges[-1].end == maxp - 1, (maxp, p)
        for i, r in enumerate(ranges):
            assert len(r) >= 1, (maxp, p, i, r)
            assert len(r) == r.end - r.start + 1
            if i:
                assert r.start == ranges[i - 1].end + 1, (maxp, p, i)
        assert sum(len(r) for r in ranges) == maxp
        # sizes differ by at most one (an even split)
        sizes = [len(r) for r in ranges]
        assert max(sizes) - min(sizes) <= 1, (maxp, p, sizes)
        # the owner of each key group is the subtask whose range holds it: every key group
        # for small maxp and a few p of 32768, the range ends otherwise (for speed)
        if maxp <= 1000 or p in (1, 3, 7, 40, 32767):
            owners = [compute_operator_index_for_key_group(maxp, p, kg) for kg in range(maxp)]
            assert owners == [i for i, r in enumerate(ranges) for _ in r], (maxp, p)
        else:
            for i, r in enumerate(ranges):
                for kg in (r.start, r.end):
                    assert compute_operator_index_for_key_group(maxp, p, kg) == i, (maxp, p, kg)


def test_documented_example_range():
    r = compute_key_group_range_for_operator_index(128, 3, 1)
    assert (r.start, r.end) == (43, 85)
    assert compute_operator_index_for_key_group(128, 3, 42) == 0
    assert compute_operator_index_for_key_group(128, 3, 43) == 1
    assert compute_operator_index_for_key_group(128, 3, 86) == 2


@pytest.mark.parametrize("maxp,p,index", [
    (128, 0, 0),          # parallelism must be positive
    (128, -1, 0),
    (128, 129, 0),        # parallelism above max parallelism
    (0, 1, 0),            # max parallelism must be positive
    (UPPER_BOUND_MAX_PARALLELISM + 1, 1, 0),
    (128, 4, 4),          # operator index outside [0, p)
    (128, 4, -1),
])
def test_bad_parallelism_raises(maxp, p, index):
    with pytest.raises(ValueError) as info:
        compute_key_group_range_for_operator_index(maxp, p, index)
    text = str(info.value)
    assert "parallelism" in text or "operator index" in text


def test_check_parallelism_preconditions_accepts_bounds():
    check_parallelism_preconditions(1, 1)
    check_parallelism_preconditions(UPPER_BOUND_MAX_PARALLELISM, UPPER_BOUND_MAX_PARALLELISM)
    with pytest.raises(ValueError, match="129"):
        check_parallelism_preconditions(128, 129)


def test_key_group_range_helpers():
    r = KeyGroupRange(3, 6)
    assert len(r) == 4 and list(r) == [3, 4, 5, 6]
    assert 3 in r and 6 in r and 2 not in r and 7 not in r and "3" not in r
    assert r.intersection(KeyGroupRange(5, 10)) == KeyGroupRange(5, 6)
    empty = r.intersection(KeyGroupRange(7, 9))
    assert len(empty) == 0 and list(empty) == [] and 7 not in empty
    assert len(KeyGroupRange.empty()) == 0
    assert KeyGroupRange.of(1, 2) == KeyGroupRange(1, 2)


# ---------------------------------------------------------------------------------------
# stable hash
# ---------------------------------------------------------------------------------------

# keys as Python source, so a subprocess can rebuild exactly the same objects
KEY_SOURCES = [
    "'user-7'", "''", "'ünïcödé ✓'", "'a' * 1000",
    "0", "1", "42", "-1", "-123456789", "2**31", "-(2**63)", "2**63 - 1",
    "2**64", "2**200 + 17", "-(2**200) - 3",
    "3.5", "-0.25", "1e300", "float('inf')", "1.0",
    "b''", "b'\\x00\\xffabc'",
    "('a', 1)", "(1, 'a')", "('user', 7, None, b'x', 2.5)", "(('nested', (1, 2)), -5)", "()",
    "None", "True", "False",
]

_HASH_SCRIPT = r"""
import json, sys
from flowray.state.key_groups import stable_hash, assign_to_key_group
sources = json.loads(sys.argv[1])
out = []
for s in sources:
    key = eval(s)
    out.append([stable_hash(key), assign_to_key_group(key, 128), assign_to_key_group(key, 32768),
                hash(s)])
print(json.dumps(out))
"""


def _hashes_in_subprocess(seed):
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    proc = subprocess.run([sys.executable, "-c", _HASH_SCRIPT, json.dumps(KEY_SOURCES)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_stable_hash_is_identical_across_processes_with_different_hash_seeds():
    a = _hashes_in_subprocess(1)
    b = _hashes_in_subprocess(987654)
    # sanity: the two processes really had different salts (Python's own str hash differs)
    assert [row[3] for row in a] != [row[3] for row in b]
    assert [row[:3] for row in a] == [row[:3] for row in b]
    # and both agree with this process
    here = [[stable_hash(eval(s)), assign_to_key_group(eval(s), 128),
             assign_to_key_group(eval(s), 32768)] for s in KEY_SOURCES]
    assert [row[:3] for row in a] == here


def test_stable_hash_is_32_bit_and_key_groups_in_range():
    for s in KEY_SOURCES:
        key = eval(s)
        h = stable_hash(key)
        assert 0 <= h <= 0xFFFFFFFF, s
        for maxp in (1, 7, 128, 32768):
            kg = assign_to_key_group(key, maxp)
            assert 0 <= kg < maxp
            assert kg == compute_key_group_for_key_hash(h, maxp)


def test_stable_hash_known_values():
    # str and bytes hash as CRC-32 of their bytes (pinned: changing it would move state)
    assert stable_hash("user-7") == zlib.crc32(b"user-7")
    assert stable_hash(b"\x00\xff") == zlib.crc32(b"\x00\xff")
    assert stable_hash(bytearray(b"abc")) == stable_hash(b"abc")
    assert stable_hash(None) == 0


def test_equal_keys_hash_equal():
    # keys that are == (and so one dict key) must land in the same key group
    assert stable_hash(1) == stable_hash(1.0) == stable_hash(True)
    assert stable_hash(0) == stable_hash(0.0) == stable_hash(-0.0) == stable_hash(False)
    assert stable_hash(2**70) == stable_hash(float(2**70))
    assert stable_hash(("a", 1)) == stable_hash(("a", 1.0))
    Point = collections.namedtuple("Point", "x y")
    assert stable_hash(Point(1, "b")) == stable_hash((1, "b"))


def test_stable_hash_distinguishes_similar_keys():
    assert stable_hash(("a", 1)) != stable_hash((1, "a"))
    assert stable_hash(("ab",)) != stable_hash(("a", "b"))
    assert stable_hash(-1) != stable_hash(1)
    assert stable_hash(2**64) != stable_hash(2**64 + 1)
    assert len({stable_hash(i) for i in range(0, 2000)}) == 2000
    assert len({stable_hash(i) for i in range(-2000, 0)}) == 2000
    assert len({stable_hash(f"k{i}") for i in range(2000)}) == 2000


class _Color(enum.Enum):
    RED = 1


@pytest.mark.parametrize("key,type_name", [
    ([1, 2], "list"),
    ({"a": 1}, "dict"),
    ({1, 2}, "set"),
    (frozenset([1]), "frozenset"),
    (object(), "object"),
    (_Color.RED, "_Color"),
    (complex(1, 2), "complex"),
    (("ok", [1]), "list"),     # an unsupported element inside a tuple
])
def test_unsupported_key_type_raises_type_error_naming_it(key, type_name):
    with pytest.raises(TypeError) as info:
        stable_hash(key)
    assert repr(type_name) in str(info.value)
    with pytest.raises(TypeError, match=type_name):
        assign_to_key_group(key, 128)
    with pytest.raises(TypeError, match=type_name):
        KeyGroupAssigner(128)(key)


# ---------------------------------------------------------------------------------------
# KeyGroupAssigner
# ---------------------------------------------------------------------------------------

def test_assigner_equals_assign_to_key_group():
    keys = [eval(s) for s in KEY_SOURCES] + [f"k{i}" for i in range(500)] + list(range(500))
    for maxp in (1, 3, 128, 32768):
        a = KeyGroupAssigner(maxp)
        first = [a(k) for k in keys]
        second = [a(k) for k in keys]  # now from the memo
        expected = [assign_to_key_group(k, maxp) for k in keys]
        assert first == expected
        assert second == expected


def test_assigner_memo_stays_bounded():
    a = KeyGroupAssigner(128, cache_size=8)
    for i in range(1000):
        assert a(f"key-{i}") == assign_to_key_group(f"key-{i}", 128)
        assert len(a._cache) <= 8
    # still right after many clears
    assert [a(f"key-{i}") for i in range(20)] == \
        [assign_to_key_group(f"key-{i}", 128) for i in range(20)]


def test_assigner_handles_unhashable_supported_key():
    # bytearray is a supported key type but not hashable: it bypasses the memo
    a = KeyGroupAssigner(128)
    assert a(bytearray(b"xyz")) == assign_to_key_group(b"xyz", 128)


class _LooksLikeOne:
    def __eq__(self, other):
        return other == 1

    def __hash__(self):
        return hash(1)


def test_assigner_rejects_unsupported_key_even_when_equal_key_is_cached():
    a = KeyGroupAssigner(128)
    a(1)
    with pytest.raises(TypeError, match="_LooksLikeOne"):
        a(_LooksLikeOne())


# ---------------------------------------------------------------------------------------
# distribution
# ---------------------------------------------------------------------------------------

def test_string_keys_cover_every_key_group():
    counts = collections.Counter(assign_to_key_group(f"user-{i}", 128) for i in range(10_000))
    assert set(counts) == set(range(128))
    mean = 10_000 / 128
    assert max(counts.values()) < 2 * mean and min(counts.values()) > mean / 2, counts


def test_sequential_int_keys_spread_over_subtasks():
    # consecutive integer keys must not all land on one subtask (the finalizer mixes bits)
    per_subtask = collections.Counter(
        compute_operator_index_for_key_group(128, 4, assign_to_key_group(i, 128))
        for i in range(4000))
    assert set(per_subtask) == {0, 1, 2, 3}
    assert min(per_subtask.values()) > 500, per_subtask
