"""The Ray shell: ``JobMaster`` and ``TaskActor`` actors and the executor that starts them.

Ray carries the control plane (deploy, exchange addresses, watch, cancel); records travel
on direct socket connections (:mod:`flowray.runtime.network.socket_transport`). Both actors ask for
``num_cpus=0`` so a dozen tasks and a Spark executor fit on two cores.

The job master's loop runs in a thread of its own, started by :meth:`JobMaster.start`
(or :meth:`JobMaster.run`, which then waits for the outcome): nothing depends on the
driver's call staying in flight. An attached job's master belongs to its driver, which
kills it once it has the outcome. A detached job's master (``execution.attached=false``)
is a detached named actor: it outlives the process that submitted it, anyone can reach it
by name (:mod:`flowray.runtime.execution.jobs`), and once the job has ended it stays
``jobstore.expiration-time`` so that its outcome can be read, then ends its own actor.
In a detached job ``print()`` sinks print in the tasks' own stdout (their Ray worker log,
as Flink's TaskManagers write a ``.out`` file), since no driver receives them.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import cloudpickle
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from flowray.runtime.network.channel import ChannelReader, ChannelStats, ChannelWriter, InputGate
from flowray.runtime.network.elements import RecordBatch
from flowray.runtime.execution.client import (
    DriverConnections,
    DriverEndpoint,
    JobClient,
    JobHandle,
)
from flowray.runtime.messages import JobOutcome, JobStatus
from flowray.common.clock import SystemClock
from flowray.runtime.execution.cluster import NAMESPACE, ensure_ray
from flowray.runtime.checkpoint.storage import checkpoint_storage_from_config
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.common.options import (
    ATTACHED,
    CHANNEL_CREDITS,
    DEPLOY_TIMEOUT,
    JOB_MASTER_MAX_RESTARTS,
    JOB_STORE_EXPIRATION,
    PROGRESS_INTERVAL,
    SAVEPOINTS_DIR,
)
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import SubtaskId, TaskDeploymentDescriptor
from flowray.runtime.execution.executor import JobExecutor, PreparedJob
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.task.stream_task import StreamTask
from flowray.runtime.task.environment import TaskEnvironment
from flowray.runtime.messages import TaskFailure, TaskResult
from flowray.runtime.task.subtask_checkpoints import CheckpointResponder
from flowray.runtime.network.in_process import InProcessChannel, InProcessGate
from flowray.runtime.network.frame_codec import frame_sequence_number
from flowray.common.options import CHANNEL_TRANSPORT
from flowray.runtime.network.ray_transport import RayChannelWriter
from flowray.runtime.network.socket_transport import (
    SocketInputGate,
    SocketListener,
    connect_channel,
)

__all__ = ["JobMaster", "TaskActor", "RayExecutor", "actor_name"]

log = logging.getLogger(__name__)



def actor_name(job_name: str, vertex_name: str, index: int) -> str:
    clean = re.sub(r"[/\s]+", " ", vertex_name).strip()
    return f"{job_name}/{clean}/{index}"


def _node() -> Tuple[str, str]:
    ctx = ray.get_runtime_context()
    return ctx.get_node_id(), ray.util.get_node_ip_address()


class _SocketTaskEnvironment(TaskEnvironment):
    def __init__(self, listener: SocketListener, addresses: Dict[str, Dict[str, Any]],
                 driver_addresses: Dict[str, Dict[str, Any]], credits: int,
                 timeout_s: float, node_id: str) -> None:
        self.clock = SystemClock()
        self.listener = listener
        self.addresses = addresses
        self.driver_addresses = driver_addresses
        self.credits = credits
        self.timeout_s = timeout_s
        self.node_id = node_id
        self.ray_inbox: Optional[Tuple[InProcessGate, Dict[str, InProcessChannel]]] = None

    def open_output(self, channel_id: str, consumer: SubtaskId) -> ChannelWriter:
        address = self.addresses[consumer.key]
        if "actor" in address:
            return RayChannelWriter(channel_id, address["actor"], self.credits)
        return connect_channel(address, channel_id, self.credits, self.node_id, self.timeout_s)

    def open_inputs(self, channel_ids: List[str], should_stop: Callable[[], bool]
                    ) -> Tuple[Dict[str, ChannelReader], InputGate]:
        if self.ray_inbox is not None:
            gate, channels = self.ray_inbox
            return {cid: channels[cid].reader for cid in channel_ids}, gate
        readers = self.listener.accept(channel_ids, self.timeout_s, should_stop)
        return readers, SocketInputGate()

    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter:
        address = self.driver_addresses[endpoint_id]
        if address.get("stdout"):  # a detached job: no driver to send records to
            return _StdoutWriter(channel_id)
        return connect_channel(address, channel_id, self.credits, self.node_id,
                               self.timeout_s)


class _StdoutWriter(ChannelWriter):
    """A detached job's ``print()``: each record's line goes to this task's own stdout
    (the Ray worker's log), as a Flink TaskManager prints into its ``.out`` file."""

    def __init__(self, channel_id: str) -> None:
        import sys

        self.channel_id = channel_id
        self.credits = 1
        self.stats = ChannelStats()
        self._out = sys.stdout

    def write(self, frame: Any) -> None:
        if type(frame) is RecordBatch and frame.records:
            self._out.write("".join(f"{r}\n" for r in frame.records))
            self._out.flush()
            self.stats.frames += 1
            self.stats.records += len(frame.records)

    def in_flight(self) -> int:
        return 0

    def close(self) -> None:
        pass


class _RayResponder(CheckpointResponder):
    """Checkpoint answers to the job master; ``flush`` waits until they were received."""

    def __init__(self, master: Any, attempt: int) -> None:
        self.master = master
        self.attempt = attempt
        self._refs: List[Any] = []
        self._lock = threading.Lock()

    def _sent(self, ref: Any) -> None:
        with self._lock:
            self._refs = [r for r in self._refs if not _is_ready(r)]
            self._refs.append(ref)

    def acknowledge_checkpoint(self, subtask, checkpoint_id, snapshot, metrics) -> None:
        self._sent(self.master.acknowledge_checkpoint.remote(
            self.attempt, subtask, checkpoint_id, snapshot, metrics))

    def decline_checkpoint(self, subtask, checkpoint_id, reason, message) -> None:
        self._sent(self.master.decline_checkpoint.remote(
            self.attempt, subtask, checkpoint_id, reason, message))

    def task_ended_input(self, subtask) -> None:
        self._sent(self.master.task_ended_input.remote(self.attempt, subtask))

    def flush(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            refs, self._refs = self._refs, []
        if refs:
            try:
                ray.get(refs, timeout=timeout_s)
            except Exception:  # the master is gone or slow: the result still goes out
                pass


def _is_ready(ref: Any) -> bool:
    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)


@ray.remote(num_cpus=0, max_concurrency=8)
class TaskActor:
    """One subtask. ``run`` executes the task loop and returns its :class:`TaskResult`;
    ``cancel``, checkpoint triggers and notifications are served from other threads
    meanwhile and reach the task through its mailbox."""

    def __init__(self, tdd: TaskDeploymentDescriptor, master: Any = None) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        self.tdd = tdd
        self.master = master
        self.node_id, ip = _node()
        self.listener = SocketListener(self.node_id, ip)
        self.task: Optional[StreamTask] = None
        self._cancelled = False
        self._early: List[Callable[[StreamTask], None]] = []
        self._lock = threading.Lock()
        config = Configuration(tdd.config)
        self.transport = config.get(CHANNEL_TRANSPORT)
        self.inbox: Optional[Tuple[InProcessGate, Dict[str, InProcessChannel]]] = None
        if self.transport == "ray":
            gate = InProcessGate()
            credits = config.get(CHANNEL_CREDITS)
            self.inbox = (gate, {i.channel_id: InProcessChannel(i.channel_id, credits, gate)
                                 for i in tdd.inputs})
            self._order = {i.channel_id: threading.Condition() for i in tdd.inputs}
            self._next_seq = {i.channel_id: 0 for i in tdd.inputs}

    def address(self) -> Dict[str, Any]:
        address = self.listener.address()
        if self.transport == "ray":
            address["actor"] = ray.get_runtime_context().current_actor
        return address

    def push_frame(self, channel_id: str, data: bytes) -> None:
        """Ray transport: queue one encoded frame; returns when the channel has room.

        Calls of a threaded actor may run out of order: frames wait for their turn by
        sequence number, so the channel stays FIFO."""
        seq = frame_sequence_number(data)
        cond = self._order[channel_id]
        with cond:
            while self._next_seq[channel_id] != seq:
                cond.wait(1.0)
            self.inbox[1][channel_id].writer.push_encoded(data)
            self._next_seq[channel_id] = seq + 1
            cond.notify_all()

    def run(self, addresses: Dict[str, Dict[str, Any]],
            driver_addresses: Dict[str, Dict[str, Any]]) -> TaskResult:
        config = Configuration(self.tdd.config)
        env = _SocketTaskEnvironment(self.listener, addresses, driver_addresses,
                                     config.get(CHANNEL_CREDITS),
                                     config.get(DEPLOY_TIMEOUT) / 1000.0, self.node_id)
        env.ray_inbox = self.inbox
        responder = _RayResponder(self.master, self.tdd.attempt)
        if self.master is not None:
            env.responder = responder
        task = StreamTask(self.tdd, env)
        with self._lock:
            self.task = task
            early, self._early = self._early, []
        for action in early:
            action(task)
        if self._cancelled:
            task.cancel()
        try:
            return task.run()
        finally:
            self.listener.close()
            responder.flush()

    def _to_task(self, action: Callable[[StreamTask], None]) -> None:
        with self._lock:
            if self.task is None:
                self._early.append(action)
                return
        action(self.task)

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, is_savepoint: bool,
                           location: Optional[str] = None) -> None:
        self._to_task(lambda t: t.trigger_checkpoint(checkpoint_id, timestamp, is_savepoint,
                                                     location))

    def stop_source(self, stop_mode: int) -> None:
        self._to_task(lambda t: t.stop_source(stop_mode))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._to_task(lambda t: t.notify_checkpoint_complete(checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._to_task(lambda t: t.notify_checkpoint_aborted(checkpoint_id))

    def cancel(self) -> None:
        self._cancelled = True
        if self.task is not None:
            self.task.cancel()

    def metrics(self) -> Dict[str, Any]:
        return self.task.metrics() if self.task is not None else {}

    def pid(self) -> int:
        import os
        return os.getpid()


@ray.remote(num_cpus=0, max_concurrency=16)
class JobMaster(TaskDeployer):
    """Deploys one TaskActor per subtask, wires the channels, runs the checkpoint
    coordinator, watches the tasks and restarts them. Decisions are made by
    :class:`JobScheduler`; this actor turns them into Ray calls, and turns Ray events
    (results, dead actors, acknowledgements) into scheduler events in one thread."""

    def __init__(self, job: "bytes | StoredJob", driver_addresses: Dict[str, Dict[str, Any]],
                 name_prefix: str, detached: bool = False,
                 submitted_ms: Optional[int] = None) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        job: PreparedJob = cloudpickle.loads(job.load() if isinstance(job, StoredJob) else job)
        self.job = job
        self.name_prefix = name_prefix
        self.detached = detached
        self.submitted_ms = submitted_ms if submitted_ms is not None else int(time.time() * 1000)
        self.ended_ms: Optional[int] = None
        self._loop_thread: Optional[threading.Thread] = None
        self._loop_started = threading.Lock()
        self._loop_done = threading.Event()
        self._outcome: Optional[JobOutcome] = None
        self.driver_addresses = driver_addresses
        self.eg = job.execution_graph()
        self.actors: Dict[SubtaskId, Any] = {}
        self.refs: Dict[Any, Tuple[int, SubtaskId]] = {}
        self.events: "queue.Queue[Callable[[], None]]" = queue.Queue()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.scheduler = JobScheduler(job.job_id, job.job_name, self.eg, job.plan_bytes, self,
                                      SystemClock(), job.config,
                                      initial_checkpoint=job.restore_checkpoint)
        # Ray restarted this actor after it died (max_restarts): the job goes on from the
        # completed checkpoints in storage; the dead master's tasks died with it
        self.reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
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

    def _loop_thread_main(self) -> None:
        try:
            outcome = self._loop()
        except BaseException as e:  # noqa: BLE001 - never leave a waiter without an answer
            log.exception("flowray: job master loop ended with an error")
            outcome = JobOutcome(self.job.job_id, self.job.job_name, JobStatus.FAILED,
                                 0.0, TaskFailure("JobMaster", None, type(e).__name__, str(e),
                                                  traceback.format_exc(), False))
        self._outcome = outcome
        self.ended_ms = int(time.time() * 1000)
        self._loop_done.set()
        if self.detached:
            self._expire()

    def _expire(self) -> None:
        """A detached master stays ``jobstore.expiration-time`` after its job ended (its
        outcome can be read, ``flowray list -a`` shows it), then ends its own actor (no
        restart: the job is over)."""
        time.sleep(Configuration(self.job.config).get(JOB_STORE_EXPIRATION))
        log.info("flowray: job %s (%s) expired from the job store; its master exits",
                 self.job.job_id, self.job.job_name)
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def _loop(self) -> JobOutcome:
        sched = self.scheduler
        self.me = ray.get_runtime_context().current_actor
        try:
            if self.reconstructed:  # the dead master's tasks may still hold their names
                self._free_names(self.eg.subtasks())
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
            self._kill(list(self.actors))
            for s in list(self.actors):
                _wait_name_free(self._name(s))
        with self._lock:
            sched.clean_up_storage()  # no task is left to upload anything
            return sched.outcome()

    def _step(self) -> None:
        sched = self.scheduler
        if self._cancel.is_set():
            self._cancel.clear()
            with self._lock:
                sched.cancel()
        ready: List[Any] = []
        if self.refs:
            ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0.02)
        else:
            time.sleep(0.02)
        with self._lock:
            while True:
                try:
                    self.events.get_nowait()()
                except queue.Empty:
                    break
            for ref in ready:
                attempt, s = self.refs.pop(ref)
                try:
                    result: TaskResult = ray.get(ref)
                    sched.on_task_result(attempt, result)
                except (RayActorError, RayTaskError) as e:
                    sched.on_task_lost(attempt, s, f"the actor of subtask {s.key} died: "
                                                   f"{type(e).__name__}: {e}")
            sched.tick()

    # -- TaskDeployer ------------------------------------------------------------------
    def _name(self, s: SubtaskId) -> str:
        return actor_name(self.name_prefix, self.eg.vertex(s).name, s.index)

    def deploy(self, attempt: int, descriptors: List[TaskDeploymentDescriptor]) -> None:
        subtasks = [d.subtask for d in descriptors]
        old = [s for s in subtasks if s in self.actors]
        if old:
            self._kill(old)
            for s in old:
                _wait_name_free(self._name(s))
        self.refs = {r: v for r, v in self.refs.items() if v[1] not in set(subtasks)}
        for d in descriptors:
            self.actors[d.subtask] = TaskActor.options(
                name=self._name(d.subtask), namespace=NAMESPACE,
                max_concurrency=8 + len(d.inputs), max_restarts=0).remote(d, self.me)
        # pipelined channels never leave a region, and a region is deployed whole
        addrs = ray.get([self.actors[s].address.remote() for s in subtasks])
        addresses = {s.key: a for s, a in zip(subtasks, addrs)}
        for s in subtasks:
            ref = self.actors[s].run.remote(addresses, self.driver_addresses)
            self.refs[ref] = (attempt, s)

    def _free_names(self, subtasks: Iterable[SubtaskId]) -> None:
        for s in subtasks:
            try:
                ray.kill(ray.get_actor(self._name(s), namespace=NAMESPACE), no_restart=True)
            except Exception:  # noqa: BLE001 - gone already
                continue
            _wait_name_free(self._name(s))

    def cancel_tasks(self, subtasks) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.cancel.remote()

    def kill(self, subtasks) -> None:
        self._kill(list(subtasks))

    def _kill(self, subtasks: List[SubtaskId]) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is None:
                continue
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        dead = set(subtasks)
        self.refs = {r: v for r, v in self.refs.items() if v[1] not in dead}

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint,
                location=None) -> None:
        actor = self.actors.get(subtask)
        if actor is not None:
            actor.trigger_checkpoint.remote(checkpoint_id, timestamp_ms, is_savepoint, location)

    def stop_sources(self, subtasks, stop_mode: int) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.stop_source.remote(stop_mode)

    def notify_complete(self, subtask, checkpoint_id) -> None:
        actor = self.actors.get(subtask)
        if actor is not None:
            actor.notify_checkpoint_complete.remote(checkpoint_id)

    def notify_aborted(self, subtask, checkpoint_id, reason) -> None:
        actor = self.actors.get(subtask)
        if actor is not None:
            actor.notify_checkpoint_aborted.remote(checkpoint_id)

    # -- calls from tasks (queued for the loop thread) -----------------------------------
    def acknowledge_checkpoint(self, attempt, subtask, checkpoint_id, snapshot, metrics) -> None:
        self.events.put(lambda: self.scheduler.on_acknowledge(
            attempt, subtask, checkpoint_id, snapshot, metrics))

    def decline_checkpoint(self, attempt, subtask, checkpoint_id, reason, message) -> None:
        self.events.put(lambda: self.scheduler.on_decline(
            attempt, subtask, checkpoint_id, reason, message))

    def task_ended_input(self, attempt, subtask) -> None:
        self.events.put(lambda: self.scheduler.on_ended_input(attempt, subtask))

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

    def info(self) -> Dict[str, Any]:
        """What ``flowray info`` / ``flowray list`` show: ids, status, times, the tasks
        with their parallelism, and the latest checkpoint and savepoint."""
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
                "name": self.name_prefix, "status": status.value,
                "detached": self.detached, "start_ms": self.submitted_ms,
                "end_ms": self.ended_ms, "vertices": vertices,
                "parallelism": max((v["parallelism"] for v in vertices), default=0),
                "checkpoints": counts, "restarts": restarts,
                "job_master_restarts": sched.job_master_restarts,
                "latest_checkpoint": latest(False), "latest_savepoint": latest(True),
                "savepoints_dir": Configuration(self.job.config).get(SAVEPOINTS_DIR),
                "failure": failure}

    def checkpoint_stats(self) -> Dict[str, Any]:
        with self._lock:
            return self.scheduler.checkpoint_stats()

    def task_actor_names(self) -> Dict[str, str]:
        """Subtask key -> actor name of the current attempt (tests kill them)."""
        with self._lock:
            return {s.key: self._name(s) for s in self.scheduler.running()}

    def progress(self) -> Dict[str, Any]:
        with self._lock:
            running = set(self.scheduler.running())
            restarts = self.scheduler.restarts
            checkpoints = self.scheduler.stats.counts().get("completed", 0)
            # tasks no longer running count with the metrics they ended with
            ended = [m for s, m in self.scheduler.metrics.items() if s not in running]
        refs = [a.metrics.remote() for s, a in self.actors.items() if s in running]
        try:
            ms = ray.get(refs, timeout=5) + ended
        except (GetTimeoutError, RayActorError):
            return {}
        return {"running_s": time.monotonic() - self._started,
                "records_in": sum(m.get("records_in", 0) for m in ms if m),
                "source_records": sum(m.get("records_in", 0) for m in ms
                                      if m and m.get("is_source")),
                "checkpoints": checkpoints, "restarts": restarts}


