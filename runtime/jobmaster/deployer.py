"""How the job master reaches its tasks (:class:`TaskDeployer`): the Ray actor shell and the
local executor implement it; the scheduler only calls it. Every call returns at once;
outcomes come back to the scheduler as events."""

from __future__ import annotations

import abc
from typing import Iterable, List

from flowray.runtime.checkpoint.gateway import CheckpointGateway
from flowray.runtime.graph.execution_graph import SubtaskId, TaskDeploymentDescriptor

__all__ = ["TaskDeployer"]


class TaskDeployer(CheckpointGateway):
    """Deploy, cancel and kill tasks, and (as a :class:`CheckpointGateway`) trigger and
    notify their checkpoints."""

    @abc.abstractmethod
    def deploy(self, attempt: int, descriptors: List[TaskDeploymentDescriptor]) -> None: ...

    @abc.abstractmethod
    def cancel_tasks(self, subtasks: Iterable[SubtaskId]) -> None:
        """Ask tasks to stop; each answers with a CANCELED (or FAILED) result."""

    @abc.abstractmethod
    def kill(self, subtasks: Iterable[SubtaskId]) -> None:
        """Stop tasks that did not answer a cancel in time; no result will come."""

    def request_loop_counters(self, subtasks: Iterable[SubtaskId], iteration: str,
                              wave: int) -> None:
        """A termination wave of ``iteration``: each task answers with its loop counters
        (``JobScheduler.on_loop_counters``). Default: not supported."""
        raise NotImplementedError(f"{type(self).__name__} runs no iterations")

    def end_loop(self, subtasks: Iterable[SubtaskId]) -> None:
        """The loop of these iteration heads is empty: they end their output."""
        raise NotImplementedError(f"{type(self).__name__} runs no iterations")

    def stop_sources(self, subtasks: Iterable[SubtaskId], stop_mode: int) -> None:
        """Stop-with-savepoint: the source tasks stop reading and end their output with
        ``stop_mode``. Default: not supported."""
        raise NotImplementedError(f"{type(self).__name__} cannot stop sources")
