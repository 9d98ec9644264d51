"""CSV rows as Flink's CsvRowSerializationSchema/CsvRowDeserializationSchema (Jackson's CSV
mapper) write and read them: bytes per type, Jackson's quoting, builder options, errors naming
field and value, CsvSchema's builder, pickling, batches. No Ray."""

import datetime as dt
import pickle
from decimal import Decimal

import pytest

from flowray.common.type_conversion import RecordTypeError
from flowray.common.typeinfo import Types
from flowray.common.types import Row
from flowray.datastream.formats._common import DeserializationError
from flowray.datastream.formats.csv import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
    CsvSchema,
    CsvSchemaBuilder,
)


def writer(t, **options):
    b = CsvRowSerializationSchema.Builder(t)
    for name, arg in options.items():
        getattr(b, name)(*([] if arg is None else [arg]))
    return b.build()


def reader(t, **options):
    b = CsvRowDeserializationSchema.Builder(t)
    for name, arg in options.items():
        getattr(b, name)(*([] if arg is None else [arg]))
    return b.build()


def one(t):
    return Types.ROW_NAMED(["v"], [t])


# ---------------------------------------------------------------------------------------
# what Flink (Jackson CSV) writes, per type
# ---------------------------------------------------------------------------------------

WRITTEN = [
    (Types.INT(), 1, b"1", 1),
    (Types.LONG(), -(2 ** 40), b"-1099511627776", -(2 ** 40)),
    (Types.SHORT(), 7, b"7", 7),
    (Types.BYTE(), -128, b"-128", -128),
    (Types.BIG_INT(), 2 ** 62, str(2 ** 62).encode(), 2 ** 62),
    (Types.DOUBLE(), 1.5, b"1.5", 1.5),
    (Types.DOUBLE(), 1e10, b"1.0E10", 1e10),
    (Types.DOUBLE(), 2, b"2.0", 2.0),
    (Types.FLOAT(), 0.1, b"0.1", 0.10000000149011612),
    (Types.BIG_DEC(), Decimal("1.50"), b"1.5", Decimal("1.5")),
    (Types.BIG_DEC(), Decimal("100"), b"1E+2", Decimal("1E+2")),  # numbers are never quoted
    (Types.BOOLEAN(), True, b"true", True),
    (Types.BOOLEAN(), False, b"false", False),
    (Types.STRING(), "hi", b"hi", "hi"),
    (Types.STRING(), "x-y.z_1", b"x-y.z_1", "x-y.z_1"),
    (Types.STRING(), "", b"", ""),
    (Types.STRING(), "hello world", b'"hello world"', "hello world"),
    (Types.STRING(), "a,b", b'"a,b"', "a,b"),
    (Types.STRING(), 'say "hi"', b'"say ""hi"""', 'say "hi"'),
    (Types.STRING(), "x+y", b'"x+y"', "x+y"),
    (Types.STRING(), "a\\b", b'"a\\b"', "a\\b"),
    (Types.STRING(), "line\nbreak", b'"line\nbreak"', "line\nbreak"),
    (Types.STRING(), "a" * 24, b"a" * 24, "a" * 24),
    (Types.STRING(), "a" * 25, b'"' + b"a" * 25 + b'"', "a" * 25),  # Jackson: > 24 chars
    (Types.STRING(), "é", "é".encode(), "é"),
    (Types.SQL_DATE(), dt.date(2024, 1, 5), b"2024-01-05", dt.date(2024, 1, 5)),
    (Types.LOCAL_DATE(), dt.date(2024, 1, 5), b"2024-01-05", dt.date(2024, 1, 5)),
    (Types.SQL_TIME(), dt.time(12, 30, 45, 500000), b"12:30:45", dt.time(12, 30, 45)),
    (Types.LOCAL_TIME(), dt.time(12, 30), b"12:30", dt.time(12, 30)),
    (Types.LOCAL_TIME(), dt.time(12, 30, 0, 1000), b"12:30:00.001", dt.time(12, 30, 0, 1000)),
    (Types.LOCAL_TIME(), dt.time(1, 2, 3, 4), b"01:02:03.000004", dt.time(1, 2, 3, 4)),
    (Types.SQL_TIMESTAMP(), dt.datetime(2024, 1, 5, 12, 30, 45, 123456),
     b'"2024-01-05 12:30:45.123"', dt.datetime(2024, 1, 5, 12, 30, 45, 123000)),
    (Types.SQL_TIMESTAMP(), dt.datetime(2024, 1, 5), b'"2024-01-05 00:00:00.0"',
     dt.datetime(2024, 1, 5)),
    (Types.LOCAL_DATE_TIME(), dt.datetime(2024, 1, 5, 12, 30), b'"2024-01-05 12:30:00"',
     dt.datetime(2024, 1, 5, 12, 30)),
    (Types.LOCAL_DATE_TIME(), dt.datetime(2024, 1, 5, 12, 30, 1, 250000),
     b'"2024-01-05 12:30:01.25"', dt.datetime(2024, 1, 5, 12, 30, 1, 250000)),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\x00\x01", b"AAE=", b"\x00\x01"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"\xfb\xff", b'"+/8="', b"\xfb\xff"),
    (Types.OBJECT_ARRAY(Types.INT()), [1, 2, 3], b"1;2;3", [1, 2, 3]),
    (Types.BASIC_ARRAY(Types.STRING()), ["a b", "c"], b'"a b;c"', ["a b", "c"]),
    (Types.OBJECT_ARRAY(Types.DOUBLE()), [1.0, 1e10], b"1.0;1.0E10", [1.0, 1e10]),
    (Types.OBJECT_ARRAY(Types.STRING()), [], b"", []),
    (Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.BOOLEAN()]), (1, True), b"1;true",
     Row(a=1, b=True)),
]


