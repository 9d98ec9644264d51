"""PyFlink's own DataStream example programs, run with only their imports changed to
``flowray``, print what PyFlink 2.3 printed (tests/acceptance/pyflink_examples/expected).

Each example runs in its own process, on the test session's Ray cluster (``RAY_ADDRESS``).
The state examples (event_time_timer, state_access) run unchanged, with their state TTL.
The Kafka examples run against the session's test broker (``kafka_broker``): only their
bootstrap address changes (and their ``add_jars`` call goes); their topics are made first.
"""

import pytest

from tests.acceptance.pyflink_examples.harness import (
    KAFKA_EXAMPLES,
    actual_lines,
    expected_lines,
    run_with_flowray,
)

pytestmark = pytest.mark.timeout(300)

WINDOWING = ["tumbling_time_window", "sliding_time_window", "session_with_gap_window",
             "session_with_dynamic_gap_window", "tumbling_count_window"]


@pytest.fixture(scope="module")
def on_session_cluster(ray_session, monkeypatch_module):
    import ray

    monkeypatch_module.setenv("RAY_ADDRESS", ray.get_runtime_context().gcs_address)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# basic_operations: ROW_NAMED records with field access (issue 15); process_json_data: the
# same with a JSON payload
@pytest.mark.parametrize("example", WINDOWING + ["word_count", "basic_operations",
                                                 "process_json_data"])
def test_example_prints_what_pyflink_prints(on_session_cluster, example):
    output = run_with_flowray(example)
    assert actual_lines(example, output) == expected_lines(example)


@pytest.mark.parametrize("example", ["event_time_timer", "state_access"])
def test_state_ttl_example_prints_what_pyflink_prints(on_session_cluster, example):
    output = run_with_flowray(example)
    assert actual_lines(example, output) == expected_lines(example)


# the four *_format examples write to a topic and print it back with an unbounded KafkaSource
# (stopped once they printed what PyFlink printed; compared as multisets); the row field
# extractor writes keyed records to a 3-partition topic and prints from inside its map
# (its map's print() lines reach the client's stdout: flowray.task-stdout-to-client)
@pytest.mark.parametrize("example", KAFKA_EXAMPLES)
def test_kafka_example_prints_what_pyflink_prints(on_session_cluster, kafka_broker, example):
    output = run_with_flowray(example, kafka=kafka_broker)
    assert actual_lines(example, output) == expected_lines(example)
