"""Where a Kafka split starts and stops: :class:`KafkaOffsetsInitializer` (Flink's
``OffsetsInitializer``) as a picklable description, resolved by a reader against the
broker when it first sees a partition.

Offsets are "next offset to read": a split reads ``[start, stop)``.

>>> tp = KafkaTopicPartition("orders", 0)
>>> KafkaOffsetsInitializer.offsets({tp: 42}).describe()
'offsets({orders-0: 42}, reset EARLIEST)'
>>> KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST).describe()
'committed_offsets(reset LATEST)'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = ["KafkaTopicPartition", "KafkaOffsetResetStrategy", "KafkaOffsetsInitializer",
           "OffsetLookup", "resolve_offsets", "NoCommittedOffsetError"]


@dataclass(frozen=True, order=True)
class KafkaTopicPartition:
    """A partition of a topic (PyFlink's ``KafkaTopicPartition(topic, partition)``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class KafkaOffsetResetStrategy(enum.Enum):
    """What to do where no committed (or a out-of-range) offset exists, as PyFlink's."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2


class NoCommittedOffsetError(RuntimeError):
    """``committed_offsets()`` with reset strategy NONE found a partition without one."""

    recoverable = False


class KafkaOffsetsInitializer:
    """Initial (or stopping) offsets of partitions: ``earliest()``, ``latest()``,
    ``committed_offsets(reset)``, ``timestamp(ms)``, ``offsets({tp: offset}, reset)``."""

    def __init__(self, kind: str, offsets: Optional[Mapping[KafkaTopicPartition, int]] = None,
                 timestamp_ms: Optional[int] = None,
                 reset: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST) -> None:
        self.kind = kind
        self.specified = dict(offsets or {})
        self.timestamp_ms = timestamp_ms
        self.reset = reset

    @staticmethod
    def committed_offsets(offset_reset_strategy: KafkaOffsetResetStrategy =
                          KafkaOffsetResetStrategy.NONE) -> "KafkaOffsetsInitializer":
        """The consumer group's committed offsets (needs ``set_group_id``); where there is
        none, ``offset_reset_strategy`` (NONE: an error naming the partition)."""
        _check_reset(offset_reset_strategy)
        return KafkaOffsetsInitializer("committed", reset=offset_reset_strategy)

    @staticmethod
    def timestamp(timestamp: int) -> "KafkaOffsetsInitializer":
        """The first offset whose record timestamp is >= ``timestamp`` (ms); the end of the
        partition where there is none."""
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
            raise ValueError(f"KafkaOffsetsInitializer.timestamp: expected a non-negative "
                             f"epoch time in ms, got {timestamp!r}")
        return KafkaOffsetsInitializer("timestamp", timestamp_ms=timestamp)

    @staticmethod
    def earliest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> "KafkaOffsetsInitializer":
        return KafkaOffsetsInitializer("latest")

    @staticmethod
    def offsets(offsets: Dict[KafkaTopicPartition, int],
                offset_reset_strategy: KafkaOffsetResetStrategy =
                KafkaOffsetResetStrategy.EARLIEST) -> "KafkaOffsetsInitializer":
        """The given offset per partition; out of range, or a partition not given: the
        committed offset if there is one, else ``offset_reset_strategy``."""
        _check_reset(offset_reset_strategy)
        for tp, offset in offsets.items():
            if not isinstance(tp, KafkaTopicPartition):
                raise TypeError(f"KafkaOffsetsInitializer.offsets: keys must be "
                                f"KafkaTopicPartition, got {tp!r}")
            if not isinstance(offset, int) or offset < 0:
                raise ValueError(f"KafkaOffsetsInitializer.offsets: offset of {tp} must be a "
                                 f"non-negative int, got {offset!r}")
        return KafkaOffsetsInitializer("specified", offsets=offsets,
                                       reset=offset_reset_strategy)

    def describe(self) -> str:
        if self.kind == "specified":
            shown = ", ".join(f"{tp}: {o}" for tp, o in sorted(self.specified.items()))
            return f"offsets({{{shown}}}, reset {self.reset.name})"
        if self.kind == "committed":
            return f"committed_offsets(reset {self.reset.name})"
        if self.kind == "timestamp":
            return f"timestamp({self.timestamp_ms})"
        return f"{self.kind}()"

    def __repr__(self) -> str:
        return f"KafkaOffsetsInitializer.{self.describe()}"


def _check_reset(strategy: Any) -> None:
    if not isinstance(strategy, KafkaOffsetResetStrategy):
        raise TypeError(f"expected a KafkaOffsetResetStrategy, got {strategy!r}")


@dataclass
class OffsetLookup:
    """What resolving offsets needs from the broker (a consumer's calls, injected so the
    resolution is a pure function): ``watermarks(tp) -> (low, high)``,
    ``committed(tps) -> {tp: offset or None}``, ``for_times(tps, ms) -> {tp: offset or
    None}``."""

    watermarks: Callable[[KafkaTopicPartition], Tuple[int, int]]
    committed: Callable[[List[KafkaTopicPartition]], Dict[KafkaTopicPartition, Optional[int]]]
    for_times: Callable[[List[KafkaTopicPartition], int],
                        Dict[KafkaTopicPartition, Optional[int]]]


def _reset(strategy: KafkaOffsetResetStrategy, tp: KafkaTopicPartition,
           lookup: OffsetLookup, why: str) -> int:
    if strategy is KafkaOffsetResetStrategy.EARLIEST:
        return lookup.watermarks(tp)[0]
    if strategy is KafkaOffsetResetStrategy.LATEST:
        return lookup.watermarks(tp)[1]
    raise NoCommittedOffsetError(
        f"Kafka partition {tp}: {why}, and the offset reset strategy is NONE (use "
        f"KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST) or "
        f"LATEST to start elsewhere)")


def resolve_offsets(initializer: KafkaOffsetsInitializer,
                    partitions: List[KafkaTopicPartition], lookup: OffsetLookup,
                    has_group: bool) -> Dict[KafkaTopicPartition, int]:
    """The concrete offset of each partition under ``initializer``."""
    kind = initializer.kind
    if not partitions:
        return {}
    if kind == "earliest":
        return {tp: lookup.watermarks(tp)[0] for tp in partitions}
    if kind == "latest":
        return {tp: lookup.watermarks(tp)[1] for tp in partitions}
    if kind == "timestamp":
        found = lookup.for_times(partitions, initializer.timestamp_ms or 0)
        return {tp: (found.get(tp) if found.get(tp) is not None
                     else lookup.watermarks(tp)[1]) for tp in partitions}
    committed: Dict[KafkaTopicPartition, Optional[int]] = {}
    if kind == "committed" or (kind == "specified" and has_group):
        if not has_group:
            raise ValueError("KafkaOffsetsInitializer.committed_offsets() needs a consumer "
                             "group: set_group_id(...) on the KafkaSource builder")
        missing = [tp for tp in partitions if tp not in initializer.specified]
        committed = lookup.committed(missing) if missing else {}
    result: Dict[KafkaTopicPartition, int] = {}
    for tp in partitions:
        if kind == "specified" and tp in initializer.specified:
            offset = initializer.specified[tp]
            low, high = lookup.watermarks(tp)
            result[tp] = offset if low <= offset <= high else _reset(
                initializer.reset, tp, lookup, f"offset {offset} is out of range "
                                               f"[{low}, {high}]")
            continue
        offset = committed.get(tp)
        result[tp] = offset if offset is not None else _reset(
            initializer.reset, tp, lookup, "the consumer group has no committed offset")
    return result
