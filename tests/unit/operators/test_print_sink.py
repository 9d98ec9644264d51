"""print(): Flink's prefixes ("2> ", "id> ", "id:2> ") and the record format of the
stream's declared type."""

import pytest

from flowray.common import Types
from flowray.common.typeinfo import record_formatter
from flowray.operators.sinks import DriverSinkOperator


class _Channel:
    def __init__(self):
        self.sent = []

    def send(self, records):
        self.sent.extend(records)


class _Ctx:
    def __init__(self, index, parallelism):
        self.subtask_index, self.parallelism = index, parallelism
        self.channel = _Channel()

    def open_driver_channel(self, endpoint_id):
        return self.channel


@pytest.mark.parametrize("identifier, index, parallelism, prefix", [
    (None, 0, 1, ""), (None, 1, 2, "2> "), ("out", 0, 1, "out> "), ("out", 1, 3, "out:2> ")])
def test_print_prefixes_follow_flink(identifier, index, parallelism, prefix):
    op = DriverSinkOperator("print", "e1", sink_identifier=identifier,
                            formatter=record_formatter(Types.TUPLE([Types.STRING(),
                                                                    Types.DOUBLE()])))
    op.ctx = _Ctx(index, parallelism)
    op.open()
    op.process_batch([("hi", 1e-5), ("yo", None)], None)
    assert op.ctx.channel.sent == [f"{prefix}(hi,1.0E-5)", f"{prefix}(yo,null)"]


def test_untyped_records_print_as_python_str():
    op = DriverSinkOperator("print", "e1")
    op.ctx = _Ctx(0, 1)
    op.open()
    op.process_batch([("hi", 1)], None)
    assert op.ctx.channel.sent == ["('hi', 1)"]


def test_add_sink_context_gives_the_record_timestamp_and_the_watermark():
    from flowray.common.clock import ManualClock
    from flowray.operators.base import CollectingOutput, OperatorContext, ProcessingTimeService
    from flowray.operators.sinks import SinkFunctionOperator
    from flowray.state.key_groups import KeyGroupRange

    seen = []

    class Remember:
        def invoke(self, value, context):
            seen.append((value, context.timestamp(), context.current_watermark(),
                         context.current_processing_time()))

    op = SinkFunctionOperator(Remember())
    op.setup(OperatorContext("s", 0, 1, 128, KeyGroupRange(0, 127),
                             ProcessingTimeService(ManualClock(42))), CollectingOutput())
    op.open()
    op.process_watermark(5)
    op.process_batch(["a", "b"], None, [7, None])
    assert seen == [("a", 7, 5, 42), ("b", None, 5, 42)]
