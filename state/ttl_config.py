"""State time-to-live configuration, as ``pyflink.datastream.state.StateTtlConfig``.

>>> from flowray.common.time import Time
>>> config = (StateTtlConfig.new_builder(Time.seconds(1))
...           .update_ttl_on_read_and_write().cleanup_full_snapshot().build())
>>> config.get_ttl_ms(), config.get_update_type().name, config.is_enabled()
(1000, 'OnReadAndWrite', True)
>>> config.get_cleanup_strategies().in_full_snapshot()
True

Semantics and storage: docs/state.md ("State time-to-live").
"""

from __future__ import annotations

from abc import ABC
from enum import Enum
from typing import Any, Dict, Optional

from flowray.common.time import Duration

__all__ = ["StateTtlConfig"]


def _ttl_ms(ttl: Any, what: str = "ttl") -> int:
    to_ms = getattr(ttl, "to_milliseconds", None)
    if not callable(to_ms):
        raise TypeError(f"StateTtlConfig: {what} must be a Time or a Duration, got {ttl!r}")
    ms = int(to_ms())
    if ms <= 0:
        raise ValueError(f"StateTtlConfig: {what} must be positive, got {ttl!r}")
    return ms


class StateTtlConfig:
    """Configuration of state TTL: how long a value lives after its last access
    (``ttl``), which accesses refresh it (``update_type``), whether an expired value not
    yet cleaned up may be returned (``state_visibility``) and how expired values are
    cleaned up in the background (``cleanup_strategies``). Build with
    :meth:`new_builder`."""

    class UpdateType(Enum):
        """When the last-access timestamp is refreshed."""

        #: TTL is disabled: state does not expire
        Disabled = 0
        #: set on create and on every write
        OnCreateAndWrite = 1
        #: as OnCreateAndWrite, and on every read
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        """Whether an expired value that is not cleaned up yet may be returned."""

        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time scale of TTL (only processing time)."""

        ProcessingTime = 0

    def __init__(self, update_type: "StateTtlConfig.UpdateType",
                 state_visibility: "StateTtlConfig.StateVisibility",
                 ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic",
                 ttl: Any, cleanup_strategies: "StateTtlConfig.CleanupStrategies") -> None:
        if not isinstance(update_type, StateTtlConfig.UpdateType):
            raise TypeError(f"StateTtlConfig: update_type must be a StateTtlConfig.UpdateType, "
                            f"got {update_type!r}")
        if not isinstance(state_visibility, StateTtlConfig.StateVisibility):
            raise TypeError("StateTtlConfig: state_visibility must be a "
                            f"StateTtlConfig.StateVisibility, got {state_visibility!r}")
        if not isinstance(ttl_time_characteristic, StateTtlConfig.TtlTimeCharacteristic):
            raise TypeError("StateTtlConfig: ttl_time_characteristic must be a "
                            f"StateTtlConfig.TtlTimeCharacteristic, got {ttl_time_characteristic!r}")
        self._ttl_ms = _ttl_ms(ttl)
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Any) -> "StateTtlConfig.Builder":
        """A builder for a config of ``ttl`` (a ``Time`` or ``Duration``, positive)."""
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self._state_visibility

    def get_ttl(self) -> Any:
        """The ttl as given (``Time`` or ``Duration``)."""
        return self._ttl

    def get_ttl_ms(self) -> int:
        """The ttl in milliseconds."""
        return self._ttl_ms

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self._cleanup_strategies

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, StateTtlConfig) and self._ttl_ms == other._ttl_ms
                and self._update_type is other._update_type
                and self._state_visibility is other._state_visibility
                and self._cleanup_strategies == other._cleanup_strategies)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"StateTtlConfig<update_type={self._update_type}, state_visibility="
                f"{self._state_visibility}, ttl_time_characteristic="
                f"{self._ttl_time_characteristic}, ttl={self._ttl}>")

    class Builder:
        """Builds a :class:`StateTtlConfig`; defaults: OnCreateAndWrite, NeverReturnExpired,
        processing time, cleanup in background."""

        def __init__(self, ttl: Any) -> None:
            _ttl_ms(ttl)
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: Dict[Any, Any] = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType"
                            ) -> "StateTtlConfig.Builder":
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility"
                                 ) -> "StateTtlConfig.Builder":
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(
                StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
                self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic"
        ) -> "StateTtlConfig.Builder":
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(
                StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            """Leave expired values out of full snapshots: the heap backend's checkpoints
            and every savepoint (not RocksDB's checkpoints, which hold its files as they
            are)."""
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] \
                = StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record: bool
                                  ) -> "StateTtlConfig.Builder":
            """Heap backend: on every access of the state check ``cleanup_size`` more
            entries (of any key) and remove the expired ones; with
            ``run_cleanup_for_every_record`` also for every record processed. No effect on
            RocksDB (as in Flink)."""
            if not isinstance(cleanup_size, int) or cleanup_size <= 0:
                raise ValueError(f"cleanup_incrementally: cleanup_size must be a positive int, "
                                 f"got {cleanup_size!r}")
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = \
                StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(
                    cleanup_size, bool(run_cleanup_for_every_record))
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int,
                                              periodic_compaction_time: Optional[Duration] = None
                                              ) -> "StateTtlConfig.Builder":
            """RocksDB backend: clean up expired values in the background. rocksdict has no
            compaction filters; flowray sweeps instead: after every
            ``query_time_after_num_entries`` writes to the state it checks that many more
            entries (docs/state.md). ``periodic_compaction_time`` is kept for API
            compatibility. No effect on the heap backend."""
            if not isinstance(query_time_after_num_entries, int) or \
                    query_time_after_num_entries <= 0:
                raise ValueError("cleanup_in_rocksdb_compact_filter: query_time_after_num_entries "
                                 f"must be a positive int, got {query_time_after_num_entries!r}")
            self._strategies[
                StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = \
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(
                    query_time_after_num_entries, periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            """No default background cleanup (explicitly configured strategies stay)."""
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> "StateTtlConfig.Builder":
            _ttl_ms(ttl)
            self._ttl = ttl
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(
                self._update_type, self._state_visibility, self._ttl_time_characteristic,
                self._ttl,
                StateTtlConfig.CleanupStrategies(dict(self._strategies),
                                                 self._is_cleanup_in_background))

    class CleanupStrategies:
        """The configured cleanup strategies. Expired values are always cleaned up when
        read."""

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy(ABC):
            """Base of cleanup strategy configurations."""

            def __eq__(self, other: object) -> bool:
                return type(self) is type(other) and vars(self) == vars(other)

            __hash__ = None  # type: ignore[assignment]

        class EmptyCleanupStrategy(CleanupStrategy):
            pass

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            def __init__(self, query_time_after_num_entries: int,
                         periodic_compaction_time: Optional[Duration] = None) -> None:
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = (periodic_compaction_time
                                                  if periodic_compaction_time
                                                  else Duration.of_days(30))

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Duration:
                return self._periodic_compaction_time

        EMPTY_STRATEGY: "StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy"

        def __init__(self, strategies: Dict[Any, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = strategies
            self._is_cleanup_in_background = is_cleanup_in_background

        def __eq__(self, other: object) -> bool:
            return (isinstance(other, StateTtlConfig.CleanupStrategies)
                    and self._strategies == other._strategies
                    and self._is_cleanup_in_background == other._is_cleanup_in_background)

        __hash__ = None  # type: ignore[assignment]

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return (StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT
                    in self._strategies)

        def get_incremental_cleanup_strategy(
                self) -> Optional["StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy"]:
            """The configured one; else, with cleanup in background, the default (5 entries,
            not per record); else ``None``."""
            default = (StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(5, False)
                       if self._is_cleanup_in_background else None)
            return self._strategies.get(
                StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(
                self
        ) -> Optional["StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy"]:
            """The configured one; else, with cleanup in background, the default (1000
            entries); else ``None``."""
            default = (StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(1000)
                       if self._is_cleanup_in_background else None)
            return self._strategies.get(
                StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER, default)


StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = \
    StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()