@pytest.mark.parametrize("t,value,text,back", WRITTEN,
                         ids=[f"{w[0]!r}-{w[1]!r}" for w in WRITTEN])
def test_each_type_is_written_as_jackson_writes_it_and_read_back(t, value, text, back):
    data = writer(Types.ROW([Types.INT(), t])).serialize((0, value))
    assert data == b"0," + text + b"\n"
    got = reader(Types.ROW([Types.INT(), t])).deserialize(data)
    assert got == (0, back) and type(got[1]) is type(back)


def test_pyflinks_kafka_csv_example_row():
    t = Types.ROW([Types.INT(), Types.STRING()])
    ser, de = writer(t), reader(t)
    assert ser.serialize((1, "hi")) == b"1,hi\n"
    assert de.deserialize(b"1,hi\n") == Row(f0=1, f1="hi")


def test_none_is_the_null_literal_empty_by_default():
    t = Types.ROW([Types.INT(), Types.STRING(), Types.OBJECT_ARRAY(Types.INT())])
    assert writer(t).serialize((None, None, [1, None])) == b",,1;\n"
    # without a null literal an empty string field reads as "", not None
    assert reader(t, set_ignore_parse_errors=True).deserialize(b",,1;") == (None, "", [1, None])
    w = writer(t, set_null_literal="NULL")
    r = reader(t, set_null_literal="NULL")
    assert w.serialize((None, None, [None, 2])) == b"NULL,NULL,NULL;2\n"
    assert r.deserialize(b"NULL,NULL,NULL;2\n") == (None, None, [None, 2])
    # Jackson splits an array field before testing for the null literal
    assert r.deserialize(b"1,x,NULL\n") == (1, "x", [None])


