"""PyFlink's remaining ``DataStream`` / ``DataStreamSink`` methods (``partition_custom``,
``rescale``, ``project``, ``set_description``, ``set_uid_hash``, ``slot_sharing_group``...),
mixed into those classes.

>>> from flowray.common import Configuration
>>> from flowray.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> ds = env.from_collection([(1, "a", 2.0), (2, "b", 3.0)])
>>> ds.project(2, 0).execute_and_collect(limit=2)
[(2.0, 1), (3.0, 2)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Union

from flowray.common.compat import not_implemented
from flowray.common.options import check_buffer_timeout
from flowray.runtime.graph.transformations import GraphError
from flowray.runtime.network.custom_partitioner import CustomPartitionerWrapper
from flowray.runtime.network.partitioners import RescalePartitioner

if TYPE_CHECKING:
    from flowray.common.execution_config import ExecutionConfig
    from flowray.datastream.data_stream import DataStream
    from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["DataStreamApiMixin", "DataStreamSinkApiMixin", "slot_sharing_group_name"]


def slot_sharing_group_name(slot_sharing_group: Any) -> str:
    """The group's name (a string, or a ``SlotSharingGroup`` with ``get_name()``)."""
    if isinstance(slot_sharing_group, str) and slot_sharing_group:
        return slot_sharing_group
    get_name = getattr(slot_sharing_group, "get_name", None)
    if callable(get_name):
        return str(get_name())
    raise TypeError(f"slot_sharing_group expects a name or a SlotSharingGroup, got "
                    f"{slot_sharing_group!r}")


class _Partitioner:
    """A plain function ``(key, num_partitions) -> int`` as a ``Partitioner``."""

    def __init__(self, fn: Callable[[Any, int], int]) -> None:
        self.fn = fn

    def partition(self, key: Any, num_partitions: int) -> int:
        return self.fn(key, num_partitions)


class _Project:
    """``project``'s map: the record's fields at ``indexes``, as a tuple."""

    def __init__(self, indexes: tuple) -> None:
        self.indexes = indexes

    def __call__(self, value: Any) -> tuple:
        try:
            return tuple(value[i] for i in self.indexes)
        except (IndexError, TypeError) as e:
            raise ValueError(f"project{self.indexes}: record {value!r} has no such fields "
                             f"({e})") from e


