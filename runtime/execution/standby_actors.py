"""The Ray side of warm standby task actors (:class:`StandbyActors`): starts the idle
:class:`~flowray.runtime.execution.task_actor.TaskActor` processes that
:class:`~flowray.runtime.jobmaster.standby.StandbyPool` asks for, keeps one call of each
in flight (``idle``) so that a standby's death is known at once, and hands one to a
failover's deployment. Used by the job master's loop thread only."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import ray
from ray.util.scheduling_strategies import NodeLabelSchedulingStrategy, NotIn

from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.task_actor import TaskActor
from flowray.runtime.graph.execution_graph import TaskDeploymentDescriptor
from flowray.runtime.jobmaster.standby import (
    Standby,
    StandbyPool,
    reserves_nothing,
    resource_profile,
)

__all__ = ["StandbyActors", "kill_quietly", "placement_strategy", "task_threads"]

log = logging.getLogger(__name__)


def task_threads(d: TaskDeploymentDescriptor) -> int:
    """Threads a task's actor needs: control calls, plus one per input channel (Ray
    transport frames wait in their calls)."""
    return 8 + len(d.inputs)


def placement_strategy(avoid: Set[str]) -> Any:
    """A scheduling strategy keeping new actors off the nodes ``avoid`` (None: Ray's
    default placement)."""
    if not avoid:
        return None
    return NodeLabelSchedulingStrategy(hard={"ray.io/node-id": NotIn(*sorted(avoid))})


def kill_quietly(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - gone already
        pass


class StandbyActors:
    """``size`` idle task actors per resource profile of the job's tasks (see
    :mod:`~flowray.runtime.jobmaster.standby`), named ``<prefix>/standby/<job>-<n>``."""

    def __init__(self, size: int, name_prefix: str, job_id: str) -> None:
        self.pool = StandbyPool(size)
        self.name_prefix = name_prefix
        self.job_id = job_id
        self._refs: Dict[Any, Tuple[str, str]] = {}  # ref -> (name, "node" | "idle")
        self._options: Dict[Any, Dict[str, Any]] = {}  # profile -> Ray resource options
        self._count = 0

    def learn(self, d: TaskDeploymentDescriptor) -> None:
        """A task is being deployed: standbys should be able to host its like."""
        if self.pool.size and reserves_nothing(d.resources):
            profile = resource_profile(d.resources)
            self.pool.learn(profile, task_threads(d))
            self._options[profile] = dict(d.resources)

    def take(self, d: TaskDeploymentDescriptor, avoid: Set[str]) -> Optional[Standby]:
        """A standby that can host ``d``, off the nodes ``avoid`` (None: start a new
        actor). The caller gives it the task (``assign``)."""
        if not self.pool.size or not reserves_nothing(d.resources):
            return None
        return self.pool.take(resource_profile(d.resources), task_threads(d), avoid)

    @property
    def refs(self) -> List[Any]:
        """Calls to watch (``ray.wait``); a ready one goes to :meth:`on_ready`."""
        return list(self._refs)

    def ready_names(self) -> List[str]:
        """The standbys whose process runs."""
        return self.pool.ready_names()

    def owns(self, ref: Any) -> bool:
        return ref in self._refs

    def on_ready(self, ref: Any) -> None:
        name, kind = self._refs.pop(ref)
        try:
            answer = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - it died or never started
            lost = self.pool.on_lost(name)
            if lost is not None:
                log.info("flowray: standby task actor %s is gone: %s", name, e)
                kill_quietly(lost.handle)
            return
        if kind == "node":
            self.pool.on_ready(name, answer)
        # "idle" answered: it was given a task, and is no standby any more

    def replenish(self, avoid: Callable[[], Set[str]]) -> None:
        """Start the standbys missing (placed off the nodes ``avoid()`` returns)."""
        wanted = self.pool.wanted()
        if not wanted:
            return
        strategy = placement_strategy(avoid())
        for w in wanted:
            name = f"{self.name_prefix}/standby/{self.job_id[:8]}-{self._count}"
            self._count += 1
            options: Dict[str, Any] = dict(name=name, namespace=NAMESPACE,
                                           max_concurrency=w.threads, max_restarts=0)
            if strategy is not None:
                options["scheduling_strategy"] = strategy
            options.update(self._options.get(w.profile, {}))
            try:
                handle = TaskActor.options(**options).remote()
            except Exception as e:  # noqa: BLE001 - a standby is an optimisation
                log.info("flowray: could not start standby task actor %s: %s", name, e)
                return
            self.pool.add(name, w.profile, w.threads, handle)
            self._refs[handle.standby_node.remote()] = (name, "node")
            self._refs[handle.idle.remote()] = (name, "idle")

    def stop(self) -> None:
        """Kill every standby (the job ended)."""
        for standby in self.pool.drain():
            kill_quietly(standby.handle)
        self._refs = {}
