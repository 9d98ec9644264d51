"""The Ray shell: ``JobMaster`` and ``TaskActor`` actors and the executor that starts them.

Ray carries the control plane (deploy, exchange addresses, watch, cancel); records travel
on direct socket connections (:mod:`flowray.runtime.transport_socket`). Both actors ask for
``num_cpus=0`` so a dozen tasks and a Spark executor fit on two cores.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from .channels import ChannelReader, ChannelWriter, InputGate
from .client import DriverEndpoint, JobClient, JobHandle, JobOutcome, JobStatus
from .clock import SystemClock
from .cluster import NAMESPACE, ensure_ray
from .config import CHANNEL_CREDITS, DEPLOY_TIMEOUT, PROGRESS_INTERVAL, Configuration
from .execution_graph import SubtaskId, TaskDeploymentDescriptor
from .executor import JobExecutor, PreparedJob
from .scheduler import Decision, JobRun
from .stream_task import StreamTask, TaskEnvironment, TaskResult
from .channels import InProcessChannel, InProcessGate, frame_sequence_number
from .config import CHANNEL_TRANSPORT
from .transport_ray import RayChannelWriter
from .transport_socket import SocketInputGate, SocketListener, connect_channel

__all__ = ["JobMaster", "TaskActor", "RayExecutor", "actor_name"]

log = logging.getLogger("flowray")

CANCEL_GRACE_S = 5.0


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
        return connect_channel(self.driver_addresses[endpoint_id], channel_id, self.credits,
                               self.node_id, self.timeout_s)


@ray.remote(num_cpus=0, max_concurrency=8)
class TaskActor:
    """One subtask. ``run`` executes the task loop and returns its :class:`TaskResult`;
    ``cancel`` and ``metrics`` are served from other threads meanwhile."""

    def __init__(self, tdd: TaskDeploymentDescriptor) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        self.tdd = tdd
        self.node_id, ip = _node()
        self.listener = SocketListener(self.node_id, ip)
        self.task: Optional[StreamTask] = None
        self._cancelled = False
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
        self.task = StreamTask(self.tdd, env)
        if self._cancelled:
            self.task.cancel()
        try:
            return self.task.run()
        finally:
            self.listener.close()

    def cancel(self) -> None:
        self._cancelled = True
        if self.task is not None:
            self.task.cancel()

    def metrics(self) -> Dict[str, Any]:
        return self.task.metrics() if self.task is not None else {}


@ray.remote(num_cpus=0, max_concurrency=16)
class JobMaster:
    """Deploys one TaskActor per subtask, wires the channels, watches the tasks, and
    reports the job's outcome. Decisions are made by :class:`JobRun`."""

    def __init__(self, job: PreparedJob, driver_addresses: Dict[str, Dict[str, Any]],
                 name_prefix: str) -> None:
        logging.getLogger("ray").setLevel(logging.WARNING)
        self.job = job
        self.name_prefix = name_prefix
        self.task_names: List[str] = []
        self.driver_addresses = driver_addresses
        self.eg = job.execution_graph()
        self.run_state = JobRun(job.job_id, job.job_name, self.eg.subtasks(), SystemClock())
        self.actors: Dict[SubtaskId, Any] = {}
        self._cancel = threading.Event()
        self._started = time.monotonic()

    def run(self) -> JobOutcome:
        try:
            self._deploy()
            self._watch()
        except Exception as e:  # deployment failed: report it as the job's failure
            if self.run_state.failure is None:
                self.run_state.on_lost(next(iter(self.run_state.states)),
                                       f"deployment failed: {type(e).__name__}: {e}")
            self.run_state.cancel()
            self._stop_tasks(self.run_state.running())
        finally:
            self._kill_all()
            for name in self.task_names:  # a next job of the same name can reuse them
                _wait_name_free(name)
        return self.run_state.outcome()

    def _deploy(self) -> None:
        job = self.job
        for s in self.eg.subtasks():
            tdd = self.eg.deployment_descriptor(s, job.job_id, job.plan_bytes[s.vertex_id],
                                                job.config)
            name = actor_name(self.name_prefix, tdd.vertex_name, s.index)
            self.task_names.append(name)
            self.actors[s] = TaskActor.options(
                name=name, namespace=NAMESPACE, max_concurrency=8 + len(tdd.inputs),
                max_restarts=0).remote(tdd)
        subtasks = list(self.actors)
        addrs = ray.get([self.actors[s].address.remote() for s in subtasks])
        addresses = {s.key: a for s, a in zip(subtasks, addrs)}
        self.refs = {self.actors[s].run.remote(addresses, self.driver_addresses): s
                     for s in subtasks}
        self.run_state.deployed()

    def _watch(self) -> None:
        pending = dict(self.refs)
        cancel_sent_at: Optional[float] = None
        while pending:
            if self._cancel.is_set() and cancel_sent_at is None:
                self.run_state.cancel()
                self._stop_tasks(self.run_state.running())
                cancel_sent_at = time.monotonic()
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
            for ref in ready:
                s = pending.pop(ref)
                try:
                    result: TaskResult = ray.get(ref)
                    decision = self.run_state.on_result(result)
                except (RayActorError, RayTaskError) as e:
                    decision = self.run_state.on_lost(
                        s, f"the actor of subtask {s.key} died: {type(e).__name__}: {e}")
                if decision is Decision.CANCEL_ALL and cancel_sent_at is None:
                    self._stop_tasks(self.run_state.running())
                    cancel_sent_at = time.monotonic()
            if cancel_sent_at is not None and time.monotonic() - cancel_sent_at > CANCEL_GRACE_S:
                for ref, s in list(pending.items()):
                    self.run_state.on_lost(s, "did not stop after cancel; killed")
                    pending.pop(ref)
                self._kill_all()

    def _stop_tasks(self, subtasks: List[SubtaskId]) -> None:
        for s in subtasks:
            actor = self.actors.get(s)
            if actor is not None:
                actor.cancel.remote()

    def _kill_all(self) -> None:
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def cancel(self) -> None:
        self._cancel.set()

    def status(self) -> str:
        return self.run_state.status.value

    def progress(self) -> Dict[str, Any]:
        refs = [a.metrics.remote() for s, a in self.actors.items()
                if s in set(self.run_state.running())]
        try:
            ms = ray.get(refs, timeout=5)
        except GetTimeoutError:
            return {}
        return {"running_s": time.monotonic() - self._started,
                "records_in": sum(m.get("records_in", 0) for m in ms if m),
                "source_records": sum(m.get("records_in", 0) for m in ms
                                      if m and m.get("is_source"))}


