"""The job master's decisions: deploy, watch, checkpoint, fail over, restart, finish.

Pure of Ray: a shell (the ``JobMaster`` actor, or the local executor) implements
:class:`~flowray.runtime.jobmaster.deployer.TaskDeployer` and feeds :class:`JobScheduler` events from one thread: task results,
lost tasks, checkpoint acknowledgements, and periodic ``tick()`` calls. Every event of an
older attempt is ignored, so a slow message from a cancelled task cannot confuse a restart.
The scheduler is the state machine; it asks the failure handler what a failure means
(:mod:`~flowray.runtime.jobmaster.failure_handler`), the partition tracker about blocking
partitions (:mod:`~flowray.runtime.jobmaster.partition_tracker`) and the checkpoint
coordinator about checkpoints, and carries out their answers.

>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.jobmaster.restart_strategy import NoRestartStrategy
>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> from flowray.runtime.messages import TaskResult, TaskState
>>> from flowray.testing.jobmaster import OneTaskGraph, RecordingDeployer
>>> sched = JobScheduler("j1", "demo", OneTaskGraph(), {"v1": b""}, RecordingDeployer(),
...                      ManualClock(), restart_strategy=NoRestartStrategy())
>>> sched.start(); sched.status.value
'RUNNING'
>>> sched.on_task_result(0, TaskResult(SubtaskId("v1", 0), TaskState.FINISHED))
>>> sched.status.value, sched.is_done
('FINISHED', True)
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from flowray.runtime.checkpoint.completed import CompletedCheckpoint
from flowray.runtime.checkpoint.coordinator import CheckpointCoordinator, SavepointCallback
from flowray.runtime.checkpoint.failure import CheckpointFailureReason
from flowray.runtime.checkpoint.retention import clean_up_ended_job
from flowray.runtime.checkpoint.savepoints import savepoint_directory
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.state_assignment import (
    TaskRestore,
    assign_task_states,
    vertex_layouts,
)
from flowray.runtime.checkpoint.channel_state import Exchange, assign_in_flight
from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.storage import (
    JOB_FILE,
    LATEST_COMPLETED_FILE,
    RESERVED_IDS_FILE,
    CheckpointStorage,
    checkpoint_storage_from_config,
)
from flowray.runtime.network.partitioners import KeyGroupStreamPartitioner
from flowray.runtime.graph.execution_graph import (
    ExecutionGraph,
    ResultPartitionSpec,
    SubtaskId,
)
from flowray.common.files import file_in_the_way
from flowray.runtime.jobmaster.attempt_counters import AttemptCounters
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.failover import (
    compute_pipelined_regions,
    failover_strategy_from_config,
)
from flowray.runtime.jobmaster.failure_handler import (
    ExecutionFailureHandler,
    FailureHandlingResult,
    PendingFailover,
    merge_failover,
    root_cause,
    task_lost,
)
from flowray.runtime.jobmaster.master_restarts import (
    JOB_MASTER_RESTARTS_FILE,
    RESTART_STATE_FILE,
    record_job_master_restart,
    restore_restart_state,
    save_restart_state,
)
from flowray.runtime.jobmaster.loop_termination import (
    LoopTerminationDetector,
    WaveResult,
    loop_detectors,
)
from flowray.runtime.jobmaster.partition_tracker import PartitionTracker
from flowray.runtime.jobmaster.restore_failures import RestoreAction, RestoreFailurePolicy
from flowray.runtime.jobmaster.restart_strategy import (
    RestartStrategy,
    restart_strategy_from_config,
)
from flowray.runtime.jobmaster.topology import SubtaskTopology, result_partitions
from flowray.runtime.messages import (
    JobOutcome,
    JobStatus,
    LoopCounters,
    TaskFailure,
    TaskResult,
    TaskState,
)
from flowray.runtime.network.blocking_partition import BlockingPartitionStore
from flowray.runtime.network.elements import STOP_DRAIN, STOP_NO_DRAIN
from flowray.state.snapshot import TaskStateSnapshot

from flowray.common.clock import Clock
from flowray.common.configuration import Configuration
from flowray.common.options import (
    BLOCKING_PARTITIONS_DIR,
    CHECKPOINTS_RETENTION,
    RUNTIME_MODE,
    SAVEPOINT_IGNORE_UNCLAIMED_STATE,
    SAVEPOINTS_DIR,
)

__all__ = ["JobScheduler", "CANCEL_GRACE_MS"]

log = logging.getLogger(__name__)

CANCEL_GRACE_MS = 5_000


def _failure_cause(failure: TaskFailure) -> str:
    """What a failed checkpoint's row says about the failure that aborted it."""
    message = failure.message if len(failure.message) <= 200 else failure.message[:197] + "..."
    return f"(task {failure.task!r}: {failure.cause_type}: {message})"


