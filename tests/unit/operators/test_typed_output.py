"""Declared output types applied by operators (operators.typed_output): in a harness and
in whole jobs on the in-process LocalExecutor (no Ray)."""

import pytest

from flowray import (
    CoMapFunction,
    JobExecutionError,
    KeyedProcessFunction,
    NumberSequenceSource,
    RestartStrategies,
)
from flowray.common import Row, RowKind, Types
from flowray.operators.base import UserFunctionError
from flowray.operators.basic import MapOperator
from flowray.operators.typed_output import TypedOutput, declare_output_type
from tests.support.environments import local_env
from tests.support.operator_harness import OperatorHarness

pytestmark = pytest.mark.timeout(60)

PERSON = Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.FLOAT()])


def test_no_type_or_pickled_leaves_the_output_alone():
    for t in (None, Types.PICKLED_BYTE_ARRAY()):
        op = MapOperator(lambda x: x)
        declare_output_type(op, t)
        h = OperatorHarness(op)
        assert not isinstance(op.output, TypedOutput)
        h.process([object, 1])
        assert h.records == [object, 1]


def test_declared_type_converts_emitted_records_and_keeps_timestamps():
    op = MapOperator(lambda x: (str(x), x / 10))
    declare_output_type(op, PERSON)
    h = OperatorHarness(op)
    h.process([1, 2], timestamps=[5, None])
    assert all(isinstance(r, Row) for r in h.records)
    assert h.records[0].score == 0.10000000149011612 and h.timestamps == [5, None]


def test_a_bad_record_fails_the_operator_with_a_non_recoverable_error():
    op = MapOperator(lambda x: ("ann", "high" if x == 2 else x), name="ToPerson")
    declare_output_type(op, PERSON)
    h = OperatorHarness(op)
    with pytest.raises(UserFunctionError) as info:
        h.process([1, 2, 3])
    e = info.value
    assert e.operator_name == "ToPerson" and e.recoverable is False
    assert e.cause_type == "RecordTypeError"
    assert "record.score: 'high' (str) does not fit FLOAT" in str(e)


def test_declare_output_type_refuses_a_non_type():
    with pytest.raises(TypeError, match="TypeInformation"):
        declare_output_type(MapOperator(lambda x: x), "STRING")


def test_map_with_row_named_output_gives_rows_downstream():
    env = local_env(1)
    ds = env.from_collection([("ann", 1), ("bob", 2)]) \
        .map(lambda t: (t[0], t[1] / 10), output_type=PERSON)
    assert ds.get_type() == PERSON
    out = sorted(ds.map(lambda r: (r.name, r.score, r.as_dict())).execute_and_collect())
    assert out == [("ann", 0.10000000149011612, {"name": "ann", "score": 0.10000000149011612}),
                   ("bob", 0.20000000298023224, {"name": "bob", "score": 0.20000000298023224})]


def test_get_type_defaults_to_pickled_bytes():
    env = local_env(1)
    ds = env.from_collection([1]).map(lambda x: x)
    assert ds.get_type() == Types.PICKLED_BYTE_ARRAY()
    assert ds.filter(lambda x: True).get_type() == Types.PICKLED_BYTE_ARRAY()
    typed = ds.map(lambda x: x, output_type=Types.INT())
    assert typed.filter(lambda x: True).get_type() == Types.INT()


