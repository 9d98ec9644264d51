"""Avro rows as Flink's AvroRowSerializationSchema/AvroRowDeserializationSchema write and read
them: schemaless binary records (the bytes are fastavro's schemaless_writer's), Flink's value
conversions and produced types, errors naming field and value, AvroSchema, pickling,
batches. No Ray."""

import datetime as dt
import io
import json
import pickle
from decimal import Decimal

import fastavro
import pytest

from flowray.common.type_conversion import RecordTypeError, record_converter
from flowray.common.typeinfo import Types
from flowray.common.types import Row
from flowray.datastream.formats._common import DeserializationError
from flowray.datastream.formats.avro import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
    AvroSchema,
    GenericRecordAvroTypeInfo,
)

# PyFlink's kafka_avro_format example
TEST_RECORD = """
    {
        "type": "record",
        "name": "TestRecord",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "name", "type": "string"}
        ]
    }"""


def record(*fields, name="R"):
    return json.dumps({"type": "record", "name": name, "fields": [
        {"name": n, "type": t} for n, t in fields]})


def fastavro_bytes(schema, datum):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema)), datum)
    return buf.getvalue()


def test_pyflinks_example_record_is_avros_binary_encoding():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    de = AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD)
    # zig-zag varint 1 = 0x02; string: length 2 (0x04) then UTF-8; no header, no schema id
    assert ser.serialize((1, "hi")) == b"\x02\x04hi"
    assert ser.serialize(Row(f0=6, f1="hello")) == b"\x0c\x0ahello"
    row = de.deserialize(b"\x02\x04hi")
    assert row == (1, "hi") and row.id == 1 and row.name == "hi"


