"""Who replays which records in flight after a restore from an unaligned checkpoint
(pure; docs/internals/unaligned-checkpoints.md, "Restore" and "Rescale").

Every channel's records in flight were between the producers' operators and the
consumers' operators, so the consumers replay them before any live input. Per old
channel the order is the consumer's input side, then the producer's output side. At the
old parallelism each channel goes to its old consumer. After a rescale:
- a keyed exchange gives each new consumer every old channel whose old key groups overlap
  its own, and the consumer keeps only the records of its key groups;
- any other exchange deals the old channels round-robin.

>>> from flowray.state.snapshot import InFlightData, TaskStateSnapshot
>>> name = ("src", "sum", 0)
>>> old = [TaskStateSnapshot(in_flight=[InFlightData(name, 0, 1, INPUT_SIDE, [b"a"])]),
...        TaskStateSnapshot(in_flight=[InFlightData(name, 0, 1, OUTPUT_SIDE, [b"b"])])]
>>> ex = Exchange(name, "v2", consumer_parallelism=2, old_consumer_parallelism=2,
...               max_parallelism=128, keyed=True)
>>> got = assign_in_flight(old, [ex])
>>> [(key, r.input_index, r.frames, r.key_groups) for key, [r] in got.items()]
[('v2:1', 0, [b'a', b'b'], None)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from flowray.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from flowray.state.snapshot import INPUT_SIDE, OUTPUT_SIDE, TaskStateSnapshot

__all__ = ["Exchange", "RecoveredInput", "assign_in_flight", "ChannelStateAssignmentError",
           "INPUT_SIDE", "OUTPUT_SIDE"]

ExchangeName = Tuple[str, str, int]


class ChannelStateAssignmentError(ValueError):
    """Records in flight at the checkpoint have nowhere to go in the restored job."""


@dataclass(frozen=True)
class Exchange:
    """An exchange of the job being restored, as channel state needs it: its stable
    ``name`` (see :class:`~flowray.state.snapshot.InFlightData`), the consumer vertex and
    its parallelism now and in the checkpoint, the consumer's max parallelism, whether
    records carry key groups, and which input of the consumer it is."""

    name: ExchangeName
    consumer_vertex: str
    consumer_parallelism: int
    old_consumer_parallelism: int
    max_parallelism: int
    keyed: bool

    @property
    def input_index(self) -> int:
        return self.name[2]


@dataclass
class RecoveredInput:
    """Encoded record frames one new subtask replays into input ``input_index`` before
    its live input; ``key_groups``: keep only records of these (after a rescale of a
    keyed exchange), ``None``: all. ``exchange`` and ``producer``: the old channel's
    (a checkpoint taken before they are all replayed files the rest under them)."""

    input_index: int
    frames: List[bytes]
    key_groups: Optional[KeyGroupRange] = None
    exchange: Optional[ExchangeName] = None
    producer: int = 0


def _channels(snapshots: Iterable[TaskStateSnapshot]
              ) -> Dict[ExchangeName, Dict[Tuple[int, int], List[bytes]]]:
    """Exchange -> (producer, consumer) -> frames: input side first, then output side."""
    sides: Dict[ExchangeName, Dict[Tuple[int, int], Dict[str, List[bytes]]]] = {}
    for snap in snapshots:
        for d in getattr(snap, "in_flight", ()) or ():
            if d.side not in (INPUT_SIDE, OUTPUT_SIDE):
                raise ValueError(f"in-flight data of {d.exchange} has side {d.side!r}")
            channel = sides.setdefault(tuple(d.exchange), {}).setdefault(
                (d.producer, d.consumer), {})
            channel.setdefault(d.side, []).extend(d.frames)
    return {name: {ch: s.get(INPUT_SIDE, []) + s.get(OUTPUT_SIDE, [])
                   for ch, s in chans.items()}
            for name, chans in sides.items()}


def assign_in_flight(snapshots: Iterable[TaskStateSnapshot], exchanges: Iterable[Exchange],
                     allow_non_restored_state: bool = False
                     ) -> Dict[str, List[RecoveredInput]]:
    """New subtask key (``"<vertex>:<index>"``) -> what it replays, in order. Records of
    an exchange the job no longer has raise :class:`ChannelStateAssignmentError`, unless
    ``allow_non_restored_state`` (they are dropped then)."""
    by_name = {e.name: e for e in exchanges}
    out: Dict[str, List[RecoveredInput]] = {}
    for name, channels in sorted(_channels(snapshots).items()):
        channels = {ch: frames for ch, frames in channels.items() if frames}
        if not channels:
            continue
        ex = by_name.get(name)
        if ex is None:
            if allow_non_restored_state:
                continue
            raise ChannelStateAssignmentError(
                f"the checkpoint holds records in flight from {name[0]!r} to input "
                f"{name[2]} of {name[1]!r}, an exchange the job no longer has; restore "
                "with the same exchange, or set execution.savepoint.ignore-unclaimed-state: "
                "true to drop them")
        for index, recovered in _for_consumers(ex, channels):
            out.setdefault(f"{ex.consumer_vertex}:{index}", []).append(recovered)
    return out


def _for_consumers(ex: Exchange, channels: Dict[Tuple[int, int], List[bytes]]
                   ) -> List[Tuple[int, RecoveredInput]]:
    ordered = sorted(channels.items(), key=lambda item: (item[0][1], item[0][0]))
    n = ex.consumer_parallelism
    if n == ex.old_consumer_parallelism:   # each channel to its consumer, untouched
        return [(consumer, RecoveredInput(ex.input_index, frames, None, ex.name, producer))
                for (producer, consumer), frames in ordered]
    if not ex.keyed:   # round-robin over the new consumers
        return [(i % n, RecoveredInput(ex.input_index, frames, None, ex.name, producer))
                for i, ((producer, _), frames) in enumerate(ordered)]
    out = []
    for new in range(n):
        mine = compute_key_group_range_for_operator_index(ex.max_parallelism, n, new)
        for (producer, old), frames in ordered:
            theirs = compute_key_group_range_for_operator_index(
                ex.max_parallelism, ex.old_consumer_parallelism, old)
            if len(mine.intersection(theirs)):
                out.append((new, RecoveredInput(ex.input_index, frames, mine, ex.name,
                                                producer)))
    return out