class DataStreamApiMixin:
    """Methods of PyFlink's ``DataStream`` built on flowray's (see the module doc)."""

    _env: "StreamExecutionEnvironment"

    def _no_repartition_of_keyed(self, what: str) -> None:
        if hasattr(self, "_key_selector"):
            raise GraphError(f"cannot override partitioning for KeyedStream ({what})")

    def partition_custom(self, partitioner: Any, key_selector: Any) -> "DataStream":
        """Records go to subtask ``partitioner.partition(key_selector(record), n)`` of the
        next operator (``partitioner``: a ``Partitioner`` or a function ``(key, n)``)."""
        self._no_repartition_of_keyed("partition_custom")
        if not callable(getattr(partitioner, "partition", None)):
            if not callable(partitioner):
                raise TypeError("partition_custom expects a Partitioner or a function "
                                f"(key, num_partitions) -> int, got {partitioner!r}")
            partitioner = _Partitioner(partitioner)
        select = key_selector if callable(key_selector) else getattr(key_selector, "get_key",
                                                                     None)
        if not callable(select):
            raise TypeError(f"partition_custom expects a key selector function or KeySelector, "
                            f"got {key_selector!r}")
        return self._partition(CustomPartitionerWrapper(partitioner, select))  # type: ignore

    def rescale(self) -> "DataStream":
        """Round robin to a share of the next operator's subtasks (Flink's rescale: each
        producer is connected to only some consumers, e.g. 2 -> 4: producer 0 feeds 0 and
        1, producer 1 feeds 2 and 3), so there are fewer channels than with rebalance."""
        self._no_repartition_of_keyed("rescale")
        return self._partition(RescalePartitioner())  # type: ignore[attr-defined]

    def project(self, *field_indexes: int) -> "DataStream":
        """Tuples of the fields at ``field_indexes`` of each (tuple or Row) record."""
        if not field_indexes or not all(isinstance(i, int) for i in field_indexes):
            raise ValueError(f"project expects one or more field indexes, got {field_indexes!r}")
        output_type = None
        in_type = self.get_type()  # type: ignore[attr-defined]
        get_types = getattr(in_type, "get_field_types", None)
        if callable(get_types):
            from flowray.common.typeinfo import Types

            types = get_types()
            try:
                output_type = Types.TUPLE([types[i] for i in field_indexes])
            except IndexError:
                raise ValueError(f"project{field_indexes}: the stream's type {in_type} has "
                                 f"{len(types)} fields") from None
        return self.map(_Project(tuple(field_indexes)), output_type)  # type: ignore

    def set_description(self, description: str) -> "DataStream":
        """A description of this operator, kept with it (Flink shows it in its web UI)."""
        self._physical("a description").description = str(description)  # type: ignore
        return self  # type: ignore[return-value]

    def set_uid_hash(self, uid_hash: str) -> "DataStream":
        """Match this operator's state in checkpoints and savepoints by ``uid_hash``:
        flowray matches state by uid, so this sets the uid (and wins over ``uid(...)``)."""
        if not isinstance(uid_hash, str) or not uid_hash:
            raise ValueError(f"uid hash must be a non-empty string, got {uid_hash!r}")
        t = self._physical("a uid hash")  # type: ignore[attr-defined]
        t.uid = uid_hash
        t.uid_hash = uid_hash
        return self  # type: ignore[return-value]

    def slot_sharing_group(self, slot_sharing_group: Any) -> "DataStream":
        """The operator's slot sharing group (a name, or a ``SlotSharingGroup`` whose
        resources each of its task actors asks Ray for); operators of different groups are
        not chained."""
        name = slot_sharing_group_name(slot_sharing_group)
        if not isinstance(slot_sharing_group, str):
            self._env.register_slot_sharing_group(slot_sharing_group)  # type: ignore
        self._physical("a slot sharing group").slot_sharing_group = name  # type: ignore
        return self  # type: ignore[return-value]

    def force_non_parallel(self) -> "DataStream":
        """Parallelism and max parallelism 1."""
        t = self._physical("parallelism")  # type: ignore[attr-defined]
        t.parallelism = 1
        t.max_parallelism = 1
        return self  # type: ignore[return-value]

    def get_execution_environment(self) -> "StreamExecutionEnvironment":
        return self._env

    def get_execution_config(self) -> "ExecutionConfig":
        return self._env.get_config()  # type: ignore[attr-defined]

    def set_buffer_timeout(self, timeout_millis: int) -> "DataStream":
        """How long this operator's output records may wait in a channel batch before it
        is sent (milliseconds; ``0``: at once, ``-1``: only when full); overrides
        ``env.set_buffer_timeout`` / ``execution.buffer-timeout`` for this operator.

        >>> from flowray.datastream import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> ds = env.from_collection([1, 2]).map(lambda x: x).set_buffer_timeout(5)
        """
        self._physical("a buffer timeout").buffer_timeout_ms = (  # type: ignore
            check_buffer_timeout(timeout_millis))
        return self  # type: ignore[return-value]
    cache = not_implemented(
        "DataStream.cache",
        "write the stream to a file sink (FileSink) and read it back with FileSource in "
        "the next job")


class DataStreamSinkApiMixin:
    """Methods of PyFlink's ``DataStreamSink`` that flowray delegates to its stream."""

    _ds: Any

    def set_description(self, description: str) -> Any:
        self._ds.set_description(description)
        return self

    def set_uid_hash(self, uid_hash: str) -> Any:
        self._ds.set_uid_hash(uid_hash)
        return self

    def slot_sharing_group(self, slot_sharing_group: Union[str, Any]) -> Any:
        self._ds.slot_sharing_group(slot_sharing_group)
        return self