PRIMITIVES = [
    ("null", None, None),
    ("boolean", True, True),
    ("int", -5, -5),
    ("int", 2 ** 31 - 1, 2 ** 31 - 1),
    ("long", -(2 ** 63), -(2 ** 63)),
    ("float", 0.1, 0.10000000149011612),
    ("double", 1.5, 1.5),
    ("double", 2, 2.0),
    ("bytes", b"\x00\xff", b"\x00\xff"),
    ("string", "héllo", "héllo"),
    (["null", "string"], None, None),
    (["string", "null"], "x", "x"),
    (["int", "string", "null"], "s", "s"),  # a general union: fastavro picks the branch
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, "B", "B"),
    ({"type": "fixed", "name": "F", "size": 3}, b"abc", b"abc"),
    ({"type": "array", "items": "long"}, [1, 2], [1, 2]),
    ({"type": "array", "items": "long"}, (1, 2), [1, 2]),
    ({"type": "map", "values": ["null", "double"]}, {"a": 1.5, "b": None},
     {"a": 1.5, "b": None}),
    ({"type": "int", "logicalType": "date"}, dt.date(2024, 1, 5), dt.date(2024, 1, 5)),
    ({"type": "int", "logicalType": "time-millis"}, dt.time(1, 2, 3, 456789),
     dt.time(1, 2, 3, 456000)),
    ({"type": "long", "logicalType": "time-micros"}, dt.time(1, 2, 3, 456789),
     dt.time(1, 2, 3, 456000)),  # Flink's SQL_TIME: milliseconds
    ({"type": "long", "logicalType": "timestamp-millis"}, dt.datetime(2024, 1, 5, 1, 2, 3, 4000),
     dt.datetime(2024, 1, 5, 1, 2, 3, 4000)),
    ({"type": "long", "logicalType": "timestamp-micros"}, dt.datetime(2024, 1, 5, 1, 2, 3, 4567),
     dt.datetime(2024, 1, 5, 1, 2, 3, 4000)),
    ({"type": "long", "logicalType": "timestamp-millis"}, 1704412800000,
     dt.datetime(2024, 1, 5)),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, dt.datetime(2024, 1, 5),
     1704412800000),  # Flink's legacy mapping reads a LONG
    ({"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}, Decimal("-1.25"),
     Decimal("-1.25")),
    ({"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}, Decimal("1.5"),
     Decimal("1.50")),
    ({"type": "fixed", "name": "D", "size": 4, "logicalType": "decimal", "precision": 6,
      "scale": 2}, Decimal("12.34"), Decimal("12.34")),
    ({"type": "string", "logicalType": "uuid"}, "12345678-1234-5678-1234-567812345678",
     "12345678-1234-5678-1234-567812345678"),
]


@pytest.mark.parametrize("avro_type,value,back", PRIMITIVES,
                         ids=[f"{json.dumps(p[0])}-{p[1]!r}" for p in PRIMITIVES])
def test_each_type_is_fastavros_encoding_and_reads_back_as_flink_converts_it(avro_type, value,
                                                                            back):
    schema = record(("k", "int"), ("v", avro_type))
    data = AvroRowSerializationSchema(avro_schema_string=schema).serialize((7, value))
    assert data == fastavro_bytes(schema, {"k": 7, "v": value})
    got = AvroRowDeserializationSchema(avro_schema_string=schema).deserialize(data)
    assert got == (7, back) and type(got[1]) is type(back)


def test_nested_records_are_nested_rows_both_ways():
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"},
                                                            {"name": "s", "type": "string"}]}
    schema = json.dumps({"type": "record", "name": "Outer", "namespace": "ns", "fields": [
        {"name": "a", "type": inner},
        {"name": "b", "type": ["null", "Inner"]},
        {"name": "c", "type": {"type": "array", "items": "Inner"}},
        {"name": "d", "type": {"type": "map", "values": "Inner"}}]})
    value = ((1, "p"), Row(x=2, s="q"), [(3, "r")], {"k": [4, "t"]})
    data = AvroRowSerializationSchema(avro_schema_string=schema).serialize(value)
    datum = {"a": {"x": 1, "s": "p"}, "b": {"x": 2, "s": "q"}, "c": [{"x": 3, "s": "r"}],
             "d": {"k": {"x": 4, "s": "t"}}}
    assert data == fastavro_bytes(schema, datum)
    row = AvroRowDeserializationSchema(avro_schema_string=schema).deserialize(data)
    assert row == ((1, "p"), (2, "q"), [(3, "r")], {"k": (4, "t")})
    assert row.a.s == "p" and row.b.x == 2 and row.c[0].x == 3 and row.d["k"].s == "t"
    assert AvroRowSerializationSchema(avro_schema_string=schema).serialize(
        (value[0], None, [], {})) == fastavro_bytes(
            schema, {"a": {"x": 1, "s": "p"}, "b": None, "c": [], "d": {}})


def test_a_recursive_record_round_trips():
    schema = json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]})
    value = (1, (2, (3, None)))
    data = AvroRowSerializationSchema(avro_schema_string=schema).serialize(value)
    de = AvroRowDeserializationSchema(avro_schema_string=schema)
    assert de.deserialize(data) == value
    assert de.get_produced_type() == Types.ROW_NAMED(["v", "next"],
                                                     [Types.INT(), Types.PICKLED_BYTE_ARRAY()])


def test_rows_are_matched_by_position_named_rows_by_name_dicts_by_key():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    assert ser.serialize(Row(name="hi", id=1)) == b"\x02\x04hi"
    assert ser.serialize({"name": "hi", "id": 1}) == b"\x02\x04hi"
    assert ser.serialize([1, "hi"]) == b"\x02\x04hi"
    dflt = record(("a", "int"), ("b", "string"))
    with_default = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "d"}]})
    assert AvroRowSerializationSchema(avro_schema_string=with_default).serialize({"a": 1}) == \
        b"\x02\x02d"
    with pytest.raises(RecordTypeError, match=r"record\.b: None .* expected a value \(missing\)"):
        AvroRowSerializationSchema(avro_schema_string=dflt).serialize({"a": 1})


