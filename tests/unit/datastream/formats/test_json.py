"""JSON rows as Flink's JsonRowSerializationSchema/JsonRowDeserializationSchema (Jackson)
write and read them: bytes per type, builder options, errors naming field and value,
pickling, batches. No Ray."""

import datetime as dt
import json
import pickle
from decimal import Decimal

import pytest

from flowray.common.type_conversion import RecordTypeError
from flowray.common.typeinfo import Types
from flowray.common.types import Row
from flowray.datastream.formats._common import DeserializationError
from flowray.datastream.formats.json import (
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
)


def writer(type_info):
    return JsonRowSerializationSchema.builder().with_type_info(type_info).build()


def reader(type_info, *options):
    b = JsonRowDeserializationSchema.builder().type_info(type_info)
    for option in options:
        getattr(b, option)()
    return b.build()


def one(t):
    return Types.ROW_NAMED(["v"], [t])


# ---------------------------------------------------------------------------------------
# what Flink (Jackson) writes, per type
# ---------------------------------------------------------------------------------------

# (type, value written, JSON text of the value as Jackson writes it, value read back)
WRITTEN = [
    (Types.INT(), 1, "1", 1),
    (Types.INT(), -2147483648, "-2147483648", -2147483648),
    (Types.LONG(), 2 ** 40, "1099511627776", 2 ** 40),
    (Types.SHORT(), -7, "-7", -7),
    (Types.BYTE(), 127, "127", 127),
    (Types.BIG_INT(), 2 ** 62, str(2 ** 62), 2 ** 62),
    (Types.INT(), True, "1", 1),  # flowray's rule for a bool in an INT field
    (Types.DOUBLE(), 1.5, "1.5", 1.5),
    (Types.DOUBLE(), 1.0, "1.0", 1.0),
    (Types.DOUBLE(), 3, "3.0", 3.0),
    (Types.DOUBLE(), 1e10, "1.0E10", 1e10),
    (Types.DOUBLE(), 123456789.0, "1.23456789E8", 123456789.0),
    (Types.DOUBLE(), 1e-5, "1.0E-5", 1e-5),
    (Types.DOUBLE(), 0.001, "0.001", 0.001),
    (Types.DOUBLE(), -0.0, "-0.0", -0.0),
    (Types.DOUBLE(), 9999999.0, "9999999.0", 9999999.0),
    (Types.FLOAT(), 0.1, "0.1", 0.10000000149011612),
    (Types.FLOAT(), 16777216.0, "1.6777216E7", 16777216.0),
    (Types.BOOLEAN(), True, "true", True),
    (Types.BOOLEAN(), False, "false", False),
    (Types.STRING(), "hi", '"hi"', "hi"),
    (Types.STRING(), 'a"b\\c\n\t\x01\x1f/é', '"a\\"b\\\\c\\n\\t\\u0001\\u001F/é"',
     'a"b\\c\n\t\x01\x1f/é'),
    (Types.CHAR(), "x", '"x"', "x"),
    (Types.BIG_DEC(), Decimal("1.50"), "1.5", Decimal("1.5")),
    (Types.BIG_DEC(), Decimal("100"), "1E+2", Decimal("1E+2")),
    (Types.BIG_DEC(), Decimal("0.000"), "0", Decimal("0")),
    (Types.BIG_DEC(), Decimal("-12.340"), "-12.34", Decimal("-12.34")),
    (Types.BIG_DEC(), Decimal("1E-7"), "1E-7", Decimal("1E-7")),
    (Types.SQL_DATE(), dt.date(2024, 1, 5), '"2024-01-05"', dt.date(2024, 1, 5)),
    (Types.LOCAL_DATE(), dt.date(999, 12, 31), '"0999-12-31"', dt.date(999, 12, 31)),
    (Types.SQL_TIME(), dt.time(12, 30, 45), '"12:30:45Z"', dt.time(12, 30, 45)),
    (Types.LOCAL_TIME(), dt.time(0, 0), '"00:00:00Z"', dt.time(0, 0)),
    (Types.SQL_TIMESTAMP(), dt.datetime(2024, 1, 5, 12, 30, 45, 123456),
     '"2024-01-05T12:30:45.123Z"', dt.datetime(2024, 1, 5, 12, 30, 45, 123000)),
    (Types.SQL_TIMESTAMP(), dt.datetime(2024, 1, 5, 12, 30), '"2024-01-05T12:30:00Z"',
     dt.datetime(2024, 1, 5, 12, 30)),
    (Types.LOCAL_DATE_TIME(), dt.datetime(2024, 1, 5, 12, 30, 0, 500000),
     '"2024-01-05T12:30:00.5Z"', dt.datetime(2024, 1, 5, 12, 30, 0, 500000)),
    (Types.LOCAL_DATE_TIME(), dt.datetime(2024, 1, 5, 12, 30, 0, 123456),
     '"2024-01-05T12:30:00.123456Z"', dt.datetime(2024, 1, 5, 12, 30, 0, 123456)),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\x00\xff\x10", '"AP8Q"', b"\x00\xff\x10"),
    (Types.OBJECT_ARRAY(Types.INT()), [1, None, 3], "[1,null,3]", [1, None, 3]),
    (Types.BASIC_ARRAY(Types.STRING()), ("a", "b"), '["a","b"]', ["a", "b"]),
    (Types.LIST(Types.DOUBLE()), [0.5], "[0.5]", [0.5]),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [1, 2], "[1,2]", [1, 2]),
    (Types.MAP(Types.STRING(), Types.LONG()), {"a": 1, "b": None}, '{"a":1,"b":null}',
     {"a": 1, "b": None}),
    (Types.MAP(Types.INT(), Types.STRING()), {1: "x"}, '{"1":"x"}', {1: "x"}),
    (Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.STRING()]), Row(x=1, y="a"),
     '{"x":1,"y":"a"}', Row(x=1, y="a")),
    (Types.TUPLE([Types.INT(), Types.STRING()]), (1, "a"), '{"f0":1,"f1":"a"}', (1, "a")),
    (Types.INT(), None, "null", None),
]


