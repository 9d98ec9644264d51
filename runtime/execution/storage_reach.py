"""Whether every node can reach the job's storage (:func:`check_storage_reachable`).

A plain path (``/data/checkpoints``, ``file:///...``) is a folder on one machine unless it
is a network mount; tasks on other nodes of a Ray cluster would write checkpoints where
the job master (and a restarted task elsewhere) cannot read them. So a job on a cluster
of more than one node fails at submission when its checkpoint, savepoint or blocking
partition folder is a plain path, unless ``flowray.storage.local-paths-shared`` says
that path is shared storage every node mounts.

>>> from flowray.common.configuration import Configuration
>>> c = Configuration({"execution.checkpointing.interval": "1 s",
...                    "execution.checkpointing.dir": "/tmp/chk"})
>>> check_storage_reachable(c, node_count=1)
>>> check_storage_reachable(c.set_string("execution.checkpointing.dir", "s3://b/chk"), 3)
"""

from __future__ import annotations

from typing import List, Tuple

from flowray.common.configuration import Configuration
from flowray.common.files import unwritable_folder_reason
from flowray.common.options import (
    BLOCKING_PARTITIONS_DIR,
    CHECKPOINTING_INTERVAL,
    CHECKPOINTS_DIR,
    LOCAL_PATHS_SHARED,
    RUNTIME_MODE,
    SAVEPOINTS_DIR,
)

__all__ = ["StorageNotSharedError", "StorageNotWritableError", "check_storage_reachable",
           "check_storage_writable", "node_local_paths"]


class StorageNotSharedError(ValueError):
    """Job storage is a path on one machine, and the Ray cluster has several nodes."""


class StorageNotWritableError(ValueError):
    """A storage folder of the job cannot be created or written (a file in the way, no
    permission, a read-only file system)."""


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def node_local_paths(config: Configuration) -> List[Tuple[str, str]]:
    """``(key, path)`` of every storage folder the job uses that is a plain path."""
    out = []
    if config.get(CHECKPOINTING_INTERVAL) is not None and config.get(CHECKPOINTS_DIR):
        out.append((CHECKPOINTS_DIR.key, config.get(CHECKPOINTS_DIR)))
    if config.get(SAVEPOINTS_DIR):
        out.append((SAVEPOINTS_DIR.key, config.get(SAVEPOINTS_DIR)))
    if config.get(RUNTIME_MODE) == "BATCH" and config.get(BLOCKING_PARTITIONS_DIR):
        out.append((BLOCKING_PARTITIONS_DIR.key, config.get(BLOCKING_PARTITIONS_DIR)))
    return [(k, p) for k, p in out if _is_local(p)]


def check_storage_reachable(config: Configuration, node_count: int) -> None:
    """Raise :class:`StorageNotSharedError` naming the key and path when a job on a
    cluster of ``node_count`` > 1 nodes would keep state in a plain path not declared
    shared."""
    if node_count <= 1 or config.get(LOCAL_PATHS_SHARED):
        return
    local = node_local_paths(config)
    if not local:
        return
    key, path = local[0]
    where = ("a folder every node shares (blocking partitions are plain files)"
             if key == BLOCKING_PARTITIONS_DIR.key else
             "a location every node reaches (s3://, gs://, hdfs://...)")
    raise StorageNotSharedError(
        f"{key} is {path!r}, a path on one machine, but the Ray cluster has {node_count} "
        f"nodes: tasks on the others could not reach it. Use {where}, or if {path!r} is a "
        f"mount every node shares, set {LOCAL_PATHS_SHARED.key}: true")


def check_storage_writable(config: Configuration) -> None:
    """Create every plain-path storage folder the job uses and write a probe file in it,
    before anything is deployed: raise :class:`StorageNotWritableError` naming the key,
    the path and why, instead of a task failing seconds into the run. (Remote locations,
    s3:// and the like, are reached by the tasks themselves and not checked here.)

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> open(os.path.join(d, "f"), "w").close()
    >>> c = Configuration({"execution.checkpointing.interval": "1 s",
    ...                    "execution.checkpointing.dir": os.path.join(d, "f", "chk")})
    >>> try:
    ...     check_storage_writable(c)
    ... except StorageNotWritableError as e:
    ...     print(str(e).replace(d, "D"))
    execution.checkpointing.dir is 'D/f/chk': 'D/f' is a file, not a folder
    """
    for key, path in node_local_paths(config):
        why = unwritable_folder_reason(path)
        if why is not None:
            raise StorageNotWritableError(f"{key} is {path!r}: {why}")
