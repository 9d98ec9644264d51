"""Savepoints: where they go and how they stay movable.

A savepoint is a directory ``<target>/savepoint-<job id prefix>-<random>/`` holding every
task's state files and ``_metadata``. Tasks write into it directly
(:class:`SavepointStorage`); its keyed state is always a full snapshot in the portable
format both backends read, and nothing in it refers to a file outside it. ``_metadata``
stores the paths of its files relative to the directory (:func:`relativize_paths`), and
reading it resolves them against wherever the directory is now
(:func:`resolve_relative_paths`), so a savepoint can be moved or copied and restored from
its new place. flowray never deletes a completed savepoint on its own: a user does, with
:func:`dispose_savepoint` (``flowray savepoint -d PATH``).

"""

from __future__ import annotations

import uuid

from typing import TYPE_CHECKING

from flowray.runtime.checkpoint.storage import FsCheckpointStorage

if TYPE_CHECKING:  # pragma: no cover
    from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.state.snapshot_paths import relativize_paths, resolve_relative_paths

__all__ = [
    "SavepointStorage",
    "savepoint_directory",
    "write_savepoint_metadata",
    "dispose_savepoint",
    "NotASavepointError",
    "relativize_paths",
    "resolve_relative_paths",
]


def savepoint_directory(target_dir: str, job_id: str) -> str:
    """A new savepoint directory under ``target_dir`` (Flink's naming)."""
    return f"{target_dir.rstrip('/')}/savepoint-{job_id[:6]}-{uuid.uuid4().hex[:12]}"


class SavepointStorage(FsCheckpointStorage):
    """The files of one savepoint: everything goes directly under ``location`` (a path or
    URI), whatever the checkpoint id."""

    def __init__(self, location: str) -> None:
        super().__init__(location, "savepoint")
        self.location = location
        self.job_root = self.root or "/"

    def __reduce__(self):  # type: ignore[override]
        return (SavepointStorage, (self.location,))

    def __repr__(self) -> str:
        return f"SavepointStorage({self.location!r})"

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        return self.job_root


def write_savepoint_metadata(checkpoint: "CompletedCheckpoint", location: str) -> str:
    """Write ``checkpoint``'s ``_metadata`` into its savepoint directory ``location``,
    with file paths relative to it; returns the ``_metadata`` path (``external_path``)."""
    import dataclasses

    storage = SavepointStorage(location)
    relative = dataclasses.replace(
        checkpoint, task_states=relativize_paths(checkpoint.task_states, storage.job_root))
    path = storage.write_metadata(relative)
    checkpoint.external_path = path
    return path


class NotASavepointError(ValueError):
    """The path given to :func:`dispose_savepoint` is not a savepoint."""


def dispose_savepoint(path: str) -> str:
    """Delete the savepoint at ``path`` (its directory or its ``_metadata``; a local path or
    a URI) with every file in it, as Flink's ``flink savepoint -d``; returns the directory.
    Refuses anything that is not a savepoint: a missing path, a folder without
    ``_metadata``, or a retained checkpoint (its job's retention owns it).

    >>> dispose_savepoint("/no/such/savepoint-1")
    Traceback (most recent call last):
    ...
    flowray.runtime.checkpoint.savepoints.NotASavepointError: no savepoint at /no/such/savepoint-1: /no/such/savepoint-1/_metadata does not exist
    """
    from flowray.runtime.checkpoint.storage import InvalidCheckpointMetadataError, METADATA_FILE

    location = path.rstrip("/")
    if location.rsplit("/", 1)[-1] == METADATA_FILE:
        location = location.rsplit("/", 1)[0]
    storage = SavepointStorage(location)
    try:
        checkpoint = storage.read_metadata(location)
    except FileNotFoundError:
        raise NotASavepointError(f"no savepoint at {path}: {location}/{METADATA_FILE} "
                                 "does not exist") from None
    except InvalidCheckpointMetadataError as e:
        raise NotASavepointError(f"no savepoint at {path}: {e}") from None
    if not checkpoint.is_savepoint:
        raise NotASavepointError(
            f"{path} is a retained checkpoint, not a savepoint: its job's checkpoint "
            "retention (execution.checkpointing.externalized-checkpoint-retention) deletes it")
    storage.discard_job()   # the savepoint directory: its job root
    return location