class _RayJobHandle(JobHandle):
    def __init__(self, job: PreparedJob, master: Any, ref: Any,
                 listeners: List[SocketListener], master_name: str) -> None:
        self.job_id = job.job_id
        self.job_name = job.job_name
        self.master = master
        self.ref = ref
        self.listeners = listeners
        self.master_name = master_name
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
        ready, _ = ray.wait([self.ref], timeout=timeout_s)
        if not ready:
            return None
        try:
            self._outcome = ray.get(self.ref)
        except (RayActorError, RayTaskError) as e:
            from .stream_task import TaskFailure
            self._outcome = JobOutcome(self.job_id, self.job_name, JobStatus.FAILED, 0.0,
                                       TaskFailure("JobMaster", None, type(e).__name__, str(e),
                                                   str(e), False))
        return self._outcome

    def progress(self) -> Dict[str, Any]:
        return ray.get(self.master.progress.remote(), timeout=10)

    def release(self) -> None:
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


class RayExecutor(JobExecutor):
    """Runs jobs as Ray actors; starts or joins Ray as configured."""

    def submit(self, job: PreparedJob) -> JobClient:
        config = Configuration(job.config)
        ensure_ray(config)
        listeners: List[SocketListener] = []
        endpoints: List[DriverEndpoint] = []
        driver_addresses: Dict[str, Dict[str, Any]] = {}
        timeout_s = config.get(DEPLOY_TIMEOUT) / 1000.0
        if job.driver_sinks:
            node_id, ip = _node()
        for eid, (mode, chans) in job.driver_sinks.items():
            listener = SocketListener(node_id, ip)  # one per driver sink
            listeners.append(listener)
            driver_addresses[eid] = listener.address()
            endpoints.append(DriverEndpoint(
                eid, mode, chans,
                lambda ids, stop, l=listener: (l.accept(ids, timeout_s, stop),
                                               SocketInputGate())))
        prefix = _free_name_prefix(job.job_name)
        name = f"{prefix}/jobmaster"
        master = JobMaster.options(name=name, namespace=NAMESPACE, max_restarts=0).remote(
            job, driver_addresses, prefix)
        for ep in endpoints:
            ep.start()
        ref = master.run.remote()
        handle = _RayJobHandle(job, master, ref, listeners, name)
        client = JobClient(handle, endpoints, config.get(PROGRESS_INTERVAL))
        client.endpoints_by_id = {ep.endpoint_id: ep for ep in endpoints}  # type: ignore[attr-defined]
        return client