def test_produced_type_is_flinks_legacy_mapping():
    schema = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"}, {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "by", "type": "bytes"}, {"name": "fx", "type": {"type": "fixed", "name": "F",
                                                                  "size": 1}},
        {"name": "a", "type": {"type": "array", "items": "string"}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "n", "type": ["null", "int"]}, {"name": "u", "type": ["int", "string"]},
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4,
                                 "scale": 1}}]})
    produced = AvroRowDeserializationSchema(avro_schema_string=schema).get_produced_type()
    assert produced == Types.ROW_NAMED(
        ["i", "l", "f", "d", "b", "s", "e", "by", "fx", "a", "m", "n", "u", "date", "tm", "ts",
         "lts", "dec"],
        [Types.INT(), Types.LONG(), Types.FLOAT(), Types.DOUBLE(), Types.BOOLEAN(),
         Types.STRING(), Types.STRING(), Types.PRIMITIVE_ARRAY(Types.BYTE()),
         Types.PRIMITIVE_ARRAY(Types.BYTE()), Types.OBJECT_ARRAY(Types.STRING()),
         Types.MAP(Types.STRING(), Types.LONG()), Types.INT(), Types.PICKLED_BYTE_ARRAY(),
         Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP(), Types.LONG(),
         Types.BIG_DEC()])
    # the records read fit their produced type as flowray applies it
    assert record_converter(produced) is not None


# ---------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("avro_type,value,message", [
    ("int", "1", "record.v: '1' (str) does not fit INT"),
    ("int", 2 ** 31, "record.v: 2147483648 (int) does not fit INT"),
    ("int", 1.5, "record.v: 1.5 (float) does not fit INT"),
    ("long", None, "record.v: None (NoneType) does not fit LONG"),
    ("double", "1.5", "record.v: '1.5' (str) does not fit DOUBLE"),
    ("boolean", "false", "record.v: 'false' (str) does not fit BOOLEAN"),
    ("string", 5, "record.v: 5 (int) does not fit STRING"),
    ("null", 1, "record.v: 1 (int) does not fit null"),
    (["null", "string"], 5, "record.v: 5 (int) does not fit STRING"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "Z",
     "record.v: 'Z' (str) does not fit enum E: expected one of ['A']"),
    ({"type": "fixed", "name": "F", "size": 2}, b"abc", "does not fit fixed F: expected 2 bytes"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}, Decimal("1.555"),
     "expected a Decimal of at most 2 decimal places"),
    ({"type": "array", "items": "int"}, [1, "x"], "record.v[1]: 'x' (str) does not fit INT"),
    ({"type": "map", "values": "int"}, {"k": "x"}, "record.v['k']: 'x' (str) does not fit INT"),
    ({"type": "array", "items": {"type": "enum", "name": "E", "symbols": ["A"]}}, ["A", "B"],
     "record.v[1]: 'B' (str) does not fit enum E"),
    (["int", "string"], 1.5, "record.v: 1.5 (float) does not fit Avro union"),
    ({"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}, ("a",),
     "record.v.x: 'a' (str) does not fit INT"),
    ({"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}, 3,
     "record.v: 3 (int) does not fit Avro record In"),
])
def test_a_value_that_does_not_fit_names_field_and_value(avro_type, value, message):
    ser = AvroRowSerializationSchema(avro_schema_string=record(("v", avro_type)))
    with pytest.raises(RecordTypeError) as info:
        ser.serialize((value,))
    assert message in str(info.value)
    assert info.value.recoverable is False


def test_a_row_of_the_wrong_shape_is_an_error():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    for bad in [(1,), None, 5, {"id": 1, "zzz": 2}]:
        with pytest.raises(RecordTypeError, match="does not fit Avro record TestRecord"):
            ser.serialize(bad)


@pytest.mark.parametrize("message,why", [
    (b"", "the message ends before the record does"),
    (b"\x02", "the message ends before the record does"),
    (b"\x02\x0ahi", "the message ends before the record does"),
    (b"\x02\x04\xff\xfe", "UnicodeDecodeError"),
])
def test_a_message_that_is_not_a_record_names_what_was_wrong(message, why):
    with pytest.raises(DeserializationError) as info:
        AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD).deserialize(message)
    assert why in str(info.value) and "not an Avro record TestRecord" in str(info.value)
    assert str(info.value).startswith("AvroRowDeserializationSchema: cannot read message")
    with pytest.raises(DeserializationError, match="the message is None"):
        AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD).deserialize(None)


