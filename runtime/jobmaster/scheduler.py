"""The job master's decisions: deploy, watch, checkpoint, fail over, restart, finish.

Pure of Ray: a shell (the ``JobMaster`` actor, or the local executor) implements
:class:`TaskDeployer` and feeds :class:`JobScheduler` events from one thread: task results,
lost tasks, checkpoint acknowledgements, and periodic ``tick()`` calls. Every event of an
older attempt is ignored, so a slow message from a cancelled task cannot confuse a restart.

>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.jobmaster.restart_strategy import NoRestartStrategy
>>> sched = JobScheduler("j1", "demo", _OneTaskGraph(), {"v1": b""}, _NullDeployer(), ManualClock(),
...                      restart_strategy=NoRestartStrategy())
>>> sched.start(); sched.status.value
'RUNNING'
>>> sched.on_task_result(0, TaskResult(SubtaskId("v1", 0), TaskState.FINISHED))
>>> sched.status.value, sched.is_done
('FINISHED', True)
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Set

from flowray.state.snapshot import TaskStateSnapshot

from flowray.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointFailureReason,
    CheckpointGateway,
    CheckpointSettings,
)
from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.storage import (
    JOB_FILE,
    CheckpointStorage,
    checkpoint_storage_from_config,
)
from flowray.runtime.messages import JobOutcome, JobStatus
from flowray.common.clock import Clock
from flowray.runtime.network.blocking_partition import BlockingPartitionStore
from flowray.common.options import BLOCKING_PARTITIONS_DIR, CHECKPOINTS_RETENTION, RUNTIME_MODE
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import (
    ResultPartitionSpec,
    SubtaskId,
    TaskDeploymentDescriptor,
)
from flowray.runtime.jobmaster.failover import (
    FailoverTopology,
    compute_pipelined_regions,
    failover_strategy_from_config,
)
from flowray.runtime.jobmaster.restart_strategy import (
    RestartStrategy,
    restart_strategy_from_config,
)
from flowray.runtime.messages import TaskFailure, TaskResult, TaskState

__all__ = ["TaskDeployer", "JobScheduler", "PendingFailover", "root_cause"]

log = logging.getLogger("flowray")

CANCEL_GRACE_MS = 5_000


class TaskDeployer(CheckpointGateway):
    """How the scheduler reaches tasks. Implementations return at once; outcomes come
    back as scheduler events."""

    @abc.abstractmethod
    def deploy(self, attempt: int, descriptors: List[TaskDeploymentDescriptor]) -> None: ...

    @abc.abstractmethod
    def cancel_tasks(self, subtasks: Iterable[SubtaskId]) -> None:
        """Ask tasks to stop; each answers with a CANCELED (or FAILED) result."""

    @abc.abstractmethod
    def kill(self, subtasks: Iterable[SubtaskId]) -> None:
        """Stop tasks that did not answer a cancel in time; no result will come."""


class JobScheduler:
    """One job's life across attempts; see the module docstring."""

    def __init__(self, job_id: str, job_name: str, execution_graph: Any,
                 plan_bytes: Dict[str, bytes], deployer: TaskDeployer, clock: Clock,
                 config: Optional[Dict[str, Any]] = None,
                 restart_strategy: Optional[RestartStrategy] = None,
                 storage: Optional[CheckpointStorage] = None) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.eg = execution_graph
        self.plan_bytes = plan_bytes
        self.config = dict(config or {})
        self.deployer = deployer
        self.clock = clock
        conf = Configuration(self.config)
        self.settings = CheckpointSettings.from_config(conf)
        self.restart_strategy = restart_strategy or restart_strategy_from_config(
            conf, self.settings.enabled)
        self.subtasks: List[SubtaskId] = list(execution_graph.subtasks())
        self.states: Dict[SubtaskId, TaskState] = {s: TaskState.CREATED for s in self.subtasks}
        self.metrics: Dict[SubtaskId, dict] = {}
        self.status = JobStatus.CREATED
        self.attempt = -1
        self.restarts = 0
        self.failure: Optional[TaskFailure] = None       # the cause the job failed with
        self.failures: List[TaskFailure] = []            # every failure, in order
        # running tasks asked to cancel -> when first asked (killed after CANCEL_GRACE_MS);
        # per task: with region failover, tasks of other regions keep running meanwhile
        self._cancel_sent: Dict[SubtaskId, float] = {}
        self._attempt_failures: List[TaskFailure] = []
        self._start_ms = clock.monotonic_ms()
        self._end_ms: Optional[float] = None
        self.stats = CheckpointStatsTracker()
        self.job_master_restarts = 0
        self.retention = conf.get(CHECKPOINTS_RETENTION)
        if storage is None and self.settings.enabled:
            storage = checkpoint_storage_from_config(conf, job_id)
        self.storage = storage
        self.coordinator = CheckpointCoordinator(
            job_id, self.settings, execution_graph.upstream(), storage, deployer, clock,
            self._on_checkpoint_failure_threshold, stats=self.stats)
        # regions, blocking partitions and the failover strategy
        self.attempts: Dict[SubtaskId, int] = {}
        self._created: Set[SubtaskId] = set(self.subtasks)   # not (re)deployed yet
        # failovers under way, each redeployed on its own once its tasks stopped and its
        # back-off passed; overlapping ones are merged
        self._failovers: List[PendingFailover] = []
        self.batch = conf.get(RUNTIME_MODE) == "BATCH"
        self.partitions: Dict[str, ResultPartitionSpec] = {
            p.partition_id: p for p in _result_partitions(execution_graph)}
        root = conf.get(BLOCKING_PARTITIONS_DIR)
        self.partition_store = (BlockingPartitionStore(root, job_id)
                                if root is not None and any(
                                    p.blocking for p in self.partitions.values()) else None)
        self._released: Set[str] = set()
        self.topology = _SubtaskTopology(self.subtasks, self.partitions, self._created)
        self.failover = failover_strategy_from_config(conf, self.topology,
                                                      self.is_partition_available)
        # scheduling goes region by region whatever the failover strategy
        self.regions = [frozenset(r) for r in compute_pipelined_regions(self.topology)]
        self._partition_of_channel: Dict[str, str] = {
            c: p.partition_id for p in self.partitions.values() for c in p.channel_ids}
        self._region_of: Dict[SubtaskId, FrozenSet[SubtaskId]] = {
            s: region for region in self.regions for s in region}

    # -- queries -----------------------------------------------------------------------
    @property
    def is_done(self) -> bool:
        return self.status.is_globally_terminal_state()

    def running(self) -> List[SubtaskId]:
        return [s for s, st in self.states.items() if st is TaskState.RUNNING]

    def is_partition_available(self, partition_id: str) -> bool:
        """A blocking partition can be read: its producer finished in its latest attempt
        and its files are there."""
        p = self.partitions[partition_id]
        if not p.blocking:
            return False
        if self.states.get(p.producer) is not TaskState.FINISHED or \
                p.producer in self._restarting:
            return False  # a producer about to run again will write it anew
        return self.partition_store is not None and \
            self.partition_store.is_partition_available(p.channel_ids)

    def outcome(self) -> JobOutcome:
        end = self._end_ms if self._end_ms is not None else self.clock.monotonic_ms()
        counts = self.stats.counts()
        return JobOutcome(self.job_id, self.job_name, self.status, end - self._start_ms,
                          self.failure, [self.metrics[s] for s in sorted(self.metrics)],
                          restarts=self.restarts, checkpoints=counts.get("completed", 0),
                          checkpoint_stats=self.checkpoint_stats(),
                          job_master_restarts=self.job_master_restarts)

    def checkpoint_stats(self) -> Dict[str, Any]:
        return {"counts": self.stats.counts(), "history": self.stats.history(),
                "summary": self.stats.summary(), "restarts": self.restarts}

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> None:
        self._schedule()

    def recover(self, first_attempt: int) -> Optional[int]:
        """The job master died and this is its successor (call before :meth:`start`):
        attempts number from ``first_attempt`` (above any of the dead master's, so its
        tasks' late messages are ignored), the retained checkpoints and the shared state
        registry are read back from checkpoint storage, and :meth:`start` then deploys
        every task from the latest one. Returns its id (None: the job starts over)."""
        self.attempt = max(self.attempt, first_attempt - 1)
        if self.storage is None:
            self.job_master_restarts += 1
            return None
        path = f"{self.storage.job_root}/{_JOB_MASTER_RESTARTS_FILE}"
        try:
            self.job_master_restarts = int(self.storage.read_file(path).decode()) + 1
        except (FileNotFoundError, ValueError):
            self.job_master_restarts = 1
        try:
            self.storage.write_file(path, str(self.job_master_restarts).encode())
        except Exception:  # noqa: BLE001 - only the count would be wrong
            log.warning("flowray: could not record the job master restart", exc_info=True)
        latest = self.coordinator.recover_from_storage()
        log.warning("flowray: job master of %r restarted (%d time(s)); %s", self.job_name,
                    self.job_master_restarts,
                    f"resuming from checkpoint {latest.checkpoint_id}" if latest is not None
                    else "no completed checkpoint: the job starts over")
        return latest.checkpoint_id if latest is not None else None

    def _schedule(self) -> None:
        """Deploy every region not deployed yet whose blocking inputs are complete (in
        STREAMING mode: every region at once). Nothing while the job is failing or being
        cancelled."""
        if self.status not in (JobStatus.CREATED, JobStatus.RUNNING, JobStatus.RESTARTING):
            return
        ready: List[SubtaskId] = []
        lost: List[ResultPartitionSpec] = []
        for region in self.regions:
            todo = region & self._created
            if not todo:
                continue
            inputs = {pid for s in region for pid in self.topology.consumed_partitions(s)
                      if self.partitions[pid].producer not in region}
            if all(self.is_partition_available(pid) for pid in inputs):
                ready.extend(s for s in self.subtasks if s in todo)
            else:  # a producer that finished but whose files are gone: produce again
                lost.extend(self.partitions[pid] for pid in sorted(inputs)
                            if self._is_lost(pid))
        if ready:
            self._deploy(ready)
        for p in lost:
            if self.states.get(p.producer) is TaskState.FINISHED:
                self._on_failure(TaskFailure(
                    f"{p.producer.vertex_id}[{p.producer.index}]", None,
                    "PartitionNotFoundError",
                    f"blocking partition {p.partition_id} of a finished producer is gone",
                    "", False), p.producer)

    def _is_lost(self, partition_id: str) -> bool:
        p = self.partitions[partition_id]
        return (p.blocking and self.states.get(p.producer) is TaskState.FINISHED
                and p.producer not in self._restarting
                and self.partition_store is not None
                and not self.partition_store.is_partition_available(p.channel_ids))

    def _deploy(self, subtasks: List[SubtaskId]) -> None:
        self.attempt += 1
        latest = self.coordinator.latest_completed()
        descriptors = []
        for s in subtasks:
            restore = latest.task_states.get(s.key) if latest is not None else None
            if latest is not None and restore is None:
                restore = TaskStateSnapshot()
            descriptors.append(self.eg.deployment_descriptor(
                s, self.job_id, self.plan_bytes[s.vertex_id], self.config, self.attempt,
                restore_checkpoint_id=latest.checkpoint_id if latest is not None else None,
                restore_state=restore))
            self.states[s] = TaskState.RUNNING
            self.attempts[s] = self.attempt
            self._created.discard(s)
            self._cancel_sent.pop(s, None)
            # a partition released earlier and produced again is released again
            self._released.difference_update(self.topology.produced_partitions(s))
        self.status = JobStatus.RUNNING
        self._attempt_failures = []
        if latest is not None:
            log.info("flowray: job %r attempt %d restores checkpoint %d", self.job_name,
                     self.attempt, latest.checkpoint_id)
        self.deployer.deploy(self.attempt, descriptors)
        self.coordinator.tasks_running(subtasks)

    def cancel(self) -> None:
        # as Flink: a job already FAILING stays failing (its cause must not be reported
        # as CANCELED); its tasks are being cancelled anyway
        if self.is_done or self.status in (JobStatus.CANCELLING, JobStatus.FAILING):
            return
        self.status = JobStatus.CANCELLING
        self._stop_all()

    # -- task events -------------------------------------------------------------------
    def _current(self, attempt: int, subtask: SubtaskId) -> bool:
        return self.attempts.get(subtask) == attempt

    def on_task_result(self, attempt: int, result: TaskResult) -> None:
        s = result.subtask
        if not self._current(attempt, s):
            return
        if self.states.get(s) is not TaskState.RUNNING:
            return
        self.states[s] = result.state
        self._cancel_sent.pop(s, None)
        if result.metrics:
            self.metrics[s] = result.metrics
        if result.state is TaskState.FINISHED:
            self.coordinator.task_finished(s)
            if self.batch:
                self._release_consumed(s)
                self._schedule()
        elif result.state is TaskState.FAILED:
            failure = result.failure or _lost_failure(s, "failed without a cause")
            self._attempt_failures.append(failure)
            self._on_failure(failure, s)
        elif (result.state is TaskState.CANCELED and self.status is JobStatus.RUNNING
              and s not in self._restarting):
            self._on_failure(_lost_failure(s, "was cancelled outside the job master"), s)
        self._check_progress()

    def on_task_lost(self, attempt: int, subtask: SubtaskId, reason: str) -> None:
        """A task's process died (no result)."""
        self.on_task_result(attempt, TaskResult(subtask, TaskState.FAILED,
                                                _lost_failure(subtask, reason)))

    def on_acknowledge(self, attempt: int, subtask: SubtaskId, checkpoint_id: int,
                       snapshot: TaskStateSnapshot, metrics: Dict[str, Any]) -> None:
        if self._current(attempt, subtask) and self.status is JobStatus.RUNNING:
            self.coordinator.receive_acknowledge(subtask, checkpoint_id, snapshot, metrics)

    def on_decline(self, attempt: int, subtask: SubtaskId, checkpoint_id: int, reason: str,
                   message: str) -> None:
        if self._current(attempt, subtask) and self.status is JobStatus.RUNNING:
            try:
                why = CheckpointFailureReason[reason]
            except KeyError:
                why = CheckpointFailureReason.DECLINED
            self.coordinator.receive_decline(subtask, checkpoint_id, why, message)

    def on_ended_input(self, attempt: int, subtask: SubtaskId) -> None:
        if self._current(attempt, subtask) and self.status is JobStatus.RUNNING:
            self.coordinator.task_ended_input(subtask)

    def tick(self) -> None:
        """Time-driven duties: checkpoints, cancel deadlines, restarts."""
        now = self.clock.monotonic_ms()
        if self.status is JobStatus.RUNNING:
            self.coordinator.tick()
        stuck = [s for s, sent in sorted(self._cancel_sent.items())
                 if now - sent > CANCEL_GRACE_MS and self.states[s] is TaskState.RUNNING]
        if stuck:  # only tasks asked to cancel: other regions' tasks run on
            self.deployer.kill(stuck)
            for s in stuck:
                self.states[s] = TaskState.CANCELED
                del self._cancel_sent[s]
        self._check_progress()

    # -- decisions ---------------------------------------------------------------------
    def _on_failure(self, failure: TaskFailure, subtask: Optional[SubtaskId] = None) -> None:
        """Fail over what the failover strategy says (the failed task's region and what
        it involves; every task for ``full`` or a failure of no task), or fail the job."""
        if self.status not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return  # failing or cancelling: the first cause stands
        if subtask is not None and subtask in self._restarting:
            return  # a consequence of a failover already under way
        self.failures.append(failure)
        deployed = [s for s in self.subtasks if s not in self._created]
        if subtask is None:
            to_restart = set(deployed)
        else:
            # a partition that could not be read counts as unavailable (rule 2), even if
            # its files are there (a truncated file)
            failed_partition = self._partition_of_channel.get(failure.failed_channel or "")
            to_restart = set(self.failover.get_tasks_needing_restart(
                subtask, failed_partition=failed_partition)) - self._created
            to_restart.add(subtask)
        self.coordinator.tasks_not_running(sorted(to_restart))
        now = self.clock.monotonic_ms()
        self.restart_strategy.notify_failure(int(now))
        if self.restart_strategy.can_restart():
            backoff = self.restart_strategy.backoff_ms()
            self._add_failover(PendingFailover(set(to_restart), now + backoff))
            if self._restarting >= set(deployed):
                self.status = JobStatus.RESTARTING
            log.warning("flowray: job %r: %s; restarting %d of %d tasks in %d ms (%s)",
                        self.job_name, failure.describe(), len(to_restart),
                        len(self.subtasks), backoff, self.restart_strategy.describe())
            self._cancel([s for s in sorted(to_restart)
                          if self.states[s] is TaskState.RUNNING])
        else:
            self.status = JobStatus.FAILING
            self.failure = failure
            # the root cause is looked for from here on: the failures before this one
            # were recovered from (a restart was granted, or they were consequences of one)
            self._attempt_failures = [failure]
            self._stop_all()

    def _on_checkpoint_failure_threshold(self, message: str) -> None:
        self._on_failure(TaskFailure("CheckpointCoordinator", None, "CheckpointFailure",
                                     message, message, False))

    def _stop_all(self) -> None:
        self._cancel(self.running())

    def _cancel(self, subtasks: List[SubtaskId]) -> None:
        """Ask running tasks to cancel; each is killed if it has not answered
        ``CANCEL_GRACE_MS`` after it was first asked."""
        if subtasks:
            now = self.clock.monotonic_ms()
            for s in subtasks:
                self._cancel_sent.setdefault(s, now)
            self.deployer.cancel_tasks(subtasks)

    def _check_progress(self) -> None:
        if self.is_done:
            return
        if self.status in (JobStatus.RUNNING, JobStatus.RESTARTING):
            if self._restarting:
                self._maybe_redeploy()
            if not self._restarting and not self._created and all(
                    st is TaskState.FINISHED for st in self.states.values()):
                self.status = JobStatus.FINISHED
                self._finish()
            return
        if self.running():
            return
        if self.status is JobStatus.FAILING:
            self.status = JobStatus.FAILED
            self.failure = root_cause(self._attempt_failures) or self.failure
            self._finish()
        elif self.status is JobStatus.CANCELLING:
            self.status = JobStatus.CANCELED
            self._finish()

    @property
    def _restarting(self) -> Set[SubtaskId]:
        """Every task of a failover under way (stopping, or waiting for its back-off)."""
        return set().union(*(f.tasks for f in self._failovers))

    def _add_failover(self, failover: "PendingFailover") -> None:
        """A failover sharing tasks with ones under way is merged with them: the merged
        one waits for the latest back-off and counts every failover it holds."""
        keep: List[PendingFailover] = []
        for other in self._failovers:
            if other.tasks & failover.tasks:
                failover = failover.merged(other)
            else:
                keep.append(other)
        self._failovers = keep + [failover]

    def _maybe_redeploy(self) -> None:
        """Redeploy each failover whose tasks have all stopped and whose back-off has
        passed; the others (other regions) go on waiting."""
        now = self.clock.monotonic_ms()
        ready = [f for f in self._failovers if now >= f.restart_at and not any(
            self.states[s] is TaskState.RUNNING for s in f.tasks)]
        if not ready:
            return
        for f in ready:
            self._failovers.remove(f)
            for s in f.tasks:
                self.states[s] = TaskState.CREATED
            self._created |= f.tasks
            self.restarts += f.count  # each failover counts once
        self._schedule()

    def _release_consumed(self, subtask: SubtaskId) -> None:
        """BATCH: once ``subtask``'s region has finished, release each blocking partition
        it consumes whose consumer regions have all finished (as in Flink: a partition is
        kept while a task of a consumer region may still restart and read it again)."""
        if self.partition_store is None or not self._region_finished(subtask):
            return
        consumed = {pid for s in self._region_of[subtask]
                    for pid in self.topology.consumed_partitions(s)}
        for pid in sorted(consumed):
            p = self.partitions[pid]
            if p.blocking and pid not in self._released and all(
                    self._region_finished(c) for c in p.consumers):
                self.partition_store.release(p.channel_ids)
                self._released.add(pid)

    def _region_finished(self, subtask: SubtaskId) -> bool:
        return all(self.states.get(s) is TaskState.FINISHED
                   for s in self._region_of[subtask])

    def _finish(self) -> None:
        self._end_ms = self.clock.monotonic_ms()
        self.coordinator.shutdown()
        if self.partition_store is not None:
            self.partition_store.release_all()
        self.clean_up_storage()

    def clean_up_storage(self) -> None:
        """What an ended job leaves in checkpoint storage: nothing, or (retention) its
        retained checkpoints with the shared files they reference and nothing else.
        Idempotent; the shell calls it again once every task process is gone, for uploads
        that landed after the end."""
        if self.storage is None or not self.is_done:
            return
        if _discard_on_end(self.retention, self.status):
            try:
                self.storage.discard_job()
            except Exception as e:  # noqa: BLE001 - the job's outcome stands
                log.warning("flowray: could not delete the checkpoints of job %r: %s",
                            self.job_name, e)
        else:  # the retained checkpoints, and the shared files they reference
            self.coordinator.discard_orphans()
            for name in (JOB_FILE, _JOB_MASTER_RESTARTS_FILE):
                try:
                    self.storage.delete_file(f"{self.storage.job_root}/{name}")
                except Exception:  # noqa: BLE001 - cleanup only
                    log.debug("could not delete %s", name, exc_info=True)

    def next_wakeup_ms(self) -> float:
        """Longest the shell may wait before the next ``tick()``."""
        return 50.0