class _RayJobHandle(JobHandle):
    """A client's way to its job master. ``ref`` is the driver's ``run`` call of an
    attached job, whose master the handle owns (``release`` kills it); without one (a
    detached job, or a client re-attached from another process, see
    :func:`flowray.runtime.execution.jobs.attach`) the handle polls
    ``await_outcome`` and leaves the master alone."""

    OUTCOME_POLL_S = 30.0

    def __init__(self, job_id: str, job_name: str, master: Any, ref: Any,
                 listeners: List[SocketListener], master_name: str,
                 owns_master: bool = True) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.master = master
        self.ref = ref
        self.listeners = listeners
        self.master_name = master_name
        self.owns_master = owns_master
        self._outcome: Optional[JobOutcome] = None

    def status(self) -> JobStatus:
        if self._outcome is not None:
            return self._outcome.status
        try:
            return JobStatus(ray.get(self.master.status.remote(), timeout=10))
        except Exception:
            return JobStatus.RUNNING

    def cancel(self) -> None:
        self.master.cancel.remote()

    def outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        if self._outcome is not None:
            return self._outcome
        if self.ref is None:
            return self._poll_outcome(timeout_s)
        ready, _ = ray.wait([self.ref], timeout=timeout_s)
        if not ready:
            return None
        try:
            self._outcome = ray.get(self.ref)
        except (RayActorError, RayTaskError) as e:
            from flowray.runtime.messages import TaskFailure
            self._outcome = JobOutcome(self.job_id, self.job_name, JobStatus.FAILED, 0.0,
                                       TaskFailure("JobMaster", None, type(e).__name__, str(e),
                                                   str(e), False))
        return self._outcome

    def _poll_outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            step = self.OUTCOME_POLL_S if deadline is None else \
                max(0.0, min(self.OUTCOME_POLL_S, deadline - time.monotonic()))
            try:
                outcome = ray.get(self.master.await_outcome.remote(step), timeout=step + 30)
            except (RayActorError, RayTaskError, GetTimeoutError) as e:
                if isinstance(e, GetTimeoutError) and (deadline is None
                                                       or time.monotonic() < deadline):
                    continue
                if isinstance(e, GetTimeoutError):
                    return None
                self._outcome = JobOutcome(
                    self.job_id, self.job_name, JobStatus.FAILED, 0.0,
                    TaskFailure("JobMaster", None, type(e).__name__,
                                f"the job master is gone: {e}", str(e), False))
                return self._outcome
            if outcome is not None:
                self._outcome = outcome
                return outcome
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def info(self) -> Dict[str, Any]:
        return ray.get(self.master.info.remote(), timeout=30)

    def progress(self) -> Dict[str, Any]:
        return ray.get(self.master.progress.remote(), timeout=10)

    def checkpoint_stats(self) -> Dict[str, Any]:
        if self._outcome is not None:
            return dict(self._outcome.checkpoint_stats)
        return ray.get(self.master.checkpoint_stats.remote(), timeout=10)

    def task_actor_names(self) -> Dict[str, str]:
        return ray.get(self.master.task_actor_names.remote(), timeout=10)

    def savepoint(self, target_dir, stop, drain, timeout_s):
        return tuple(ray.get(self.master.savepoint.remote(target_dir, stop, drain, timeout_s)))

    def checkpoint(self, timeout_s):
        return tuple(ray.get(self.master.checkpoint.remote(timeout_s)))

    def release(self) -> None:
        if self.owns_master:
            try:
                ray.kill(self.master, no_restart=True)
            except Exception:
                pass
            _wait_name_free(self.master_name)
        for listener in self.listeners:
            listener.close()


