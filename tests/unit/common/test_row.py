"""Row and RowKind (PyFlink's surface on a tuple) and the Types/TypeInformation surface."""

import copy
import pickle

import cloudpickle
import pytest

from flowray.common import Row, RowKind, Types
from flowray.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicType,
    BasicTypeInfo,
    DateTypeInfo,
    ListTypeInfo,
    LocalTimeTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    SqlTimeTypeInfo,
    TimestampTypeInfo,
    TimeTypeInfo,
    TupleTypeInfo,
    record_formatter,
)
from flowray.state.key_groups import assign_to_key_group
from flowray.state.key_types import canonical_key, identity_form


def test_row_kind_values_and_short_strings_are_pyflinks():
    assert [(k.name, k.value, str(k)) for k in RowKind] == [
        ("INSERT", 0, "+I"), ("UPDATE_BEFORE", 1, "-U"), ("UPDATE_AFTER", 2, "+U"),
        ("DELETE", 3, "-D")]


def test_row_kind_defaults_to_insert_and_can_be_set():
    r = Row(1, 2)
    assert r.get_row_kind() is RowKind.INSERT
    r.set_row_kind(RowKind.DELETE)
    assert r.get_row_kind() is RowKind.DELETE and Row(1, 2).get_row_kind() is RowKind.INSERT
    assert Row.of_kind(RowKind.UPDATE_AFTER, a=1).get_row_kind() is RowKind.UPDATE_AFTER
    assert r._is_retract_msg() and not r._is_accumulate_msg()
    with pytest.raises(TypeError, match="RowKind"):
        r.set_row_kind("-D")


def test_named_access_as_pyflink():
    r = Row(name="ann", clicks=3)
    assert (r.name, r["clicks"], r[0], len(r)) == ("ann", 3, "ann", 2)
    assert "name" in r and "ann" not in r and "ann" in Row("ann")
    with pytest.raises(AttributeError):
        r.missing
    with pytest.raises(KeyError):
        r["missing"]
    with pytest.raises(TypeError, match="immutable"):
        r[0] = "bob"


def test_repr_is_pyflinks():
    assert repr(Row(name="ann", clicks=3)) == "Row(name='ann', clicks=3)"
    assert repr(Row("a", 1)) == "<Row('a', 1)>"


def test_as_dict_plain_and_recursive():
    r = Row(key=1, value=Row(name="a", age=2), items=[Row(x=1)], m={"k": Row(y=2)})
    assert r.as_dict() == {"key": 1, "value": Row(name="a", age=2), "items": [Row(x=1)],
                           "m": {"k": Row(y=2)}}
    assert r.as_dict(recursive=True) == {"key": 1, "value": {"name": "a", "age": 2},
                                         "items": [{"x": 1}], "m": {"k": {"y": 2}}}
    with pytest.raises(TypeError):
        Row(1).as_dict()
    with pytest.raises(ValueError):  # what flowray raised before: still caught
        Row(1).as_dict()


def test_set_field_names_and_get_fields_by_names():
    r = Row("ann", 3)
    r.set_field_names(["name", "age"])
    assert r.name == "ann" and r.as_dict() == {"name": "ann", "age": 3}
    assert r.get_fields_by_names(["age", "name"]) == [3, "ann"]
    assert Row(1, 2).get_fields_by_names(["x", "y"]) == [1, 2]
    with pytest.raises(KeyError, match="not exist"):
        r.get_fields_by_names(["nope"])
    with pytest.raises(ValueError):
        r.set_field_names(["only_one"])


def test_a_row_template_makes_named_rows():
    Person = Row("name", "age")
    assert repr(Person) == "<Row('name', 'age')>" and "name" in Person
    p = Person("Alice", 11)
    assert p == ("Alice", 11) and p.age == 11 and repr(p) == "Row(name='Alice', age=11)"
    with pytest.raises(ValueError, match="expected 2 values"):
        Person(1, 2, 3)


def test_equality_and_hash_are_the_tuples():
    assert Row("a", 1) == ("a", 1) == Row(x="a", y=1)
    assert hash(Row(x="a", y=1)) == hash(("a", 1))
    assert Row.of_kind(RowKind.DELETE, "a") == Row("a")  # row kind is not compared


