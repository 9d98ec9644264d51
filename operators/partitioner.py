"""PyFlink's ``Partitioner``: picks the downstream subtask of each record from its key
(``DataStream.partition_custom``)."""

from __future__ import annotations

import abc
from typing import Any

from flowray.operators.functions import Function

__all__ = ["Partitioner"]


class Partitioner(Function):
    """``partition(key, num_partitions)`` returns the index, in ``[0, num_partitions)``,
    of the subtask that gets records with ``key``. Must be picklable."""

    @abc.abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int: ...