def _wait_name_free(name: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.05)


def _free_name_prefix(job_name: str) -> str:
    """``job_name``, or ``job_name#2``... while a job of that name is still running."""
    prefix, n = job_name, 1
    while True:
        try:
            ray.get_actor(f"{prefix}/jobmaster", namespace=NAMESPACE)
        except ValueError:
            return prefix
        n += 1
        prefix = f"{job_name}#{n}"


class _SocketDriverConnections(DriverConnections):
    def __init__(self, listener: SocketListener, allowed: set) -> None:
        self.listener = listener
        self.allowed = allowed
        self.gate = SocketInputGate()

    def poll_new(self, timeout_s: float) -> List[ChannelReader]:
        return self.listener.accept_ready(self.allowed, timeout_s)


@dataclass(frozen=True)
class StoredJob:
    """Where the pickled job lies in the job's checkpoint storage (a small argument for
    a restartable job master)."""

    config: Dict[str, Any]
    job_id: str

    @staticmethod
    def save(config: Dict[str, Any], job_id: str, job_bytes: bytes) -> "StoredJob":
        stored = StoredJob(dict(config), job_id)
        storage = checkpoint_storage_from_config(stored.config, job_id)
        storage.write_file(storage.job_file_path, job_bytes)
        return stored

    def load(self) -> bytes:
        storage = checkpoint_storage_from_config(self.config, self.job_id)
        return storage.read_file(storage.job_file_path)