def test_flat_map_process_keyed_and_connected_outputs_are_converted():
    class Emit(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield Row.of_kind(RowKind.UPDATE_AFTER, value % 2, value)

    env = local_env(2)
    src = env.from_source(NumberSequenceSource(1, 6))
    flat = src.flat_map(lambda x: [x, x], output_type=Types.DOUBLE())
    keyed = src.key_by(lambda x: x % 2).process(
        Emit(), output_type=Types.ROW_NAMED(["k", "v"], [Types.INT(), Types.INT()]))
    class Both(CoMapFunction):
        def map1(self, value):
            return [value]

        def map2(self, value):
            return (value,)

    co = src.connect(src).map(Both(), output_type=Types.LIST(Types.FLOAT()))
    assert sorted(flat.execute_and_collect()) == [float(x) for x in (1, 1, 2, 2, 3, 3, 4, 4,
                                                                     5, 5, 6, 6)]
    rows = list(keyed.execute_and_collect())
    assert sorted(r.v for r in rows) == [1, 2, 3, 4, 5, 6]
    assert {r.get_row_kind() for r in rows} == {RowKind.UPDATE_AFTER}
    assert sorted(co.execute_and_collect()) == [[float(x)] for x in (1, 1, 2, 2, 3, 3, 4, 4,
                                                                     5, 5, 6, 6)]


def test_from_collection_converts_at_once_and_names_the_field():
    env = local_env(1)
    assert list(env.from_collection([(1, 0.1)], Types.TUPLE([Types.INT(), Types.FLOAT()]))
                .execute_and_collect()) == [(1, 0.10000000149011612)]
    with pytest.raises(TypeError, match=r"record\[0\]: 'x'"):
        env.from_collection([("x", 0.1)], Types.TUPLE([Types.INT(), Types.FLOAT()]))


def test_from_source_type_info_converts_source_records():
    env = local_env(1)
    ds = env.from_source(NumberSequenceSource(1, 3), source_name="n", type_info=Types.DOUBLE())
    out = list(ds.execute_and_collect())
    assert sorted(out) == [1.0, 2.0, 3.0] and all(type(x) is float for x in out)


def test_a_bad_record_fails_the_job_once_naming_operator_field_and_value():
    env = local_env(1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))  # would restart
    env.from_collection([1, 2, 3]).map(
        lambda x: ("a", "x" if x == 2 else x),
        output_type=Types.ROW_NAMED(["k", "age"], [Types.STRING(), Types.INT()])) \
        .name("ToRow").add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("typed")
    err = info.value
    assert err.operator == "ToRow" and err.cause_type == "RecordTypeError"
    assert "record.age: 'x' (str) does not fit INT" in str(err)
    assert err.outcome.restarts == 0


def test_sum_of_a_named_row_keeps_its_names_and_row_kind():
    from flowray.operators.keyed import field_aggregator

    r = Row.of_kind(RowKind.UPDATE_AFTER, k="a", v=1)
    for field in (1, -1):
        s = field_aggregator("sum", field)(r, Row(k="a", v=4))
        assert repr(s) == "Row(k='a', v=5)" and s.get_row_kind() is RowKind.UPDATE_AFTER
    assert repr(field_aggregator("sum", 1)(Row("a", 1), ("a", 2))) == "<Row('a', 3)>"


def test_key_by_key_type_converts_keys_and_names_a_bad_one():
    env = local_env(2)
    out = list(env.from_collection([(1, "a"), (1.0, "b"), (2, "c")])
               .key_by(lambda t: t[0], key_type=Types.DOUBLE())
               .process(_CurrentKey()).execute_and_collect())
    assert sorted(out) == [(1.0, "a"), (1.0, "b"), (2.0, "c")]
    assert all(type(k) is float for k, _ in out)
    env.from_collection([(1, "a"), ("x", "b")]).key_by(lambda t: t[0], Types.INT()) \
        .process(_CurrentKey()).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("bad key")
    assert "key: 'x' (str) does not fit INT" in str(info.value)
    assert info.value.outcome.restarts == 0


class _CurrentKey(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield ctx.get_current_key(), value[1]


def test_side_outputs_are_converted_to_their_tags_type():
    from flowray.datastream import OutputTag, ProcessFunction

    odd = OutputTag("odd", Types.TUPLE([Types.STRING(), Types.FLOAT()]))
    plain = OutputTag("plain")

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            if value == 99:
                yield odd, ("bad", "not a float")
            elif value % 2:
                yield odd, ("odd", value + 0.1)
                yield plain, value + 0.1
            else:
                yield value

    env = local_env(1)
    main = env.from_collection([1, 2, 3]).process(Split()).name("Split")
    side, untyped = main.get_side_output(odd), main.get_side_output(plain)
    assert sorted(side.execute_and_collect()) == [("odd", 1.100000023841858),
                                                  ("odd", 3.0999999046325684)]
    assert sorted(untyped.execute_and_collect()) == [1.1, 3.1]  # no type: untouched
    assert sorted(main.execute_and_collect()) == [2]

    env = local_env(1)
    env.from_collection([99]).process(Split()).name("Split").get_side_output(odd) \
        .add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("typed side output")
    assert info.value.operator == "Split" and info.value.cause_type == "RecordTypeError"
    assert "record[1]: 'not a float' (str) does not fit FLOAT" in str(info.value)
