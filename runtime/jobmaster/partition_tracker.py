"""Blocking result partitions from the job master's side (Flink's partition tracker): which
partitions exist and which channel belongs to which, whether one can be read or is lost,
and when one is released: once every consumer *region* has finished (a task of a consumer
region may still restart and read it again), again after its producer ran anew, and all of
them when the job ends. The files themselves are a
:class:`~flowray.runtime.network.blocking_partition.BlockingPartitionStore`'s; the
tracker asks the store and tells it what to release."""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Set

from flowray.runtime.graph.execution_graph import ResultPartitionSpec, SubtaskId
from flowray.runtime.jobmaster.topology import SubtaskTopology
from flowray.runtime.network.blocking_partition import BlockingPartitionStore

__all__ = ["PartitionTracker"]


class PartitionTracker:
    """``store`` is ``None`` when the job has no blocking exchange (or nowhere to put one):
    then no partition is ever available."""

    def __init__(self, partitions: Iterable[ResultPartitionSpec], topology: SubtaskTopology,
                 regions: Iterable[FrozenSet[SubtaskId]],
                 store: Optional[BlockingPartitionStore]) -> None:
        self.partitions: Dict[str, ResultPartitionSpec] = {p.partition_id: p
                                                           for p in partitions}
        self.topology = topology
        self.store = store
        self._released: Set[str] = set()
        self._partition_of_channel: Dict[str, str] = {
            c: p.partition_id for p in self.partitions.values() for c in p.channel_ids}
        self._region_of: Dict[SubtaskId, FrozenSet[SubtaskId]] = {
            s: region for region in regions for s in region}

    @property
    def has_blocking(self) -> bool:
        return any(p.blocking for p in self.partitions.values())

    def partition_of_channel(self, channel_id: Optional[str]) -> Optional[str]:
        return self._partition_of_channel.get(channel_id or "")

    def inputs_of(self, region: FrozenSet[SubtaskId]) -> Set[str]:
        """The partitions a region reads that are produced outside it."""
        return {pid for s in region for pid in self.topology.consumed_partitions(s)
                if self.partitions[pid].producer not in region}

    def is_available(self, partition_id: str, producer_done: bool) -> bool:
        """Readable: blocking, its producer finished in its latest attempt and is not about
        to run again (``producer_done``), and its files are there."""
        p = self.partitions[partition_id]
        return (p.blocking and producer_done and self.store is not None
                and self.store.is_partition_available(p.channel_ids))

    def is_lost(self, partition_id: str, producer_done: bool) -> bool:
        """Its producer finished but its files are gone: it must be produced again."""
        p = self.partitions[partition_id]
        return (p.blocking and producer_done and self.store is not None
                and not self.store.is_partition_available(p.channel_ids))

    def producer_deployed(self, subtask: SubtaskId) -> None:
        """A producer runs (again): what it writes anew is released again later."""
        self._released.difference_update(self.topology.produced_partitions(subtask))

    def release_consumed(self, subtask: SubtaskId,
                         finished: Callable[[SubtaskId], bool]) -> List[str]:
        """``subtask`` finished: if its whole region has, release each blocking partition
        the region consumes whose consumer regions have all finished. Returns the released
        partition ids."""
        if self.store is None or not self._region_finished(subtask, finished):
            return []
        consumed = {pid for s in self._region_of[subtask]
                    for pid in self.topology.consumed_partitions(s)}
        released = []
        for pid in sorted(consumed):
            p = self.partitions[pid]
            if p.blocking and pid not in self._released and all(
                    self._region_finished(c, finished) for c in p.consumers):
                self.store.release(p.channel_ids)
                self._released.add(pid)
                released.append(pid)
        return released

    def release_all(self) -> None:
        if self.store is not None:
            self.store.release_all()

    def _region_finished(self, subtask: SubtaskId,
                         finished: Callable[[SubtaskId], bool]) -> bool:
        return all(finished(s) for s in self._region_of[subtask])