def test_field_and_line_delimiters():
    t = Types.ROW([Types.STRING(), Types.INT()])
    # Jackson quotes a string holding any character below the separator: with "|", most
    assert writer(t, set_field_delimiter="|").serialize(("a,b", 1)) == b'"a,b"|1\n'
    assert writer(t, set_field_delimiter="|").serialize(("}~", 1)) == b"}~|1\n"
    assert writer(t, set_field_delimiter="\t").serialize(("a b", 1)) == b'"a b"\t1\n'
    assert writer(t, set_line_delimiter="\r\n").serialize(("a", 1)) == b"a,1\r\n"
    assert writer(t, set_line_delimiter="").serialize(("a", 1)) == b"a,1"
    assert reader(t, set_field_delimiter="|").deserialize(b"a,b|1\n") == ("a,b", 1)
    assert reader(t).deserialize(b"a,1\r\n") == ("a", 1)
    assert reader(t).deserialize(b"a,1\rb,2") == ("a", 1)  # the first record only
    with pytest.raises(ValueError, match="Unsupported new line delimiter"):
        CsvRowSerializationSchema.Builder(t).set_line_delimiter(";")
    with pytest.raises(ValueError, match="single character"):
        CsvRowSerializationSchema.Builder(t).set_field_delimiter("||")


def test_quote_and_escape_characters():
    t = Types.ROW([Types.STRING()])
    assert writer(t, set_quote_character="'").serialize(("it's a",)) == b"'it''s a'\n"
    assert reader(t, set_quote_character="'").deserialize(b"'it''s a'") == ("it's a",)
    assert writer(t, disable_quote_character=None).serialize(('a "b", c',)) == b'a "b", c\n'
    assert reader(t, disable_quote_character=None).deserialize(b'"a"') == ('"a"',)
    b = CsvRowSerializationSchema.Builder(t).set_quote_character("'").disable_quote_character()
    assert b.enable_quote_character().build().serialize(("a b",)) == b"'a b'\n"
    # with an escape character, it is quoted and doubled; a quote is still doubled
    esc = writer(t, set_escape_character="\\")
    assert esc.serialize(("a\\b",)) == b'"a\\\\b"\n'
    assert esc.serialize(('a"b',)) == b'"a""b"\n'
    r = reader(t, set_escape_character="\\")
    assert r.deserialize(b"a\\,b\\nc") == ("a,b\nc",)
    assert r.deserialize(b'"x\\"y"') == ('x"y',)


def test_array_element_delimiter():
    t = Types.ROW([Types.OBJECT_ARRAY(Types.STRING()), Types.ROW([Types.INT(), Types.INT()])])
    w = writer(t, set_array_element_delimiter="|")
    assert w.serialize((["a", "b"], (1, 2))) == b"a|b,1|2\n"
    r = reader(t, set_array_element_delimiter="|")
    assert r.deserialize(b"a|b,1|2") == (["a", "b"], (1, 2))
    assert r.deserialize(b" ,") == ([], None)  # blank array: empty; blank row: None


def test_quoted_fields_may_hold_separators_quotes_and_line_breaks():
    t = Types.ROW_NAMED(["a", "b", "c"], [Types.STRING(), Types.STRING(), Types.INT()])
    assert reader(t).deserialize(b'"x,y","line1\r\nline2" ,3\n4,5,6') == \
        ("x,y", "line1\r\nline2", 3)
    assert reader(t).deserialize(b' "a",b,1') == (' "a"', "b", 1)  # a quote later is text


def test_comments_and_blank_lines_are_skipped_when_allowed():
    t = Types.ROW([Types.INT(), Types.STRING()])
    r = reader(t, set_allow_comments=True)
    assert r.deserialize(b"# a comment\n\n  7,x\n") == (7, "x")
    with pytest.raises(DeserializationError, match="No content"):
        r.deserialize(b"# only a comment\n")
    with pytest.raises(DeserializationError, match="record.f0: '# c' does not read as INT"):
        reader(t).deserialize(b"# c,x")