def test_row_keys_keep_their_key_group_and_identity():
    named, plain, deleted = Row(name="a", n=1), Row("a", 1), Row.of_kind(RowKind.DELETE, "a", 1)
    for k in (named, plain, deleted):
        assert identity_form(k) == ("a", 1) and type(identity_form(k)) is tuple
        assert assign_to_key_group(k, 128) == assign_to_key_group(("a", 1), 128)
        assert canonical_key(k) is k


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_names_and_row_kind_survive_pickling_and_copies(dumps):
    for r in (Row(a=1, b=Row(c=2)), Row(1, 2), Row.of_kind(RowKind.UPDATE_BEFORE, x=1)):
        for back in (pickle.loads(dumps(r)), copy.copy(r), copy.deepcopy(r)):
            assert back == r and repr(back) == repr(r)
            assert back.get_row_kind() is r.get_row_kind()


def test_rows_pickled_before_row_kinds_still_load():
    from flowray.common.types import _named_row

    assert repr(_named_row(("a",), (1,))) == "Row(a=1)"
    assert repr(Row(*(1, 2))) == "<Row(1, 2)>"


def test_replace_and_aggregating_a_named_row_keeps_names_and_kind():
    r = Row.of_kind(RowKind.UPDATE_AFTER, user="a", n=1)
    s = r._replace(n=5)
    assert repr(s) == "Row(user='a', n=5)" and s.get_row_kind() is RowKind.UPDATE_AFTER
    assert repr(type(r)("b", 2)) == "Row(user='b', n=2)"  # a named row's own class
    with pytest.raises(ValueError):
        type(r)("b")


# -- TypeInformation ----------------------------------------------------------------------------

def test_types_factories_give_pyflinks_classes():
    assert isinstance(Types.INT(), BasicTypeInfo) and Types.INT()._basic_type is BasicType.INT
    assert isinstance(Types.SQL_DATE(), DateTypeInfo) and Types.SQL_DATE() == SqlTimeTypeInfo.DATE()
    assert isinstance(Types.SQL_TIME(), TimeTypeInfo)
    assert isinstance(Types.SQL_TIMESTAMP(), TimestampTypeInfo)
    assert isinstance(Types.PRIMITIVE_ARRAY(Types.INT()), PrimitiveArrayTypeInfo)
    assert isinstance(Types.BASIC_ARRAY(Types.INT()), BasicArrayTypeInfo)
    assert isinstance(Types.OBJECT_ARRAY(Types.INT()), ObjectArrayTypeInfo)
    assert isinstance(Types.LIST(Types.INT()), ListTypeInfo)
    assert isinstance(Types.MAP(Types.INT(), Types.STRING()), MapTypeInfo)
    assert isinstance(Types.PICKLED_BYTE_ARRAY(), PickledBytesTypeInfo)
    assert isinstance(Types.TUPLE([Types.INT()]), TupleTypeInfo)
    assert Types.LOCAL_DATE() == LocalTimeTypeInfo(LocalTimeTypeInfo.TimeType.LOCAL_DATE)
    assert Types.LIST(Types.INT()).elem_type == Types.INT()
    assert Types.BIG_DEC() != Types.BIG_INT() and Types.PRIMITIVE_ARRAY(Types.INT()) != \
        Types.LIST(Types.INT())


def test_row_type_info_surface():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.STRING()])
    assert t.get_field_names() == ["a", "b"] and t.get_field_types() == [Types.INT(),
                                                                         Types.STRING()]
    assert t.get_field_index("b") == 1 and t.get_field_index("z") == -1
    assert Types.ROW([Types.INT()]).get_field_names() == ["f0"]
    assert Types.TUPLE([Types.INT()]).get_field_types() == [Types.INT()]
    assert isinstance(t, RowTypeInfo)


def test_bad_type_arguments_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="2 field names for 1 field types"):
        Types.ROW_NAMED(["a", "b"], [Types.INT()])
    with pytest.raises(ValueError, match="distinct"):
        Types.ROW_NAMED(["a", "a"], [Types.INT(), Types.INT()])
    with pytest.raises(TypeError, match="field_types\\[1\\] must be a TypeInformation"):
        Types.TUPLE([Types.INT(), int])
    with pytest.raises(TypeError, match="element_type"):
        Types.LIST("INT")
    with pytest.raises(ValueError, match="no basic type"):
        BasicTypeInfo("INTEGER")


