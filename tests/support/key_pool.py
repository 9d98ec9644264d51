"""Keys of every supported key type, grouped into classes of keys that are one key
(``flowray.state.key_types``): shared by the key tests and the process they start with
another hash seed."""

import datetime as dt
import struct
from collections import namedtuple
from decimal import Decimal

from flowray.common.types import Row

Point = namedtuple("Point", "x y")

_EST = dt.timezone(dt.timedelta(hours=-5))
_CET = dt.timezone(dt.timedelta(hours=1))


def _odd_nan(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def key_classes():
    """A list of lists: the keys in one inner list are one key; keys of different lists
    are different keys."""
    classes = [
        [1, 1.0, True, Decimal("1"), Decimal("1.000")],
        [0, 0.0, -0.0, False, Decimal("0"), Decimal("-0.00")],
        [2.5, Decimal("2.5"), Decimal("2.50")],
        [Decimal("0.1")],
        [0.1],
        [float("nan"), float("-nan"), _odd_nan(0x7FF0000000000001), _odd_nan(0xFFF8DEADBEEF0000),
         Decimal("NaN")],
        [float("inf"), Decimal("Infinity")],
        [2 ** 70, float(2 ** 70), Decimal(2 ** 70)],
        ["user-7"],
        [""],
        ["1"],
        [b"1"],
        [None],
        [dt.date(2024, 2, 29)],
        [dt.datetime(2024, 2, 29), dt.datetime(2024, 2, 29, fold=1)],
        [dt.datetime(2024, 2, 29, 12, 0, tzinfo=dt.timezone.utc),
         dt.datetime(2024, 2, 29, 7, 0, tzinfo=_EST),
         dt.datetime(2024, 2, 29, 13, 0, tzinfo=_CET)],
        [dt.datetime(2024, 2, 29, 12, 0)],
        [dt.time(12, 30, 1, 5)],
        [dt.time(12, 30, tzinfo=dt.timezone.utc), dt.time(7, 30, tzinfo=_EST)],
        [dt.time(0, 30, tzinfo=_CET)],  # 23:30 the day before in UTC
        [dt.timedelta(days=1, seconds=3), dt.timedelta(seconds=86403)],
        [dt.timedelta(microseconds=-1)],
        [("a", 1), Row("a", 1), Row(name="a", n=1), ("a", 1.0), ("a", True)],
        [("a", 1, None, b"x")],
        [Point(1, 2), (1, 2), (1.0, Decimal(2))],
        [(dt.date(2024, 1, 1), Decimal("9.99"))],
        [(float("nan"),), (_odd_nan(0x7FF8000000000001),)],
        [()],
    ]
    try:
        import numpy as np
    except ImportError:
        return classes
    classes[0] += [np.int64(1), np.float32(1.0), np.bool_(True), np.uint8(1)]
    classes[2] += [np.float64(2.5), np.float32(2.5)]
    classes[5] += [np.float64("nan"), np.float32("nan")]
    classes[8] += [np.str_("user-7")]
    classes[11] += [np.bytes_(b"1")]
    classes[22] += [("a", np.int32(1))]
    return classes


def all_keys():
    return [k for cls in key_classes() for k in cls]


def describe():
    """Per key, in order: (repr, key group of 128, key group of 32768, stable hash, RocksDB
    encoding as hex). What a process with another hash seed must compute alike."""
    from flowray.state.key_groups import assign_to_key_group, stable_hash
    from flowray.state.rocksdb.layout import encode_key
    return [(repr(k), assign_to_key_group(k, 128), assign_to_key_group(k, 32768),
             stable_hash(k), encode_key(k).hex()) for k in all_keys()]


if __name__ == "__main__":
    import json
    import sys
    json.dump(describe(), sys.stdout)
