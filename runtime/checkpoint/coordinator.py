"""The job master's checkpoint bookkeeping (Flink's ``CheckpointCoordinator``), pure.

One role per class, as in Flink:

- :func:`compute_checkpoint_plan` (``DefaultCheckpointPlanCalculator``): which tasks to
  trigger, which must acknowledge, which are finished.
- :class:`PendingCheckpoint`: the acknowledgements of one checkpoint in flight.
- :class:`CompletedCheckpointStore`: the retained completed checkpoints (and savepoints).
- :class:`CheckpointFailureManager`: consecutive failures against
  ``execution.checkpointing.tolerable-failed-checkpoints``.
- :class:`CheckpointCoordinator`: triggers (periodic, forced, savepoint, final), acks,
  declines, timeouts, completion, subsumption and aborts.

No threads, no Ray, no sleeping: time comes from the injected :class:`~flowray.common.clock.Clock`,
tasks are reached through a :class:`CheckpointGateway`, files through a
:class:`~flowray.runtime.checkpoint.storage.CheckpointStorage`. The job master calls
:meth:`CheckpointCoordinator.tick` often and forwards task events.

>>> from flowray.common.clock import ManualClock
>>> from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> from flowray.state.snapshot import TaskStateSnapshot
>>> src, sink = SubtaskId("src", 0), SubtaskId("sink", 0)
>>> class Gateway(CheckpointGateway):
...     def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint, location=None):
...         print("trigger", subtask.key, checkpoint_id)
...     def notify_complete(self, subtask, checkpoint_id):
...         print("complete", subtask.key, checkpoint_id)
...     def notify_aborted(self, subtask, checkpoint_id, reason):
...         print("aborted", subtask.key, checkpoint_id, reason.name)
>>> clock = ManualClock(0)
>>> settings = CheckpointSettings(interval_ms=1000)
>>> coord = CheckpointCoordinator("job", settings, {src: set(), sink: {src}},
...                               MemoryCheckpointStorage("job"), Gateway(), clock,
...                               fail_job=print)
>>> coord.tasks_running([src, sink])
>>> clock.advance(1000); coord.tick()
trigger src:0 1
>>> coord.receive_acknowledge(src, 1, TaskStateSnapshot(), {"sync_ms": 1})
<AckResult.SUCCESS: 'SUCCESS'>
>>> _ = coord.receive_acknowledge(sink, 1, TaskStateSnapshot(), {})
complete sink:0 1
complete src:0 1
>>> coord.latest_completed().checkpoint_id, coord.latest_completed().external_path
(1, 'memory://job/chk-1/_metadata')
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from typing import (Any, Callable, Deque, Dict, FrozenSet, Iterable, List, Mapping,
                    Optional, Set, Union)

from flowray.state.snapshot import TaskStateSnapshot

from flowray.runtime.checkpoint.stats import CheckpointStatsTracker
from flowray.runtime.checkpoint.pending import AckResult, PendingCheckpoint
from flowray.runtime.checkpoint.failure import (
    CheckpointFailureManager,
    CheckpointFailureReason,
    notify_nobody,
)
from flowray.runtime.checkpoint.gateway import CheckpointGateway, TriggerResult
from flowray.runtime.checkpoint.plan import CheckpointPlan, TaskStatus, compute_checkpoint_plan
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.runtime.checkpoint.completed import CompletedCheckpoint, CompletedCheckpointStore
from flowray.runtime.checkpoint.recovery import CheckpointRecoveryError, StorageRecovery
from flowray.runtime.checkpoint.storage import CheckpointStorage
from flowray.runtime.checkpoint.savepoints import SavepointStorage, write_savepoint_metadata
from flowray.runtime.checkpoint.state_assignment import VertexStateLayout
from flowray.runtime.checkpoint.shared_registry import FileHandle, SharedStateRegistry
from flowray.runtime.checkpoint.shared_files import (
    register_shared_state,
    unreferenced_files,
)
from flowray.common.clock import Clock
from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = ["CheckpointCoordinator", "SavepointCallback", "CheckpointRecoveryError"]


#: told how a triggered checkpoint or savepoint ended: ``(its directory, None)`` or
#: ``(None, error message)``
SavepointCallback = Callable[[Optional[str], Optional[str]], None]

log = logging.getLogger(__name__)

_DONE = (TaskStatus.ENDED_INPUT, TaskStatus.FINISHED)  # sent everything it will send
_RECENTLY_ABORTED = 64  # ids of aborted checkpoints remembered for late acknowledgements


class CheckpointCoordinator(StorageRecovery):
    """Triggers checkpoints, collects acknowledgements, completes or aborts them.

    ``upstream`` maps every subtask of the job to the subtasks it reads from (an empty
    set for sources). ``storage`` may be ``None`` when checkpointing is off (a savepoint
    then fails with IO_FAILURE). ``fail_job(message)`` is called when consecutive failures exceed
    ``settings.tolerable_failures``. Every task starts NOT_RUNNING: the job master calls
    :meth:`tasks_running` once they are deployed.
    """

    def __init__(self, job_id: str, settings: CheckpointSettings,
                 upstream: Mapping[SubtaskId, Iterable[SubtaskId]],
                 storage: Optional[CheckpointStorage], gateway: CheckpointGateway,
                 clock: Clock,
                 fail_job: Callable[[str], None],
                 stats: Optional[CheckpointStatsTracker] = None,
                 store: Optional[CompletedCheckpointStore] = None,
                 layouts: Optional[Mapping[str, VertexStateLayout]] = None,
                 job_name: str = "") -> None:
        self.job_id = job_id
        self.settings = settings
        self.upstream: Dict[SubtaskId, FrozenSet[SubtaskId]] = {
            t: frozenset(u) for t, u in upstream.items()}
        for t, ups in self.upstream.items():
            unknown = [u for u in ups if u not in self.upstream]
            if unknown:
                raise ValueError(f"{t.key} reads from unknown subtask(s) "
                                 f"{sorted(u.key for u in unknown)}")
        self.storage = storage
        self.gateway = gateway
        self.clock = clock
        self.fail_job = fail_job
        self.stats = stats if stats is not None else CheckpointStatsTracker()
        self.store = store if store is not None else CompletedCheckpointStore(
            settings.num_retained)
        self.failures = CheckpointFailureManager(settings.tolerable_failures)
        self._by_key: Dict[str, SubtaskId] = {t.key: t for t in self.upstream}
        self.statuses: Dict[SubtaskId, TaskStatus] = {
            t: TaskStatus.NOT_RUNNING for t in self.upstream}
        self._pending: "OrderedDict[int, PendingCheckpoint]" = OrderedDict()
        self._recently_aborted: Deque[int] = deque(maxlen=_RECENTLY_ABORTED)
        self._next_id = self._first_checkpoint_id()
        #: ids below this one are noted in storage as handed out (a successor starts here)
        self._reserved_up_to = 0
        #: after a job master restart: ids of the dead master's checkpoints are below the
        #: fence, and its tasks' late uploads for them are swept until the given time
        self._fence: Optional[int] = None
        self._fence_until_ms = 0.0
        self._next_trigger_ms: Optional[float] = None  # monotonic; None: not scheduled
        self._last_completion_ms: Optional[float] = None  # monotonic
        # tasks that ended their input and wait for a checkpoint taken after that
        self._awaiting_final: Set[SubtaskId] = set()
        self._shutdown = False
        self._not_triggered_streak = 0  # periodic triggers in a row that could not start
        # files shared between incremental checkpoints, counted over the retained ones
        self.registry = SharedStateRegistry(discard=self._discard_shared_file)
        #: every vertex's layout, recorded in each checkpoint (for restores by uid)
        self.layouts: Dict[str, VertexStateLayout] = dict(layouts or {})
        self.job_name = job_name
        self._callbacks: Dict[int, SavepointCallback] = {}
        #: a stop-with-savepoint under way: (savepoint directory, callback)
        self._stop: Optional[tuple] = None

    def _first_checkpoint_id(self) -> int:
        """1, or past every checkpoint already in the store or in storage (a restarted
        job master must not reuse a ``chk-<n>`` directory)."""
        highest = self.store.max_checkpoint_id()
        if self.storage is None:
            return highest + 1
        try:
            on_disk = self.storage.list_completed()
        except Exception:  # unreadable storage shows up at the first write
            log.warning("could not list completed checkpoints of %s", self.job_id,
                        exc_info=True)
            on_disk = []
        if on_disk:
            highest = max(highest, on_disk[-1])
        return highest + 1

    # -- queries -----------------------------------------------------------------------------
    def latest_completed(self) -> Optional[CompletedCheckpoint]:
        return self.store.latest()

    def pending_ids(self) -> List[int]:
        return list(self._pending)

    def pending(self, checkpoint_id: int) -> Optional[PendingCheckpoint]:
        return self._pending.get(checkpoint_id)

    @property
    def next_checkpoint_id(self) -> int:
        return self._next_id

    @property
    def next_trigger_ms(self) -> Optional[float]:
        """Monotonic time of the next periodic trigger (``None``: not scheduled)."""
        return self._next_trigger_ms

    @property
    def consecutive_failures(self) -> int:
        return self.failures.count

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def plan(self) -> CheckpointPlan:
        return compute_checkpoint_plan(self.upstream, self.statuses)

    # -- task status -------------------------------------------------------------------------
    def tasks_running(self, subtasks: Iterable[SubtaskId]) -> None:
        """Deployed and initialized; (re)starts the periodic timer: next trigger at
        now + interval. A task that already said it ended its input (its messages may
        arrive out of order) or finished stays so."""
        for t in subtasks:
            self._check_known(t)
            if self.statuses[t] == TaskStatus.NOT_RUNNING:
                self.statuses[t] = TaskStatus.RUNNING
        if self.settings.enabled and not self._shutdown:
            self._next_trigger_ms = self.clock.monotonic_ms() + self.settings.interval_ms
        self._maybe_trigger_final()   # the last task up may be what the final one waited for

    def tasks_not_running(self, subtasks: Iterable[SubtaskId], cause: str = "") -> None:
        """Being restarted: every pending checkpoint is aborted (TASK_FAILURE, with the
        failure's ``cause``: which task, what); tasks that keep running are told, the
        restarting ones are not."""
        for t in subtasks:
            self._check_known(t)
            self.statuses[t] = TaskStatus.NOT_RUNNING
            self._awaiting_final.discard(t)
        for p in list(self._pending.values()):
            self._abort(p, CheckpointFailureReason.TASK_FAILURE, message=cause)
        if self._stop is not None:  # still waiting for inputs to end: the stop is over
            _, callback = self._stop
            self._stop = None
            self._notify(callback, None, "stop-with-savepoint failed: a task failed before "
                                         "the savepoint; the job restarts and runs on")

    def task_ended_input(self, subtask: SubtaskId) -> None:
        """The task's input ended and its operators finished; it waits for a checkpoint to
        complete. It is triggered directly for every pending checkpoint it has not
        acknowledged (and was not triggered for); once every task not finished has ended
        its input, a final checkpoint is triggered at once (as soon as max-concurrent
        allows)."""
        self._check_known(subtask)
        if self.statuses[subtask] == TaskStatus.FINISHED:
            return
        self.statuses[subtask] = TaskStatus.ENDED_INPUT
        self._awaiting_final.add(subtask)
        self._trigger_new_roots()
        self._maybe_trigger_final()

    def task_finished(self, subtask: SubtaskId) -> None:
        """FINISHED: pending checkpoints waiting for it take ``finished_task()`` as its
        acknowledgement; later checkpoints include it as finished without asking it."""
        self._check_known(subtask)
        self.statuses[subtask] = TaskStatus.FINISHED
        self._awaiting_final.discard(subtask)
        for p in list(self._pending.values()):
            if p.is_discarded or subtask not in p.not_yet_acknowledged:
                continue
            if p.acknowledge(subtask, TaskStateSnapshot.finished_task(), {}) is \
                    AckResult.SUCCESS:
                self.stats.report_acknowledged(p.checkpoint_id, subtask.key,
                                               {"finished": True})
                if p.is_fully_acknowledged:
                    self._complete(p)
        self._trigger_new_roots()
        if self._all_finished():
            self._next_trigger_ms = None
        else:  # the tasks still running may have been all that kept a final checkpoint
            self._maybe_trigger_final()

    # -- time ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Expire timed-out checkpoints, trigger a periodic checkpoint when due."""
        if self._shutdown:
            return
        now = self.clock.monotonic_ms()
        for p in list(self._pending.values()):
            if now - p.trigger_monotonic_ms >= self.settings.timeout_ms:
                self._abort(p, CheckpointFailureReason.EXPIRED)
        self._maybe_trigger_final()
        if self._next_trigger_ms is not None and now >= self._next_trigger_ms \
                and self._stop is None:
            self.trigger_checkpoint(is_savepoint=False, periodic=True)

    # -- triggering ------------------------------------------------------------------------------
    def trigger_checkpoint(self, is_savepoint: bool = False,
                           periodic: bool = True,
                           location: Optional[str] = None,
                           on_done: Optional[SavepointCallback] = None) -> TriggerResult:
        """Start a checkpoint. Periodic ones obey max-concurrent and min-pause; savepoints
        and forced checkpoints (``periodic=False``) do not. A failed precondition consumes
        no checkpoint id."""
        periodic = periodic and not is_savepoint
        now = self.clock.monotonic_ms()
        failure = self._check_preconditions(periodic, now)
        if failure is not None:
            if periodic:
                self._reschedule_after_failed_trigger(failure, now)
                if failure == CheckpointFailureReason.NOT_ALL_TASKS_RUNNING:
                    self._report_not_triggered(failure)
            return TriggerResult(None, failure)
        self._not_triggered_streak = 0
        plan = self.plan()
        return TriggerResult(self._start(plan, is_savepoint, periodic, now,
                                         location=location, on_done=on_done), None)

    def trigger_manual_checkpoint(self, on_done: SavepointCallback) -> TriggerResult:
        """A checkpoint now, outside the periodic schedule (Flink's manual checkpoint);
        ``on_done`` gets its ``chk-<n>`` directory once it completes."""
        result = self.trigger_checkpoint(is_savepoint=False, periodic=False, on_done=on_done)
        if not result.ok:
            on_done(None, f"checkpoint not triggered: {result.failure.value}")
        return result

    def trigger_savepoint(self, location: str, on_done: SavepointCallback) -> TriggerResult:
        """Start a savepoint written to the directory ``location``; ``on_done`` is told
        how it ends. Sinks do not commit on it (a restore may go back to an earlier
        checkpoint); its transactions commit with the next checkpoint."""
        result = self.trigger_checkpoint(is_savepoint=True, periodic=False,
                                         location=location, on_done=on_done)
        if not result.ok:
            on_done(None, f"savepoint not triggered: {result.failure.value}")
        return result

    def request_stop(self, location: str, on_done: SavepointCallback) -> Optional[str]:
        """Stop-with-savepoint: once every task has ended its input (the job master stops
        the sources), a final savepoint is written to ``location``; tasks are notified of
        its completion (sinks commit) and finish. If it fails, the job fails over
        (``fail_job``). Returns an error message if a stop cannot start now."""
        if self._shutdown:
            return "the job is not running"
        if self._stop is not None:
            return "a stop-with-savepoint is already under way"
        if any(s == TaskStatus.NOT_RUNNING for s in self.statuses.values()):
            return "not every task is running (the job is restarting)"
        self._stop = (location, on_done)
        self._maybe_trigger_final()
        return None

    @property
    def stopping(self) -> bool:
        return self._stop is not None

    def _report_not_triggered(self, failure: CheckpointFailureReason) -> None:
        """Counted in the stats; logged once per outage (the trigger is retried every
        interval until every task runs again)."""
        self.stats.report_not_triggered(failure.name)
        self._not_triggered_streak += 1
        if self._not_triggered_streak == 1:
            down = sum(1 for s in self.statuses.values() if s == TaskStatus.NOT_RUNNING)
            log.info("flowray: checkpoint not triggered (%s: %d task(s) not running); "
                     "retrying every %d ms", failure.name, down, self.settings.interval_ms)

    def _check_preconditions(self, periodic: bool, now: float
                             ) -> Optional[CheckpointFailureReason]:
        if self._shutdown:
            return CheckpointFailureReason.COORDINATOR_SHUTDOWN
        if self._all_finished():
            return CheckpointFailureReason.ALL_TASKS_FINISHED
        if any(s == TaskStatus.NOT_RUNNING for s in self.statuses.values()):
            return CheckpointFailureReason.NOT_ALL_TASKS_RUNNING
        if periodic:
            if len(self._pending) >= self._max_concurrent():
                return CheckpointFailureReason.TOO_MANY_CONCURRENT
            if (self._last_completion_ms is not None
                    and now - self._last_completion_ms < self.settings.min_pause_ms):
                return CheckpointFailureReason.MINIMUM_PAUSE
        return None

    def _max_concurrent(self) -> int:
        # Flink: a minimum pause implies one checkpoint at a time
        return 1 if self.settings.min_pause_ms > 0 else self.settings.max_concurrent

    def _reschedule_after_failed_trigger(self, failure: CheckpointFailureReason,
                                         now: float) -> None:
        if not self.settings.enabled:
            return
        if failure == CheckpointFailureReason.MINIMUM_PAUSE:
            assert self._last_completion_ms is not None
            self._next_trigger_ms = self._last_completion_ms + self.settings.min_pause_ms
        elif failure == CheckpointFailureReason.TOO_MANY_CONCURRENT:
            # stays due (Flink queues the request): the next tick after a pending
            # checkpoint ends triggers, subject to the minimum pause
            pass
        elif failure == CheckpointFailureReason.NOT_ALL_TASKS_RUNNING:
            self._next_trigger_ms = now + self.settings.interval_ms
        else:  # all finished, shut down: nothing more to schedule
            self._next_trigger_ms = None

    def _start(self, plan: CheckpointPlan, is_savepoint: bool, periodic: bool,
               now: float, is_final: bool = False, location: Optional[str] = None,
               terminate: bool = False,
               on_done: Optional[SavepointCallback] = None) -> int:
        cid = self._next_id
        self._next_id += 1
        self._reserve_id(cid)
        timestamp = self.clock.now_ms()
        p = PendingCheckpoint(cid, timestamp, set(plan.tasks_to_ack), set(plan.finished),
                              is_savepoint, tasks_to_trigger=plan.tasks_to_trigger,
                              trigger_monotonic_ms=now, is_final=is_final,
                              location=location, terminate=terminate)
        self._pending[cid] = p
        if on_done is not None:  # before any trigger: a failed one reports through it
            self._callbacks[cid] = on_done
        self.stats.report_triggered(cid, timestamp, is_savepoint,
                                    num_tasks=len(plan.tasks_to_ack) + len(plan.finished))
        for t in plan.finished:
            self.stats.report_acknowledged(cid, t.key, {"finished": True})
        if periodic and self.settings.enabled:
            nxt = now + self.settings.interval_ms
            if self._last_completion_ms is not None:
                nxt = max(nxt, self._last_completion_ms + self.settings.min_pause_ms)
            self._next_trigger_ms = nxt
        log.debug("triggering %s %d of %s (%d tasks to trigger, %d to ack, %d finished)",
                  "savepoint" if is_savepoint else "checkpoint", cid, self.job_id,
                  len(plan.tasks_to_trigger), len(plan.tasks_to_ack), len(plan.finished))
        self._send_trigger(p, sorted(plan.tasks_to_trigger))
        return cid

    def _trigger_new_roots(self) -> None:
        """A task whose upstream tasks all ended or finished can no longer get a barrier
        from them (they may have finished without taking part): trigger it directly for
        every pending checkpoint it has not acknowledged and was not triggered for."""
        # a task that ended its input has had end-of-partition from every upstream task,
        # whatever their status here says
        roots = set(self.plan().tasks_to_trigger) | {
            t for t, st in self.statuses.items() if st == TaskStatus.ENDED_INPUT}
        for p in list(self._pending.values()):
            if p.is_discarded:
                continue
            new = sorted(t for t in roots
                         if t in p.not_yet_acknowledged and t not in p.tasks_triggered)
            if new:
                p.tasks_triggered.update(new)
                self._send_trigger(p, new)

    def _send_trigger(self, p: PendingCheckpoint, subtasks: Iterable[SubtaskId]) -> None:
        for t in subtasks:
            if p.is_discarded:
                return
            try:
                self.gateway.trigger(t, p.checkpoint_id, p.trigger_ms, p.is_savepoint,
                                     location=p.location)
            except Exception:  # a task we cannot reach fails the checkpoint
                log.warning("could not trigger checkpoint %d on %s", p.checkpoint_id,
                            t.key, exc_info=True)
                self._abort(p, CheckpointFailureReason.TRIGGER_FAILURE)
                return

    def _maybe_trigger_final(self) -> None:
        """Trigger the final checkpoint when every task not finished has ended its input,
        some of them still wait for a checkpoint taken after that, no pending checkpoint
        will be one, and max-concurrent allows."""
        if self._shutdown or not self._all_ended():
            return
        if self._stop is not None:  # the final checkpoint is the stop's savepoint
            if not any(p.terminate for p in self._pending.values()):
                self._start(self.plan(), True, False, self.clock.monotonic_ms(),
                            is_final=True, location=self._stop[0], terminate=True,
                            on_done=self._stop[1])
            return
        if not self._awaiting_final:
            return
        waiting = self._awaiting_final
        for p in self._pending.values():
            if p.is_savepoint:  # completing a savepoint releases nobody
                continue
            if all(not p.is_acknowledged_by(t) or p.task_states[t.key].input_ended
                   for t in waiting):
                return  # it will complete with their after-the-end snapshots
        if len(self._pending) >= self._max_concurrent():
            return  # triggered when a pending checkpoint ends
        now = self.clock.monotonic_ms()
        if (self._last_completion_ms is not None
                and now - self._last_completion_ms < self.settings.min_pause_ms):
            return  # the minimum pause holds for it too: a later tick triggers it
        self._start(self.plan(), False, False, now, is_final=True)

    # -- acknowledgements ------------------------------------------------------------------------
    def receive_acknowledge(self, subtask: SubtaskId, checkpoint_id: int,
                            state: Optional[TaskStateSnapshot],
                            metrics: Optional[dict] = None) -> AckResult:
        p = self._pending.get(checkpoint_id)
        if p is None:
            if state is not None:  # its shared uploads belong to no checkpoint
                self._discard_unreferenced({subtask.key: state})
            if checkpoint_id in self._recently_aborted:
                # a late ack of an aborted checkpoint may have written files again
                self._discard_dir(checkpoint_id)
                return AckResult.DISCARDED
            return AckResult.UNKNOWN
        result = p.acknowledge(subtask, state, metrics)
        if result is AckResult.SUCCESS:
            self.stats.report_acknowledged(checkpoint_id, subtask.key, metrics)
            if p.is_fully_acknowledged:
                self._complete(p)
        return result

    def receive_decline(self, subtask: SubtaskId, checkpoint_id: int,
                        reason: "Union[CheckpointFailureReason, str, None]" = None,
                        message: str = "") -> None:
        """A task could not take part: abort with ``reason`` (DECLINED when none or
        unknown; a reason name as sent by tasks is accepted)."""
        p = self._pending.get(checkpoint_id)
        if p is None or subtask not in p.tasks_to_ack:
            return
        r = CheckpointFailureReason.parse(reason)
        log.info("checkpoint %d declined by %s: %s%s", checkpoint_id, subtask.key, r.value,
                 f" ({message})" if message else "")
        self._abort(p, r, from_task=True, message=message)

    # -- completion and abort ---------------------------------------------------------------------
    def _complete(self, p: PendingCheckpoint) -> None:
        cid = p.checkpoint_id
        completed = CompletedCheckpoint(self.job_id, cid, p.trigger_ms, self.clock.now_ms(),
                                        dict(p.task_states), p.is_savepoint,
                                        vertices=dict(self.layouts), job_name=self.job_name)
        try:
            if self.storage is None and p.location is None:
                raise RuntimeError("no checkpoint storage configured")
            # before the metadata is written: it must name the copies the registry keeps
            if not p.is_savepoint:  # savepoints are self-contained
                register_shared_state(self.registry, cid, completed.task_states)
            if p.location is not None:
                write_savepoint_metadata(completed, p.location)
            else:
                completed.external_path = self.storage.write_metadata(completed)
                if not p.is_savepoint:  # recovery never uses savepoints
                    self._record_latest(cid)
        except Exception as e:  # storage errors fail this checkpoint only
            log.warning("could not write metadata of checkpoint %d", cid, exc_info=True)
            self.registry.release_checkpoint(cid)
            self._abort(p, CheckpointFailureReason.IO_FAILURE,
                        message=f"{type(e).__name__}: {e}")
            return
        del self._pending[cid]
        self._last_completion_ms = self.clock.monotonic_ms()
        self.failures.on_success(cid)
        self.stats.report_completed(cid, completed.completed_ms, completed.state_size(),
                                    completed.external_path)
        if not p.is_savepoint:
            for old in self.store.add(completed):
                if old.checkpoint_id != cid:
                    self._discard_completed(old.checkpoint_id)
            for older in [q for q in self._pending.values()
                          if q.checkpoint_id < cid and not q.is_savepoint]:
                self._abort(older, CheckpointFailureReason.SUBSUMED)
            for t in sorted(p.tasks_to_ack):
                if self.statuses.get(t) in (TaskStatus.RUNNING, TaskStatus.ENDED_INPUT):
                    self._notify(self.gateway.notify_complete, t, cid)
            for key, state in completed.task_states.items():
                if state.finished or state.input_ended:
                    self._awaiting_final.discard(self._by_key[key])
        else:
            self.store.add(completed)
            if p.terminate:  # the stop's savepoint: sinks commit, tasks finish
                for t in sorted(p.tasks_to_ack):
                    if self.statuses.get(t) in (TaskStatus.RUNNING, TaskStatus.ENDED_INPUT):
                        self._notify(self.gateway.notify_complete, t, cid)
                self._awaiting_final.clear()
                self._stop = None
        callback = self._callbacks.pop(cid, None)
        if callback is not None:
            self._notify(callback, p.location or completed.external_path.rsplit("/", 1)[0],
                         None)
        log.info("completed %s %d of %s (%d bytes, %d ms)",
                 "savepoint" if p.is_savepoint else "checkpoint", cid, self.job_id,
                 completed.state_size(), completed.duration_ms)
        self.sweep_late_uploads()
        self._maybe_trigger_final()

    def _abort(self, p: PendingCheckpoint, reason: CheckpointFailureReason,
               from_task: bool = False, message: str = "") -> None:
        if p.is_discarded and p.checkpoint_id not in self._pending:
            return
        p.abort(reason)
        self._pending.pop(p.checkpoint_id, None)
        self._recently_aborted.append(p.checkpoint_id)
        if p.location is not None:  # a savepoint that never completed is not the user's
            self._discard_savepoint_dir(p.location)
        else:
            self._discard_dir(p.checkpoint_id)
        self._discard_unreferenced(p.task_states)
        if not notify_nobody(reason):
            for t in sorted(p.tasks_to_ack):
                if self.statuses.get(t) in (TaskStatus.RUNNING, TaskStatus.ENDED_INPUT):
                    self._notify(self.gateway.notify_aborted, t, p.checkpoint_id, reason)
        text = reason.value + (f" {message}" if message else "")
        self.stats.report_failed(p.checkpoint_id, self.clock.now_ms(), text)
        callback = self._callbacks.pop(p.checkpoint_id, None)
        if callback is not None:
            self._notify(callback, None, f"{'savepoint' if p.is_savepoint else 'checkpoint'} "
                                         f"{p.checkpoint_id} failed: {text}")
        if p.terminate:
            self._stop = None
            # a task failure is failed over already (globally, while stopping)
            if reason not in (CheckpointFailureReason.COORDINATOR_SHUTDOWN,
                              CheckpointFailureReason.TASK_FAILURE):
                # the sources have stopped: only a restart brings the job back
                self.fail_job(f"stop-with-savepoint failed: savepoint {p.checkpoint_id} "
                              f"aborted ({text})")
        log.info("%s %d of %s aborted: %s", "savepoint" if p.is_savepoint else "checkpoint",
                 p.checkpoint_id, self.job_id, text)
        error = self.failures.on_failure(p.checkpoint_id, reason, p.is_savepoint, from_task)
        if error is not None:
            if message:
                error = f"{error}: {message}"
            self.fail_job(error)
        if reason not in (CheckpointFailureReason.SUBSUMED,
                          CheckpointFailureReason.TRIGGER_FAILURE):  # (tick retries)
            self._maybe_trigger_final()

    def _discard_dir(self, checkpoint_id: int) -> None:
        if self.storage is None:
            return
        try:
            self.storage.discard_checkpoint(checkpoint_id)
        except Exception:  # leftover files are not worth failing for
            log.warning("could not discard checkpoint %d of %s", checkpoint_id, self.job_id,
                        exc_info=True)

    def _discard_savepoint_dir(self, location: str) -> None:
        try:
            SavepointStorage(location).discard_job()
        except Exception:  # leftover files are not worth failing for
            log.warning("could not delete the files of failed savepoint %s", location,
                        exc_info=True)

    def _discard_completed(self, checkpoint_id: int) -> None:
        """A retained checkpoint is dropped: its folder, and the shared files only it
        referenced."""
        self._discard_dir(checkpoint_id)
        self.registry.release_checkpoint(checkpoint_id)

    def _discard_unreferenced(self, task_states: Mapping[str, TaskStateSnapshot]) -> None:
        for path in unreferenced_files(self.registry, task_states):
            self._discard_shared_file(FileHandle(path))

    def _discard_shared_file(self, handle: FileHandle) -> None:
        if self.storage is not None:
            try:
                self.storage.delete_file(handle.path)
            except Exception:  # an orphan file is not worth failing for
                log.warning("could not delete shared checkpoint file %s", handle.path,
                            exc_info=True)

    def _notify(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # one unreachable task must not stop the others
            log.warning("checkpoint notification %s%r failed", fn.__name__, args,
                        exc_info=True)

    def shutdown(self) -> None:
        """Abort every pending checkpoint (COORDINATOR_SHUTDOWN); trigger nothing more."""
        self._shutdown = True
        self._next_trigger_ms = None
        for p in list(self._pending.values()):
            self._abort(p, CheckpointFailureReason.COORDINATOR_SHUTDOWN)
        if self._stop is not None:
            _, callback = self._stop
            self._stop = None
            self._notify(callback, None, "the job ended before the stop's savepoint")

    # -- helpers ----------------------------------------------------------------------------------
    def _check_known(self, subtask: SubtaskId) -> None:
        if subtask not in self.statuses:
            raise KeyError(f"unknown subtask {subtask.key!r}")

    def _all_finished(self) -> bool:
        return all(s == TaskStatus.FINISHED for s in self.statuses.values())

    def _all_ended(self) -> bool:
        return all(s in _DONE for s in self.statuses.values())
