"""The Ray actor of one subtask (:class:`TaskActor`, a thin shell over
:class:`~flowray.runtime.task.stream_task.StreamTask`) and what it gives the task: socket
channels, the driver's channels, checkpoint answers to the job master."""

from __future__ import annotations

import logging
import re
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import ray

from flowray.runtime.network.channel import ChannelReader, ChannelStats, ChannelWriter, InputGate
from flowray.runtime.network.elements import RecordBatch
from flowray.common.clock import SystemClock
from flowray.common.options import (
    CHANNEL_CREDITS,
    CHANNEL_SAME_NODE,
    DEPLOY_TIMEOUT,
    TASK_GC_THRESHOLD,
)
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import SubtaskId, TaskDeploymentDescriptor
from flowray.runtime.task.iteration_head_task import create_stream_task
from flowray.runtime.task.stream_task import StreamTask
from flowray.runtime.task.environment import TaskEnvironment
from flowray.runtime.messages import TaskResult
from flowray.runtime.execution.executor import driver_channel_id
from flowray.runtime.execution.task_stdout import TASK_STDOUT, TaskStdout
from flowray.runtime.task.subtask_checkpoints import CheckpointResponder
from flowray.runtime.task.collector_tuning import CollectorTuning
from flowray.runtime.network.in_process import InProcessChannel, InProcessGate
from flowray.runtime.network.frame_codec import frame_sequence_number
from flowray.common.options import CHANNEL_TRANSPORT, METRICS_ENABLED, METRICS_REPORT_INTERVAL
from flowray.metrics.groups import MetricRegistry
from flowray.runtime.execution.metrics_export import RayMetricsExporter
from flowray.runtime.network.ray_transport import RayChannelWriter
from flowray.state.queryable import UnknownKvStateLocation
from flowray.runtime.network.tls import TlsSettings
from flowray.runtime.network.socket_transport import (
    SocketInputGate,
    SocketListener,
    connect_channel,
)

__all__ = ["TaskActor", "actor_name"]

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
                 timeout_s: float, node_id: str, secret: bytes = b"",
                 tls: Optional[TlsSettings] = None, same_node: str = "unix") -> None:
        self.clock = SystemClock()
        self.secret = secret
        self.tls = tls
        self.same_node = same_node
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
        return connect_channel(address, channel_id, self.credits, self.node_id, self.timeout_s,
                               self.secret, self.tls, self.same_node)

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
                               self.timeout_s, self.secret, self.tls, self.same_node)


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

    def task_initialized(self, subtask) -> None:
        self._sent(self.master.task_initialized.remote(self.attempt, subtask))

    def task_ended_input(self, subtask) -> None:
        self._sent(self.master.task_ended_input.remote(self.attempt, subtask))

    def loop_idle(self, subtask) -> None:
        self._sent(self.master.loop_idle.remote(self.attempt, subtask))

    def loop_counters(self, subtask, iteration, wave, counters) -> None:
        self._sent(self.master.loop_counters.remote(self.attempt, subtask, iteration, wave,
                                                    counters))

    def flush(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            refs, self._refs = self._refs, []
        if refs:
            try:
                ray.get(refs, timeout=timeout_s)
            except Exception:  # noqa: BLE001 - the master is gone or slow: the result goes out
                pass


def _is_ready(ref: Any) -> bool:
    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)


#: queryable-state queries a task actor answers at once (the rest are told to retry)
MAX_CONCURRENT_QUERIES = 2


