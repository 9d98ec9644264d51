"""flowray.state.value_codec: stored state values round-trip with their exact type; msgpack
for plain scalars and flat tuples of them, pickle for the rest; plain pickles of earlier
releases stay readable."""

import collections
import datetime
import decimal
import enum
import math
import pickle

import cloudpickle
import pytest

from flowray.common.types import Row
from flowray.state.full_snapshot import dumps_state
from flowray.state.value_codec import decode_value, encode_value, is_plain_value


class Color(enum.IntEnum):
    RED = 1


Point = collections.namedtuple("Point", "x y")

MSGPACKED = [0, 1, -1, 127, 128, -33, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1,
             0.0, 1.5, -2.25, 1e308, float("inf"), float("-inf"), "", "a", "é€𝄞", "x" * 70000,
             b"", b"\x80\x00", b"y" * 70000, True, False, None]

MSGPACKED_TUPLES = [("k", 3), (), (None,), (True, 1, 1.0, "s", b"b", False), ("é", -2 ** 63),
                    (2 ** 64 - 1, float("inf"), ""), ("x" * 70000, b"y" * 70000)]

PICKLED = [2 ** 64, -2 ** 63 - 1, 10 ** 40, "lone \ud800 surrogate", ((1,), [2]), ((1, 2),),
           ("k", [1]), ("k", 2 ** 64), ("lone \ud800", 1), (Color.RED, 1), ("k", bytearray(b"a")),
           Point("k", 3), (1, {2: 3}),
           [1, 2.5, None], [(1, 2)], {"a": 1}, {}, {(1, "x"): [b"z"]}, bytearray(b"ab"),
           Color.RED, Point(1, 2), Row(1, "a"), {1, 2}, frozenset({3}),
           datetime.datetime(2024, 5, 1, 12, 30), decimal.Decimal("1.10"), 3 + 4j,
           collections.OrderedDict(a=1), collections.Counter("aab")]


@pytest.mark.parametrize("value", MSGPACKED + MSGPACKED_TUPLES + PICKLED, ids=repr)
def test_values_round_trip_with_their_exact_type(value):
    back = decode_value(encode_value(value))
    assert type(back) is type(value)
    assert back == value
    if isinstance(value, tuple):  # items keep their types too (a tuple is not a list)
        assert [type(x) for x in back] == [type(x) for x in value]


@pytest.mark.parametrize("value", MSGPACKED + MSGPACKED_TUPLES, ids=repr)
def test_plain_scalars_are_msgpack_and_never_start_with_the_pickle_byte(value):
    data = encode_value(value)
    assert data[0] != 0x80
    assert len(data) <= len(pickle.dumps(value, protocol=5))


@pytest.mark.parametrize("value", PICKLED, ids=repr)
def test_everything_else_is_a_pickle(value):
    assert encode_value(value)[0] == 0x80


@pytest.mark.parametrize("value", MSGPACKED + MSGPACKED_TUPLES, ids=repr)
def test_plain_values_are_the_msgpack_ones(value):
    assert is_plain_value(value)


@pytest.mark.parametrize("value", PICKLED, ids=repr)
def test_pickled_values_are_not_plain_unless_msgpack_refused_them(value):
    refused = [2 ** 64, -2 ** 63 - 1, 10 ** 40, "lone \ud800 surrogate", ("k", 2 ** 64),
               ("lone \ud800", 1)]
    assert is_plain_value(value) == (value in refused)


def test_a_tuple_is_read_back_as_a_tuple_of_the_same_items():
    back = decode_value(encode_value((1, True, None, 2.0, b"x")))
    assert type(back) is tuple and [type(x) for x in back] == [int, bool, type(None), float, bytes]
    assert encode_value(("k", 3))[0] == 0x92  # a msgpack fixarray of two


def test_float_specials_keep_their_bits():
    assert math.isnan(decode_value(encode_value(float("nan"))))
    assert math.copysign(1.0, decode_value(encode_value(-0.0))) == -1.0


def test_small_values_are_small():
    assert encode_value(5) == b"\x05"
    assert encode_value("ab") == b"\xa2ab"
    assert encode_value(None) == b"\xc0"


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_plain_pickles_of_earlier_releases_are_read(protocol):
    for value in [7, "s", ("k", 3), {"a": [1]}, None]:
        assert decode_value(pickle.dumps(value, protocol=protocol)) == value
    assert decode_value(dumps_state(("k", 3))) == ("k", 3)


def test_cloudpickle_fallback_for_what_pickle_cannot_name():
    fn = lambda x: x + 1  # noqa: E731 - a lambda pickle cannot name
    data = encode_value(fn)
    assert data[0] == 0x80 and data == cloudpickle.dumps(fn, protocol=5)
    assert decode_value(data)(1) == 2


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\xc1\x00"])
def test_bytes_that_no_encoding_wrote_are_refused(data):
    with pytest.raises(ValueError, match="not a stored state value"):
        decode_value(data)


def test_decode_accepts_memoryview_and_bytearray():
    data = encode_value(12345)
    assert decode_value(memoryview(data)) == 12345
    assert decode_value(bytearray(encode_value(("k", 1)))) == ("k", 1)
