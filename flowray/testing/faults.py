"""Fault injection for tests on Ray: kill a running job's task actors or its job master.

``FaultInjector(client)`` asks the job's :class:`~flowray.runtime.execution.client.JobClient`
for the actors of the current attempt and kills them the way a crashed worker process dies
(``ray.kill``, no cleanup). Tests then compare the committed output with the expected output.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Dict, List, Optional

from flowray.runtime.execution.client import JobClient
from flowray.runtime.messages import JobStatus

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
        return self.client.task_actor_names()

    def subtasks(self, task_name_part: str = "") -> List[str]:
        """The keys of the running subtasks whose task's name (its chained operators'
        names, e.g. ``"Source: numbers -> Map"``) contains ``task_name_part``, sorted.
        (Task actors may be the driver's pool's: their names say nothing of the task.)"""
        return sorted(k for k, name in self.client.task_names().items()
                      if task_name_part in name)

    def kill(self, subtask_key: str) -> str:
        import ray

        from flowray.runtime.execution.cluster import NAMESPACE
        name = self.task_actor_names()[subtask_key]
        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        self.killed.append(name)
        return name

    def kill_job_master(self) -> None:
        """Kill the job master's process; Ray restarts the actor (checkpointing on) and the
        new one resumes the job from the latest completed checkpoint."""
        import ray

        master = self.client.job_master_actor()
        if master is None:
            raise RuntimeError("the job does not run on Ray: no job master actor to kill")
        ray.kill(master, no_restart=False)
        self.killed.append("jobmaster")

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
