"""Test utilities for the runtime: kill a running job's task actors.

``FaultInjector(client)`` reaches the job master of a job running on Ray and kills task
actors the way a crashed worker process would die (``ray.kill``, no cleanup). Tests then
compare the committed output with the expected output.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Dict, List, Optional

from .client import JobClient, JobStatus

__all__ = ["FaultInjector", "wait_until"]


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str,
               poll_s: float = 0.05) -> None:
    """Poll ``condition`` until true; ``TimeoutError`` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)


class FaultInjector:
    """Kills task actors of a job running on Ray."""

    def __init__(self, client: JobClient, rng: Optional[random.Random] = None) -> None:
        self.client = client
        self.rng = rng or random.Random()
        self.killed: List[str] = []

    def task_actor_names(self) -> Dict[str, str]:
        """Subtask key -> actor name, for the tasks running in the current attempt."""
        return self.client._handle.task_actor_names()  # type: ignore[attr-defined]

    def kill(self, subtask_key: str) -> str:
        import ray

        from .cluster import NAMESPACE
        name = self.task_actor_names()[subtask_key]
        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        self.killed.append(name)
        return name

    def kill_random_task(self, timeout_s: float = 60.0) -> str:
        """Wait until the job runs with every task up, then kill one task at random."""
        names: Dict[str, str] = {}

        def running() -> bool:
            nonlocal names
            status = self.client.get_job_status()
            if status.is_globally_terminal_state():
                raise RuntimeError(f"job ended ({status.value}) before a task could be killed")
            if status is not JobStatus.RUNNING:
                return False
            names = self.task_actor_names()
            return bool(names)

        wait_until(running, timeout_s, "the job to run")
        return self.kill(self.rng.choice(sorted(names)))