@pytest.mark.parametrize("t,value,text,back", WRITTEN, ids=[repr(w[0]) + "-" + repr(w[1])
                                                            for w in WRITTEN])
def test_each_type_is_written_as_jackson_writes_it_and_read_back(t, value, text, back):
    data = writer(one(t)).serialize((value,))
    assert data == ('{"v":' + text + '}').encode("utf-8")
    got = reader(one(t)).deserialize(data)
    assert got == (back,)
    assert type(got[0]) is type(back)


def test_a_named_row_keeps_the_type_s_field_order_without_spaces():
    t = Types.ROW_NAMED(["id", "name", "score", "ok"],
                        [Types.INT(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN()])
    assert writer(t).serialize((1, "hi", 2.5, True)) == \
        b'{"id":1,"name":"hi","score":2.5,"ok":true}'
    # a named Row is matched by name, a dict by key
    assert writer(t).serialize(Row(ok=False, score=0.5, name="x", id=2)) == \
        b'{"id":2,"name":"x","score":0.5,"ok":false}'
    assert writer(t).serialize({"ok": None, "id": 3, "name": None, "score": None}) == \
        b'{"id":3,"name":null,"score":null,"ok":null}'


def test_types_row_is_written_with_f0_keys_and_read_as_rows_named_f0():
    t = Types.ROW([Types.INT(), Types.STRING()])  # PyFlink's kafka_json_format example
    data = writer(t).serialize((1, "hi"))
    assert data == b'{"f0":1,"f1":"hi"}'
    row = reader(t).deserialize(data)
    assert row == (1, "hi") and isinstance(row, Row) and row.f1 == "hi"
    assert reader(t).deserialize(data).as_dict() == {"f0": 1, "f1": "hi"}


def test_non_finite_doubles_are_quoted_as_jackson_does_and_read_back():
    t = Types.ROW([Types.DOUBLE(), Types.FLOAT(), Types.DOUBLE()])
    data = writer(t).serialize((float("nan"), float("inf"), float("-inf")))
    assert data == b'{"f0":"NaN","f1":"Infinity","f2":"-Infinity"}'
    back = reader(t).deserialize(data)
    assert back[0] != back[0] and back[1] == float("inf") and back[2] == float("-inf")


def test_a_none_record_is_json_null_both_ways():
    t = one(Types.INT())
    assert writer(t).serialize(None) == b"null"
    assert reader(t).deserialize(b"null") is None


def test_nested_rows_arrays_and_maps():
    inner = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.OBJECT_ARRAY(Types.STRING())])
    t = Types.ROW_NAMED(["id", "inner", "m"], [Types.LONG(), inner,
                                               Types.MAP(Types.STRING(), inner)])
    value = (7, (1, ["x", None]), {"k": Row(a=2, b=[])})
    data = writer(t).serialize(value)
    assert data == b'{"id":7,"inner":{"a":1,"b":["x",null]},"m":{"k":{"a":2,"b":[]}}}'
    back = reader(t).deserialize(data)
    assert back == (7, (1, ["x", None]), {"k": (2, [])})
    assert back.inner.b == ["x", None] and back.m["k"].a == 2


