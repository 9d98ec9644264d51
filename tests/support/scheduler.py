"""The job master's scheduler, pure: a :class:`JobScheduler` over a real execution graph, on
a ManualClock, with in-memory checkpoint storage and a deployer that records every call;
and the settings, failures and snapshots its tests feed it."""

from flowray.common.clock import ManualClock
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.messages import TaskFailure, TaskState
from flowray.state.snapshot import (
    SPLIT_DISTRIBUTE,
    OperatorStateEntry,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

JOB = "job-1"
INTERVAL_MS = 100
DELAY_MS = 1000


def scheduler_config(**overrides):
    """Checkpoints every ``INTERVAL_MS``, fixed-delay restarts (2, ``DELAY_MS`` apart);
    an override of None removes the key."""
    conf = {
        "execution.checkpointing.interval": f"{INTERVAL_MS} ms",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 2,
        "restart-strategy.fixed-delay.delay": f"{DELAY_MS} ms",
    }
    conf.update(overrides)
    return {k: v for k, v in conf.items() if v is not None}


def task_failure(subtask, message):
    """A user-code ``ValueError(message)`` in ``subtask``."""
    return TaskFailure(task=f"{subtask.vertex_id}[{subtask.index}]", operator="Map",
                       cause_type="ValueError", message=message,
                       traceback_text=f"Traceback...\nValueError: {message}", user_code=True)


def tagged_snapshot(tag):
    """A task snapshot with one operator ``op-<tag>`` whose state holds ``tag``."""
    entry = OperatorStateEntry(SPLIT_DISTRIBUTE, [tag.encode()])
    return TaskStateSnapshot({f"op-{tag}": OperatorSubtaskState({"s": entry})})


class SchedulerHarness:
    """A started (unless ``start=False``) :class:`JobScheduler` for ``eg`` and the clock it
    runs on. A subclass defines ``result(subtask, state, failure=None, attempt=None,
    metrics=None)``: which attempt a task's event belongs to unless one is given."""

    def __init__(self, eg, config, deployer, job_name, plan_bytes=None, start=True,
                 restart_strategy=None):
        self.clock = ManualClock(0)
        self.deployer = deployer
        self.eg = eg
        self.storage = MemoryCheckpointStorage(JOB)
        if plan_bytes is None:
            plan_bytes = {v: f"plan-{v}".encode() for v in eg.vertices}
        self.sched = JobScheduler(JOB, job_name, eg, plan_bytes, self.deployer,
                                  self.clock, config, restart_strategy=restart_strategy,
                                  storage=self.storage)
        self._initialize_on_deploy()
        if start:
            self.sched.start()

    def _initialize_on_deploy(self):
        """Deployed tasks say at once that they have initialized (as real tasks do once
        their channels are connected), unless a test sets ``initialize_on_deploy``
        False to say it itself (:meth:`initialized`)."""
        self.initialize_on_deploy = True
        deploy = self.deployer.deploy

        def deploy_and_initialize(attempt, descriptors):
            deploy(attempt, descriptors)
            if self.initialize_on_deploy:
                for d in descriptors:
                    self.sched.on_task_initialized(attempt, d.subtask)

        self.deployer.deploy = deploy_and_initialize

    def initialized(self, *subtasks):
        for s in subtasks:
            self.sched.on_task_initialized(self.sched.attempts[s], s)

    def result(self, subtask, state, failure=None, attempt=None, metrics=None):
        raise NotImplementedError

    def fail(self, subtask, message="boom", attempt=None):
        failure = task_failure(subtask, message)
        self.result(subtask, TaskState.FAILED, failure, attempt=attempt)
        return failure

    def advance(self, ms):
        self.clock.advance(ms)
        self.sched.tick()

    def advance_to(self, ms):
        self.clock.set(ms)
        self.sched.tick()

    def trigger_checkpoint(self):
        """Advance to the next periodic trigger and tick; the id triggered."""
        before = len(self.deployer.triggers)
        due = self.sched.coordinator.next_trigger_ms
        assert due is not None
        self.clock.set(int(due))
        self.sched.tick()
        new = self.deployer.triggers[before:]
        assert new, "no checkpoint was triggered"
        (cid,) = {t[1] for t in new}
        return cid
