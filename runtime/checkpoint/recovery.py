"""What a job master restart reads back from checkpoint storage, and what the coordinator
notes there for it (a mix-in of :class:`~flowray.runtime.checkpoint.coordinator.CheckpointCoordinator`:
the same state, its own role): the retained checkpoints and the shared state registry
(:meth:`StorageRecovery.recover_from_storage`), dropping a checkpoint that proved damaged,
the ``latest-completed`` record, and deleting what no checkpoint references.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional

from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.shared_files import orphan_shared_files, rebuild_registry
from flowray.runtime.checkpoint.shared_registry import FileHandle
from flowray.state.snapshot import checkpoint_of_shared_file

__all__ = ["CheckpointRecoveryError", "StorageRecovery", "RESERVED_ID_BLOCK",
           "LATE_UPLOAD_SWEEP_MS"]

log = logging.getLogger(__name__)

#: checkpoint ids noted as handed out at a time (one small write per this many
#: checkpoints; 1 keeps a successor's ids right after its predecessor's, as Flink's)
RESERVED_ID_BLOCK = 1
#: how long after a job master restart its predecessor's late uploads are looked for (at
#: each completed checkpoint); the job's end sweeps whatever comes later
LATE_UPLOAD_SWEEP_MS = 10 * 60_000


class CheckpointRecoveryError(RuntimeError):
    """A restarted job master cannot resume from its retained checkpoints (names why);
    the job fails rather than start over."""



class StorageRecovery:
    """The coordinator's recovery from storage; uses its ``storage``, ``store``,
    ``registry``, ``settings`` and file-discarding helpers."""

    def continue_after(self, checkpoint_id: int) -> None:
        """Number new checkpoints after ``checkpoint_id`` (the savepoint a job starts
        from), so no id of its transactions is reused."""
        self._next_id = max(self._next_id, checkpoint_id + 1)

    def recover_from_storage(self, allow_fallback: bool = True
                             ) -> Optional[CompletedCheckpoint]:
        """After a job master restart: load the retained checkpoints from storage into the
        store (the newest ``num_retained``; older leftovers and folders without
        ``_metadata`` are deleted, savepoints are left alone), rebuild the shared state
        registry from their metadata, delete shared files none of them references, and
        return the newest (``None`` if none ever completed).

        If the newest completed checkpoint cannot be read (damaged or missing
        ``_metadata``), recovery falls back to the newest readable one when
        ``allow_fallback`` (the job commits nothing on completion), logging which and why;
        otherwise, or with none readable, it raises :class:`CheckpointRecoveryError`
        naming the files: a job that completed a checkpoint never starts over. Call before
        any task runs."""
        if self.storage is None:
            return None
        found: List[CompletedCheckpoint] = []
        unreadable: Dict[int, str] = {}
        for cid in self.storage.list_completed():
            try:
                checkpoint = self.storage.read_metadata(self.storage.checkpoint_dir(cid))
            except Exception as e:  # noqa: BLE001 - an unreadable checkpoint cannot be used
                unreadable[cid] = f"{type(e).__name__}: {e}"
                continue
            if not checkpoint.is_savepoint:
                found.append(checkpoint)
        noted = self.storage.latest_completed_record() or 0
        newest = max([noted, *unreadable, *(c.checkpoint_id for c in found)], default=0)
        readable = found[-1].checkpoint_id if found else None
        if newest and (readable is None or readable < newest):
            problem = unreadable.get(newest) or \
                f"{self.storage.metadata_path(newest)} is missing"
            if readable is None:
                raise CheckpointRecoveryError(
                    f"checkpoint {newest} of job {self.job_id} completed but no retained "
                    f"checkpoint can be read ({problem}); the job fails instead of "
                    "starting over")
            if not allow_fallback:
                raise CheckpointRecoveryError(
                    f"checkpoint {newest} of job {self.job_id} cannot be read ({problem}); "
                    f"its transactions were committed, so resuming from checkpoint "
                    f"{readable} would commit records twice: repair it or start the job "
                    "from a savepoint")
            log.warning("flowray: checkpoint %d of %s cannot be read (%s); falling back to "
                        "checkpoint %d", newest, self.job_id, problem, readable)
        for cid in unreadable:
            self._discard_dir(cid)
        keep = found[-self.settings.num_retained:]
        for old in found[:len(found) - len(keep)]:
            self._discard_dir(old.checkpoint_id)
        incomplete = self.storage.list_incomplete()
        for cid in incomplete:  # never reused: a task of the dead master may still write
            self._discard_dir(cid)
            self._next_id = max(self._next_id, cid + 1)
        # past every id the dead master may have handed out, folder or not
        self._next_id = max(self._next_id, self.storage.reserved_ids_record() or 0)
        for checkpoint in keep:
            self.store.add(checkpoint)
        rebuild_registry(self.registry, [(c.checkpoint_id, c.task_states) for c in keep])
        for path in orphan_shared_files(self.storage, self.registry):
            self._discard_shared_file(FileHandle(path))
        self._next_id = max(self._next_id, self.store.max_checkpoint_id() + 1, newest + 1)
        self._fence = self._next_id
        self._fence_until_ms = self.clock.monotonic_ms() + LATE_UPLOAD_SWEEP_MS
        if keep:
            self._record_latest(keep[-1].checkpoint_id)
            log.info("recovered %d checkpoint(s) of %s from storage, latest %d", len(keep),
                     self.job_id, keep[-1].checkpoint_id)
        return self.store.latest()

    def _reserve_id(self, checkpoint_id: int) -> None:
        """Note in storage, a block at a time, that ``checkpoint_id`` was handed out: a
        successor starts past it even if no folder of it exists yet (a task of this
        master may create one late). Flink keeps this counter in its HA services."""
        if self.storage is None or checkpoint_id < self._reserved_up_to:
            return
        up_to = checkpoint_id + RESERVED_ID_BLOCK
        try:
            self.storage.record_reserved_ids(up_to)
            self._reserved_up_to = up_to
        except Exception:  # the checkpoint's own writes will show it
            log.warning("could not note checkpoint ids up to %d of %s", up_to, self.job_id,
                        exc_info=True)

    def sweep_late_uploads(self) -> int:
        """After a job master restart, delete what its predecessor's tasks uploaded after
        the recovery's sweep: ``chk-<n>`` folders without ``_metadata`` and shared files
        no checkpoint references, of ids below the fence only (this master's own uploads
        are never touched). Runs at each completed checkpoint for
        ``LATE_UPLOAD_SWEEP_MS`` after the restart; returns how many it deleted."""
        fence = self._fence
        if fence is None or self.storage is None:
            return 0
        if self.clock.monotonic_ms() >= self._fence_until_ms:
            self._fence = None   # this sweep is the last
        try:
            folders = [c for c in self.storage.list_incomplete() if c < fence]
            live = {h.path for h in self.registry.handles()}
            files = [p for p in self.storage.list_shared_files() if p not in live
                     and (checkpoint_of_shared_file(p) or fence) < fence]
        except Exception:  # cleanup only; the job's end sweeps again
            log.warning("could not list the checkpoint files of %s", self.job_id,
                        exc_info=True)
            return 0
        for cid in folders:
            self._discard_dir(cid)
        for path in files:
            self._discard_shared_file(FileHandle(path))
        if folders or files:
            log.info("flowray: deleted %d checkpoint folder(s) and %d shared file(s) the "
                     "previous job master's tasks uploaded late", len(folders), len(files))
        return len(folders) + len(files)

    def drop_damaged(self, checkpoint_id: int, reason: str) -> Optional[CompletedCheckpoint]:
        """A retained checkpoint proved unrestorable: forget and delete it; the previous
        retained one becomes the latest (returned)."""
        if self.store.remove(checkpoint_id) is not None:
            log.warning("flowray: %s", reason)
            self._discard_dir(checkpoint_id)
            self.registry.release_checkpoint(checkpoint_id)
        latest = self.store.latest()
        if latest is not None:
            self._record_latest(latest.checkpoint_id)
        return latest

    def _record_latest(self, checkpoint_id: int) -> None:
        if self.storage is None:
            return
        try:
            self.storage.record_latest_completed(checkpoint_id)
        except Exception:  # only a restarted master's check would miss it
            log.warning("could not note checkpoint %d as the latest", checkpoint_id,
                        exc_info=True)

    def discard_orphans(self) -> int:
        """Delete what no retained checkpoint references: shared files, and ``chk-<n>``
        folders without ``_metadata`` that are not pending (uploads of aborted checkpoints
        whose acknowledgement never came, e.g. from a task of an attempt that failed over).
        Call when no task runs, e.g. when the job ends with its checkpoints retained;
        returns how many files and folders were deleted."""
        if self.storage is None:
            return 0
        try:
            orphans = orphan_shared_files(self.storage, self.registry)
            incomplete = [c for c in self.storage.list_incomplete() if c not in self._pending]
        except Exception:  # cleanup only
            log.warning("could not list the checkpoint files of %s", self.job_id,
                        exc_info=True)
            return 0
        for path in orphans:
            self._discard_shared_file(FileHandle(path))
        for cid in incomplete:
            self._discard_dir(cid)
        return len(orphans) + len(incomplete)