def test_type_infos_pickle():
    t = Types.ROW_NAMED(["a", "b"], [Types.LOCAL_DATE(), Types.MAP(Types.STRING(),
                                                                   Types.LIST(Types.INT()))])
    assert pickle.loads(pickle.dumps(t)) == t


def test_print_shows_the_row_kind():
    fmt = record_formatter(Types.ROW([Types.STRING(), Types.INT()]))
    assert fmt(Row.of_kind(RowKind.DELETE, "a", 1)) == "-D[a,1]"
    assert fmt(("a", 1)) == "+I[a,1]"


# -- batches of named rows on the wire (rows_for_pickling) --------------------------------

def _round_trip(records):
    import pickle

    from flowray.common.types import rows_for_pickling
    return pickle.loads(pickle.dumps(rows_for_pickling(records), protocol=5))


def test_a_batch_of_named_rows_pickles_flat_and_comes_back_equal():
    from flowray.common.types import _FlatBatch, rows_for_pickling
    rows = [Row(k=f"k{i}", v=i) for i in range(100)]
    assert isinstance(rows_for_pickling(rows), _FlatBatch)
    back = _round_trip(rows)
    assert back == rows
    assert all(type(b) is type(r) and b.as_dict() == r.as_dict() for b, r in zip(back, rows))


def test_batches_of_tuples_and_of_positional_rows_of_one_length_pickle_flat_too():
    from flowray.common.types import C_ROWS, _FlatBatch, rows_for_pickling
    shared = [1, 2]
    for records in ([("a", 1), ("b", shared), ("c", shared)], [Row("a", 1), Row("b", 2)]):
        # plain tuples go flat with the C half only (in Python it costs what it saves)
        flat = C_ROWS or type(records[0]) is not tuple
        assert isinstance(rows_for_pickling(records), _FlatBatch) is flat
        back = _round_trip(records)
        assert back == records and [type(b) for b in back] == [type(r) for r in records]
    back = _round_trip([("b", shared), ("c", shared)])
    assert back[0][1] is back[1][1]   # an object twice in a batch is one object after
    for odd in ([("a", 1), ("b",)], [("a", 1), ["b", 2]], [(), ()], [("a", 1), 3]):
        assert rows_for_pickling(odd) is odd and _round_trip(odd) == odd


def test_batches_in_the_earlier_form_of_named_rows_still_unpickle():
    """Field names and plain tuples: how batches of named rows crossed a channel before
    they went flat (an unaligned checkpoint may hold frames of that form)."""
    import pickle

    from flowray.common.types import _named_rows
    data = pickle.dumps((_named_rows, (("k", "v"), [("a", 1), ("b", 2)])))
    func, args = pickle.loads(data)
    back = func(*args)
    assert back == [("a", 1), ("b", 2)] and back[1].v == 2 and back[0]._fields == ("k", "v")


@pytest.mark.parametrize("odd_one", [
    lambda: Row.of_kind(RowKind.DELETE, k="x", v=0),        # another kind
    lambda: Row(a="x", b=0),                                 # another schema
    lambda: ("x", 0),                                        # not a row
    lambda: Row("x", 0),                                     # a positional row
])
def test_a_mixed_batch_keeps_every_rows_own_kind_and_names(odd_one):
    from flowray.common.types import rows_for_pickling
    rows = [Row(k="a", v=1), odd_one(), Row(k="b", v=2)]
    assert rows_for_pickling(rows) is rows
    back = _round_trip(rows)
    assert back == rows
    assert [getattr(r, "_row_kind", None) for r in back] == \
        [getattr(r, "_row_kind", None) for r in rows]
    assert [getattr(r, "_fields", None) for r in back] == \
        [getattr(r, "_fields", None) for r in rows]


def test_a_row_renamed_in_place_is_not_taken_for_its_class():
    from flowray.common.types import rows_for_pickling
    renamed = Row(k="a", v=1)
    renamed.set_field_names(["x", "y"])
    rows = [Row(k="b", v=2), renamed]
    assert rows_for_pickling(rows) is rows
    assert _round_trip(rows)[1].as_dict() == {"x": "a", "y": 1}
