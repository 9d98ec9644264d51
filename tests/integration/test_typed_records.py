"""Declared output types on real Ray tasks: rows cross socket channels with their names and
kinds, FLOAT rounds, and a record that does not fit fails the job once."""

import pytest

from flowray import JobExecutionError, NumberSequenceSource, RestartStrategies
from flowray.common import Row, RowKind, Types

PERSON = Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.FLOAT()])


def test_row_named_output_reaches_downstream_tasks_with_field_access(env):
    env.set_parallelism(2)
    out = list(env.from_source(NumberSequenceSource(1, 40))
               .map(lambda x: Row.of_kind(RowKind.UPDATE_AFTER, f"u{x % 4}", x / 10),
                    output_type=PERSON)
               .key_by(lambda r: r.name)  # a network exchange: rows are pickled across
               .map(lambda r: (r.name, r.score, r.get_row_kind(), isinstance(r, Row)))
               .execute_and_collect("typed-rows"))
    assert len(out) == 40
    assert {name for name, *_ in out} == {"u0", "u1", "u2", "u3"}
    assert all(kind is RowKind.UPDATE_AFTER and is_row for _, _, kind, is_row in out)
    assert 0.10000000149011612 in {score for _, score, _, _ in out}  # 0.1 as float32


def test_a_record_that_does_not_fit_fails_the_job_once(env):
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    env.from_source(NumberSequenceSource(1, 10)) \
        .map(lambda x: ("ann", "high" if x == 7 else x), output_type=PERSON) \
        .name("Scorer").add_sink(lambda v: None)
    with pytest.raises(JobExecutionError) as info:
        env.execute("typed-failure")
    err = info.value
    assert err.operator == "Scorer" and err.cause_type == "RecordTypeError"
    assert "record.score: 'high' (str) does not fit FLOAT" in str(err)
    assert err.outcome.restarts == 0
