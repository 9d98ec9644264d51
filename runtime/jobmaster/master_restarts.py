"""What a job master's successor must not forget, kept in checkpoint storage: how many
times the master was restarted (``JobOutcome.job_master_restarts``), and the restart
strategy's budget with the job's restart count, so a new master neither grants fresh
restarts nor counts from zero."""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, Optional

from flowray.runtime.checkpoint.storage import CheckpointStorage

__all__ = ["JOB_MASTER_RESTARTS_FILE", "RESTART_STATE_FILE", "record_job_master_restart",
           "save_restart_state", "restore_restart_state"]

log = logging.getLogger(__name__)

JOB_MASTER_RESTARTS_FILE = "jobmaster-restarts"
RESTART_STATE_FILE = "restart-state.json"


def record_job_master_restart(storage: CheckpointStorage) -> int:
    """Count one more restart of the job master and return the count (1 for the first)."""
    path = f"{storage.job_root}/{JOB_MASTER_RESTARTS_FILE}"
    try:
        restarts = int(storage.read_file(path).decode()) + 1
    except (FileNotFoundError, ValueError):
        restarts = 1
    try:
        storage.write_file(path, str(restarts).encode())
    except Exception:  # only the count would be wrong
        log.warning("flowray: could not record the job master restart", exc_info=True)
    return restarts


def save_restart_state(storage: CheckpointStorage, strategy: Any, restarts: int) -> None:
    """Record ``strategy``'s memory of the failures (``RestartStrategy.snapshot``) and the
    job's restart count; called after each failure and each restart."""
    doc = {"strategy": strategy.describe(), "state": strategy.snapshot(),
           "restarts": int(restarts)}
    try:
        storage.write_file(f"{storage.job_root}/{RESTART_STATE_FILE}",
                           json.dumps(doc).encode())
    except Exception:  # only a successor's budget would be off
        log.warning("flowray: could not record the restart strategy's state", exc_info=True)


def restore_restart_state(storage: CheckpointStorage, strategy: Any) -> Optional[int]:
    """Continue ``strategy`` from what the predecessor recorded, if it was configured the
    same way; returns the job's restart count so far (None: nothing recorded)."""
    try:
        doc: Dict[str, Any] = json.loads(
            storage.read_file(f"{storage.job_root}/{RESTART_STATE_FILE}").decode())
    except FileNotFoundError:
        return None
    except ValueError:
        log.warning("flowray: the recorded restart strategy state does not parse; the "
                    "restart budget starts over")
        return None
    if doc.get("strategy") == strategy.describe():
        strategy.restore(doc.get("state") or {})
    else:
        log.warning("flowray: the restart strategy changed (%s, was %s); its budget starts "
                    "over", strategy.describe(), doc.get("strategy"))
    return int(doc.get("restarts", 0))
