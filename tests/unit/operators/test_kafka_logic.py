"""The Kafka connector's pure parts, without a broker: split ownership (Flink's owner
function, checked against values Java computed), offset resolution, per-split watermarks
with idleness on a manual clock, record serialization, the write-ahead-log transaction's
checkpointed form, and the submission check of the transaction timeout."""

from __future__ import annotations

import pickle

import pytest

from flowray.common import Duration, WatermarkStrategy
from flowray.common.clock import ManualClock
from flowray.common.serialization import SimpleStringSchema
from flowray.operators.base import CollectingOutput
from flowray.operators.kafka.offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
    NoCommittedOffsetError,
    OffsetLookup,
    resolve_offsets,
)
from flowray.operators.kafka.sink import (
    FlinkFixedPartitioner,
    KafkaRecordSerializationSchema,
    WalTransaction,
    check_transaction_timeout,
)
from flowray.operators.kafka.source import java_string_hash, split_owner
from flowray.operators.split_watermarks import SplitWatermarkMultiplexer
from flowray.operators.staged_records import StagedRecords


# -- split ownership ----------------------------------------------------------------------

def test_java_string_hash_matches_java():
    # values printed by Java 17's String.hashCode()
    assert java_string_hash("orders") == -1008770331
    assert java_string_hash("émoji😀") == -436919891


def test_every_partition_has_exactly_one_owner_at_every_parallelism():
    for n in (1, 2, 3, 5, 8):
        for topic in ("a", "orders", "payments-eu"):
            owners = [split_owner(KafkaTopicPartition(topic, p), n) for p in range(16)]
            assert all(0 <= o < n for o in owners)
            # round-robin from the topic's start index: consecutive partitions, next reader
            assert all((owners[p + 1] - owners[p]) % n == 1 % n for p in range(15))


# -- offsets ------------------------------------------------------------------------------

def _lookup(committed=None, times=None):
    marks = {0: (5, 50), 1: (0, 10)}
    return OffsetLookup(
        watermarks=lambda tp: marks[tp.partition],
        committed=lambda tps: {tp: (committed or {}).get(tp.partition) for tp in tps},
        for_times=lambda tps, ms: {tp: (times or {}).get(tp.partition) for tp in tps})


P0, P1 = KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)


def test_earliest_latest_timestamp():
    assert resolve_offsets(KafkaOffsetsInitializer.earliest(), [P0, P1], _lookup(),
                           False) == {P0: 5, P1: 0}
    assert resolve_offsets(KafkaOffsetsInitializer.latest(), [P0, P1], _lookup(),
                           False) == {P0: 50, P1: 10}
    # no record at or after the timestamp: the end of the partition
    assert resolve_offsets(KafkaOffsetsInitializer.timestamp(99), [P0, P1],
                           _lookup(times={0: 7}), False) == {P0: 7, P1: 10}


def test_committed_with_and_without_reset():
    init = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
    assert resolve_offsets(init, [P0, P1], _lookup(committed={0: 9}), True) == {P0: 9, P1: 10}
    with pytest.raises(NoCommittedOffsetError, match="t-1: the consumer group has no "
                                                     "committed offset"):
        resolve_offsets(KafkaOffsetsInitializer.committed_offsets(), [P0, P1],
                        _lookup(committed={0: 9}), True)


def test_specified_offsets_out_of_range_and_missing_partitions():
    init = KafkaOffsetsInitializer.offsets({P0: 2, P1: 4}, KafkaOffsetResetStrategy.LATEST)
    # 2 is below partition 0's earliest offset 5: reset to latest
    assert resolve_offsets(init, [P0, P1], _lookup(), False) == {P0: 50, P1: 4}
    only0 = KafkaOffsetsInitializer.offsets({P0: 7})
    # partition 1 not given: the committed offset, else the reset strategy (EARLIEST)
    assert resolve_offsets(only0, [P0, P1], _lookup(committed={1: 3}), True) == {P0: 7, P1: 3}
    assert resolve_offsets(only0, [P0, P1], _lookup(), False) == {P0: 7, P1: 0}


