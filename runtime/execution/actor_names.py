"""Ray names and places of a job's actors, and the stored job a restarted job master reads:
waiting for a killed actor's name to be free (:func:`name_free`, :func:`wait_name_free`),
the nodes Ray is draining (:func:`draining_nodes`), :class:`StoredJob`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List

import ray

from flowray.runtime.checkpoint.storage import checkpoint_storage_from_config
from flowray.runtime.execution.cluster import NAMESPACE

__all__ = ["StoredJob", "draining_nodes", "name_free", "wait_name_free"]


def draining_nodes() -> List[str]:
    """Nodes Ray is draining (autoscaler scale-down, preemption); Ray has no public API
    for it yet, so any failure means none."""
    try:
        from ray._private.state import state

        return list(state.get_draining_nodes())
    except Exception:  # noqa: BLE001 - best effort
        return []


def name_free(name: str, timeout_s: float) -> bool:
    """Whether no actor holds ``name`` (a killed one may hold it a moment), waiting at
    most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def wait_name_free(name: str, timeout_s: float = 10.0) -> None:
    """Wait (at most ``timeout_s``) until no actor holds ``name``."""
    name_free(name, timeout_s)


@dataclass(frozen=True)
class StoredJob:
    """Where the pickled job lies in the job's checkpoint storage (a small argument for
    a restartable job master)."""

    config: Dict[str, Any]
    job_id: str

    @staticmethod
    def save(config: Dict[str, Any], job_id: str, job_bytes: bytes) -> "StoredJob":
        stored = StoredJob(dict(config), job_id)
        storage = checkpoint_storage_from_config(stored.config, job_id)
        storage.write_file(storage.job_file_path, job_bytes)
        return stored

    def load(self) -> bytes:
        storage = checkpoint_storage_from_config(self.config, self.job_id)
        return storage.read_file(storage.job_file_path)
