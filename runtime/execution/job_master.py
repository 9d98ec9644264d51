"""The job master actor (:class:`JobMaster`): deploys one :class:`TaskActor` per subtask,
wires the channels, runs the checkpoint coordinator, watches the tasks and restarts them.
Decisions are :class:`~flowray.runtime.jobmaster.scheduler.JobScheduler`'s; this shell turns
them into Ray calls and Ray events into scheduler events. A failover deploys into a warm
standby task actor when one fits (:mod:`flowray.runtime.execution.standby_actors`). See
:mod:`flowray.runtime.execution.ray_executor` for attached and detached jobs."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import traceback
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import cloudpickle
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from flowray.runtime.messages import JobOutcome, JobStatus
from flowray.common.clock import SystemClock
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import MASTER_SUFFIX
from flowray.runtime.execution.job_store import KV_NAMESPACE, MIN_GAP_S, JobRecordPublisher
from flowray.common.options import ports_of
from flowray.common.options import (
    DEPLOY_TIMEOUT,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    JOB_ARCHIVE_DIR,
    JOB_STORE_EXPIRATION,
    METRICS_ENABLED,
    METRICS_REPORT_INTERVAL,
    REST_ADDRESS,
    REST_BIND_ADDRESS,
    REST_PORT,
    REST_TOKEN,
    SAVEPOINTS_DIR,
    REDEPLOY_IN_PLACE,
    STANDBY_TASKS,
    SUBMISSION_ID,
)
from flowray.common.configuration import Configuration
from flowray.metrics.groups import MetricRegistry
from flowray.runtime.execution.metrics_export import RayMetricsExporter
from flowray.runtime.jobmaster.job_metrics import JobMetrics
from flowray.runtime.jobmaster.rest_snapshot import job_snapshot
from flowray.runtime.rest.history import write_job_archive
from flowray.runtime.rest.routes import job_router
from flowray.runtime.rest.server import RestServer
from flowray.runtime.rest.snapshot import JobSnapshot
from flowray.runtime.rest.web_ui import web_ui_files
from flowray.state.state_backend import discard_local_state
from flowray.runtime.graph.execution_graph import SubtaskId, TaskDeploymentDescriptor
from flowray.runtime.execution.executor import PreparedJob
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.deployments import DeploymentTracker, Wiring
from flowray.runtime.jobmaster.heartbeats import ExpiryKind, HeartbeatMonitor
from flowray.runtime.jobmaster.placement import NodeBlocklist
from flowray.runtime.jobmaster.restart_strategy import NoRestartStrategy
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.messages import TaskFailure, TaskResult, TaskState

from flowray.runtime.execution.actor_names import (
    StoredJob,
    draining_nodes,
    name_free,
    wait_name_free,
)
from flowray.runtime.execution.standby_actors import (
    StandbyActors,
    kill_quietly,
    placement_strategy,
    task_threads,
)
from flowray.runtime.execution.task_actor import TaskActor, actor_name
from flowray.runtime.execution.master_assignment import (
    MasterAssignment,
    read_assignment,
    write_assignment,
)

__all__ = ["JobMaster", "StoredJob", "wait_name_free"]

log = logging.getLogger(__name__)


#: how long the web UI's list of the cluster's jobs is reused (s)
CLUSTER_JOBS_MAX_AGE_S = 2.0


#: how often the record thread looks for a change to publish
RECORD_CHECK_S = MIN_GAP_S


def _kv_put(key: bytes, value: bytes) -> None:
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(key, value, overwrite=True, namespace=KV_NAMESPACE)


def _kv_del(key: bytes) -> None:
    from ray.experimental.internal_kv import _internal_kv_del

    _internal_kv_del(key, namespace=KV_NAMESPACE)


@ray.remote(num_cpus=0, max_concurrency=16)
class JobMaster(TaskDeployer):
    """Deploys one TaskActor per subtask, wires the channels, runs the checkpoint
    coordinator, watches the tasks and restarts them. Decisions are made by
    :class:`JobScheduler`; this actor turns them into Ray calls, and turns Ray events
    (results, dead actors, acknowledgements) into scheduler events in one thread."""

    def __init__(self, job: "bytes | StoredJob | None" = None,
                 driver_addresses: Optional[Dict[str, Dict[str, Any]]] = None,
                 name_prefix: str = "", detached: bool = False,
                 submitted_ms: Optional[int] = None,
                 display_name: Optional[str] = None, actor_pool: Any = None) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        self._assigned = False
        if job is None:   # a spare master (spare_masters.py): its job comes with assign()
            stored = (read_assignment(ray.get_runtime_context().get_actor_id())
                      if ray.get_runtime_context().was_current_actor_reconstructed else None)
            if stored is not None:   # restarted after assign(): the same job resumes
                self._setup(**stored.master_arguments())
            return
        self._setup(job, driver_addresses or {}, name_prefix, detached, submitted_ms,
                    display_name, actor_pool)

    def assign(self, job: "bytes | StoredJob", driver_addresses: Dict[str, Dict[str, Any]],
               name_prefix: str, submitted_ms: int, display_name: str,
               actor_pool: Any = None, pool_name: Optional[str] = None) -> None:
        """Make this spare master the master of ``job`` (an attached job's), as if it had
        been constructed for it. A restartable job's assignment is kept in the GCS first:
        Ray restarts this actor with its constructor's arguments, which name no job.
        Not idempotent: a second call raises."""
        if self._assigned:
            raise RuntimeError("this job master has a job already")
        if isinstance(job, StoredJob):
            write_assignment(ray.get_runtime_context().get_actor_id(), MasterAssignment(
                job, driver_addresses, name_prefix, submitted_ms, display_name, pool_name))
        self._setup(job, driver_addresses, name_prefix, False, submitted_ms, display_name,
                    actor_pool)

    def _setup(self, job: "bytes | StoredJob", driver_addresses: Dict[str, Dict[str, Any]],
               name_prefix: str, detached: bool, submitted_ms: Optional[int],
               display_name: Optional[str], actor_pool: Any) -> None:
        job: PreparedJob = cloudpickle.loads(job.load() if isinstance(job, StoredJob) else job)
        self.job = job
        #: this actor's own name (a spare master's is not the job's prefix)
        self.actor_name = ray.get_runtime_context().get_actor_name() \
            or f"{name_prefix}{MASTER_SUFFIX}"
        self.name_prefix = name_prefix   # of every actor name of this job (unique)
        self.display_name = display_name or name_prefix   # the name `flowray list` shows
        # the record `flowray list`/`info`/`checkpoints` read from the GCS (job_store.py)
        self._record = JobRecordPublisher(job.job_id, _kv_put, _kv_del)
        self.detached = detached
        self.submitted_ms = submitted_ms if submitted_ms is not None else int(time.time() * 1000)
        self.ended_ms: Optional[int] = None
        self._cluster_jobs_cache: Optional[Tuple[float, List[Dict[str, Any]]]] = None
        self._loop_thread: Optional[threading.Thread] = None
        self._loop_started = threading.Lock()
        self._loop_done = threading.Event()
        self._outcome: Optional[JobOutcome] = None
        self.driver_addresses = driver_addresses
        #: each started task's data-plane listener, by task key (the newest attempt)
        self.task_addresses: Dict[str, Any] = {}
        self.eg = job.execution_graph()
        self.actors: Dict[SubtaskId, Any] = {}
        self.refs: Dict[Any, Tuple[int, SubtaskId]] = {}
        self.events: "queue.Queue[Callable[[], None]]" = queue.Queue()
        config = Configuration(job.config)
        self.deploy_timeout_s = config.get(DEPLOY_TIMEOUT) / 1000.0
        self.deployments = DeploymentTracker()  # actors created, not started yet
        self._address_refs: Dict[Any, SubtaskId] = {}
        self._starting: Dict[SubtaskId, int] = {}  # being started by _wire
        self.heartbeats = HeartbeatMonitor(config.get(HEARTBEAT_INTERVAL),
                                           config.get(HEARTBEAT_TIMEOUT))
        self._heartbeat_refs: Dict[Any, Tuple[SubtaskId, int]] = {}
        #: each subtask's metrics at its latest heartbeat (the REST API's task metrics)
        self.subtask_metrics: Dict[SubtaskId, Dict[str, Any]] = {}
        self.blocklist = NodeBlocklist()
        self.nodes: Dict[SubtaskId, str] = {}  # node of each task's actor
        self._actor_names: Dict[SubtaskId, str] = {}
        #: the driver's warm task actors (task_actor_pool.py), None: start our own
        self.actor_pool = actor_pool
        #: subtasks whose actor is the pool's (given back, not killed, when they finished)
        self._pooled: Set[SubtaskId] = set()
        #: subtasks whose actor's last attempt ended and left it fit to host another
        #: (a failover redeploys into it: no new process; the pool takes it back)
        self._reusable: Set[SubtaskId] = set()
        #: each task actor's epoch (its ``address``): calls name it, so that a pooled
        #: actor hosting a later task drops what was meant for this one
        self._epochs: Dict[SubtaskId, int] = {}
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        #: (wall-clock s, event, subtask key) of deployments and failures, newest last
        self._trace: "deque[Tuple[float, str, str]]" = deque(maxlen=512)
        self._trace.append((time.time(), "master", ""))  # where a job's start goes
        self.scheduler = JobScheduler(job.job_id, job.job_name, self.eg, job.plan_bytes, self,
                                      SystemClock(), job.config,
                                      initial_checkpoint=job.restore_checkpoint)
        # the job's metrics (uptime, restarts, checkpoints), exported to Ray's as the tasks'
        self.metrics = MetricRegistry()
        self.job_metrics = JobMetrics(self.metrics.job_group(job.job_name, job.job_id),
                                      self.scheduler, SystemClock())
        self._metrics_exporter = RayMetricsExporter(
            self.metrics, config.get(METRICS_REPORT_INTERVAL) / 1000.0).start() \
            if config.get(METRICS_ENABLED) else None
        self._rest_server: Optional[RestServer] = self._start_rest(config)
        # warm standby task actors for failovers (none if the job never restarts); none
        # is started while a deployment is on its way, nor before a checkpoint completed
        # after it (checkpointing on): a new process competes for CPU with the tasks
        standbys = config.get(STANDBY_TASKS)
        if isinstance(self.scheduler.restart_strategy, NoRestartStrategy) \
                or actor_pool is not None:   # (the pool's idle actors are warm already)
            standbys = 0
        self.standbys = StandbyActors(standbys, name_prefix, job.job_id)
        self._standby_hold = True
        self._redeploy_in_place = config.get(REDEPLOY_IN_PLACE)
        self._checkpointing = self.scheduler.settings.enabled
        # Ray restarted this actor after it died (max_restarts): the job goes on from the
        # completed checkpoints in storage; the dead master's tasks died with it
        self.reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
        self._assigned = True
        if self.reconstructed:  # nobody else may be there to start it (a detached job)
            self._ensure_loop()

    def _recover(self) -> None:
        """A restarted master resumes from the retained checkpoints (or fails the job
        with a clear error; it never starts over after a checkpoint completed)."""
        # attempts above any of the dead master's (which counted from 0, one per deploy)
        self.scheduler.recover(first_attempt=int(time.time() * 1000))

    # -- the loop ----------------------------------------------------------------------
    def start(self) -> str:
        """Start the job (once; later calls do nothing) and return its status: the loop
        runs in a thread of this actor, whoever called."""
        self._ensure_loop()
        return self.scheduler.status.value

    def run(self) -> JobOutcome:
        """Start the job if not started, and wait for its outcome."""
        self._ensure_loop()
        self._loop_done.wait()
        assert self._outcome is not None
        return self._outcome

    def await_outcome(self, timeout_s: float) -> Optional[JobOutcome]:
        """The outcome once the job has ended; ``None`` if it still runs after
        ``timeout_s`` (re-attached clients poll this: no call waits unbounded)."""
        self._loop_done.wait(timeout_s)
        return self._outcome

    def _ensure_loop(self) -> None:
        with self._loop_started:
            if self._loop_thread is None:
                self._loop_thread = threading.Thread(target=self._loop_thread_main,
                                                     name="flowray-jobmaster", daemon=True)
                self._loop_thread.start()
                threading.Thread(target=self._publish_records, name="flowray-job-record",
                                 daemon=True).start()

    def _publish_records(self) -> None:
        """Keep the job's record in the GCS current while the job runs (job_store.py), in
        a thread of its own: a slow GCS never holds up the job's loop."""
        while not self._loop_done.is_set():
            with self._lock:
                sched = self.scheduler
                counts = sched.stats.counts()
                version = (sched.status, counts.get("completed"), counts.get("failed"),
                           sched.restarts)
            if not self._loop_done.is_set():
                self._record.maybe_publish(self._record_snapshot, version)
            self._loop_done.wait(RECORD_CHECK_S)

    def _loop_thread_main(self) -> None:
        try:
            outcome = self._loop()
        except BaseException as e:  # never leave a waiter without an answer
            log.exception("flowray: job master loop ended with an error")
            outcome = JobOutcome(self.job.job_id, self.job.job_name, JobStatus.FAILED,
                                 0.0, TaskFailure("JobMaster", None, type(e).__name__, str(e),
                                                  traceback.format_exc(), False))
        self._outcome = outcome
        self.ended_ms = int(time.time() * 1000)
        if self._metrics_exporter is not None:
            self._metrics_exporter.close()
        self._archive()   # before the outcome is told: a waiter finds the archive written
        info, stats = self._record_snapshot()
        self._record.publish_final(
            info, stats, int(Configuration(self.job.config).get(JOB_STORE_EXPIRATION) * 1000))
        self._loop_done.set()
        if self.detached:
            self._expire()

    def _archive(self) -> None:
        """Archive the ended job's REST responses in ``jobmanager.archive.fs.dir`` (if set)
        for ``flowray history``. Idempotent: a restarted master writes the same file."""
        directory = Configuration(self.job.config).get(JOB_ARCHIVE_DIR)
        if not directory:
            return
        try:
            path = write_job_archive(directory, self.rest_snapshot())
            log.info("flowray: job %s archived in %s", self.job.job_id, path)
        except Exception as e:  # noqa: BLE001 - the job's outcome stands without it
            log.warning("flowray: job %s (%s) could not be archived in %s: %s",
                        self.job.job_id, self.job.job_name, directory, e)

    def _expire(self) -> None:
        """A detached master stays ``jobstore.expiration-time`` after its job ended (its
        outcome can be read, ``flowray list -a`` shows it), then ends its own actor (no
        restart: the job is over)."""
        time.sleep(Configuration(self.job.config).get(JOB_STORE_EXPIRATION))
        log.info("flowray: job %s (%s) expired from the job store; its master exits",
                 self.job.job_id, self.job.job_name)
        self._record.delete()
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def _loop(self) -> JobOutcome:
        sched = self.scheduler
        self.me = ray.get_runtime_context().current_actor
        try:
            if self.reconstructed:  # the dead master's tasks may still hold their names
                self._free_names()
                with self._lock:
                    self._recover()
            with self._lock:
                sched.start()
            while not sched.is_done:
                self._step()
        except Exception as e:  # a bug or a deployment failure: report it as the failure
            log.exception("flowray: job master failed")
            with self._lock:
                if sched.failure is None:
                    sched.failure = TaskFailure("JobMaster", None, type(e).__name__, str(e),
                                                traceback.format_exc(), False)
                sched.status = JobStatus.FAILED
        finally:
            # (no waiting for the killed actors' names: they hold this job's id, which
            # no other job has; a restarted master frees them in _free_names)
            self._give_back_or_kill()
            self.standbys.stop()
        with self._lock:
            sched.clean_up_storage()  # no task is left to upload anything
            discard_local_state(self.job.config, self.job.job_id)  # on this node
            return sched.outcome()

    def _step(self) -> None:
        sched = self.scheduler
        if self._cancel.is_set():
            self._cancel.clear()
            with self._lock:
                sched.cancel()
        watched = (list(self.refs) + list(self._address_refs) + list(self._heartbeat_refs)
                   + self.standbys.refs)
        ready: List[Any] = []
        if watched:  # back at once when a call ends (a task's death among them)
            ready, _ = ray.wait(watched, num_returns=1, timeout=0.02)
            if ready and len(watched) > 1:
                ready, _ = ray.wait(watched, num_returns=len(watched), timeout=0)
        else:
            time.sleep(0.02)
        with self._lock:
            while True:
                try:
                    self.events.get_nowait()()
                except queue.Empty:
                    break
            # standbys first: one that died is not given a task in this same turn
            for ref in sorted(ready, key=lambda r: not self.standbys.owns(r)):
                if ref in self.refs:
                    self._on_run_ended(ref)
                elif ref in self._address_refs:
                    self._on_address(ref)
                elif ref in self._heartbeat_refs:
                    self._on_heartbeat(ref)
                elif self.standbys.owns(ref):
                    self.standbys.on_ready(ref)
            self._wire_ready()
            self._replenish_standbys()
            self._send_heartbeats()
            sched.tick()

    def _on_run_ended(self, ref: Any) -> None:
        attempt, s = self.refs.pop(ref)
        self.heartbeats.untrack(s)
        self._reusable.discard(s)
        try:
            result: TaskResult = ray.get(ref)
            self._mark("ended:" + result.state.value, s)
            if result.actor_reusable:
                self._reusable.add(s)
            self.scheduler.on_task_result(attempt, result)
        except (RayActorError, RayTaskError) as e:
            self._mark("lost", s)
            if isinstance(e, RayActorError):  # its node may be gone: Ray places actors
                self.blocklist.block(self.nodes.get(s, ""), _now_ms())  # there a while
            self.scheduler.on_task_lost(attempt, s, f"the actor of task {self._task_name(s)!r} "
                                                    f"died: {type(e).__name__}: {e}")

    def _task_name(self, s: SubtaskId) -> str:
        v = self.eg.vertex(s)
        return f"{v.name} ({s.index + 1}/{v.parallelism})"

    # -- deployment: a failure anywhere in it is a task failure ---------------------------
    def _on_address(self, ref: Any) -> None:
        s = self._address_refs.pop(ref)
        try:
            address = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - the actor died before it answered
            self.deployments.on_failure(s, f"deploying task {self._task_name(s)!r} failed: "
                                           f"{type(e).__name__}: {e}")
            return
        self._mark("address", s)
        self.nodes[s] = address.get("node_id", "")
        self._epochs[s] = address.get("epoch")
        self.deployments.on_address(s, address)

    def _wire_ready(self) -> None:
        self.deployments.expire(time.monotonic())
        for wiring in self.deployments.take_ready():
            self._wire(wiring)

    def _wire(self, wiring: Wiring) -> None:
        """Report what failed in a deployment (its failover may cancel others of it),
        then start the rest."""
        lost = dict(wiring.lost)
        for s in wiring.timed_out:
            lost[s] = (f"task {self._task_name(s)!r} did not start within "
                       f"flowray.deploy-timeout ({self.deploy_timeout_s:g} s)")
        addresses = {s.key: a for s, a in wiring.start.items()}
        self.task_addresses.update(addresses)
        self._starting = {s: wiring.attempt for s in wiring.start}
        try:
            for s, reason in sorted(lost.items()):
                self._kill([s])
                self.scheduler.on_task_lost(wiring.attempt, s, reason)
            starting = list(self._starting)  # less those cancelled by that failover
        finally:
            self._starting = {}
        now = _now_ms()
        if not self._checkpointing:  # no checkpoint to wait for: started is recovered
            self._standby_hold = False
        for s in starting:
            ref = self.actors[s].run.remote(addresses, self.driver_addresses)
            self._mark("run", s)
            self.refs[ref] = (wiring.attempt, s)
            self.heartbeats.track(s, wiring.attempt, now)

    # -- heartbeats --------------------------------------------------------------------
    def _send_heartbeats(self) -> None:
        now = _now_ms()
        for s, attempt in self.heartbeats.due(now):
            actor = self.actors.get(s)
            if actor is not None:
                self._heartbeat_refs[actor.heartbeat.remote()] = (s, attempt)
        for expiry in self.heartbeats.expired(now):
            s = expiry.subtask
            reason = expiry.reason(self._task_name(s), self.heartbeats.timeout_ms)
            log.warning("flowray: %s", reason)
            if expiry.kind is ExpiryKind.UNREACHABLE:
                self.blocklist.block(self.nodes.get(s, ""), now)
            self.scheduler.on_task_lost(expiry.attempt, s, reason)

    def _on_heartbeat(self, ref: Any) -> None:
        s, attempt = self._heartbeat_refs.pop(ref)
        try:
            stalled_ms, values = ray.get(ref)
        except Exception:  # noqa: BLE001 - a dead actor shows through its run call
            return
        self.heartbeats.on_reply(s, attempt, _now_ms(), stalled_ms)
        self.subtask_metrics[s] = values  # (the loop holds the lock)
        self.scheduler.on_task_metrics(attempt, s, values)

    # -- TaskDeployer ------------------------------------------------------------------
    def _name(self, s: SubtaskId) -> str:
        return actor_name(self.name_prefix, self.eg.vertex(s).name, s.index)

    def deploy(self, attempt: int, descriptors: List[TaskDeploymentDescriptor]) -> None:
        """Create the actors and ask for their addresses; the loop starts them once all
        answered (:meth:`_wire`). Returns at once: an actor that dies before it answers,
        or one that does not answer within ``flowray.deploy-timeout``, is a task failure
        for the failover and restart strategies."""
        subtasks = [d.subtask for d in descriptors]
        avoid = self._nodes_to_avoid()
        # a failover's tasks whose last attempts ended cleanly run again in their actors
        in_place = {s for s in subtasks if self._redeploy_in_place and s in self.actors
                    and s in self._reusable and self.nodes.get(s, "") not in avoid}
        old = [s for s in subtasks if s in self.actors and s not in in_place]
        if old:
            self._kill(old)
        strategy = placement_strategy(avoid)
        created = []
        for d in descriptors:
            d.channel_secret = self.job.channel_secret
        self.deployments.start(attempt, subtasks, time.monotonic() + self.deploy_timeout_s)
        self._standby_hold = True
        pooled = self._take_pooled([d for d in descriptors if d.subtask not in in_place],
                                   strategy)
        for d in descriptors:
            s = d.subtask
            self._mark("deploy", s)
            self.standbys.learn(d)
            if s in in_place:
                self._redeploy_into_same_actor(d)
                continue
            self._pooled.discard(s)
            if s in old and self._deploy_into_standby(d, avoid):
                continue
            if s in pooled:
                self._deploy_into_pooled(d, *pooled[s])
                continue
            try:
                self.actors[s] = self._create_actor(d, strategy)
                self._mark("created", s)
            except Exception as e:  # noqa: BLE001 - e.g. a name still taken
                self.deployments.on_failure(s, f"deploying task {self._task_name(s)!r} "
                                               f"failed: {type(e).__name__}: {e}")
                continue
            created.append(s)
        for s in created:
            self._address_refs[self.actors[s].address.remote()] = s

    def _redeploy_into_same_actor(self, d: TaskDeploymentDescriptor) -> None:
        """Give ``d`` to the actor its subtask's last attempt ran in (its address
        comes back as a new actor's does; if the actor cannot take it, that is a
        deployment failure, and the next attempt gets a new actor)."""
        s = d.subtask
        self._reusable.discard(s)
        self._address_refs[self.actors[s].redeploy.remote(d, self.me)] = s
        self._mark("created", s)

    def _create_actor(self, d: TaskDeploymentDescriptor, strategy: Any) -> Any:
        name = self._name(d.subtask)
        if not name_free(name, 1.0):  # a killed attempt still holds it
            name = f"{name}~{d.attempt}"
        options: Dict[str, Any] = dict(name=name, namespace=NAMESPACE,
                                       max_concurrency=task_threads(d), max_restarts=0)
        if strategy is not None:
            options["scheduling_strategy"] = strategy
        options.update(d.resources)  # the slot sharing group's num_cpus, memory, GPUs...
        actor = TaskActor.options(**options).remote(d, self.me)
        self._actor_names[d.subtask] = name
        return actor

    def _nodes_to_avoid(self) -> set:
        """Nodes new actors should keep off: dead, draining, or where tasks were just
        lost (placement is best effort: none if Ray cannot say)."""
        try:
            alive = {n["NodeID"]: bool(n.get("Alive")) for n in ray.nodes()}
        except Exception:  # noqa: BLE001 - placement is best effort
            return set()
        for node in draining_nodes():  # about to go: as good as dead for new tasks
            alive[node] = False
        avoid = self.blocklist.nodes_to_avoid(alive, _now_ms())
        if avoid:
            log.info("flowray: placing tasks off %d node(s) that are dead or just lost "
                     "tasks", len(avoid))
        return avoid

    # -- the driver's pool of warm task actors -----------------------------------------
    def _take_pooled(self, descriptors: List[TaskDeploymentDescriptor],
                     strategy: Any) -> Dict[SubtaskId, Tuple[str, Any]]:
        """Actors from the driver's pool for the tasks that may run in one: no node to
        avoid, no Ray resources of their own (one call for the whole deployment)."""
        if self.actor_pool is None or strategy is not None:
            return {}
        fits = [d for d in descriptors if not d.resources]
        if not fits:
            return {}
        try:
            taken = ray.get(self.actor_pool.take.remote(
                self.job.job_id, [task_threads(d) for d in fits]), timeout=30)
        except Exception as e:  # noqa: BLE001 - no pool: the job starts its own actors
            log.warning("flowray: the driver's task actor pool did not answer (%s); "
                        "starting task actors", e)
            return {}
        return {d.subtask: t for d, t in zip(fits, taken) if t is not None}

    def _deploy_into_pooled(self, d: TaskDeploymentDescriptor, name: str, handle: Any) -> None:
        s = d.subtask
        self.actors[s] = handle
        self._actor_names[s] = name
        self._pooled.add(s)
        self._address_refs[handle.assign.remote(d, self.me)] = s
        self._mark("created", s)

    def _give_back_or_kill(self) -> List[SubtaskId]:
        """At the job's end: pooled actors go back to the pool (a finished job's, and
        those of a cancelled or failed job whose tasks ended fit to host another); every
        other actor is killed. The subtasks whose actors were killed."""
        finished = self.scheduler.status is JobStatus.FINISHED
        pooled = [s for s in self.actors if s in self._pooled
                  and (finished or s in self._reusable)]
        if pooled:
            names = [self._actor_names[s] for s in pooled]
            try:
                ray.get(self.actor_pool.give_back.remote(self.job.job_id, names), timeout=30)
            except Exception as e:  # noqa: BLE001 - they are the pool's to clean up
                log.warning("flowray: giving task actors back to the pool failed: %s", e)
            for s in pooled:
                self.actors.pop(s, None)
        killed = list(self.actors)
        self._kill(killed)
        if self.actor_pool is not None:
            self.actor_pool.drop_job.remote(self.job.job_id)   # any pooled left: killed
        return killed

    # -- warm standby task actors ----------------------------------------------------
    def _deploy_into_standby(self, d: TaskDeploymentDescriptor, avoid: set) -> bool:
        """Give ``d`` to a standby actor (its address comes back as a new actor's
        does); False if none fits."""
        standby = self.standbys.take(d, avoid)
        if standby is None:
            return False
        s = d.subtask
        self.actors[s] = standby.handle
        self._actor_names[s] = standby.name
        self._address_refs[standby.handle.assign.remote(d, self.me)] = s
        self._mark("created", s)
        log.info("flowray: task %r deployed into standby actor %s", self._task_name(s),
                 standby.name)
        return True

    def _replenish_standbys(self) -> None:
        """Start the standbys missing once no deployment is on its way (and, with
        checkpointing, a checkpoint completed since the last one)."""
        if (not self._standby_hold and not self._address_refs
                and self.scheduler.status is JobStatus.RUNNING):
            self.standbys.replenish(self._nodes_to_avoid)

    def _free_names(self) -> None:
        """Kill the task actors a dead master left (every ``<prefix>/...`` name but
        this master's own)."""
        prefix, mine = self.name_prefix + "/", self.name_prefix + "/jobmaster"
        if self.actor_pool is not None:   # the dead master's pooled actors
            try:
                ray.get(self.actor_pool.drop_job.remote(self.job.job_id), timeout=30)
            except Exception:  # noqa: BLE001 - the pool is gone: so are its actors
                pass
        try:
            named = ray.util.list_named_actors(all_namespaces=True)
        except Exception:  # noqa: BLE001 - nothing to free then
            return
        names = [a["name"] for a in named if a.get("namespace") == NAMESPACE
                 and a["name"].startswith(prefix) and a["name"] != mine]
        for name in names:
            try:
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            except Exception:  # noqa: BLE001 - gone already
                continue
        deadline = time.monotonic() + 10.0
        for name in names:
            name_free(name, max(0.0, deadline - time.monotonic()))

    def cancel_tasks(self, subtasks) -> None:
        for s in subtasks:
            attempt = self.deployments.cancel(s)
            if attempt is None:
                attempt = self._starting.pop(s, None)
            if attempt is not None:  # never started: nothing to stop, it is cancelled now
                self._kill([s])
                self.events.put(lambda a=attempt, s=s: self.scheduler.on_task_result(
                    a, TaskResult(s, TaskState.CANCELED)))
                continue
            actor = self.actors.get(s)
            if actor is not None:
                actor.cancel.remote(epoch=self._epochs.get(s))

    def kill(self, subtasks) -> None:
        self._kill(list(subtasks))

    def _kill(self, subtasks: List[SubtaskId]) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                kill_quietly(actor)
        gone = [self._actor_names[s] for s in subtasks
                if s in self._pooled and s in self.actors and s in self._actor_names]
        if gone and self.actor_pool is not None:
            self.actor_pool.forget.remote(gone)
        dead = set(subtasks)
        self._reusable -= dead
        self.refs = {r: v for r, v in self.refs.items() if v[1] not in dead}
        self._address_refs = {r: v for r, v in self._address_refs.items() if v not in dead}
        for s in subtasks:
            self.heartbeats.untrack(s)

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint,
                location=None) -> None:
        actor = self.actors.get(subtask)
        self._mark(f"trigger:{checkpoint_id}", subtask)
        if actor is not None:
            actor.trigger_checkpoint.remote(checkpoint_id, timestamp_ms, is_savepoint, location,
                                            epoch=self._epochs.get(subtask))

    def stop_sources(self, subtasks, stop_mode: int) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.stop_source.remote(stop_mode, epoch=self._epochs.get(s))

    def notify_complete(self, subtask, checkpoint_id) -> None:
        self._mark(f"complete:{checkpoint_id}", subtask)
        self._standby_hold = False  # every task runs again
        actor = self.actors.get(subtask)
        if actor is not None:
            actor.notify_checkpoint_complete.remote(checkpoint_id,
                                                    epoch=self._epochs.get(subtask))

    def notify_aborted(self, subtask, checkpoint_id, reason) -> None:
        actor = self.actors.get(subtask)
        if actor is not None:
            actor.notify_checkpoint_aborted.remote(checkpoint_id,
                                                   epoch=self._epochs.get(subtask))

    def request_loop_counters(self, subtasks, iteration, wave) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.report_loop_counters.remote(iteration, wave, epoch=self._epochs.get(s))

    def end_loop(self, subtasks) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.end_loop.remote(epoch=self._epochs.get(s))

    # -- calls from tasks (queued for the loop thread) -----------------------------------
    def acknowledge_checkpoint(self, attempt, subtask, checkpoint_id, snapshot, metrics) -> None:
        self._mark(f"ack:{checkpoint_id}", subtask)
        self.events.put(lambda: self.scheduler.on_acknowledge(
            attempt, subtask, checkpoint_id, snapshot, metrics))

    def decline_checkpoint(self, attempt, subtask, checkpoint_id, reason, message) -> None:
        self.events.put(lambda: self.scheduler.on_decline(
            attempt, subtask, checkpoint_id, reason, message))

    def task_initialized(self, attempt, subtask) -> None:
        self.events.put(lambda: self.scheduler.on_task_initialized(attempt, subtask))

    def task_ended_input(self, attempt, subtask) -> None:
        self.events.put(lambda: self.scheduler.on_ended_input(attempt, subtask))

    def loop_idle(self, attempt, subtask) -> None:
        self.events.put(lambda: self.scheduler.on_loop_idle(attempt, subtask))

    def loop_counters(self, attempt, subtask, iteration, wave, counters) -> None:
        self.events.put(lambda: self.scheduler.on_loop_counters(attempt, subtask, iteration,
                                                                wave, counters))

    # -- the REST API -------------------------------------------------------------------
    def _start_rest(self, config: Configuration) -> RestServer:
        """Flink's REST API and the web UI on this job master (``rest.*``), binding in the
        background; a port that cannot be bound leaves the job without them, with a
        warning (:attr:`rest`)."""
        master = self

        class _Actions:
            def cancel(self) -> None:
                master.cancel()

            def savepoint(self, target: Optional[str], stop: bool, drain: bool
                          ) -> Tuple[Optional[str], Optional[str]]:
                return master.savepoint(target, stop, drain, None)

        server = RestServer(job_router(self.rest_snapshot, _Actions(),
                                       cluster_jobs=self.cluster_jobs),
                            config.get(REST_BIND_ADDRESS), ports_of(config.get(REST_PORT)),
                            config.get(REST_TOKEN), config.get(REST_ADDRESS),
                            static=web_ui_files())
        return server.start_in_background()   # bound or given up on at first use (rest)

    @property
    def rest(self) -> Optional[RestServer]:
        """The running REST server; None when none could be bound (warned once)."""
        server = self._rest_server
        if server is None:
            return None
        try:
            return server.wait_started(30.0)
        except (OSError, TimeoutError) as e:
            log.warning("flowray: job %r has no REST API: %s", self.job.job_name, e)
            self._rest_server = None
            return None

    def cluster_jobs(self) -> List[Dict[str, Any]]:
        """Every job on this Ray cluster (this one too) as the web UI's job list shows it:
        id, name, status, start, restarts and its web UI's URL (never its REST token).
        Asked of the job masters at most every 2 s."""
        from flowray.runtime.execution.job_directory import list_jobs

        now = time.monotonic()
        cached = self._cluster_jobs_cache
        if cached is not None and now - cached[0] < CLUSTER_JOBS_MAX_AGE_S:
            return cached[1]
        rows = [{"jid": j["job_id"], "name": j["job_name"], "state": j["status"],
                 "start-time": j.get("start_ms") or -1, "restarts": j.get("restarts", 0),
                 "web-url": j.get("web_url")} for j in list_jobs()]
        self._cluster_jobs_cache = (now, rows)
        return rows

    def rest_snapshot(self) -> JobSnapshot:
        with self._lock:
            return job_snapshot(self.scheduler, self.job.job_graph, self.job.config,
                                dict(self.subtask_metrics), dict(self.nodes),
                                self.submitted_ms, self.ended_ms, int(time.time() * 1000),
                                self.job_metrics.group.values())

    def web_url(self) -> Optional[str]:
        """The REST API's and web UI's URL (None: none could be bound)."""
        rest = self.rest
        return rest.url if rest is not None else None

    def rest_token(self) -> Optional[str]:
        """The token its write endpoints need off loopback (None on loopback)."""
        rest = self.rest
        return rest.token if rest is not None else None

    # -- calls from the driver ---------------------------------------------------------
    def cancel(self) -> None:
        self._cancel.set()

    def savepoint(self, target_dir: Optional[str], stop: bool, drain: bool,
                  timeout_s: Optional[float]) -> Tuple[Optional[str], Optional[str]]:
        """Take a savepoint (``stop``: stop-with-savepoint); blocks this call's thread
        until it completes or fails: ``(directory, None)`` or ``(None, error)``."""
        if stop:
            return self._ask(lambda done: self.scheduler.stop_with_savepoint(
                target_dir, drain, done), timeout_s)
        return self._ask(lambda done: self.scheduler.trigger_savepoint(target_dir, done),
                         timeout_s)

    def checkpoint(self, timeout_s: Optional[float]) -> Tuple[Optional[str], Optional[str]]:
        """Take a checkpoint now; blocks until it completes or fails."""
        return self._ask(self.scheduler.trigger_checkpoint, timeout_s)

    def _ask(self, request: Callable[[Any], None], timeout_s: Optional[float]
             ) -> Tuple[Optional[str], Optional[str]]:
        """Run ``request(done)`` in the loop thread and wait (in this call's thread) for
        what ``done`` is given."""
        done = threading.Event()
        result: List[Any] = [None, "no answer"]

        def on_done(path: Optional[str], error: Optional[str]) -> None:
            result[:] = [path, error]
            done.set()
        self.events.put(lambda: request(on_done))
        if not done.wait(timeout_s):
            return None, f"no answer after {timeout_s} s"
        return result[0], result[1]

    def status(self) -> str:
        return self.scheduler.status.value

    def display_status(self) -> Optional[Tuple[str, str]]:
        """``(the name shown for the job, its status)``; None for a spare master that has
        no job yet."""
        if not self._assigned:
            return None
        return self.display_name, self.status()

    def data_endpoints(self) -> Dict[str, Any]:
        """Where the job's data plane listens: ``{"tasks": {task key: address}, "driver":
        {endpoint id: address}}`` (an address: node id, unix socket path, TCP host and
        port). What a firewall must let through between nodes; every listener
        authenticates its peers (docs/internals/network.md)."""
        with self._lock:
            return {"tasks": dict(self.task_addresses), "driver": dict(self.driver_addresses)}

    def _record_snapshot(self) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        return self.info(), self.checkpoint_stats()

    def info(self) -> Dict[str, Any]:
        """What ``flowray info`` / ``flowray list`` show: ids, status, times, the tasks
        with their parallelism, and the latest checkpoint and savepoint (``{"spare":
        True}`` for a spare master that has no job yet)."""
        if not self._assigned:
            return {"spare": True}
        with self._lock:
            sched = self.scheduler
            status = (self._outcome.status if self._outcome is not None else sched.status)
            history = sched.stats.history()
            counts = sched.stats.counts()
            restarts = sched.restarts
            failure = sched.failure.describe() if sched.failure is not None else None
            if self._outcome is not None and self._outcome.failure is not None:
                failure = self._outcome.failure.describe()

        def latest(savepoint: bool) -> Optional[Dict[str, Any]]:
            for r in reversed(history):
                if r["status"] == "COMPLETED" and bool(r["is_savepoint"]) == savepoint:
                    path = r.get("external_path") or ""
                    if path.endswith("/_metadata"):
                        path = path[:-len("/_metadata")]
                    found = {"id": r["checkpoint_id"], "path": path,
                             "completed_ms": r.get("end_ms"), "size": r.get("state_size", 0)}
                    if self._outcome is not None and path and "://" not in path:
                        # an ended job's checkpoints may be gone (retention)
                        found["exists"] = os.path.exists(path)
                    return found
            return None
        vertices = [{"name": v.name, "parallelism": v.parallelism,
                     "max_parallelism": v.max_parallelism}
                    for v in self.job.job_graph.topological_order()]
        return {"job_id": self.job.job_id, "job_name": self.job.job_name,
                "name": self.display_name, "status": status.value,
                "master": self.actor_name,
                "node_id": ray.get_runtime_context().get_node_id(),
                "detached": self.detached, "start_ms": self.submitted_ms,
                "end_ms": self.ended_ms, "vertices": vertices,
                "parallelism": max((v["parallelism"] for v in vertices), default=0),
                "checkpoints": counts, "restarts": restarts,
                "job_master_restarts": sched.job_master_restarts,
                "latest_checkpoint": latest(False), "latest_savepoint": latest(True),
                "savepoints_dir": Configuration(self.job.config).get(SAVEPOINTS_DIR),
                # the Ray job (Job Submission) whose driver runs the program: `flowray logs`
                "submission_id": Configuration(self.job.config).get(SUBMISSION_ID),
                "failure": failure, "web_url": self.web_url(), "rest_token": self.rest_token(),
                "restart_events": list(sched.restart_events)}

    def restart_events(self, since: int = 0) -> List[Dict[str, Any]]:
        """The restarts from the ``since``-th on, explained (see ``JobScheduler``)."""
        with self._lock:
            return list(self.scheduler.restart_events[since:])

    def checkpoint_stats(self) -> Dict[str, Any]:
        with self._lock:
            return self.scheduler.checkpoint_stats()

    def _mark(self, event: str, subtask: SubtaskId) -> None:
        self._trace.append((time.time(), event, subtask.key))

    def recovery_trace(self) -> List[Tuple[float, str, str]]:
        """``(wall-clock time, event, subtask key)`` of recent deployments, task losses,
        checkpoint triggers, acknowledgements and completions, oldest first (where a
        failover's time goes: benchmarks/recovery.py)."""
        return list(self._trace)

    def standby_names(self) -> List[str]:
        """Names of the standby task actors whose process runs (tests wait for one)."""
        with self._lock:
            return self.standbys.ready_names()

    def kv_state_vertices(self) -> List[Dict[str, Any]]:
        """The job's keyed vertices, where queryable states live: id, name, parallelism,
        max parallelism, and each subtask's actor name (None while it is not running)."""
        with self._lock:
            running = set(self.scheduler.running())
            out = []
            for v in self.job.job_graph.topological_order():
                if not v.plan.keyed:
                    continue
                actors = {}
                for i in range(v.parallelism):
                    s = SubtaskId(v.id, i)
                    actors[i] = (self._actor_names.get(s, self._name(s)) if s in running
                                 else None)
                out.append({"vertex": v.id, "name": v.name, "parallelism": v.parallelism,
                            "max_parallelism": v.max_parallelism, "actors": actors})
            return out

    def task_names(self) -> Dict[str, str]:
        """Subtask key -> the name of its task (its chained operators), for the running
        attempt (an actor's own name says nothing of its task when it is the pool's)."""
        with self._lock:
            return {s.key: self.eg.vertex(s).name for s in self.scheduler.running()}

    def task_actor_names(self) -> Dict[str, str]:
        """Subtask key -> actor name of the current attempt (tests kill them)."""
        with self._lock:
            return {s.key: self._actor_names.get(s, self._name(s))
                    for s in self.scheduler.running()}

    def progress(self) -> Dict[str, Any]:
        with self._lock:
            running = set(self.scheduler.running())
            restarts = self.scheduler.restarts
            checkpoints = self.scheduler.stats.counts().get("completed", 0)
            # tasks no longer running count with the metrics they ended with, and every
            # task with what its earlier attempts counted
            ended = [m for s, m in self.scheduler.metrics.items() if s not in running]
            earlier = self.scheduler.counters.earlier(self.scheduler.attempts)
        refs = [a.metrics.remote() for s, a in self.actors.items() if s in running]
        try:
            ms = ray.get(refs, timeout=5) + ended
        except (GetTimeoutError, RayActorError):
            return {}
        return {"running_s": time.monotonic() - self._started,
                "records_in": earlier["records_in"]
                + sum(m.get("records_in", 0) for m in ms if m),
                "source_records": earlier["source_records"]
                + sum(m.get("records_in", 0) for m in ms if m and m.get("is_source")),
                "checkpoints": checkpoints, "restarts": restarts}


def _now_ms() -> float:
    return time.monotonic() * 1000.0