_JOB_MASTER_RESTARTS_FILE = "jobmaster-restarts"


def _result_partitions(eg: Any) -> List[ResultPartitionSpec]:
    partitions = getattr(eg, "result_partitions", None)
    return partitions() if partitions is not None else []


class _SubtaskTopology(FailoverTopology):
    """The execution graph as the failover strategy sees it: subtasks and the result
    partitions between them; ``created`` (shared with the scheduler) holds the subtasks
    not scheduled in their current attempt."""

    def __init__(self, subtasks: List[SubtaskId], partitions: Dict[str, ResultPartitionSpec],
                 created: Set[SubtaskId]) -> None:
        self._subtasks = list(subtasks)
        self._partitions = partitions
        self._created = created
        self._consumed: Dict[SubtaskId, List[str]] = {s: [] for s in subtasks}
        self._produced: Dict[SubtaskId, List[str]] = {s: [] for s in subtasks}
        for pid, p in partitions.items():
            self._produced[p.producer].append(pid)
            for c in p.consumers:
                self._consumed[c].append(pid)

    def vertices(self) -> List[SubtaskId]:
        return list(self._subtasks)

    def consumed_partitions(self, vertex: SubtaskId) -> List[str]:
        return self._consumed[vertex]

    def produced_partitions(self, vertex: SubtaskId) -> List[str]:
        return self._produced[vertex]

    def partition_producer(self, partition: str) -> SubtaskId:
        return self._partitions[partition].producer

    def partition_consumers(self, partition: str) -> List[SubtaskId]:
        return list(self._partitions[partition].consumers)

    def partition_type(self, partition: str) -> str:
        return "blocking" if self._partitions[partition].blocking else "pipelined"

    def is_scheduled(self, vertex: SubtaskId) -> bool:
        return vertex not in self._created