def test_one_trailing_empty_field_is_ignored_as_jacksons_allow_trailing_comma():
    t = Types.ROW([Types.INT(), Types.STRING()])
    assert reader(t).deserialize(b"1,a,\n") == (1, "a")
    assert reader(t).deserialize(b"1,a, \n") == (1, "a")
    with pytest.raises(DeserializationError, match='Too many entries: expected at most 2 '
                                                   r'\(value #2 \(1 chars\) "x"\)'):
        reader(t).deserialize(b"1,a,x")


@pytest.mark.parametrize("t,text,why", [
    (Types.INT(), b"x", "record.v: 'x' does not read as INT: 'x' is not an integer"),
    (Types.INT(), b" ", "record.v: ' ' does not read as INT"),
    (Types.INT(), b"1.0", "'1.0' is not an integer"),
    (Types.BYTE(), b"128", "out of the 8-bit range"),
    (Types.DOUBLE(), b"1,5", "Too many entries"),
    (Types.DOUBLE(), b"abc", "'abc' is not a number"),
    (Types.BIG_DEC(), b"1e", "is not a decimal number"),
    (Types.SQL_DATE(), b"2024/01/05", "expected yyyy-[m]m-[d]d"),
    (Types.SQL_TIME(), b"12:30:00.5", "expected hh:mm:ss"),
    (Types.SQL_TIMESTAMP(), b"2024-01-05T12:30:00", "expected yyyy-[m]m-[d]d hh:mm:ss"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"@@", "Unable to deserialize byte array"),
    (Types.OBJECT_ARRAY(Types.INT()), b"1;x", "record.v[1]: 'x' does not read as INT"),
    (Types.ROW([Types.INT(), Types.INT()]), b"1;2;3", "Row length mismatch. 2 fields "
                                                     "expected but was 3."),
    (Types.STRING(), b'"open', "Missing closing quote for value"),
    (Types.STRING(), b'"a"b', "Expected column separator character"),
])
def test_a_field_that_does_not_read_names_field_and_value(t, text, why):
    with pytest.raises(DeserializationError) as info:
        reader(one(t)).deserialize(text)
    assert why in str(info.value)
    assert str(info.value).startswith("CsvRowDeserializationSchema: cannot read message")
    assert info.value.recoverable is False


@pytest.mark.parametrize("text,value", [
    (b" 12 ", 12), (b"+5", 5), (b"-0", 0),
])
def test_numbers_are_javas_parse_of_the_trimmed_text(text, value):
    assert reader(one(Types.INT())).deserialize(text) == (value,)


@pytest.mark.parametrize("text,value", [(b"true", True), (b" TRUE ", True), (b"yes", False),
                                        (b" ", False)])
def test_booleans_are_javas_boolean_valueof(text, value):
    assert reader(one(Types.BOOLEAN())).deserialize(text) == (value,)


def test_dates_and_times_read_with_javas_valueof_rules():
    t = Types.ROW([Types.SQL_DATE(), Types.SQL_TIMESTAMP(), Types.LOCAL_DATE_TIME()])
    assert reader(t).deserialize(b"2024-1-5,2024-1-5 1:2:3.5,2024-01-05 12:30:00.123456789") == \
        (dt.date(2024, 1, 5), dt.datetime(2024, 1, 5, 1, 2, 3, 500000),
         dt.datetime(2024, 1, 5, 12, 30, 0, 123456))


def test_wrong_field_count_is_an_error_unless_ignoring():
    t = Types.ROW([Types.INT(), Types.STRING(), Types.INT()])
    with pytest.raises(DeserializationError, match="Row length mismatch. 3 fields expected "
                                                   "but was 2."):
        reader(t).deserialize(b"1,a")
    r = reader(t, set_ignore_parse_errors=True)
    assert r.deserialize(b"1,a") == (1, "a", None)
    assert r.deserialize(b"x,a,2") == (None, "a", 2)
    assert r.deserialize(b"1,a,2,3,4") is None
    assert r.deserialize(b"") is None
    assert r.deserialize(None) is None
    assert r.deserialize(b"\xff") is None