class RayExecutor(JobExecutor):
    """Runs jobs as Ray actors; starts or joins Ray as configured."""

    def submit(self, job: PreparedJob) -> JobClient:
        config = Configuration(job.config)
        detached = not config.get(ATTACHED)
        if detached:
            collects = [eid for eid, (mode, _) in job.driver_sinks.items() if mode == "collect"]
            if collects:
                raise ValueError(
                    "a detached job (execution.attached=false) cannot collect records to "
                    "the driver: there is none once it exits; write to a sink instead")
        ensure_ray(config, cluster_required=detached)
        listeners: List[SocketListener] = []
        endpoints: List[DriverEndpoint] = []
        driver_addresses: Dict[str, Dict[str, Any]] = {}
        if detached:  # print() sinks print in the tasks' own stdout
            driver_addresses = {eid: {"stdout": True} for eid in job.driver_sinks}
        elif job.driver_sinks:
            node_id, ip = _node()
        for eid, (mode, chans) in (job.driver_sinks.items() if not detached else ()):
            listener = SocketListener(node_id, ip)  # one per driver sink
            listeners.append(listener)
            driver_addresses[eid] = listener.address()
            endpoints.append(DriverEndpoint(eid, mode, chans,
                                            _SocketDriverConnections(listener, set(chans))))
        prefix = _free_name_prefix(job.job_name)
        name = f"{prefix}/jobmaster"
        # pickled here: the user's modules are registered for pickling by value with
        # cloudpickle, which Ray's own vendored copy does not know about
        # with checkpoints a dead job master is restarted and resumes from them (its calls,
        # the driver's ``run`` included, are retried on the new one); without, the job
        # fails, as Flink's default restart strategy without checkpointing
        restarts = (config.get(JOB_MASTER_MAX_RESTARTS)
                    if CheckpointSettings.from_config(config).enabled else 0)
        job_bytes = cloudpickle.dumps(job)
        # a restartable master reads the job from checkpoint storage: Ray may lose large
        # constructor arguments of a restarted actor (ray#53727)
        job_arg = StoredJob.save(job.config, job.job_id, job_bytes) if restarts else job_bytes
        options: Dict[str, Any] = dict(name=name, namespace=NAMESPACE, max_restarts=restarts,
                                       max_task_retries=-1 if restarts else 0)
        if detached:  # outlives the submitting process; ends itself after the job
            options["lifetime"] = "detached"
        master = JobMaster.options(**options).remote(
            job_arg, driver_addresses, prefix, detached, int(time.time() * 1000))
        for ep in endpoints:
            ep.start()
        if detached:
            # returns once the master runs the job's loop, in a thread of its own
            ray.get(master.start.remote())
            handle = _RayJobHandle(job.job_id, job.job_name, master, None, listeners, name,
                                   owns_master=False)
        else:
            ref = master.run.remote()
            handle = _RayJobHandle(job.job_id, job.job_name, master, ref, listeners, name)
        client = JobClient(handle, endpoints, config.get(PROGRESS_INTERVAL), detached=detached)
        client.endpoints_by_id = {ep.endpoint_id: ep for ep in endpoints}  # type: ignore[attr-defined]
        return client
