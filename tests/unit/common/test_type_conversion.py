"""Declared types applied to records (flowray.common.type_conversion), rule by rule, as
PyFlink's coders apply them; errors name the field path, the value and the type."""

import datetime as dt
import math
import pickle
from decimal import Decimal
from enum import IntEnum

import pytest

from flowray.common import Instant, Row, RowKind, Types
from flowray.common.type_conversion import RecordTypeError, record_converter


def conv(t, v):
    return record_converter(t)(v)


def fails(t, v):
    with pytest.raises(RecordTypeError) as info:
        conv(t, v)
    return info.value


# -- no conversion ------------------------------------------------------------------------

def test_no_type_and_pickled_bytes_convert_nothing():
    assert record_converter(None) is None
    assert record_converter(Types.PICKLED_BYTE_ARRAY()) is None
    obj = object()
    assert conv(Types.TUPLE([Types.PICKLED_BYTE_ARRAY()]), (obj,))[0] is obj


def test_a_non_type_is_refused_at_once():
    with pytest.raises(TypeError, match="must be a TypeInformation"):
        record_converter(int)


# -- integers -----------------------------------------------------------------------------

@pytest.mark.parametrize("t,lo,hi", [(Types.BYTE(), -128, 127), (Types.SHORT(), -2**15, 2**15 - 1),
                                     (Types.INT(), -2**31, 2**31 - 1),
                                     (Types.LONG(), -2**63, 2**63 - 1),
                                     (Types.BIG_INT(), -2**63, 2**63 - 1)])
def test_integers_are_range_checked(t, lo, hi):
    assert conv(t, lo) == lo and conv(t, hi) == hi
    for bad in (lo - 1, hi + 1):
        e = fails(t, bad)
        assert f"[{lo}, {hi}]" in str(e) and repr(bad) in str(e) and e.path == "record"


def test_integers_take_bools_and_int_likes_but_not_floats_or_strings():
    class Level(IntEnum):
        HIGH = 3

    assert conv(Types.INT(), True) == 1 and type(conv(Types.INT(), True)) is int
    assert type(conv(Types.INT(), Level.HIGH)) is int
    for bad in (1.0, "1", Decimal(1), None):
        assert "does not fit INT" in str(fails(Types.INT(), bad))
    assert "(not None)" in str(fails(Types.INT(), None))


# -- floating point, booleans, strings, decimals ------------------------------------------

def test_float_rounds_to_32_bits_and_double_keeps_64():
    assert conv(Types.FLOAT(), 110.1) == 110.0999984741211
    assert conv(Types.FLOAT(), 3) == 3.0 and type(conv(Types.FLOAT(), 3)) is float
    assert conv(Types.FLOAT(), 1e40) == math.inf and conv(Types.FLOAT(), -1e40) == -math.inf
    assert math.isnan(conv(Types.FLOAT(), float("nan")))
    assert conv(Types.DOUBLE(), 110.1) == 110.1 and type(conv(Types.DOUBLE(), 2)) is float
    assert "expected a number" in str(fails(Types.FLOAT(), "1.5"))
    assert "does not fit DOUBLE" in str(fails(Types.DOUBLE(), Decimal("1.5")))


def test_boolean():
    assert conv(Types.BOOLEAN(), True) is True and conv(Types.BOOLEAN(), 0) is False
    assert conv(Types.BOOLEAN(), 2) is True
    for bad in ("true", 256, -1, None):
        fails(Types.BOOLEAN(), bad)


def test_string_and_char_take_str_only():
    class Name(str):
        pass

    assert type(conv(Types.STRING(), Name("a"))) is str
    assert conv(Types.CHAR(), "xy") == "xy"
    assert "expected a str" in str(fails(Types.STRING(), b"a"))
    fails(Types.CHAR(), 1)


def test_big_dec_goes_through_str_as_pyflink():
    assert conv(Types.BIG_DEC(), Decimal("1.50")) == Decimal("1.50")
    assert conv(Types.BIG_DEC(), 0.1) == Decimal("0.1")
    assert conv(Types.BIG_DEC(), 7) == Decimal(7)
    assert conv(Types.BIG_DEC(), "2.5") == Decimal("2.5")
    for bad in ("abc", True, None, [1]):
        fails(Types.BIG_DEC(), bad)