# ---------------------------------------------------------------------------------------
# reading: Flink's rules
# ---------------------------------------------------------------------------------------

def test_missing_fields_and_nulls_are_none_and_other_keys_are_ignored():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    assert reader(t).deserialize(b'{"b": null, "c": [1, 2]}') == (None, None)
    assert reader(t).deserialize(b'  {"a": 1}\n') == (1, None)


def test_fail_on_missing_field_names_the_field():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    r = reader(t, "fail_on_missing_field")
    assert r.deserialize(b'{"a": 1, "b": null}') == (1, None)
    with pytest.raises(DeserializationError) as info:
        r.deserialize(b'{"a": 1}')
    assert "record.b: Could not find field with name 'b'." in str(info.value)


@pytest.mark.parametrize("t,text,value", [
    (Types.INT(), '"42"', 42),
    (Types.INT(), '" 42 "', 42),
    (Types.INT(), "1.9", 1),  # Jackson's canConvertToInt: truncated
    (Types.LONG(), "-3.5", -3),
    (Types.LONG(), '"-9223372036854775808"', -9223372036854775808),
    (Types.SHORT(), '"12"', 12),
    (Types.DOUBLE(), '"1e3"', 1000.0),
    (Types.DOUBLE(), "7", 7.0),
    (Types.DOUBLE(), '"NaN"', "nan"),
    (Types.FLOAT(), '"0.1"', 0.10000000149011612),
    (Types.BIG_DEC(), '"1.50"', Decimal("1.50")),
    (Types.BIG_DEC(), "2.50", Decimal("2.50")),
    (Types.BIG_DEC(), "12", Decimal(12)),
    (Types.BIG_INT(), '"123456789012345678901"', 123456789012345678901),
    (Types.BOOLEAN(), '"TRUE"', True),
    (Types.BOOLEAN(), '"yes"', False),  # Boolean.parseBoolean
    (Types.BOOLEAN(), "1", False),
    (Types.STRING(), "1.5", "1.5"),
    (Types.STRING(), "1e20", "1.0E20"),  # asText of a double: Java's text
    (Types.STRING(), "true", "true"),
    (Types.STRING(), '{"x": [1, "a", null]}', '{"x":[1,"a",null]}'),
    (Types.CHAR(), "65", "A"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), "12", None),  # binaryValue of a number: null
    (Types.MAP(Types.STRING(), Types.INT()), "[1]", {}),  # fields() of a non-object: none
])
def test_values_read_as_flink_converts_them(t, text, value):
    got = reader(one(t)).deserialize(('{"v": ' + text + '}').encode())[0]
    if value == "nan":
        assert got != got
    else:
        assert got == value and type(got) is type(value)


@pytest.mark.parametrize("t,text,why", [
    (Types.INT(), '"x"', "'x' (JSON string) does not read as INT: 'x' is not an integer"),
    (Types.INT(), "3000000000", "out of the 32-bit range"),
    (Types.INT(), "true", "(JSON boolean) does not read as INT"),
    (Types.SHORT(), "1.0", "'1.0' is not an integer"),
    (Types.BYTE(), "300", "out of the 8-bit range"),
    (Types.DOUBLE(), '"abc"', "'abc' is not a number"),
    (Types.BIG_DEC(), '"1,5"', "is not a decimal number"),
    (Types.SQL_DATE(), '"2024-1-5"', "expected an ISO date yyyy-MM-dd"),
    (Types.SQL_DATE(), '"2024-02-30"', "day is out of range"),
    (Types.SQL_TIMESTAMP(), '"2024-01-05 12:30:00"', "expected an RFC 3339 timestamp"),
    (Types.SQL_TIMESTAMP(), '"2024-01-05T12:30:00"', "expected an RFC 3339 timestamp"),
    (Types.SQL_TIME(), '"12:30:00.5Z"', "without milliseconds"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), '"@@"', "not base64"),
    (Types.OBJECT_ARRAY(Types.INT()), '{"a": 1}', "expected a JSON array"),
    (Types.ROW_NAMED(["x"], [Types.INT()]), "[1]", "is not a JSON object"),
    (Types.PRIMITIVE_ARRAY(Types.INT()), "[1, null]", "no null elements"),
])
def test_a_value_that_does_not_read_names_field_and_value(t, text, why):
    message = ('{"v": ' + text + '}').encode()
    with pytest.raises(DeserializationError) as info:
        reader(one(t)).deserialize(message)
    err = info.value
    assert "record.v" in str(err) and why in str(err)
    assert err.recoverable is False and err.message == message
    assert str(err).startswith("JsonRowDeserializationSchema: cannot read message b'{")


