"""``partition_custom``: a user :class:`~flowray.operators.partitioner.Partitioner` picks
each record's channel from its key."""

from __future__ import annotations

from typing import Any, Callable

from flowray.runtime.network.partitioners import StreamPartitioner

__all__ = ["CustomPartitionerWrapper", "PartitionerError"]


class PartitionerError(Exception):
    """The user's partitioner or key selector raised, or returned no valid channel."""


class CustomPartitionerWrapper(StreamPartitioner):
    """Channel ``partitioner.partition(key_selector(record), num_channels)``.

    >>> class Mod:
    ...     def partition(self, key, n): return key % n
    >>> p = CustomPartitionerWrapper(Mod(), lambda r: r)
    >>> p.setup(2, 0); out = [[], []]
    >>> p.route([1, 2, 3], out, None); out
    [[2], [1, 3]]
    """

    name = "CUSTOM"

    def __init__(self, partitioner: Any, key_selector: Callable[[Any], Any]) -> None:
        self.partitioner = partitioner
        self.key_selector = key_selector

    def route(self, records, out, out_kgs, timestamps=None, out_ts=None):
        n, key_of, part = self.n, self.key_selector, self.partitioner.partition
        for i, r in enumerate(records):
            try:
                c = part(key_of(r), n)
            except Exception as e:
                raise PartitionerError(
                    f"partition_custom: {type(e).__name__}: {e} (record {r!r})") from e
            if not isinstance(c, int) or not 0 <= c < n:
                raise PartitionerError(
                    f"partition_custom: {type(self.partitioner).__name__}.partition returned "
                    f"{c!r} for record {r!r}; expected an int in [0, {n})")
            out[c].append(r)
            if timestamps is not None:
                out_ts[c].append(timestamps[i])