# -- dates and times -----------------------------------------------------------------------

def test_sql_types_are_naive_and_millisecond_precise():
    aware = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert conv(Types.SQL_TIMESTAMP(), aware) == dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
    assert conv(Types.SQL_TIME(), dt.time(1, 2, 3, 456789)) == dt.time(1, 2, 3, 456000)
    assert conv(Types.SQL_DATE(), dt.datetime(2024, 1, 2, 3)) == dt.date(2024, 1, 2)
    assert type(conv(Types.SQL_DATE(), dt.date(2024, 1, 2))) is dt.date
    fails(Types.SQL_TIMESTAMP(), dt.date(2024, 1, 2))
    fails(Types.SQL_DATE(), "2024-01-02")
    fails(Types.SQL_TIME(), 3600)


def test_local_types_keep_microseconds_and_allow_none():
    t = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc)
    assert conv(Types.LOCAL_DATE_TIME(), t) == dt.datetime(2024, 1, 2, 3, 4, 5, 678901)
    assert conv(Types.LOCAL_TIME(), dt.time(1, 2, 3, 7)) == dt.time(1, 2, 3, 7)
    assert conv(Types.LOCAL_DATE(), t) == dt.date(2024, 1, 2)
    assert conv(Types.LOCAL_DATE(), None) is None
    fails(Types.LOCAL_DATE_TIME(), dt.date(2024, 1, 2))
    fails(Types.LOCAL_TIME(), "01:02")


def test_instant():
    i = Instant.of_epoch_milli(1500)
    assert conv(Types.INSTANT(), i) == i and conv(Types.INSTANT(), None) is None
    fails(Types.INSTANT(), 1500)


# -- arrays, lists, maps --------------------------------------------------------------------

def test_primitive_arrays_refuse_none_elements_and_bytes_arrays_are_bytes():
    assert conv(Types.PRIMITIVE_ARRAY(Types.INT()), (1, True)) == [1, 1]
    e = fails(Types.PRIMITIVE_ARRAY(Types.INT()), [1, None])
    assert e.path == "record[1]"
    assert conv(Types.PRIMITIVE_ARRAY(Types.BYTE()), bytearray(b"ab")) == b"ab"
    fails(Types.PRIMITIVE_ARRAY(Types.BYTE()), [1, 2])
    e = fails(Types.PRIMITIVE_ARRAY(Types.PICKLED_BYTE_ARRAY()), [1, None])
    assert e.path == "record[1]"


@pytest.mark.parametrize("factory", [Types.BASIC_ARRAY, Types.OBJECT_ARRAY, Types.LIST])
def test_object_arrays_and_lists_allow_none_elements(factory):
    t = factory(Types.FLOAT())
    assert conv(t, (0.1, None)) == [0.10000000149011612, None]
    e = fails(t, [0.5, "x"])
    assert e.path == "record[1]" and "'x'" in str(e)
    fails(t, "abc")
    fails(t, {1: 2})


def test_map_converts_keys_and_values_and_allows_none_values():
    t = Types.MAP(Types.STRING(), Types.FLOAT())
    assert conv(t, {"a": 0.1, "b": None}) == {"a": 0.10000000149011612, "b": None}
    assert fails(t, {"a": "x"}).path == "record['a']"
    assert fails(t, {1: 1.0}).path == "record[key 1]"
    fails(t, {None: 1.0})
    fails(t, [("a", 1.0)])


# -- tuples and rows --------------------------------------------------------------------------

def test_tuple_takes_sequences_of_its_arity_and_refuses_none_fields():
    t = Types.TUPLE([Types.INT(), Types.STRING()])
    assert conv(t, [1, "a"]) == (1, "a") and type(conv(t, Row(1, "a"))) is tuple
    assert "of 2 values" in str(fails(t, (1, "a", 3)))
    assert fails(t, (None, "a")).path == "record[0]"
    fails(t, None)
    fails(t, {"a": 1})


