"""Restoring one task's state at start (Flink's ``StreamTaskStateInitializer``): where
checkpoint files are read from, the keyed backend's restore, and each operator's list
states, redistributed after a rescale.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from flowray.operators.base import StateInitializationContext, StreamOperator
from flowray.runtime.checkpoint.state_assignment import OperatorRestore, TaskRestore
from flowray.runtime.checkpoint.storage import file_reader
from flowray.state.checksums import ChecksumRecorder, verifying_reader
from flowray.state.keyed_backend import KeyedStateBackend
from flowray.state.operator_state import OperatorStateStore, redistribute_operator_state

__all__ = ["checkpoint_reader", "restore_keyed_state", "initialize_operator_state"]


def _no_storage(path: str) -> bytes:
    raise FileNotFoundError(f"{path}: no checkpoint storage configured to read it from")


def checkpoint_reader(storage: Any, restore: Optional[TaskRestore]
                      ) -> Tuple[Callable[[str], bytes], ChecksumRecorder]:
    """How the task reads checkpoint files (the restored checkpoint's location, or the
    job's storage), and the checksums its own checkpoints record. Every file read back
    for a restore is checked against the size and CRC-32 recorded for it; a claimed
    restore's checksums are known to later checkpoints that build on its files."""
    checksums = ChecksumRecorder()
    read: Callable[[str], bytes] = storage.read_file if storage is not None else _no_storage
    if restore is not None:
        if restore.location is not None:
            read = file_reader(restore.location)
        read = verifying_reader(read, restore.file_checksums)
        if restore.claimed:
            checksums.learn(restore.file_checksums)
    return read, checksums


def restore_keyed_state(backend: Optional[KeyedStateBackend], restore: Optional[TaskRestore],
                        read: Callable[[str], bytes]) -> None:
    """Load the restored checkpoint's keyed state handles into ``backend`` (if any)."""
    if backend is None or restore is None:
        return
    handles = restore.keyed_handles()
    if handles:
        backend.restore(handles, read, claimed=restore.claimed)


def initialize_operator_state(operators: List[StreamOperator], restore: Optional[TaskRestore],
                              backend: Optional[KeyedStateBackend],
                              read: Callable[[str], bytes], parallelism: int,
                              subtask_index: int) -> Dict[str, OperatorStateStore]:
    """Give each operator its list states (restored, or empty) and the keyed backend;
    the stores by operator uid."""
    stores: Dict[str, OperatorStateStore] = {}
    for op in operators:
        op_restore = restore.operators.get(op.uid) if restore is not None else None
        store = (OperatorStateStore.restore(
                     restored_operator_state(op_restore, read, parallelism, subtask_index))
                 if op_restore is not None else OperatorStateStore())
        stores[op.uid] = store
        op.initialize_state(StateInitializationContext(
            store, backend, restore.checkpoint_id if op_restore is not None else None))
    return stores


def restored_operator_state(op_restore: OperatorRestore, read: Callable[[str], bytes],
                            parallelism: int, subtask_index: int) -> Dict[str, Any]:
    """This subtask's share of one operator's list states: its own after a restore at
    the same parallelism, an even split after a rescale, and the union state of every
    old subtask either way (Flink's round-robin redistribution,
    :func:`redistribute_operator_state`)."""
    previous = [s.load_operator_state(read) if s is not None else None
                for s in op_restore.operator_states]
    return redistribute_operator_state(previous, parallelism)[subtask_index]
