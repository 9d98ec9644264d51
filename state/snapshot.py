"""What a checkpoint holds for one subtask: handles to keyed state, operator state, flags.

The task builds a :class:`TaskStateSnapshot` in its synchronous part (operator state is
serialized right away, so later changes cannot leak into it) and completes the keyed part
in its asynchronous part (a file in checkpoint storage, referenced by a
:class:`KeyedStateHandle`). The job master keeps snapshots opaque: it never unpickles user
objects, so redistribution works on serialized elements.

>>> entry = OperatorStateEntry(SPLIT_DISTRIBUTE, [b"a", b"b"])
>>> snap = TaskStateSnapshot({"src": OperatorSubtaskState({"positions": entry})})
>>> snap.state_size()
2
"""

from __future__ import annotations

import pickle
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from flowray.state.key_groups import KeyGroupRange

__all__ = [
    "SPLIT_DISTRIBUTE",
    "UNION",
    "BROADCAST",
    "OperatorStateEntry",
    "KeyedStateHandle",
    "IncrementalKeyedStateHandle",
    "OperatorSubtaskState",
    "OperatorStateHandle",
    "TaskStateSnapshot",
    "InFlightData",
    "INPUT_SIDE",
    "OUTPUT_SIDE",
    "shared_file_name",
    "checkpoint_of_shared_file",
]

SPLIT_DISTRIBUTE = "SPLIT_DISTRIBUTE"  # each element goes to one subtask on rescale
UNION = "UNION"                        # every subtask gets all elements on restore
BROADCAST = "BROADCAST"                # a map every subtask holds a copy of; (key, value) items


@dataclass
class OperatorStateEntry:
    """One named operator list state: its redistribution mode and serialized elements."""

    mode: str
    items: List[bytes] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(i) for i in self.items)


@dataclass
class KeyedStateHandle:
    """A file in checkpoint storage holding the keyed state of ``key_group_range``.
    ``local_copy_id``: names the copy of this state the task kept on its node for
    task-local recovery (:mod:`flowray.state.rocksdb.local_recovery`); empty: none."""

    path: str
    key_group_range: KeyGroupRange
    size: int
    local_copy_id: str = ""


@dataclass
class IncrementalKeyedStateHandle(KeyedStateHandle):
    """An incremental RocksDB checkpoint of ``key_group_range`` (Flink's
    ``IncrementalRemoteKeyedStateHandle``): the files of a RocksDB checkpoint directory.

    ``shared``: SST file name -> path in checkpoint storage, outside any ``chk-<n>`` folder
    (``<job root>/shared/...``); such a file may be referenced by many checkpoints (the
    JobMaster's ``SharedStateRegistry`` counts references, keyed by
    ``shared_state_key(operator_uid, subtask_index, sst_name)``). ``private``: every other
    file (``MANIFEST-*``, ``CURRENT``, ``OPTIONS-*``, ...) -> its path under
    ``path`` (``<chk-n>/<vertex>-<i>.keyed.private/<name>``), uploaded each time and deleted
    with the ``chk-<n>`` folder. ``state_kinds``: state name -> ``StateKind`` value (the
    column families). ``file_sizes``: remote path -> size, for every shared and private file.
    ``size``: bytes uploaded by this checkpoint; ``full_size``: bytes of all its files.
    ``db_uid``: identifies the database lineage the SST names belong to (a restored
    database keeps it; a fresh or rescaled one gets a new one).
    """

    checkpoint_id: int = -1
    shared: Dict[str, str] = field(default_factory=dict)
    private: Dict[str, str] = field(default_factory=dict)
    state_kinds: Dict[str, str] = field(default_factory=dict)
    full_size: int = 0
    file_sizes: Dict[str, int] = field(default_factory=dict)
    db_uid: str = ""


@dataclass
class OperatorStateHandle:
    """A file in checkpoint storage holding one operator's list states in one subtask
    (written when they exceed ``state.storage.fs.memory-threshold``)."""

    path: str
    size: int