class JobScheduler:
    """One job's life across attempts; see the module docstring."""

    def __init__(self, job_id: str, job_name: str, execution_graph: ExecutionGraph,
                 plan_bytes: Dict[str, bytes], deployer: TaskDeployer, clock: Clock,
                 config: Optional[Dict[str, Any]] = None,
                 restart_strategy: Optional[RestartStrategy] = None,
                 storage: Optional[CheckpointStorage] = None,
                 initial_checkpoint: Optional[CompletedCheckpoint] = None) -> None:
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
        #: iterations whose loop goes through channels: when is it empty?
        self.loops: Dict[str, LoopTerminationDetector] = loop_detectors(execution_graph)
        self.states: Dict[SubtaskId, TaskState] = {s: TaskState.CREATED for s in self.subtasks}
        #: epoch ms each subtask's current attempt was deployed and ended (-1: not yet)
        self.subtask_times: Dict[SubtaskId, Tuple[int, int]] = {}
        self.metrics: Dict[SubtaskId, dict] = {}
        #: records counted by every attempt (the job's totals span restarts)
        self.counters = AttemptCounters()
        self._status = JobStatus.CREATED
        self.attempt = -1
        self.restarts = 0
        self.failure: Optional[TaskFailure] = None       # the cause the job failed with
        self.failures: List[TaskFailure] = []            # every failure, in order
        #: every restart, explained: ``time_ms`` (epoch), ``failure`` (which task, what
        #: exception) and ``decision`` (what restarts, when, under which strategy)
        self.restart_events: List[Dict[str, Any]] = []
        self.failure_times: List[int] = []               # when each was reported (epoch ms)
        #: epoch ms at which the job entered each status (the REST API's "timestamps")
        self.status_times: Dict[str, int] = {JobStatus.CREATED.value: clock.now_ms()}
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
        job_graph = getattr(execution_graph, "job_graph", None)
        self.layouts = vertex_layouts(job_graph) if job_graph is not None else {}
        #: the savepoint or retained checkpoint the job started from (``-s PATH``): used
        #: until the job completes a checkpoint of its own
        self.initial_checkpoint = initial_checkpoint
        self.allow_non_restored_state = conf.get(SAVEPOINT_IGNORE_UNCLAIMED_STATE)
        self.savepoints_dir = conf.get(SAVEPOINTS_DIR)
        self._assigned: Optional[tuple] = None  # (checkpoint, {subtask key: TaskRestore})
        #: a completed checkpoint has side effects (commits): never restore an older one
        self.commits_on_complete = job_graph is not None and any(
            op.commits_on_checkpoint_complete
            for v in job_graph.vertices.values() for op in v.plan.operators.values())
        self.restore_failures = RestoreFailurePolicy()
        self.coordinator = CheckpointCoordinator(
            job_id, self.settings, execution_graph.upstream(), storage, deployer, clock,
            self._on_checkpoint_failure_threshold, stats=self.stats, layouts=self.layouts,
            job_name=job_name)
        if initial_checkpoint is not None:  # ids go on from the savepoint's (Flink)
            self.coordinator.continue_after(initial_checkpoint.checkpoint_id)
        # regions, blocking partitions and the failover strategy
        self.attempts: Dict[SubtaskId, int] = {}
        self._created: Set[SubtaskId] = set(self.subtasks)   # not (re)deployed yet
        # failovers under way, each redeployed on its own once its tasks stopped and its
        # back-off passed; overlapping ones are merged
        self._failovers: List[PendingFailover] = []
        self.batch = conf.get(RUNTIME_MODE) == "BATCH"
        partitions = result_partitions(execution_graph)
        self.topology = SubtaskTopology(self.subtasks, {p.partition_id: p for p in partitions},
                                        self._created, self._finished_for_good)
        #: subtasks that finished in some attempt: their sinks committed all they will
        #: ever get (a re-run of one that restores no checkpoint drops its sinks' records)
        self._output_committed: Set[SubtaskId] = set()
        #: deployed but not initialized yet (not running for the coordinator), and the
        #: savepoint and checkpoint requests that wait for them
        self._initializing: Set[SubtaskId] = set()
        self._waiting_requests: List[Callable[[], None]] = []
        # scheduling goes region by region whatever the failover strategy
        self.regions = [frozenset(r) for r in compute_pipelined_regions(self.topology)]
        root = conf.get(BLOCKING_PARTITIONS_DIR)
        store = (BlockingPartitionStore(root, job_id)
                 if root is not None and any(p.blocking for p in partitions) else None)
        self.partitions = PartitionTracker(partitions, self.topology, self.regions, store)
        self.failure_handler = ExecutionFailureHandler(
            failover_strategy_from_config(conf, self.topology, self.is_partition_available),
            self.restart_strategy, clock)

    # -- queries -----------------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        return self._status

    @status.setter
    def status(self, value: JobStatus) -> None:
        if value is not self._status:
            self.status_times[value.value] = self.clock.now_ms()
        self._status = value

    @property
    def is_done(self) -> bool:
        return self.status.is_globally_terminal_state()

    def running(self) -> List[SubtaskId]:
        return [s for s, st in self.states.items() if st is TaskState.RUNNING]

    @property
    def partition_store(self) -> Optional[BlockingPartitionStore]:
        return self.partitions.store

    def _producer_done(self, partition_id: str) -> bool:
        """Its producer finished in its latest attempt and is not about to run again (one
        that is will write the partition anew)."""
        producer = self.partitions.partitions[partition_id].producer
        return self._finished_for_good(producer)

    def _finished_for_good(self, subtask: SubtaskId) -> bool:
        """Finished in its latest attempt and not about to run again."""
        return self.states.get(subtask) is TaskState.FINISHED and \
            subtask not in self._restarting

    def is_partition_available(self, partition_id: str) -> bool:
        """A blocking partition can be read: its producer finished in its latest attempt
        and its files are there."""
        return self.partitions.is_available(partition_id, self._producer_done(partition_id))

    @property
    def is_running(self) -> bool:
        """The job's status is RUNNING."""
        return self.status == JobStatus.RUNNING

    def outcome(self) -> JobOutcome:
        end = self._end_ms if self._end_ms is not None else self.clock.monotonic_ms()
        counts = self.stats.counts()
        return JobOutcome(self.job_id, self.job_name, self.status, end - self._start_ms,
                          self.failure, [self.metrics[s] for s in sorted(self.metrics)],
                          restarts=self.restarts, checkpoints=counts.get("completed", 0),
                          checkpoint_stats=self.checkpoint_stats(),
                          job_master_restarts=self.job_master_restarts,
                          earlier_attempts=self.counters.earlier(self.attempts),
                          restart_events=list(self.restart_events))

    def checkpoint_stats(self) -> Dict[str, Any]:
        return {"counts": self.stats.counts(), "history": self.stats.history(),
                "summary": self.stats.summary(), "restarts": self.restarts,
                "task_names": {s.key: self._display_name(s) for s in self.subtasks},
                "latest_restore": self.stats.latest_restore,
                "fallbacks": list(self.stats.fallbacks)}

    def _display_name(self, s: SubtaskId) -> str:
        """``"Map (2/4)"``, as the task names itself."""
        vertex = self.eg.vertex(s)
        return f"{vertex.name} ({s.index + 1}/{vertex.parallelism})"

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
        self.job_master_restarts = record_job_master_restart(self.storage)
        restarts = restore_restart_state(self.storage, self.restart_strategy)
        if restarts is not None:
            self.restarts = restarts
        latest = self.coordinator.recover_from_storage(
            allow_fallback=not self.commits_on_complete)
        if latest is None and self.initial_checkpoint is not None:
            latest = self.initial_checkpoint
        log.warning("flowray: job master of %r restarted (%d time(s)); %s", self.job_name,
                    self.job_master_restarts,
                    f"resuming from checkpoint {latest.checkpoint_id}" if latest is not None
                    else "no completed checkpoint: the job starts over")
        return latest.checkpoint_id if latest is not None else None

    # -- savepoints --------------------------------------------------------------------
    def _savepoint_target(self, target_dir: Optional[str], what: str,
                          on_done: SavepointCallback) -> Optional[str]:
        """A new savepoint directory under ``target_dir`` (or
        ``execution.checkpointing.savepoint-dir``);
        None after telling ``on_done`` why there is none."""
        if self.status is not JobStatus.RUNNING:
            on_done(None, f"cannot {what}: the job is {self.status.value}")
            return None
        target = target_dir or self.savepoints_dir
        if not target:
            on_done(None, "no savepoint directory: pass one, or set "
                          "execution.checkpointing.savepoint-dir")
            return None
        blocker = file_in_the_way(target) if "://" not in target or \
            target.startswith("file://") else None
        if blocker is not None:   # before any source stops or any task writes
            on_done(None, f"cannot {what}: the savepoint directory {target!r} cannot be "
                          f"created: {blocker!r} is a file, not a folder")
            return None
        return savepoint_directory(target, self.job_id)

    def _wait_for_initialization(self, request: Callable[[], None]) -> bool:
        """A request made while deployed tasks are still initializing runs once they
        are up (True), instead of failing as 'not all tasks running'."""
        if self._initializing and self.status is JobStatus.RUNNING:
            self._waiting_requests.append(request)
            return True
        return False

    def _run_waiting_requests(self) -> None:
        requests, self._waiting_requests = self._waiting_requests, []
        for request in requests:
            request()

    def trigger_savepoint(self, target_dir: Optional[str], on_done: SavepointCallback) -> None:
        """Take a savepoint into a new directory under ``target_dir`` (or
        ``execution.checkpointing.savepoint-dir``); ``on_done(directory, None)`` or
        ``(None, error)``."""
        if self._wait_for_initialization(lambda: self.trigger_savepoint(target_dir, on_done)):
            return
        location = self._savepoint_target(target_dir, "take a savepoint", on_done)
        if location is not None:
            self.coordinator.trigger_savepoint(location, on_done)

    def trigger_checkpoint(self, on_done: SavepointCallback) -> None:
        """A checkpoint now (retained like the periodic ones); ``on_done(its directory,
        None)`` or ``(None, error)``."""
        if self.storage is None:
            on_done(None, "cannot take a checkpoint: checkpointing is not enabled")
            return
        if self._wait_for_initialization(lambda: self.trigger_checkpoint(on_done)):
            return
        if self.status is not JobStatus.RUNNING:
            on_done(None, f"cannot take a checkpoint: the job is {self.status.value}")
            return
        self.coordinator.trigger_manual_checkpoint(on_done)

    def stop_with_savepoint(self, target_dir: Optional[str], drain: bool,
                            on_done: SavepointCallback) -> None:
        """Stop the sources (``drain``: as if their input ended, so timers and windows
        fire), take a final savepoint, let sinks commit, and finish the job. If the
        savepoint fails, the job fails over and runs on."""
        if self._wait_for_initialization(
                lambda: self.stop_with_savepoint(target_dir, drain, on_done)):
            return
        location = self._savepoint_target(target_dir, "stop with a savepoint", on_done)
        if location is None:
            return
        error = self.coordinator.request_stop(location, on_done)
        if error is not None:
            on_done(None, f"cannot stop with a savepoint: {error}")
            return
        sources = [s for s in self.running() if not self.coordinator.upstream.get(s)]
        log.info("flowray: job %r stops with a savepoint into %s%s", self.job_name, location,
                 " (drain)" if drain else "")
        self.deployer.stop_sources(sources, STOP_DRAIN if drain else STOP_NO_DRAIN)

    # -- restore -----------------------------------------------------------------------
    def _checkpoint_to_restore(self) -> Optional[CompletedCheckpoint]:
        latest = self.coordinator.latest_completed()
        return latest if latest is not None else self.initial_checkpoint

    def _restore_for(self, checkpoint: CompletedCheckpoint, subtask: SubtaskId
                     ) -> TaskRestore:
        """``subtask``'s part of ``checkpoint``, assigned once per checkpoint."""
        if self._assigned is None or self._assigned[0] is not checkpoint:
            own = checkpoint is not self.initial_checkpoint
            location = None if own else checkpoint.external_path.rsplit("/", 1)[0]
            assigned = assign_task_states(
                checkpoint, self.layouts, self.allow_non_restored_state, claimed=own,
                location=location)
            in_flight = assign_in_flight(checkpoint.task_states.values(),
                                         self._exchanges(checkpoint),
                                         self.allow_non_restored_state)
            for key, recovered in in_flight.items():
                assigned.setdefault(key, TaskRestore(checkpoint.checkpoint_id)).in_flight = \
                    recovered
            self._assigned = (checkpoint, assigned)
        restore = self._assigned[1].get(subtask.key)
        return restore if restore is not None else TaskRestore(checkpoint.checkpoint_id)

    def _exchanges(self, checkpoint: CompletedCheckpoint) -> List[Exchange]:
        """The job's exchanges as channel state needs them, with each consumer's
        parallelism in ``checkpoint`` (found by its first operator uid)."""
        old = {lay.operator_uids[0]: lay.parallelism
               for lay in (getattr(checkpoint, "vertices", None) or {}).values()
               if lay.operator_uids}
        out = []
        for edge in self.eg.job_graph.edges.values():
            name = self.eg.exchange_name(edge)
            consumer = self.eg.vertices[edge.target_vertex]
            out.append(Exchange(name, consumer.id, consumer.parallelism,
                                old.get(name[1], consumer.parallelism),
                                consumer.max_parallelism,
                                isinstance(edge.partitioner, KeyGroupStreamPartitioner)))
        return out

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
            inputs = self.partitions.inputs_of(region)
            if all(self.is_partition_available(pid) for pid in inputs):
                ready.extend(s for s in self.subtasks if s in todo)
            else:  # a producer that finished but whose files are gone: produce again
                lost.extend(self.partitions.partitions[pid] for pid in sorted(inputs)
                            if self.partitions.is_lost(pid, self._producer_done(pid)))
        if ready:
            self._deploy(ready)
        for p in lost:
            if self.states.get(p.producer) is TaskState.FINISHED:
                self._on_failure(TaskFailure(
                    f"{p.producer.vertex_id}[{p.producer.index}]", None,
                    "PartitionNotFoundError",
                    f"blocking partition {p.partition_id} of a finished producer is gone",
                    "", False), p.producer)

    def _deploy(self, subtasks: List[SubtaskId]) -> None:
        self.attempt += 1
        latest = self._checkpoint_to_restore()
        descriptors = []
        for s in subtasks:
            restore = self._restore_for(latest, s) if latest is not None else None
            descriptors.append(self.eg.deployment_descriptor(
                s, self.job_id, self.plan_bytes[s.vertex_id], self.config, self.attempt,
                restore=restore,
                output_committed=restore is None and s in self._output_committed))
            self.states[s] = TaskState.RUNNING
            self.subtask_times[s] = (self.clock.now_ms(), -1)
            self.attempts[s] = self.attempt
            self._initializing.add(s)
            self._created.discard(s)
            self._cancel_sent.pop(s, None)
            # a partition released earlier and produced again is released again
            self.partitions.producer_deployed(s)
        self.status = JobStatus.RUNNING
        self._attempt_failures = []
        if latest is not None:
            log.info("flowray: job %r attempt %d restores checkpoint %d", self.job_name,
                     self.attempt, latest.checkpoint_id)
            self.stats.report_restored(latest.checkpoint_id, latest.is_savepoint,
                                       latest.external_path, self.clock.now_ms())
        for detector in self.loops.values():   # the tasks start counting again
            if detector.tasks & set(subtasks):
                detector.reset()
        # the coordinator counts a task as running once it says it has initialized
        # (channels connected, state restored): checkpoints wait for that, and the first
        # one comes an interval after the last task is up, not an interval after the
        # deploy request (when processes may still be starting)
        self.deployer.deploy(self.attempt, descriptors)

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

    def _ended(self, s: SubtaskId) -> None:
        now = self.clock.now_ms()
        self.subtask_times[s] = (self.subtask_times.get(s, (now, -1))[0], now)

    def on_task_metrics(self, attempt: int, subtask: SubtaskId,
                        metrics: Optional[dict]) -> None:
        """A task's metrics as its heartbeat brought them."""
        self.counters.observe(subtask, attempt, metrics)

    def on_task_result(self, attempt: int, result: TaskResult) -> None:
        s = result.subtask
        self.counters.observe(s, attempt, result.metrics)   # an older attempt's too
        if not self._current(attempt, s):
            return
        if self.states.get(s) is not TaskState.RUNNING:
            return
        self.states[s] = result.state
        self._ended(s)
        self._cancel_sent.pop(s, None)
        self._initializing.discard(s)
        if result.metrics:
            self.metrics[s] = result.metrics
        if result.state is TaskState.FINISHED:
            self._output_committed.add(s)
            self.coordinator.task_finished(s)
            if self.batch:
                self.partitions.release_consumed(
                    s, lambda t: self.states.get(t) is TaskState.FINISHED)
                self._schedule()
        elif result.state is TaskState.FAILED:
            failure = result.failure or self._task_lost(s, "failed without a cause")
            self._attempt_failures.append(failure)
            self._on_failure(failure, s)
        elif (result.state is TaskState.CANCELED and self.status is JobStatus.RUNNING
              and s not in self._restarting):
            self._on_failure(self._task_lost(s, "was cancelled outside the job master"), s)
        self._check_progress()

    def on_task_lost(self, attempt: int, subtask: SubtaskId, reason: str) -> None:
        """A task's process died, hangs, or never started (no result)."""
        self.on_task_result(attempt, TaskResult(subtask, TaskState.FAILED,
                                                self._task_lost(subtask, reason)))

    def _task_lost(self, subtask: SubtaskId, reason: str) -> TaskFailure:
        """A failure without a result from the task, named as the task names itself."""
        failure = task_lost(subtask, reason)
        v = self.eg.vertex(subtask)
        failure.task = f"{v.name} ({subtask.index + 1}/{v.parallelism})"
        return failure

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

    def on_task_initialized(self, attempt: int, subtask: SubtaskId) -> None:
        """The task is up (Flink's INITIALIZING -> RUNNING): checkpoints may include it."""
        if self._current(attempt, subtask) and self.states.get(subtask) is TaskState.RUNNING:
            self.coordinator.tasks_running([subtask])
            self._initializing.discard(subtask)
            if not self._initializing:
                self._run_waiting_requests()

    def on_ended_input(self, attempt: int, subtask: SubtaskId) -> None:
        if self._current(attempt, subtask) and self.status is JobStatus.RUNNING:
            self.coordinator.task_ended_input(subtask)

    # -- loops (runtime/jobmaster/loop_termination.py) ----------------------------------
    def on_loop_idle(self, attempt: int, subtask: SubtaskId) -> None:
        """An iteration head is idle: a wave reads its loop's counters."""
        if not self._current(attempt, subtask) or self.status is not JobStatus.RUNNING:
            return
        for detector in self.loops.values():
            if subtask in detector.heads and not detector.terminated:
                detector.wanted = True
        self._start_loop_waves()

    def on_loop_counters(self, attempt: int, subtask: SubtaskId, iteration: str, wave: int,
                         counters: LoopCounters) -> None:
        detector = self.loops.get(iteration)
        if detector is None or not self._current(attempt, subtask) \
                or self.status is not JobStatus.RUNNING:
            return
        if detector.on_counters(wave, subtask, counters) is WaveResult.TERMINATED:
            log.info("flowray: the loop of iteration %s is empty: its heads end", iteration)
            self.deployer.end_loop(sorted(detector.heads))
        self._start_loop_waves()

    def _start_loop_waves(self) -> None:
        for iteration, detector in self.loops.items():
            if (detector.wanted and not detector.in_flight and not detector.terminated
                    and all(self.states.get(t) is TaskState.RUNNING
                            for t in detector.tasks)):
                wave = detector.start_wave()
                self.deployer.request_loop_counters(sorted(detector.tasks), iteration, wave)

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
                self._ended(s)
                del self._cancel_sent[s]
        self._check_progress()

    # -- decisions ---------------------------------------------------------------------
    def _on_failure(self, failure: TaskFailure, subtask: Optional[SubtaskId] = None) -> None:
        """Ask the failure handler what ``failure`` means (the failed task's region and what
        it involves; every task for ``full`` or a failure of no task) and carry it out:
        a failover after a back-off, or the job fails."""
        if self.status not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return  # failing or cancelling: the first cause stands
        if subtask is not None and subtask in self._restarting:
            return  # a consequence of a failover already under way
        self.failures.append(failure)
        self.failure_times.append(self.clock.now_ms())
        deployed = [s for s in self.subtasks if s not in self._created]
        if failure.restoring_checkpoint is None:
            self.restore_failures.restored()  # the last restore went through
        else:
            decision = self.restore_failures.decide(
                failure, [c.checkpoint_id for c in self.coordinator.store.all()],
                own=self._checkpoint_to_restore() is not self.initial_checkpoint,
                commits_on_complete=self.commits_on_complete,
                attempt=self.attempts.get(subtask, -1) if subtask is not None else -1)
            if decision.action is RestoreAction.FAIL_JOB:
                log.error("flowray: job %r: %s", self.job_name, decision.message)
                self.coordinator.tasks_not_running(deployed, cause=_failure_cause(failure))
                failure.message = f"{decision.message}"
                self._fail(failure)
                return
            if decision.action is RestoreAction.FALL_BACK:
                # every task must restore the same checkpoint: a global failover
                self.coordinator.drop_damaged(decision.checkpoint_id, decision.message)
                self.stats.report_fallback(decision.message)
                subtask = None
        if self.coordinator.stopping:  # sources have stopped everywhere: restart all
            subtask = None
        if subtask is None:
            result = self.failure_handler.handle_global_failure(failure, deployed)
        else:
            result = self.failure_handler.handle_task_failure(
                subtask, failure, self.partitions.partition_of_channel(failure.failed_channel),
                self._created)
        self._save_restart_state()
        self.coordinator.tasks_not_running(sorted(result.tasks_to_restart),
                                           cause=_failure_cause(failure))
        if result.can_restart:
            self._restart(result, deployed)
        else:
            self._fail(failure)

    def _save_restart_state(self) -> None:
        if self.storage is not None:
            save_restart_state(self.storage, self.restart_strategy, self.restarts)

    def _fail(self, failure: TaskFailure) -> None:
        self.status = JobStatus.FAILING
        self.failure = failure
        # the root cause is looked for from here on: the failures before this one
        # were recovered from (a restart was granted, or they were consequences of one)
        self._attempt_failures = [failure]
        self._stop_all()

    def _restart(self, result: FailureHandlingResult, deployed: List[SubtaskId]) -> None:
        tasks = set(result.tasks_to_restart)
        self._add_failover(PendingFailover(tasks, self.clock.monotonic_ms()
                                           + result.restart_delay_ms))
        if self._restarting >= set(deployed):
            self.status = JobStatus.RESTARTING
        decision = (f"restarting {len(tasks)} of {len(self.subtasks)} tasks in "
                    f"{result.restart_delay_ms} ms ({result.restart_strategy})")
        self.restart_events.append({"time_ms": self.clock.now_ms(),
                                    "failure": result.failure.describe(),
                                    "decision": decision})
        log.warning("flowray: job %r: %s; %s", self.job_name, result.failure.describe(),
                    decision)
        self._cancel([s for s in sorted(tasks) if self.states[s] is TaskState.RUNNING])

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

    def _add_failover(self, failover: PendingFailover) -> None:
        """A failover sharing tasks with ones under way is merged with them: the merged
        one waits for the latest back-off and counts every failover it holds."""
        self._failovers = merge_failover(self._failovers, failover)

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
        self._save_restart_state()
        self._schedule()

    def _finish(self) -> None:
        self._initializing.clear()
        self._run_waiting_requests()   # each tells its caller the job has ended
        self._end_ms = self.clock.monotonic_ms()
        self.coordinator.shutdown()
        self.partitions.release_all()
        self.clean_up_storage()

    def clean_up_storage(self) -> None:
        """What an ended job leaves in checkpoint storage: nothing, or (retention) its
        retained checkpoints with the shared files they reference and nothing else.
        Idempotent; the shell calls it again once every task process is gone, for uploads
        that landed after the end."""
        if self.storage is None or not self.is_done:
            return
        clean_up_ended_job(self.storage, self.coordinator, self.retention, self.status,
                           self.job_name,
                           (JOB_FILE, JOB_MASTER_RESTARTS_FILE, RESTART_STATE_FILE,
                            LATEST_COMPLETED_FILE, RESERVED_IDS_FILE))

    def next_wakeup_ms(self) -> float:
        """Longest the shell may wait before the next ``tick()``."""
        return 50.0