def test_error_paths_reach_into_nested_values():
    t = Types.ROW_NAMED(["user"], [Types.ROW_NAMED(["tags"], [Types.OBJECT_ARRAY(Types.INT())])])
    with pytest.raises(DeserializationError, match=r"record\.user\.tags\[1\]: 'x'"):
        reader(t).deserialize(b'{"user": {"tags": [1, "x"]}}')


@pytest.mark.parametrize("message,why", [
    (b"{oops", "not JSON"),
    (b"", "not JSON"),
    (b"[1, 2]", "[1, 2] (JSON array) is not a JSON object"),
    (b'"text"', "is not a JSON object"),
    (b'{"v": NaN}', "not JSON"),  # Jackson refuses non-numeric numbers
    (b"\xff\xfe\x00", "not JSON"),
])
def test_a_message_that_is_not_a_json_object_is_an_error(message, why):
    with pytest.raises(DeserializationError) as info:
        reader(one(Types.INT())).deserialize(message)
    assert why in str(info.value)


def test_a_none_message_is_an_error_or_none_when_ignoring():
    with pytest.raises(DeserializationError, match="the message is None"):
        reader(one(Types.INT())).deserialize(None)
    assert reader(one(Types.INT()), "ignore_parse_errors").deserialize(None) is None


def test_content_after_the_json_value_is_ignored_as_jackson_does():
    assert reader(one(Types.INT())).deserialize(b'{"v": 1} trailing') == (1,)


def test_ignore_parse_errors_gives_none_for_bad_fields_and_bad_messages():
    t = Types.ROW_NAMED(["a", "b", "c"], [Types.INT(), Types.STRING(),
                                          Types.OBJECT_ARRAY(Types.INT())])
    r = reader(t, "ignore_parse_errors")
    assert r.deserialize(b'{"a": "x", "b": "ok", "c": [1, "y", 3]}') == (None, "ok", [1, None, 3])
    assert r.deserialize(b"{oops") is None
    assert r.deserialize(b"[1]") is None
    assert r.deserialize_batch([b'{"a": 1}', b"bad", b'{"a": 2}']) == \
        [(1, None, None), None, (2, None, None)]


def test_utf16_messages_are_read_as_jackson_detects_them():
    text = '{"v": "é"}'
    assert reader(one(Types.STRING())).deserialize(text.encode("utf-16")) == ("é",)
    assert reader(one(Types.STRING())).deserialize(text.encode("utf-8-sig")) == ("é",)


# ---------------------------------------------------------------------------------------
# writing: errors name the field and the value
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("t,value,message", [
    (Types.INT(), "1", "record.v: '1' (str) does not fit INT"),
    (Types.INT(), 2 ** 31, "record.v: 2147483648 (int) does not fit INT"),
    (Types.INT(), 1.5, "record.v: 1.5 (float) does not fit INT"),
    (Types.STRING(), 5, "record.v: 5 (int) does not fit STRING"),
    (Types.DOUBLE(), "high", "record.v: 'high' (str) does not fit DOUBLE"),
    (Types.BIG_DEC(), Decimal("NaN"), "does not fit BIG_DEC"),
    (Types.SQL_DATE(), "2024-01-01", "does not fit SQL_DATE"),
    (Types.OBJECT_ARRAY(Types.INT()), [1, "2"], "record.v[1]: '2' (str) does not fit INT"),
    (Types.OBJECT_ARRAY(Types.INT()), 5, "record.v: 5 (int) does not fit ObjectArray(INT)"),
    (Types.MAP(Types.STRING(), Types.INT()), {"k": "x"}, "record.v['k']: 'x' (str)"),
    (Types.MAP(Types.STRING(), Types.INT()), {None: 1}, "keys that are not None"),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [1, None], "record.v[1]: None"),
    (Types.ROW_NAMED(["a"], [Types.INT()]), ("x",), "record.v.a: 'x' (str) does not fit INT"),
    (Types.ROW_NAMED(["a"], [Types.INT()]), (1, 2), "record.v: (1, 2) (tuple) does not fit"),
])
def test_a_value_that_does_not_fit_names_field_and_value(t, value, message):
    with pytest.raises(RecordTypeError) as info:
        writer(one(t)).serialize((value,))
    assert message in str(info.value)
    assert info.value.recoverable is False