def test_bad_initializers_are_rejected_when_built():
    with pytest.raises(ValueError):
        KafkaOffsetsInitializer.timestamp(-1)
    with pytest.raises(TypeError):
        KafkaOffsetsInitializer.offsets({("t", 0): 1})
    with pytest.raises(ValueError):
        KafkaOffsetsInitializer.offsets({P0: -3})


# -- per-split watermarks -----------------------------------------------------------------

def _mux(idle_ms=None):
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    if idle_ms is not None:
        strategy = strategy.with_idleness(Duration.of_millis(idle_ms))
    clock = ManualClock()
    out = CollectingOutput()
    return SplitWatermarkMultiplexer(strategy, "kafka", out, clock), out, clock


def test_watermark_is_the_minimum_over_splits():
    mux, out, _ = _mux()
    mux.set_splits(["a", "b"])
    mux.emit("a", ["x"], [100])
    mux.emit("b", ["y"], [40])
    mux.periodic_emit()
    assert out.watermarks == [39]
    mux.emit("b", ["y"], [500])
    mux.periodic_emit()
    assert out.watermarks == [39, 99]
    assert out.timestamps == [100, 40, 500]


def test_an_idle_split_stops_holding_the_watermark_back():
    mux, out, clock = _mux(idle_ms=1000)
    mux.set_splits(["busy", "silent"])
    mux.emit("busy", ["x"], [100])
    mux.periodic_emit()
    assert out.watermarks == []          # the silent split has no watermark yet
    clock.advance(1500)
    mux.emit("busy", ["x"], [200])
    mux.periodic_emit()                  # silent is idle now
    assert out.watermarks == [199]


def test_no_split_or_all_idle_marks_the_subtask_idle():
    mux, out, clock = _mux(idle_ms=10)
    mux.set_splits([])
    assert out.statuses[-1:] == [True]
    mux.set_splits(["a"])
    mux.emit("a", ["x"], [5])
    mux.periodic_emit()
    assert out.statuses[-1] is False and out.watermarks == [4]
    mux.periodic_emit()                  # no event since: the inactivity clock starts
    clock.advance(50)
    mux.periodic_emit()
    assert out.statuses[-1] is True


def test_a_finished_split_leaves_the_minimum_and_end_emits_max():
    mux, out, _ = _mux()
    mux.set_splits(["a", "b"])
    mux.emit("a", ["x"], [10])
    mux.emit("b", ["y"], [90])
    mux.periodic_emit()
    mux.split_finished("a")
    assert out.watermarks == [9, 89]
    mux.end()
    assert out.watermarks[-1] > 2 ** 62


def test_the_mux_knows_its_last_event_time_and_output_watermark():
    mux, out, clock = _mux()
    clock.set(5_000)
    mux.set_splits(["a", "b"])
    assert mux.output_watermark is None and mux.emit_times.last_event_ms is None
    mux.emit("a", ["x", "y"], [100, 300])
    mux.emit("b", ["z"], [200])
    mux.periodic_emit()
    assert (mux.emit_times.last_event_ms, mux.emit_times.last_emit_ms) == (200, 5_000)
    assert mux.output_watermark == 199 == out.watermarks[-1]


def test_an_assigner_sees_the_kafka_timestamp():
    strategy = (WatermarkStrategy.for_monotonous_timestamps()
                .with_timestamp_assigner(lambda value, record_ts: record_ts + value))
    out = CollectingOutput()
    mux = SplitWatermarkMultiplexer(strategy, "kafka", out, ManualClock())
    mux.set_splits(["a"])
    mux.emit("a", [1, 2], [1000, 1000])
    assert out.timestamps == [1001, 1002]


# -- the sink ------------------------------------------------------------------------------

def test_serialization_with_selector_key_and_fixed_partitioner():
    schema = (KafkaRecordSerializationSchema.builder()
              .set_topic_selector(lambda r: f"t-{r[0]}")
              .set_key_serialization_schema(_FirstField())
              .set_value_serialization_schema(_SecondField())
              .set_partitioner(FlinkFixedPartitioner())
              .build())
    topics, keys, values, _ = schema.serialize_batch([("a", "1"), ("b", "2")])
    assert (topics, keys, values) == (["t-a", "t-b"], [b"a", b"b"], [b"1", b"2"])


