"""Choosing a keyed state backend from configuration (``state.backend.type``), and the
PyFlink-shaped backend objects for ``env.set_state_backend(...)``.

>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = create_keyed_backend({}, KeyGroupRange(0, 127), 128, "job", "v1:0", 0)
>>> type(backend).__name__
'HeapKeyedStateBackend'
>>> EmbeddedRocksDBStateBackend(True).to_config()
{'state.backend.type': 'rocksdb', 'execution.checkpointing.incremental': True}
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Mapping, Optional

from flowray.common.compat import not_implemented
from flowray.state.keyed_backend import KeyedStateBackend
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange

__all__ = ["create_keyed_backend", "discard_local_state", "local_state_root", "StateBackend",
           "HashMapStateBackend", "EmbeddedRocksDBStateBackend"]


def create_keyed_backend(config: Mapping[str, Any], key_group_range: KeyGroupRange,
                         max_parallelism: int, job_id: str, subtask_key: str,
                         attempt: int) -> KeyedStateBackend:
    """The keyed backend ``config`` names for one subtask; RocksDB gets a working folder
    of its own (``<localdir>/flowray-rocksdb/<job>/<subtask>-<attempt>``; without a
    localdir, ``<tmp>/flowray-<uid>/rocksdb/<job>/...``, private to the user), and with
    task-local recovery on, a :class:`TaskLocalStateStore` under :func:`local_state_root`."""
    from flowray.common.options import (
        LOCAL_RECOVERY,
        ROCKSDB_INCREMENTAL,
        ROCKSDB_VALUE_CACHE_ENTRIES,
        STATE_BACKEND_TYPE,
    )
    from flowray.common.configuration import Configuration
    conf = Configuration(dict(config))
    if conf.get(STATE_BACKEND_TYPE) == "hashmap":
        return HeapKeyedStateBackend(key_group_range, max_parallelism)
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
    safe = subtask_key.replace(":", "-").replace("/", "_")
    job_dir = _rocksdb_job_dir(conf, job_id)
    _remove_earlier_attempts(job_dir, safe, attempt)
    working_dir = os.path.join(job_dir, f"{safe}-{attempt}")
    local_store = None
    if conf.get(LOCAL_RECOVERY):
        from flowray.state.rocksdb.local_recovery import TaskLocalStateStore
        local_store = TaskLocalStateStore(os.path.join(local_state_root(job_dir), safe))
    return RocksDBKeyedStateBackend(key_group_range, max_parallelism, working_dir,
                                    incremental=conf.get(ROCKSDB_INCREMENTAL),
                                    value_cache_entries=conf.get(ROCKSDB_VALUE_CACHE_ENTRIES),
                                    local_store=local_store)


def _rocksdb_job_dir(conf: Any, job_id: str) -> str:
    from flowray.common.files import user_temp_dir
    from flowray.common.options import ROCKSDB_LOCAL_DIR
    local_dir = conf.get(ROCKSDB_LOCAL_DIR)
    root = (os.path.join(local_dir, "flowray-rocksdb") if local_dir
            else user_temp_dir("rocksdb"))
    return os.path.join(root, job_id)


def local_state_root(job_dir: str) -> str:
    """Where a job's task-local recovery copies live on a node: beside its RocksDB working
    folders (``<job dir>/local-state/<subtask>``), so keeping one is a rename."""
    return os.path.join(job_dir, "local-state")


def discard_local_state(config: Mapping[str, Any], job_id: str) -> None:
    """Remove the job's task-local recovery copies on this node (the job ended)."""
    from flowray.common.configuration import Configuration
    shutil.rmtree(local_state_root(_rocksdb_job_dir(Configuration(dict(config)), job_id)),
                  ignore_errors=True)


def _remove_earlier_attempts(job_dir: str, subtask: str, attempt: int) -> None:
    """Working folders of this subtask's earlier attempts: a killed task could not remove
    its own (the job master stops an attempt before it deploys the next one)."""
    try:
        names = os.listdir(job_dir)
    except FileNotFoundError:
        return
    for name in names:
        stem, _, number = name.rpartition("-")
        if stem == subtask and number.isdigit() and int(number) < attempt:
            shutil.rmtree(os.path.join(job_dir, name), ignore_errors=True)


class StateBackend:
    """A state backend choice, as PyFlink's ``StateBackend`` objects."""

    def to_config(self) -> Dict[str, Any]:
        raise NotImplementedError


class HashMapStateBackend(StateBackend):
    """Keyed state as Python objects in dicts (the default; fastest, bounded by memory)."""

    def to_config(self) -> Dict[str, Any]:
        return {"state.backend.type": "hashmap"}


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in an embedded RocksDB per task (state larger than memory).
    ``enable_incremental_checkpointing``: None leaves ``execution.checkpointing.incremental`` as
    configured."""

    def __init__(self, enable_incremental_checkpointing: Optional[bool] = None,
                 local_dir: Any = None) -> None:
        if enable_incremental_checkpointing is not None and not isinstance(
                enable_incremental_checkpointing, bool):
            raise TypeError("enable_incremental_checkpointing must be a bool or None (use "
                            "execution.checkpointing.incremental), got "
                            f"{enable_incremental_checkpointing!r}")
        self.incremental = enable_incremental_checkpointing
        self.local_dir = None if local_dir is None else os.path.abspath(str(local_dir))

    def is_incremental_checkpoints_enabled(self) -> bool:
        return bool(self.incremental)

    def set_db_storage_paths(self, *paths: str) -> None:
        """The local folder for the RocksDB files (``state.backend.rocksdb.localdir``);
        flowray uses one folder per task, so exactly one path (``None``: the default)."""
        if len(paths) > 1:
            raise ValueError(f"set_db_storage_paths: flowray takes one local folder, got "
                             f"{len(paths)} ({', '.join(map(str, paths))})")
        path = paths[0] if paths else None
        self.local_dir = None if path is None else os.path.abspath(str(path))

    def get_db_storage_paths(self) -> List[str]:
        return [] if self.local_dir is None else [self.local_dir]

    set_predefined_options = not_implemented(
        "EmbeddedRocksDBStateBackend.set_predefined_options",
        "flowray tunes its RocksDB itself; pass state.backend.rocksdb.* keys it documents")
    get_predefined_options = not_implemented(
        "EmbeddedRocksDBStateBackend.get_predefined_options",
        "flowray tunes its RocksDB itself")
    set_options = not_implemented(
        "EmbeddedRocksDBStateBackend.set_options",
        "RocksDB option factories are Java classes; use the state.backend.rocksdb.* keys")
    get_options = not_implemented(
        "EmbeddedRocksDBStateBackend.get_options",
        "RocksDB option factories are Java classes")
    set_number_of_transfer_threads = not_implemented(
        "EmbeddedRocksDBStateBackend.set_number_of_transfer_threads",
        "snapshot files are written by the task; no transfer thread pool to size")
    get_number_of_transfer_threads = not_implemented(
        "EmbeddedRocksDBStateBackend.get_number_of_transfer_threads",
        "snapshot files are written by the task; no transfer thread pool")

    def to_config(self) -> Dict[str, Any]:
        conf: Dict[str, Any] = {"state.backend.type": "rocksdb"}
        if self.incremental is not None:
            conf["execution.checkpointing.incremental"] = self.incremental
        if self.local_dir is not None:
            conf["state.backend.rocksdb.localdir"] = self.local_dir
        return conf
