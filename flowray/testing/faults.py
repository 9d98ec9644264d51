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

    def kill(self, subtask_key: str, timeout_s: float = 60.0) -> str:
        """Kill the actor running ``subtask_key``; while a failover redeploys the subtask
        (it is not running, or its actor is gone), wait for it to run again."""
        killed: List[str] = []

        def killed_it() -> bool:
            status = self.client.get_job_status()
            if status.is_globally_terminal_state():
                raise RuntimeError(f"job ended ({status.value}) before subtask {subtask_key} "
                                   f"could be killed")
            name = self.task_actor_names().get(subtask_key)
            if name is not None and self._kill_actor(name):
                killed.append(name)
            return bool(killed)

        wait_until(killed_it, timeout_s, f"subtask {subtask_key} to run")
        return killed[0]

    def _kill_actor(self, name: str) -> bool:
        """Kill the task actor ``name``; ``False`` if there is no such actor (any more)."""
        import ray

        from flowray.runtime.execution.cluster import NAMESPACE
        try:
            actor = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return False
        ray.kill(actor, no_restart=True)
        self.killed.append(name)
        return True

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

        killed: List[str] = []

        def killed_one() -> bool:
            # the names are looked up again after a failover took the chosen one away
            if running():
                name = names[self.rng.choice(sorted(names))]
                if self._kill_actor(name):
                    killed.append(name)
            return bool(killed)

        wait_until(killed_one, timeout_s, "the job to run")
        return killed[0]