def test_serialization_schema_needs_one_topic_and_a_value_schema():
    with pytest.raises(ValueError, match="exactly one"):
        KafkaRecordSerializationSchema.builder().set_value_serialization_schema(
            SimpleStringSchema()).build()
    with pytest.raises(ValueError, match="set_value_serialization_schema"):
        KafkaRecordSerializationSchema.builder().set_topic("t").build()


def test_a_sealed_transaction_keeps_its_records_in_the_checkpoint():
    txn = WalTransaction("p", "job", 1, StagedRecords(threshold=50))
    txn.staged.append([b"chunk-%d" % i for i in range(20)])  # past 50 bytes: spilled
    txn.count = 20
    open_copy = pickle.loads(pickle.dumps(txn))
    assert open_copy.staged is None and open_copy.chunks is None  # replayed, not kept
    txn.seal(7)
    sealed = pickle.loads(pickle.dumps(txn))
    assert sealed.checkpoint_id == 7 and sealed.chunks == [b"chunk-%d" % i for i in range(20)]
    assert (sealed.prefix, sealed.job_id, sealed.subtask) == ("p", "job", 1)


def test_transaction_timeout_against_the_checkpoint_interval():
    check_transaction_timeout({"transaction.timeout.ms": "900000"}, 60_000)
    check_transaction_timeout({}, None)
    with pytest.raises(ValueError, match="shorter than the checkpoint interval"):
        check_transaction_timeout({}, 120_000)       # librdkafka's default: 60 s
    with pytest.raises(ValueError, match="must be a number of ms"):
        check_transaction_timeout({"transaction.timeout.ms": "soon"}, 1000)


class _FirstField:
    def serialize(self, r):
        return r[0].encode()


class _SecondField:
    def serialize(self, r):
        return r[1].encode()


def test_the_consumer_fetches_8_mib_per_partition_unless_the_properties_say_otherwise():
    from flowray.operators.kafka.source import (FETCH_BYTES_PER_PARTITION,
                                                KafkaSourceDefinition, KafkaSourceReader)
    from flowray.operators.sources import SourceReaderContext

    def config_of(properties):
        seen = []
        reader = KafkaSourceReader(
            KafkaSourceDefinition("127.0.0.1:1", topics=("t",), properties=properties),
            SourceReaderContext(0, 1), consumer_factory=lambda c: seen.append(c) or object())
        reader._open_consumer()
        return seen[0]

    assert FETCH_BYTES_PER_PARTITION == 8 << 20
    assert config_of(()).get("max.partition.fetch.bytes") == str(8 << 20)
    assert config_of((("max.partition.fetch.bytes", "1048576"),))[
        "max.partition.fetch.bytes"] == "1048576"


def test_pending_records_is_the_lag_behind_the_fetched_high_watermarks():
    from confluent_kafka import KafkaError, KafkaException

    from flowray.metrics.groups import MetricRegistry
    from flowray.operators.kafka.source import (KafkaPartitionSplit, KafkaSourceDefinition,
                                                KafkaSourceReader)
    from flowray.operators.sources import SourceReaderContext

    class Consumer:   # what librdkafka last fetched: the cached high watermark per partition
        highs = {0: 1_000, 1: 50, 2: -1001}

        def get_watermark_offsets(self, tp, cached=False):
            assert cached   # never a broker round trip from a gauge
            if tp.partition == 3:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
            return 0, self.highs[tp.partition]

    group = MetricRegistry().task_group("j", "id", "Source: kafka", 0).operator_group("k")
    reader = KafkaSourceReader(KafkaSourceDefinition("127.0.0.1:1", topics=("t",)),
                               SourceReaderContext(0, 1, metric_group=group))
    assert group.values() == {"pendingRecords": 0}    # no consumer yet
    reader._consumer = Consumer()
    reader._splits = {("t", 0): KafkaPartitionSplit("t", 0, 400),
                      ("t", 1): KafkaPartitionSplit("t", 1, 10, stopping_offset=30),
                      ("t", 2): KafkaPartitionSplit("t", 2, 0),         # nothing fetched yet
                      ("t", 3): KafkaPartitionSplit("t", 3, 0),         # gone
                      ("t", 4): KafkaPartitionSplit("t", 4, 9, stopping_offset=9)}  # ended
    assert group.values() == {"pendingRecords": 600 + 20}