def test_row_named_gives_named_rows_from_tuples_lists_rows_and_dicts():
    t = Types.ROW_NAMED(["name", "age"], [Types.STRING(), Types.INT()])
    for value in (("ann", 3), ["ann", 3], Row("ann", 3), Row(age=3, name="ann"),
                  {"age": 3, "name": "ann"}):
        r = conv(t, value)
        assert isinstance(r, Row) and r.name == "ann" and r.age == 3 and r == ("ann", 3)
    assert repr(conv(t, ("ann", 3))) == "Row(name='ann', age=3)"


def test_row_fields_may_be_none_and_row_kind_is_kept():
    t = Types.ROW_NAMED(["name", "age"], [Types.STRING(), Types.INT()])
    assert conv(t, (None, None)) == (None, None)
    r = conv(t, Row.of_kind(RowKind.UPDATE_BEFORE, "ann", 3))
    assert r.get_row_kind() is RowKind.UPDATE_BEFORE and r.name == "ann"
    assert conv(t, ("ann", 3)).get_row_kind() is RowKind.INSERT


def test_unnamed_row_type_names_fields_f0_f1():
    r = conv(Types.ROW([Types.STRING(), Types.DOUBLE()]), ("a", 1))
    assert r.f0 == "a" and r.f1 == 1.0 and r.as_dict() == {"f0": "a", "f1": 1.0}


def test_row_mismatches_name_the_field_path():
    t = Types.ROW_NAMED(["user", "tags"], [Types.STRING(), Types.LIST(Types.INT())])
    e = fails(t, ("ann", [1, "two"]))
    assert e.path == "record.tags[1]"
    assert str(e) == ("record.tags[1]: 'two' (str) does not fit INT: expected an int in "
                      "[-2147483648, 2147483647]")
    assert "of 2 values" in str(fails(t, ("ann",)))
    assert "fields ['user', 'tags']" in str(fails(t, Row(user="a", other=[])))
    assert "exactly the fields" in str(fails(t, {"user": "a"}))
    fails(t, None)
    fails(t, 5)


def test_nested_rows_and_odd_field_names():
    inner = Types.ROW_NAMED(["x"], [Types.INT()])
    t = Types.ROW_NAMED(["in", "my field"], [inner, Types.FLOAT()])
    r = conv(t, ((1,), 0.5))
    assert r["in"].x == 1 and r["my field"] == 0.5
    assert fails(t, (("no",), 0.5)).path == "record.in.x"
    assert fails(t, ((1,), "no")).path == "record['my field']"


def test_the_error_is_not_recoverable_and_pickles_with_its_text():
    e = fails(Types.TUPLE([Types.INT()]), (object(),))
    assert e.recoverable is False and isinstance(e, TypeError)
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e) and again.path == "record[0]" and again.recoverable is False


# -- fast paths ----------------------------------------------------------------------------------

def test_records_that_already_fit_pass_without_a_copy():
    t = record_converter(Types.TUPLE([Types.STRING(), Types.LONG(), Types.PICKLED_BYTE_ARRAY()]))
    record = ("a", 2**62, object())
    assert t(record) is record
    assert t(("a", True, 1)) == ("a", 1, 1) and type(t(("a", True, 1))[1]) is int
    with pytest.raises(RecordTypeError):
        t(("a", 2**63, 1))
    row_type = Types.ROW_NAMED(["k", "d"], [Types.STRING(), Types.SQL_DATE()])
    r = record_converter(row_type)
    row = Row.of_kind(RowKind.DELETE, k="a", d=None)
    same = r(row)
    assert same is row and same.get_row_kind() is RowKind.DELETE
    strings = record_converter(Types.ROW_NAMED(["k", "d"], [Types.STRING(), Types.STRING()]))
    renamed = strings(("x", "y"))
    renamed.set_field_names(["d", "k"])
    assert strings(renamed) == ("y", "x")  # matched by name, not passed through


def test_fast_path_refusals_match_the_general_path():
    t = Types.ROW_NAMED(["n"], [Types.INT()])
    assert record_converter(t)((None,)) == (None,)  # row fields may be None
    with pytest.raises(RecordTypeError) as info:
        record_converter(Types.TUPLE([Types.INT()]))((None,))
    assert info.value.path == "record[0]"