def test_constructor_arguments_as_pyflink():
    for cls in (AvroRowSerializationSchema, AvroRowDeserializationSchema):
        with pytest.raises(TypeError, match="record_class or avro_schema_string should be "
                                            "specified."):
            cls()
        with pytest.raises(ValueError, match="record_class names a Java SpecificRecord class"):
            cls(record_class="com.example.User")
        with pytest.raises(ValueError, match="Could not parse Avro schema string"):
            cls(avro_schema_string='{"type": "record", "name": "R"}')
        with pytest.raises(ValueError, match="Could not parse Avro schema string"):
            cls(avro_schema_string="{nope")
        with pytest.raises(ValueError, match="the Avro schema must be a record"):
            cls(avro_schema_string='"string"')
        # positional as in PyFlink: (record_class, avro_schema_string); an AvroSchema also does
        assert cls(None, TEST_RECORD) == cls(avro_schema_string=AvroSchema(TEST_RECORD))


# ---------------------------------------------------------------------------------------
# AvroSchema and GenericRecordAvroTypeInfo
# ---------------------------------------------------------------------------------------

def test_avro_schema_parses_strings_and_files(tmp_path):
    s = AvroSchema.parse_string(TEST_RECORD)
    assert str(s) == ('{"type":"record","name":"TestRecord","fields":[{"name":"id","type":"int"},'
                      '{"name":"name","type":"string"}]}')
    path = tmp_path / "r.avsc"
    path.write_text(TEST_RECORD)
    assert AvroSchema.parse_file(str(path)) == s
    assert pickle.loads(pickle.dumps(s)) == s and hash(s) == hash(AvroSchema(str(s)))
    for bad, why in [('{"type": "enum", "name": "E"}', "needs 'symbols'"),
                     ('{"type": "array"}', "needs 'items'"),
                     ('{"type": "wat"}', "Could not parse")]:
        with pytest.raises(ValueError, match=why):
            AvroSchema.parse_string(bad)


def test_generic_record_type_info_passes_records_unchanged():
    t = GenericRecordAvroTypeInfo(AvroSchema.parse_string(TEST_RECORD))
    assert repr(t) == "GenericRecordAvroTypeInfo(TestRecord)"
    assert t.get_schema() == AvroSchema(TEST_RECORD)
    assert record_converter(t) is None  # a declared output type that converts nothing
    assert pickle.loads(pickle.dumps(t)) == t


# ---------------------------------------------------------------------------------------
# shipping and batches
# ---------------------------------------------------------------------------------------

def test_schemas_pickle_and_work_after_unpickling():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    de = AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD)
    ser2, de2 = pickle.loads(pickle.dumps(ser)), pickle.loads(pickle.dumps(de))
    assert ser2 == ser and de2 == de and hash(de2) == hash(de)
    assert de2.deserialize(ser2.serialize((3, "x"))) == (3, "x")
    assert ser2.get_schema() == de2.get_schema() == AvroSchema(TEST_RECORD)


def test_batches_loop_in_one_call_and_errors_carry_the_index():
    ser = AvroRowSerializationSchema(avro_schema_string=TEST_RECORD)
    de = AvroRowDeserializationSchema(avro_schema_string=TEST_RECORD)
    data = ser.serialize_batch([(1, "a"), (2, "b")])
    assert data == [b"\x02\x02a", b"\x04\x02b"]
    assert de.deserialize_batch(data) == [(1, "a"), (2, "b")]
    with pytest.raises(DeserializationError) as info:
        de.deserialize_batch(data + [b"\x02"])
    assert info.value.index == 2
    with pytest.raises(RecordTypeError) as info2:
        ser.serialize_batch([(1, "a"), ("x", "b")])
    assert info2.value.index == 1


def test_the_row_schemas_are_importable_from_flowray_common_as_from_pyflink_common():
    import flowray.common as common
    assert common.AvroRowSerializationSchema is AvroRowSerializationSchema
    assert common.AvroRowDeserializationSchema is AvroRowDeserializationSchema