def test_empty_and_none_messages_are_errors():
    with pytest.raises(DeserializationError, match="No content to map"):
        reader(one(Types.STRING())).deserialize(b"")
    with pytest.raises(DeserializationError, match="the message is None"):
        reader(one(Types.STRING())).deserialize(None)
    with pytest.raises(DeserializationError, match="not UTF-8"):
        reader(one(Types.STRING())).deserialize(b"\xff")
    assert reader(one(Types.STRING())).deserialize(b"\n") == ("",)


# ---------------------------------------------------------------------------------------
# writing errors and types
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("t,value,message", [
    (Types.INT(), "1", "record.v: '1' (str) does not fit INT"),
    (Types.STRING(), 5, "record.v: 5 (int) does not fit STRING"),
    (Types.DOUBLE(), "x", "record.v: 'x' (str) does not fit DOUBLE"),
    (Types.SQL_TIMESTAMP(), dt.date(2024, 1, 1), "does not fit SQL_TIMESTAMP"),
    (Types.OBJECT_ARRAY(Types.INT()), [1, "2"], "record.v[1]: '2' (str) does not fit INT"),
    (Types.ROW([Types.INT()]), ("x",), "record.v[0]: 'x' (str) does not fit INT"),
    (Types.ROW([Types.INT()]), (1, 2), "record.v: (1, 2) (tuple) does not fit"),
])
def test_a_value_that_does_not_fit_names_field_and_value(t, value, message):
    with pytest.raises(RecordTypeError) as info:
        writer(one(t)).serialize((value,))
    assert message in str(info.value)


def test_named_rows_and_dicts_are_written_by_field_name():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    assert writer(t).serialize(Row(b="x", a=1)) == b"1,x\n"
    assert writer(t).serialize({"b": "y", "a": 2}) == b"2,y\n"
    with pytest.raises(RecordTypeError, match="a Row, tuple or list of 2 values"):
        writer(t).serialize((1,))