def _discard_on_end(retention: str, status: JobStatus) -> bool:
    """Flink's externalized-checkpoint retention: are a job's checkpoints deleted when it
    ends with ``status``?"""
    if status is JobStatus.FINISHED or retention == "NO_EXTERNALIZED_CHECKPOINTS":
        return True
    if status is JobStatus.CANCELED:
        return retention == "DELETE_ON_CANCELLATION"
    return False  # FAILED: kept by both externalized modes


#: failures that follow from another task's failure (its connection broke)
_CONSEQUENTIAL = ("ChannelClosedError", "ChannelError", "BrokenPipeError",
                  "ConnectionResetError")


def root_cause(failures: List[TaskFailure]) -> Optional[TaskFailure]:
    """The failure to report when several tasks of one attempt failed: the first that is
    not merely a broken connection to a task that failed before (results of different
    tasks reach the job master in any order)."""
    for f in failures:
        if f.user_code or f.cause_type not in _CONSEQUENTIAL:
            return f
    return failures[0] if failures else None


@dataclass
class PendingFailover:
    """Tasks to redeploy once they have all stopped and ``restart_at`` (monotonic ms) has
    passed; ``count``: the failovers it stands for (merged ones count each)."""

    tasks: Set[SubtaskId]
    restart_at: float
    count: int = 1

    def merged(self, other: "PendingFailover") -> "PendingFailover":
        return PendingFailover(self.tasks | other.tasks,
                               max(self.restart_at, other.restart_at),
                               self.count + other.count)


