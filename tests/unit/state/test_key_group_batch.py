"""The batch key-group path computes exactly the key groups every earlier release computed.

Changing the key-group function would route restored keys to other key groups than the
ones their state was checkpointed in; so the fast batch path must be the same function.
"""

from __future__ import annotations

import datetime
import decimal
import random

import pytest

from flowray.state.key_groups import KeyGroupAssigner, assign_to_key_group
from flowray.state.key_types import UnsupportedKeyError

#: keys and the key groups the release before the batch path (1b9b29a) computed for them
GOLDEN_KEYS = ["", "a", "user-7", "k99999", "ü", "\ud800", 0, 1, -1, 2**31, -2**63, 2**63,
               2**100, True, False, 1.5, float("nan"), None, b"xy", ("a", 1), ("a", (2, None)),
               datetime.date(2026, 11, 25), decimal.Decimal("1.10")]
GOLDEN_128 = [0, 55, 110, 76, 3, 65, 0, 55, 0, 32, 32, 58, 63, 55, 0, 95, 57, 0, 32, 0, 95, 27,
              107]
GOLDEN_32768 = [0, 12727, 16622, 15052, 15747, 27457, 0, 10423, 0, 26016, 26016, 25274, 32319,
                10423, 0, 21599, 825, 0, 19232, 19968, 6879, 6683, 1387]


@pytest.mark.parametrize("maxp, golden", [(128, GOLDEN_128), (32768, GOLDEN_32768)])
def test_key_groups_match_the_previous_release(maxp, golden):
    assigner = KeyGroupAssigner(maxp)
    assert [assign_to_key_group(k, maxp) for k in GOLDEN_KEYS] == golden
    assert [assigner(k) for k in GOLDEN_KEYS] == golden
    assert assigner.assign_batch(GOLDEN_KEYS) == golden
    # the same keys as homogeneous batches take the vectorized paths
    for kind in (str, int):
        idx = [i for i, k in enumerate(GOLDEN_KEYS) if type(k) is kind]
        batch = [GOLDEN_KEYS[i] for i in idx] * 8
        assert assigner.assign_batch(batch) == [golden[i] for i in idx] * 8


def _random_key(rng: random.Random, kind: str):
    if kind == "str":
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000),
                                       rng.randrange(0x10000, 0x10FFFF)]))
                       for _ in range(rng.randrange(0, 12)))
    if kind == "int":
        return rng.choice([rng.randrange(-1000, 1000), rng.randrange(-2**63, 2**63),
                           rng.randrange(-2**31, 2**31)])
    return rng.choice([rng.random(), (rng.randrange(9), "x"), b"b", None, True, 2.0])


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("kind", ["str", "int", "mixed"])
def test_batch_equals_key_by_key(seed, kind):
    rng = random.Random(seed)
    maxp = rng.choice([1, 7, 128, 4096, 32768])
    keys = [_random_key(rng, kind) for _ in range(rng.randrange(0, 300))]
    if kind == "str" and keys and seed % 3 == 0:
        keys[rng.randrange(len(keys))] = "lone \udc80 surrogate"
    if kind == "int" and keys and seed % 3 == 0:
        keys[rng.randrange(len(keys))] = -2**64 - seed  # outside 64 bits
    assert KeyGroupAssigner(maxp).assign_batch(keys) == [assign_to_key_group(k, maxp)
                                                          for k in keys]


def test_an_unsupported_key_in_a_batch_is_named():
    keys = ["a"] * 20 + [object()]
    with pytest.raises(UnsupportedKeyError, match="object"):
        KeyGroupAssigner(128).assign_batch(keys)


def test_memo_stays_bounded():
    assigner = KeyGroupAssigner(128, cache_size=10)
    for i in range(100):
        assigner((i, "x"))
    assert len(assigner._cache) <= 10