def test_a_record_of_the_wrong_shape_is_an_error():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()])
    for record, expected in [((1,), "a Row, tuple or list of 2 values"),
                             ({"a": 1}, "a dict of exactly the fields ['a', 'b']"),
                             (7, "a Row, tuple or list of 2 values")]:
        with pytest.raises(RecordTypeError, match="does not fit") as info:
            writer(t).serialize(record)
        assert expected in str(info.value)
    # a Row named otherwise is taken by position, as Flink does (rows of Types.ROW: f0, f1)
    assert writer(t).serialize(Row(f0=1, f1=2)) == b'{"a":1,"b":2}'


def test_unsupported_types_are_refused_when_built():
    for t in (Types.INSTANT(), Types.PICKLED_BYTE_ARRAY()):
        with pytest.raises(TypeError, match="field record.v has type"):
            writer(one(t))
        with pytest.raises(TypeError, match="does not support"):
            reader(one(t))


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------

def test_serialization_builder_as_pyflink():
    t = Types.ROW([Types.INT()])
    # PyFlink's examples use both JsonRowSerializationSchema.builder() and .Builder()
    assert JsonRowSerializationSchema.Builder().with_type_info(t).build() == writer(t)
    with pytest.raises(TypeError, match="Typeinfo should be set."):
        JsonRowSerializationSchema.builder().build()
    with pytest.raises(TypeError, match="only row types"):
        JsonRowSerializationSchema.builder().with_type_info(Types.INT()).build()
    assert writer(t).get_type_info() == t


def test_deserialization_builder_as_pyflink():
    t = Types.ROW([Types.INT()])
    d = JsonRowDeserializationSchema.Builder().type_info(t).build()
    assert d.get_produced_type() == t
    with pytest.raises(TypeError, match="should be set"):
        JsonRowDeserializationSchema.builder().build()
    with pytest.raises(ValueError, match="doesn't support failOnMissingField and "
                                         "ignoreParseErrors are both true"):
        reader(t, "fail_on_missing_field", "ignore_parse_errors")
    assert d.is_end_of_stream(Row(1)) is False


