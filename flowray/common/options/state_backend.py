"""State backends (Flink's StateBackendOptions and RocksDBOptions)."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_bool,
    parse_int,
    parse_str,
    register_option,
)
from flowray.common.options.validators import bounded

__all__ = ["STATE_BACKEND_TYPE", "ROCKSDB_LOCAL_DIR", "ROCKSDB_INCREMENTAL", "LOCAL_RECOVERY",
           "ROCKSDB_VALUE_CACHE_ENTRIES"]


STATE_BACKEND_TYPE = register_option(
    "state.backend.type",
    parse_str,
    "hashmap",
    "Where keyed state lives: hashmap (Python dicts on the heap) or rocksdb (an embedded "
    "RocksDB per task, through rocksdict).",
    choices=("hashmap", "rocksdb"),
    aliases={"heap": "hashmap", "filesystem": "hashmap", "jobmanager": "hashmap"},
)

ROCKSDB_LOCAL_DIR = register_option(
    "state.backend.rocksdb.localdir",
    parse_str,
    None,
    "Working folder for RocksDB state (one sub-folder per task, removed when the task "
    "ends); unset: the system temp folder.",
)


ROCKSDB_INCREMENTAL = register_option(
    "execution.checkpointing.incremental",
    parse_bool,
    False,
    "RocksDB only: incremental checkpoints (upload only the SST files that no confirmed "
    "earlier checkpoint uploaded; the rest are shared between checkpoints and "
    "reference-counted by the job master); false: every checkpoint uploads all of "
    "RocksDB's files, its own. Ignored by the hashmap backend.",
    deprecated_keys=("state.backend.incremental",),
)

LOCAL_RECOVERY = register_option(
    "execution.checkpointing.local-backup.enabled",
    parse_bool,
    False,
    "RocksDB only: task-local recovery. Each checkpoint's RocksDB directory (hard links to "
    "the database's files) stays on the task's node beside the RocksDB working folders "
    "until a later checkpoint completes; a task restored on the same node opens it instead "
    "of reading checkpoint storage (elsewhere, or if it is missing, storage is read).",
    deprecated_keys=("state.backend.local-recovery",),
)

ROCKSDB_VALUE_CACHE_ENTRIES = register_option(
    "flowray.state.rocksdb.value-cache-entries",
    parse_int,
    65536,
    "RocksDB only: entries of the write-behind cache in front of each reduce/sum/min/max "
    "state (stored bytes, written to RocksDB before every snapshot); 0: every input batch "
    "is written through at once.",
    check=bounded(0, 100_000_000),
)