def _lost_failure(subtask: SubtaskId, reason: str) -> TaskFailure:
    return TaskFailure(task=f"{subtask.vertex_id}[{subtask.index}]", operator=None,
                       cause_type="TaskLost", message=reason, traceback_text=reason,
                       user_code=False)


class _OneTaskGraph:  # for the doctest
    def subtasks(self) -> List[SubtaskId]:
        return [SubtaskId("v1", 0)]

    def upstream(self) -> Dict[SubtaskId, set]:
        return {SubtaskId("v1", 0): set()}

    def deployment_descriptor(self, s: SubtaskId, *args: Any, **kwargs: Any) -> Any:
        return s


class _NullDeployer(TaskDeployer):  # for the doctest
    def deploy(self, attempt: int, descriptors: List[Any]) -> None:
        pass

    def cancel_tasks(self, subtasks: Iterable[SubtaskId]) -> None:
        pass

    def kill(self, subtasks: Iterable[SubtaskId]) -> None:
        pass

    def trigger(self, subtask: SubtaskId, checkpoint_id: int, timestamp_ms: int,
                is_savepoint: bool) -> None:
        pass

    def notify_complete(self, subtask: SubtaskId, checkpoint_id: int) -> None:
        pass

    def notify_aborted(self, subtask: SubtaskId, checkpoint_id: int, reason: Any) -> None:
        pass