@dataclass
class OperatorSubtaskState:
    """State of one operator in one subtask. Its list states are either inline
    (``operator_state``) or in a file (``operator_state_file``), never both."""

    operator_state: Dict[str, OperatorStateEntry] = field(default_factory=dict)
    keyed: Optional[KeyedStateHandle] = None
    operator_state_file: Optional[OperatorStateHandle] = None

    def size(self) -> int:
        keyed = self.keyed.size if self.keyed is not None else 0
        inline = sum(e.size() for e in self.operator_state.values())
        in_file = self.operator_state_file.size if self.operator_state_file else 0
        return keyed + inline + in_file

    def offload_operator_state(self, threshold: int,
                               write: Callable[[str, bytes], int], path: str) -> bool:
        """Move the list states to a file at ``path`` if they exceed ``threshold`` bytes;
        True if they were moved."""
        if not self.operator_state or \
                sum(e.size() for e in self.operator_state.values()) <= threshold:
            return False
        data = pickle.dumps(self.operator_state, protocol=5)
        self.operator_state_file = OperatorStateHandle(path, write(path, data))
        self.operator_state = {}
        return True

    def load_operator_state(self, read: Callable[[str], bytes]
                            ) -> Dict[str, OperatorStateEntry]:
        """The list states, read from their file if they were written to one."""
        if self.operator_state_file is None:
            return self.operator_state
        path = self.operator_state_file.path
        try:
            return pickle.loads(read(path))
        except Exception as e:
            raise ValueError(f"{path}: cannot read operator state: "
                             f"{type(e).__name__}: {e}") from e


INPUT_SIDE = "input"    # in flight to the consumer, arrived before its barrier
OUTPUT_SIDE = "output"  # still queued at the producer, overtaken by its barrier


@dataclass
class InFlightData:
    """Records in flight on one channel at an unaligned checkpoint (channel state;
    docs/internals/unaligned-checkpoints.md), as encoded record frames, oldest first.

    ``exchange``: the exchange's stable name, ``(producer vertex's first operator uid,
    consumer vertex's first operator uid, consumer input index)``, so a rebuilt graph
    finds it. ``producer``/``consumer``: the channel's old subtask indexes. ``side``:
    :data:`INPUT_SIDE` (kept by the consumer) or :data:`OUTPUT_SIDE` (by the producer)."""

    exchange: Tuple[str, str, int]
    producer: int
    consumer: int
    side: str
    frames: List[bytes] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(f) for f in self.frames)


@dataclass
class TaskStateSnapshot:
    """State of every operator of one subtask, keyed by operator uid.

    ``finished``: the subtask had finished when the checkpoint was taken; restored, it
    emits nothing and ends at once. ``input_ended``: the snapshot was taken after the
    subtask's input ended (the final checkpoint); ``drained``: its operators finished
    then (False after a stop-with-savepoint without drain: a restore runs them on).
    ``file_checksums``: path -> (size, CRC-32) of every file the snapshot needs, checked
    on restore (:mod:`flowray.state.checksums`). ``in_flight``: the channel state of an
    unaligned checkpoint.
    """

    operators: Dict[str, OperatorSubtaskState] = field(default_factory=dict)
    finished: bool = False
    input_ended: bool = False
    drained: bool = True
    file_checksums: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    #: channel state of an unaligned checkpoint (empty for an aligned one)
    in_flight: List[InFlightData] = field(default_factory=list)

    @staticmethod
    def finished_task() -> "TaskStateSnapshot":
        return TaskStateSnapshot({}, finished=True)

    def state_size(self) -> int:
        # (a snapshot pickled before channel state existed has no in_flight)
        return sum(o.size() for o in self.operators.values()) + \
            sum(d.size() for d in getattr(self, "in_flight", ()))


_SHARED_CHECKPOINT = re.compile(r"-c(\d+)-[0-9a-f]{8}$")


def shared_file_name(stem: str, file_name: str, checkpoint_id: int) -> str:
    """A fresh unique name in the job's ``shared`` folder for ``file_name`` of the
    subtask ``stem``, uploaded for ``checkpoint_id``: the id is in the name, so a sweep
    can tell whose upload an unreferenced file was.

    >>> name = shared_file_name("v2-0", "000012.sst", 7)
    >>> name.startswith("v2-0-000012.sst-c7-"), checkpoint_of_shared_file("shared/" + name)
    (True, 7)
    >>> checkpoint_of_shared_file("shared/v2-0-000012.sst-1a2b3c4d") is None  # older name
    True
    """
    return f"{stem}-{file_name}-c{int(checkpoint_id)}-{uuid.uuid4().hex[:8]}"


def checkpoint_of_shared_file(path: str) -> Optional[int]:
    """The checkpoint a shared file was uploaded for (``None``: a name without it)."""
    m = _SHARED_CHECKPOINT.search(path)
    return int(m.group(1)) if m else None
