"""``flowray.datastream.connectors.kafka``: Kafka source and sink with PyFlink's API
(``KafkaSource.builder()``, ``KafkaSink.builder()``), exactly once against a real broker.

>>> from flowray.common.serialization import SimpleStringSchema
>>> source = (KafkaSource.builder()
...           .set_bootstrap_servers("localhost:9092")
...           .set_topics("orders")
...           .set_group_id("orders-job")
...           .set_starting_offsets(KafkaOffsetsInitializer.earliest())
...           .set_value_only_deserializer(SimpleStringSchema())
...           .build())
>>> source.get_boundedness().name
'CONTINUOUS_UNBOUNDED'
>>> sink = (KafkaSink.builder()
...         .set_bootstrap_servers("localhost:9092")
...         .set_record_serializer(KafkaRecordSerializationSchema.builder()
...                                .set_topic("counts")
...                                .set_value_serialization_schema(SimpleStringSchema())
...                                .build())
...         .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
...         .set_transactional_id_prefix("counts-job")
...         .build())
>>> sink.definition.guarantee
'exactly-once'

How the source splits, checkpoints and rescales, and how the sink is exactly once
without resuming a Kafka transaction: ``docs/connectors.md``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Set

from flowray.common.optional_deps import require
from flowray.common.serialization import DeserializationSchema
from flowray.operators.kafka.offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from flowray.operators.kafka.sink import (
    FlinkFixedPartitioner,
    KafkaPartitioner,
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaSinkBase,
    KafkaSinkDefinition,
    KafkaTopicSelector,
)
from flowray.operators.kafka.source import (
    KafkaRecord,
    KafkaRecordDeserializationSchema,
    KafkaSourceDefinition,
    KafkaSourceDefinitionSource,
)

from flowray.datastream.connectors.base import DeliveryGuarantee

__all__ = ["DeliveryGuarantee", "KafkaSource", "KafkaSourceBuilder", "KafkaSink", "KafkaSinkBuilder",
           "KafkaTopicPartition", "KafkaOffsetResetStrategy", "KafkaOffsetsInitializer",
           "KafkaRecordSerializationSchema", "KafkaRecordSerializationSchemaBuilder",
           "KafkaTopicSelector", "KafkaRecordDeserializationSchema", "KafkaRecord",
           "KafkaPartitioner", "FlinkFixedPartitioner"]


def _servers(value: Any, who: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{who}.set_bootstrap_servers: expected 'host:port[,host:port]', got "
                         f"{value!r}")
    return value.strip()


class KafkaSource(KafkaSourceDefinitionSource):
    """A Kafka source; build it with :meth:`builder`. Use with
    ``env.from_source(source, watermark_strategy, "Kafka Source")``."""

    @staticmethod
    def builder() -> "KafkaSourceBuilder":
        return KafkaSourceBuilder()


class KafkaSourceBuilder:
    """PyFlink's ``KafkaSourceBuilder``: bootstrap servers, what to read (topics, a topic
    pattern or partitions), a deserializer, and optionally group id, starting and stopping
    offsets, properties."""

    def __init__(self) -> None:
        self._servers: Optional[str] = None
        self._topics: tuple = ()
        self._pattern: Optional[str] = None
        self._partitions: tuple = ()
        self._group: Optional[str] = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: Optional[KafkaOffsetsInitializer] = None
        self._bounded = False
        self._deserializer: Optional[KafkaRecordDeserializationSchema] = None
        self._props: Dict[str, str] = {}
        self._client_id_prefix: Optional[str] = None

    def build(self) -> KafkaSource:
        require("confluent_kafka", "kafka", "KafkaSource")
        props = dict(self._props)
        servers = self._servers or props.pop("bootstrap.servers", None)
        if not servers:
            raise ValueError("KafkaSource: set_bootstrap_servers(...) is required")
        props.pop("bootstrap.servers", None)
        group = self._group or props.pop("group.id", None)
        props.pop("group.id", None)
        if not (self._topics or self._pattern or self._partitions):
            raise ValueError("KafkaSource: say what to read with set_topics(...), "
                             "set_topic_pattern(...) or set_partitions(...)")
        if self._deserializer is None:
            raise ValueError("KafkaSource: set_value_only_deserializer(...) or "
                             "set_deserializer(...) is required")
        if self._starting.kind == "committed" and not group:
            raise ValueError("KafkaSource: KafkaOffsetsInitializer.committed_offsets() needs "
                             "set_group_id(...)")
        return KafkaSource(KafkaSourceDefinition(
            bootstrap_servers=servers, topics=self._topics, topic_pattern=self._pattern,
            partitions=self._partitions, group_id=group, starting=self._starting,
            stopping=self._stopping, bounded=self._bounded, deserializer=self._deserializer,
            properties=props, client_id_prefix=self._client_id_prefix))

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSourceBuilder":
        self._servers = _servers(bootstrap_servers, "KafkaSourceBuilder")
        return self

    def set_group_id(self, group_id: str) -> "KafkaSourceBuilder":
        if not isinstance(group_id, str) or not group_id:
            raise ValueError(f"set_group_id: expected a non-empty string, got {group_id!r}")
        self._group = group_id
        return self

    def set_topics(self, *topics: str) -> "KafkaSourceBuilder":
        names = tuple(t for ts in topics for t in ([ts] if isinstance(ts, str) else ts))
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ValueError(f"set_topics: expected topic names, got {topics!r}")
        self._topics, self._pattern, self._partitions = names, None, ()
        return self

    def set_topic_pattern(self, topic_pattern: str) -> "KafkaSourceBuilder":
        try:
            re.compile(topic_pattern)
        except (re.error, TypeError) as e:
            raise ValueError(f"set_topic_pattern: {topic_pattern!r} is not a regular "
                             f"expression: {e}") from None
        self._pattern, self._topics, self._partitions = topic_pattern, (), ()
        return self

    def set_partitions(self, partitions: Set[KafkaTopicPartition]) -> "KafkaSourceBuilder":
        parts = tuple(sorted(partitions))
        if not parts or not all(isinstance(p, KafkaTopicPartition) for p in parts):
            raise ValueError(f"set_partitions: expected KafkaTopicPartition s, got "
                             f"{partitions!r}")
        self._partitions, self._topics, self._pattern = parts, (), None
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer
                             ) -> "KafkaSourceBuilder":
        self._starting = _initializer(starting_offsets_initializer, "set_starting_offsets")
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer
                      ) -> "KafkaSourceBuilder":
        self._stopping = _initializer(stopping_offsets_initializer, "set_unbounded")
        self._bounded = False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer
                    ) -> "KafkaSourceBuilder":
        self._stopping = _initializer(stopping_offsets_initializer, "set_bounded")
        self._bounded = True
        return self

    def set_value_only_deserializer(self, deserialization_schema: DeserializationSchema
                                    ) -> "KafkaSourceBuilder":
        self._deserializer = KafkaRecordDeserializationSchema.value_only(
            deserialization_schema)
        return self

    def set_deserializer(self, record_deserializer: KafkaRecordDeserializationSchema
                         ) -> "KafkaSourceBuilder":
        if not isinstance(record_deserializer, KafkaRecordDeserializationSchema):
            raise TypeError(f"set_deserializer: expected a KafkaRecordDeserializationSchema "
                            f"(or use set_value_only_deserializer), got {record_deserializer!r}")
        self._deserializer = record_deserializer
        return self

    def set_client_id_prefix(self, prefix: str) -> "KafkaSourceBuilder":
        self._client_id_prefix = prefix
        return self

    def set_property(self, key: str, value: str) -> "KafkaSourceBuilder":
        self._props[str(key)] = str(value)
        return self

    def set_properties(self, props: Dict) -> "KafkaSourceBuilder":
        for key, value in dict(props).items():
            self.set_property(key, value)
        return self


def _initializer(value: Any, where: str) -> KafkaOffsetsInitializer:
    if not isinstance(value, KafkaOffsetsInitializer):
        raise TypeError(f"{where}: expected a KafkaOffsetsInitializer (e.g. "
                        f"KafkaOffsetsInitializer.earliest()), got {value!r}")
    return value


class KafkaSink(KafkaSinkBase):
    """A Kafka sink; build it with :meth:`builder`. Use with ``stream.sink_to(sink)``."""

    @staticmethod
    def builder() -> "KafkaSinkBuilder":
        return KafkaSinkBuilder()


class KafkaSinkBuilder:
    """PyFlink's ``KafkaSinkBuilder``: bootstrap servers, a record serializer, and
    optionally the delivery guarantee (default NONE), a transactional id prefix (required
    for EXACTLY_ONCE), producer properties."""

    def __init__(self) -> None:
        self._servers: Optional[str] = None
        self._serializer: Optional[KafkaRecordSerializationSchema] = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: Optional[str] = None
        self._props: Dict[str, str] = {}

    def build(self) -> KafkaSink:
        require("confluent_kafka", "kafka", "KafkaSink")
        props = dict(self._props)
        servers = self._servers or props.pop("bootstrap.servers", None)
        props.pop("bootstrap.servers", None)
        if not servers:
            raise ValueError("KafkaSink: set_bootstrap_servers(...) is required")
        if self._serializer is None:
            raise ValueError("KafkaSink: set_record_serializer(...) is required")
        return KafkaSink(KafkaSinkDefinition(servers, self._serializer, self._guarantee.value,
                                             self._prefix, props))

    def set_bootstrap_servers(self, bootstrap_servers: str) -> "KafkaSinkBuilder":
        self._servers = _servers(bootstrap_servers, "KafkaSinkBuilder")
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee
                               ) -> "KafkaSinkBuilder":
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise TypeError(f"set_delivery_guarantee: expected a DeliveryGuarantee, got "
                            f"{delivery_guarantee!r}")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> "KafkaSinkBuilder":
        if not isinstance(transactional_id_prefix, str) or not transactional_id_prefix:
            raise ValueError(f"set_transactional_id_prefix: expected a non-empty string, got "
                             f"{transactional_id_prefix!r}")
        if len(transactional_id_prefix.encode()) > 6400:
            raise ValueError("set_transactional_id_prefix: at most 6400 bytes (as Flink)")
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema
                              ) -> "KafkaSinkBuilder":
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise TypeError(f"set_record_serializer: expected a KafkaRecordSerializationSchema "
                            f"(KafkaRecordSerializationSchema.builder()...build()), got "
                            f"{record_serializer!r}")
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> "KafkaSinkBuilder":
        self._props[str(key)] = str(value)
        return self