@ray.remote(num_cpus=0, max_concurrency=8)
class TaskActor:
    """One subtask. ``run`` executes the task loop and returns its :class:`TaskResult`;
    ``cancel``, checkpoint triggers and notifications are served from other threads
    meanwhile and reach the task through its mailbox."""

    def __init__(self, tdd: Optional[TaskDeploymentDescriptor] = None,
                 master: Any = None) -> None:
        """With ``tdd``: the actor of that task. Without: a warm standby, idle until
        :meth:`assign` gives it a task (a failover deploys into it)."""
        logging.getLogger("ray").setLevel(logging.WARNING)
        self.node_id, self._ip = _node()
        self.task: Optional[StreamTask] = None
        self._cancelled = False
        self._early: List[Callable[[StreamTask], None]] = []
        self._lock = threading.Lock()
        self._assigned = threading.Event()
        # queries take at most this many of the actor's threads: heartbeats, triggers and
        # cancels always find one
        self._queries = threading.BoundedSemaphore(MAX_CONCURRENT_QUERIES)
        #: which assignment this actor serves: a pooled actor hosts one task after
        #: another, and a call meant for an earlier task (it names that task's epoch)
        #: must not reach the current one
        self._epoch = 0
        self._running = False
        if tdd is not None:
            self._set_up(tdd, master)

    def standby_node(self) -> str:
        """A standby's node, once its process runs."""
        return self.node_id

    def idle(self) -> None:
        """Returns once the standby was given a task: the job master keeps this call in
        flight, so a standby that dies is noticed at once (the call fails)."""
        self._assigned.wait()

    def assign(self, tdd: TaskDeploymentDescriptor, master: Any = None) -> Dict[str, Any]:
        """Make this standby the actor of ``tdd``; its :meth:`address`."""
        with self._lock:
            if self._assigned.is_set():
                raise RuntimeError("this task actor already hosts a task")
            self._set_up(tdd, master)
        return self.address()

    def reset(self) -> bool:
        """After its task ended: make this actor a standby again, for another task (of
        any job). False if it cannot host another (its task still runs, or did not end
        finished or fit for another attempt, see :meth:`_can_redeploy`): it is then
        killed, not reused."""
        with self._lock:
            task = self.task
            if (self._running or task is None
                    or not (task.ended_normally() or self._can_redeploy())):
                return False
            self._clear()
        return True

    def redeploy(self, tdd: TaskDeploymentDescriptor, master: Any = None) -> Dict[str, Any]:
        """Host ``tdd``, the next attempt of a task, in this actor whose task was
        cancelled by a failover, failed, or finished (as Flink redeploys a region's tasks into the slots they
        ran in, with no new process); its :meth:`address`. Raises ``RuntimeError`` if
        this actor cannot host it (see :meth:`_can_redeploy`); calls for the ended task
        are dropped from here on (its epoch is over)."""
        with self._lock:
            if not self._can_redeploy():
                raise RuntimeError("this task actor cannot host another attempt: its task "
                                   "runs, or did not end with its operators closed")
            self._clear()
            self._set_up(tdd, master)
        return self.address()

    def _can_redeploy(self) -> bool:
        """Whether the ended task left this actor fit for another attempt: its run
        returned, its operators were closed (``StreamTask.can_host_another``), and it used
        sockets (calls of the Ray transport's producers may still be on their way)."""
        task = self.task
        return (not self._running and task is not None and task.can_host_another()
                and self.transport != "ray")

    def _clear(self) -> None:
        """Forget the ended task (the lock held)."""
        self._epoch += 1   # calls for the ended task are dropped from here on
        self.task = None
        self.tdd = None
        self.master = None
        self._early = []
        self.inbox = None
        self._assigned.clear()

    def current_epoch(self) -> int:
        """The epoch calls for the current (or, idle, the former) task name."""
        return self._epoch

    def _for_current(self, epoch: Optional[int]) -> bool:
        """A call naming ``epoch`` is meant for the task this actor hosts now (None: no
        epoch named, as from tests)."""
        return epoch is None or epoch == self._epoch

    def _set_up(self, tdd: TaskDeploymentDescriptor, master: Any) -> None:
        self._epoch += 1
        self._cancelled = False
        self.tdd = tdd
        self.master = master
        self._assigned.set()
        # only producers of this job (they know its secret) get to send it anything
        self.tls = TlsSettings.from_config(tdd.config)
        config = Configuration(tdd.config)
        self.listener = SocketListener(self.node_id, self._ip, tdd.channel_secret,
                                       tls=self.tls, credits=config.get(CHANNEL_CREDITS))
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
        address["epoch"] = self._epoch
        if self.transport == "ray":
            address["actor"] = ray.get_runtime_context().current_actor
        return address

    def push_frame(self, channel_id: str, data: bytes) -> Optional[int]:
        """Ray transport: queue one encoded frame; returns when the channel has room,
        with the batch size this consumer announced (buffer debloating; None: none).

        Calls of a threaded actor may run out of order: frames wait for their turn by
        sequence number, so the channel stays FIFO."""
        seq = frame_sequence_number(data)
        cond = self._order[channel_id]
        with cond:
            while self._next_seq[channel_id] != seq:
                cond.wait(1.0)
            writer = self.inbox[1][channel_id].writer
            writer.push_encoded(data)
            self._next_seq[channel_id] = seq + 1
            cond.notify_all()
        return writer.batch_limit

    def run(self, addresses: Dict[str, Dict[str, Any]],
            driver_addresses: Dict[str, Dict[str, Any]]) -> TaskResult:
        with self._lock:
            self._running = True
        try:
            result = self._run(addresses, driver_addresses)
        finally:
            with self._lock:
                self._running = False
        with self._lock:
            result.actor_reusable = self._can_redeploy()
        return result

    def _run(self, addresses: Dict[str, Dict[str, Any]],
             driver_addresses: Dict[str, Dict[str, Any]]) -> TaskResult:
        config = Configuration(self.tdd.config)
        env = _SocketTaskEnvironment(self.listener, addresses, driver_addresses,
                                     config.get(CHANNEL_CREDITS),
                                     config.get(DEPLOY_TIMEOUT) / 1000.0, self.node_id,
                                     self.tdd.channel_secret, self.tls,
                                     config.get(CHANNEL_SAME_NODE))
        env.ray_inbox = self.inbox
        responder = _RayResponder(self.master, self.tdd.attempt)
        if self.master is not None:
            env.responder = responder
        exporter = self._metrics(env, config)
        task = create_stream_task(self.tdd, env)
        with self._lock:
            self.task = task
            early, self._early = self._early, []
        for action in early:
            action(task)
        if self._cancelled:
            task.cancel()
        stdout = self._task_stdout(env, driver_addresses)
        try:
            with CollectorTuning(config.get(TASK_GC_THRESHOLD)):
                return task.run()
        finally:
            if exporter is not None:
                exporter.close()
            if stdout is not None:
                self._restore_stdout(stdout)
            self.listener.close()
            responder.flush()

    def _metrics(self, env: "_SocketTaskEnvironment",
                 config: Configuration) -> Optional[RayMetricsExporter]:
        """The subtask's metric group on ``env``, exported to Ray's metrics while the task
        runs (``flowray.metrics.enabled``)."""
        tdd = self.tdd
        registry = MetricRegistry()
        env.metrics_group = registry.task_group(tdd.job_name, tdd.job_id, tdd.vertex_name,
                                                tdd.subtask.index)
        if not config.get(METRICS_ENABLED):
            return None
        interval_s = config.get(METRICS_REPORT_INTERVAL) / 1000.0
        return RayMetricsExporter(registry, interval_s).start()

    def _task_stdout(self, env: "_SocketTaskEnvironment",
                     driver_addresses: Dict[str, Dict[str, Any]]) -> Optional[TaskStdout]:
        """While the task runs, what user code prints goes to the client (attached jobs
        with ``flowray.task-stdout-to-client``: the client declared the endpoint)."""
        address = driver_addresses.get(TASK_STDOUT)
        if address is None or address.get("stdout"):
            return None
        writer = env.open_driver_channel(
            TASK_STDOUT, driver_channel_id(TASK_STDOUT, self.tdd.subtask))
        stdout = TaskStdout(writer, sys.stdout)
        sys.stdout = stdout
        return stdout

    @staticmethod
    def _restore_stdout(stdout: TaskStdout) -> None:
        sys.stdout = stdout.original
        try:
            stdout.end()
        except Exception:  # noqa: BLE001 - the client is gone: its lines have nowhere to go
            pass
        finally:
            stdout.close_channel()

    def _to_task(self, action: Callable[[StreamTask], None],
                 epoch: Optional[int] = None) -> None:
        with self._lock:
            if not self._for_current(epoch):
                return   # meant for a task this actor hosted before
            if self.task is None:
                self._early.append(action)
                return
        action(self.task)

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, is_savepoint: bool,
                           location: Optional[str] = None, epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.trigger_checkpoint(checkpoint_id, timestamp, is_savepoint,
                                                     location), epoch)

    def stop_source(self, stop_mode: int, epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.stop_source(stop_mode), epoch)

    def notify_checkpoint_complete(self, checkpoint_id: int,
                                   epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.notify_checkpoint_complete(checkpoint_id), epoch)

    def notify_checkpoint_aborted(self, checkpoint_id: int,
                                  epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.notify_checkpoint_aborted(checkpoint_id), epoch)

    def report_loop_counters(self, iteration: str, wave: int,
                             epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.report_loop_counters(iteration, wave), epoch)

    def end_loop(self, epoch: Optional[int] = None) -> None:
        self._to_task(lambda t: t.end_loop(), epoch)

    def cancel(self, epoch: Optional[int] = None) -> None:
        with self._lock:
            if not self._for_current(epoch):
                return
            self._cancelled = True
            task = self.task
        if task is not None:
            task.cancel()

    def metrics(self) -> Dict[str, Any]:
        return self.task.metrics() if self.task is not None else {}

    # -- queryable state (flowray.queryable_state) -------------------------------------
    def queryable_state_info(self) -> Dict[str, Tuple[str, List[str]]]:
        """Queryable state name -> (state kind, the key types it has seen)."""
        task = self.task
        backend = getattr(task, "keyed_backend", None)
        return backend.queryable.info() if backend is not None else {}

    def query_state(self, name: str, key: Any, committed: bool) -> Tuple[int, Any]:
        """``(checkpoint id, value)`` of ``key`` in the state queryable as ``name``
        (``StreamTask.query_state``)."""
        task = self.task
        if getattr(task, "keyed_backend", None) is None:
            tdd = getattr(self, "tdd", None)
            raise UnknownKvStateLocation(f"subtask {tdd.display_name if tdd else '?'} is not "
                                         "running")
        if not self._queries.acquire(blocking=False):
            raise UnknownKvStateLocation(f"subtask {task.tdd.display_name} is answering "
                                         f"{MAX_CONCURRENT_QUERIES} queries already; retry")
        try:
            return task.query_state(name, key, committed)
        except TimeoutError as e:
            raise UnknownKvStateLocation(str(e)) from None
        finally:
            self._queries.release()

    def heartbeat(self) -> Tuple[float, Dict[str, Any]]:
        """The job master's heartbeat request; the answer is how long the task's loop
        has gone without a turn (ms; 0 while it progresses or waits on its channels) and
        the subtask's metrics now (for the REST API)."""
        task = self.task
        if task is None:
            return 0.0, {}
        try:
            values = task.metric_values()
        except Exception:  # noqa: BLE001 - metrics never fail a heartbeat
            values = {}
        return task.stalled_ms(), values

    def pid(self) -> int:
        import os
        return os.getpid()