@pytest.mark.parametrize("t,message", [
    (Types.CHAR(), "Unsupported type information 'CHAR' for field 'v'."),
    (Types.INSTANT(), "Unsupported type information 'INSTANT' for field 'v'."),
    (Types.MAP(Types.STRING(), Types.INT()), "Unsupported type information"),
    (Types.LIST(Types.INT()), "Unsupported type information"),
    (Types.PRIMITIVE_ARRAY(Types.INT()), "Unsupported type information"),
    (Types.OBJECT_ARRAY(Types.ROW([Types.INT()])),
     "Only simple types are supported in the second level nesting of fields 'v'"),
    (Types.ROW([Types.OBJECT_ARRAY(Types.INT())]), "second level nesting"),
])
def test_types_csv_cannot_hold_are_refused_by_the_builders(t, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CsvRowSerializationSchema.Builder(one(t))
    with pytest.raises(ValueError, match="Unsupported|second level"):
        CsvRowDeserializationSchema.Builder(one(t))


def test_builders_need_a_row_type():
    with pytest.raises(TypeError, match="Type information must not be None"):
        CsvRowSerializationSchema.Builder(None)
    with pytest.raises(TypeError, match="Row type information expected"):
        CsvRowDeserializationSchema.Builder(Types.INT())


# ---------------------------------------------------------------------------------------
# CsvSchema
# ---------------------------------------------------------------------------------------

def test_csv_schema_builder_as_pyflink():
    schema = (CsvSchema.builder()
              .add_number_column("id", number_type=Types.INT())
              .add_string_column("name")
              .add_array_column("list", ",", element_type=Types.STRING())
              .add_boolean_column("ok")
              .add_number_column("big")
              .set_column_separator("|")
              .set_escape_char("\\")
              .set_quote_char("'")
              .set_null_value("N")
              .set_line_separator("\r\n")
              .set_use_header()
              .set_strict_headers()
              .set_skip_first_data_row()
              .set_allow_comments()
              .set_array_element_separator("#")
              .set_any_property_name("extra")
              .build())
    assert isinstance(schema, CsvSchema) and schema.size() == len(schema) == 5
    assert schema.get_type_info() == Types.ROW_NAMED(
        ["id", "name", "list", "ok", "big"],
        [Types.INT(), Types.STRING(), Types.OBJECT_ARRAY(Types.STRING()), Types.BOOLEAN(),
         Types.LONG()])
    assert str(schema) == ('[CsvSchema: columns=["id"/NUMBER,"name"/STRING,"list"/ARRAY,'
                           '"ok"/BOOLEAN,"big"/NUMBER], header? true, skipFirst? true, '
                           "comments? true, any-properties? as 'extra']")
    assert (schema.column_separator, schema.escape_char, schema.quote_char, schema.null_value,
            schema.line_separator, schema.array_element_separator) == \
        ("|", "\\", "'", "N", "\r\n", "#")
    assert schema.columns[2][3] == ","


def test_csv_schema_builder_edits():
    b = CsvSchemaBuilder().add_string_column("a").add_array_column("b")
    assert b.size() == len(b) == 2
    b.remove_array_element_separator(1)
    assert b.build().columns[1][3] == ""
    other = CsvSchema.builder().add_string_column("a").add_number_column("c").build()
    assert [c[0] for c in b.add_columns_from(other).build().columns] == ["a", "b", "c"]
    assert b.clear_columns().size() == 0
    s = b.disable_quote_char().disable_escape_char().disable_array_element_separator().build()
    assert (s.quote_char, s.escape_char, s.array_element_separator) == (None, None, "")
    with pytest.raises(ValueError, match="Column separator must be a single char"):
        b.set_column_separator("ab")
    with pytest.raises(ValueError, match="Quote char must be a single char"):
        b.set_quote_char("")
    with pytest.raises(ValueError, match="Escape char must be a single char"):
        b.set_escape_char("ab")
    with pytest.raises(TypeError, match="number_type must be a number type"):
        b.add_number_column("x", Types.STRING())
    with pytest.raises(IndexError):
        b.remove_array_element_separator(3)
    assert pickle.loads(pickle.dumps(other)) == other


# ---------------------------------------------------------------------------------------
# shipping and batches
# ---------------------------------------------------------------------------------------

def test_schemas_pickle_and_work_after_unpickling():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.OBJECT_ARRAY(Types.STRING())])
    w = writer(t, set_field_delimiter=";", set_array_element_delimiter="|",
               set_null_literal="-")
    r = reader(t, set_field_delimiter=";", set_array_element_delimiter="|",
               set_null_literal="-", set_ignore_parse_errors=True)
    w2, r2 = pickle.loads(pickle.dumps(w)), pickle.loads(pickle.dumps(r))
    assert w2 == w and r2 == r and w2 != writer(t)
    assert w2.serialize((None, ["x", None])) == b'-;"x|-"\n'  # '-' is below ';': quoted
    assert r2.deserialize(b"-;x|-\n") == (None, ["x", None])
    assert r2.deserialize(b"q;x") == (None, ["x"])
    assert r2.get_produced_type() == t and w2.get_type_info() == t


def test_batches_loop_in_one_call_and_errors_carry_the_index():
    t = Types.ROW([Types.INT()])
    assert writer(t).serialize_batch([(1,), (2,)]) == [b"1\n", b"2\n"]
    assert reader(t).deserialize_batch([b"1\n", b"2"]) == [(1,), (2,)]
    with pytest.raises(DeserializationError) as info:
        reader(t).deserialize_batch([b"1", b"x"])
    assert info.value.index == 1


def test_the_row_schemas_are_importable_from_flowray_common_as_from_pyflink_common():
    import flowray.common as common
    assert common.CsvRowSerializationSchema is CsvRowSerializationSchema
    assert common.CsvRowDeserializationSchema is CsvRowDeserializationSchema