def test_json_schema_converts_as_flinks_json_row_schema_converter():
    schema = json.dumps({
        "definitions": {"addr": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "price": {"type": ["number", "null"]},
            "name": {"type": "string"},
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "time"},
            "ts": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
            "blob": {"type": "string", "contentEncoding": "base64"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]},
            "addr": {"$ref": "#/definitions/addr"},
            "maybe": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/addr"}]},
            "empty": {"type": "object"},
        }})
    d = JsonRowDeserializationSchema.builder().json_schema(schema).build()
    addr = Types.ROW_NAMED(["city"], [Types.STRING()])
    assert d.get_produced_type() == Types.ROW_NAMED(
        ["id", "price", "name", "day", "at", "ts", "mail", "blob", "ok", "tags", "pair", "addr",
         "maybe", "empty"],
        [Types.BIG_DEC(), Types.BIG_DEC(), Types.STRING(), Types.SQL_DATE(), Types.SQL_TIME(),
         Types.SQL_TIMESTAMP(), Types.STRING(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
         Types.BOOLEAN(), Types.OBJECT_ARRAY(Types.STRING()),
         Types.ROW([Types.BIG_DEC(), Types.STRING()]), addr, addr, Types.ROW([])])
    row = d.deserialize(b'{"id": 3, "price": 9.99, "addr": {"city": "Oslo"}, "pair": {"f0": 1}}')
    assert row.id == Decimal(3) and row.price == Decimal("9.99") and row.addr == ("Oslo",)
    assert row.pair == (Decimal(1), None)


@pytest.mark.parametrize("schema,message", [
    ('{"type": "object", "properties": {"a": {"anyOf": []}}}', "Union types are such as"),
    ('{"type": ["string", "integer"]}', "Union types with more than just a null type"),
    ('{"type": "object", "properties": {}, "additionalProperties": true}',
     "must not allow additional properties"),
    ('{"type": "array"}', "Arrays must specify an 'items' property"),
    ('{"type": "string", "contentEncoding": "hex"}', "Invalid encoding 'hex'"),
    ('{"type": "weird"}', "Unsupported type 'weird'"),
    ('{"$ref": "http://x/y"}', "Only JSON schemes with simple references"),
    ('{"$ref": "#/nothing"}', "Could not find reference: #/nothing"),
    ("{nope", "Invalid JSON schema"),
])
def test_json_schema_errors(schema, message):
    with pytest.raises(ValueError, match=message):
        JsonRowDeserializationSchema.builder().json_schema(schema)
    with pytest.raises(TypeError, match="must not be None"):
        JsonRowDeserializationSchema.builder().json_schema(None)


# ---------------------------------------------------------------------------------------
# shipping and batches
# ---------------------------------------------------------------------------------------

def test_schemas_pickle_and_work_after_unpickling():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.OBJECT_ARRAY(Types.STRING())])
    w, r = writer(t), reader(t, "fail_on_missing_field")
    w2, r2 = pickle.loads(pickle.dumps(w)), pickle.loads(pickle.dumps(r))
    assert w2 == w and r2 == r and hash(w2) == hash(w)
    assert r2.deserialize(w2.serialize((1, ["x"]))) == (1, ["x"])
    with pytest.raises(DeserializationError):
        r2.deserialize(b'{"a": 1}')


def test_batches_loop_in_one_call_and_errors_carry_the_index():
    t = Types.ROW([Types.INT()])
    w, r = writer(t), reader(t)
    assert w.serialize_batch([(1,), (2,)]) == [b'{"f0":1}', b'{"f0":2}']
    assert r.deserialize_batch([b'{"f0":1}', b"null"]) == [(1,), None]
    with pytest.raises(DeserializationError) as info:
        r.deserialize_batch([b'{"f0":1}', b'{"f0":2}', b"{bad"])
    assert info.value.index == 2 and "(message 2 of the batch)" in str(info.value)
    with pytest.raises(RecordTypeError) as info2:
        w.serialize_batch([(1,), ("x",)])
    assert info2.value.index == 1


def test_a_batch_writes_what_each_record_writes_on_its_own():
    """serialize_batch's one-call path (tuples and lists unpacked at once) gives the same
    bytes as serialize, for every shape of record, and a bad record in it is still named."""
    t = Types.ROW_NAMED(["key", "count", "ok"], [Types.STRING(), Types.LONG(), Types.BOOLEAN()])
    w = writer(t)
    records = [("a", 1, True), ["b\x01", None, False], Row(key="c", count=3, ok=None),
               Row(ok=True, count=4, key="d"), {"count": 5, "ok": False, "key": "e"},
               ("f\u00e9\"", -(1 << 63), True)]
    assert w.serialize_batch(records) == [w.serialize(r) for r in records]
    assert w.serialize_batch([None, ("a", 1, True)]) == [b"null", w.serialize(("a", 1, True))]
    with pytest.raises(RecordTypeError) as info:
        w.serialize_batch([("a", 1, True), ("b", 1 << 63, True)])
    assert info.value.index == 1 and "count" in str(info.value)
    with pytest.raises(RecordTypeError) as info:
        w.serialize_batch([("a", 1, True), ("\ud800", 1, True)])
    assert info.value.index == 1 and "UTF-8" in str(info.value)
    with pytest.raises(RecordTypeError) as info:
        w.serialize_batch([("a", 1)])
    assert info.value.index == 0


def test_deserialization_errors_pickle_with_their_text():
    try:
        reader(one(Types.INT())).deserialize(b'{"v": "x"}')
    except DeserializationError as e:
        again = pickle.loads(pickle.dumps(e))
        assert str(again) == str(e) and again.message == e.message and again.recoverable is False


def test_the_row_schemas_are_importable_from_flowray_common_as_from_pyflink_common():
    import flowray.common as common
    assert common.JsonRowSerializationSchema is JsonRowSerializationSchema
    assert common.JsonRowDeserializationSchema is JsonRowDeserializationSchema
