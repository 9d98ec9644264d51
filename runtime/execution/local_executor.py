"""Runs a job in this process, one thread per subtask, over in-process channels.

For unit tests and debugging (``execution.target: local``): the same tasks, operators,
channel codec, scheduler and checkpoint coordinator as on Ray, without Ray. A failed
attempt's threads are cancelled and a new attempt gets fresh channels.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from flowray.runtime.network.channel import ChannelReader, ChannelWriter, InputGate
from flowray.runtime.network.in_process import InProcessChannel, InProcessGate
from flowray.runtime.execution.python_env import apply_in_process
from flowray.runtime.execution.client import (
    DriverConnections,
    DriverEndpoint,
    JobClient,
    JobHandle,
)
from flowray.runtime.messages import JobOutcome, JobStatus
from flowray.common.clock import Clock, SystemClock
from flowray.common.options import CHANNEL_CREDITS, PROGRESS_INTERVAL
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import SubtaskId, TaskDeploymentDescriptor
from flowray.runtime.execution.executor import JobExecutor, PreparedJob
from flowray.runtime.jobmaster.deployer import TaskDeployer
from flowray.runtime.jobmaster.scheduler import JobScheduler
from flowray.runtime.task.iteration_head_task import create_stream_task
from flowray.runtime.task.stream_task import StreamTask
from flowray.runtime.task.environment import TaskEnvironment
from flowray.metrics.groups import MetricRegistry, TaskMetricGroup
from flowray.runtime.task.subtask_checkpoints import CheckpointResponder

__all__ = ["LocalExecutor"]


class _Wiring:
    """All channels of one attempt, created on first use; each end is handed out once."""

    def __init__(self, credits: int, driver: Dict[str, "_LocalDriverConnections"]) -> None:
        self.credits = credits
        self.channels: Dict[str, InProcessChannel] = {}
        self.lock = threading.Lock()
        self.driver = driver

    def channel(self, cid: str) -> InProcessChannel:
        with self.lock:
            ch = self.channels.get(cid)
            if ch is None:
                ch = self.channels[cid] = InProcessChannel(cid, self.credits)
            return ch

    def open_inputs(self, ids: List[str], should_stop: Callable[[], bool]
                    ) -> Tuple[Dict[str, ChannelReader], InputGate]:
        gate = InProcessGate()
        readers = {}
        for cid in ids:
            ch = self.channel(cid)
            ch.attach_gate(gate)
            readers[cid] = ch.reader
        return readers, gate

    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter:
        conns = self.driver[endpoint_id]
        ch = InProcessChannel(channel_id, self.credits, conns.gate)
        conns.new.put(ch.reader)
        return ch.writer


class _LocalDriverConnections(DriverConnections):
    def __init__(self) -> None:
        self.gate = InProcessGate()
        self.new: "queue.Queue[ChannelReader]" = queue.Queue()

    def poll_new(self, timeout_s: float) -> List[ChannelReader]:
        out = []
        try:
            out.append(self.new.get(timeout=timeout_s) if timeout_s > 0
                       else self.new.get_nowait())
            while True:
                out.append(self.new.get_nowait())
        except queue.Empty:
            pass
        return out


class _LocalTaskEnvironment(TaskEnvironment):
    def __init__(self, wiring: _Wiring, clock: Clock, responder: CheckpointResponder,
                 metrics: MetricRegistry) -> None:
        self.wiring = wiring
        self.clock = clock
        self.responder = responder
        self.metrics = metrics

    def metrics_group_for(self, tdd: TaskDeploymentDescriptor) -> TaskMetricGroup:
        return self.metrics.task_group(tdd.job_name, tdd.job_id, tdd.vertex_name,
                                       tdd.subtask.index)

    def open_output(self, channel_id: str, consumer: SubtaskId) -> ChannelWriter:
        return self.wiring.channel(channel_id).writer

    def open_inputs(self, channel_ids, should_stop):
        return self.wiring.open_inputs(channel_ids, should_stop)

    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter:
        return self.wiring.open_driver_channel(endpoint_id, channel_id)


class _Responder(CheckpointResponder):
    """Task -> scheduler messages, queued for the scheduler thread."""

    def __init__(self, events: "queue.Queue[Callable[[], None]]", scheduler: Any,
                 attempt: int) -> None:
        self.events = events
        self.scheduler = scheduler
        self.attempt = attempt

    def acknowledge_checkpoint(self, subtask, checkpoint_id, snapshot, metrics) -> None:
        self.events.put(lambda: self.scheduler().on_acknowledge(
            self.attempt, subtask, checkpoint_id, snapshot, metrics))

    def decline_checkpoint(self, subtask, checkpoint_id, reason, message) -> None:
        self.events.put(lambda: self.scheduler().on_decline(
            self.attempt, subtask, checkpoint_id, reason, message))

    def task_initialized(self, subtask) -> None:
        self.events.put(lambda: self.scheduler().on_task_initialized(self.attempt, subtask))

    def task_ended_input(self, subtask) -> None:
        self.events.put(lambda: self.scheduler().on_ended_input(self.attempt, subtask))

    def loop_idle(self, subtask) -> None:
        self.events.put(lambda: self.scheduler().on_loop_idle(self.attempt, subtask))

    def loop_counters(self, subtask, iteration, wave, counters) -> None:
        self.events.put(lambda: self.scheduler().on_loop_counters(
            self.attempt, subtask, iteration, wave, counters))


class _LocalJob(TaskDeployer, JobHandle):
    """Deployer for the scheduler and handle for the client, driven by one thread."""

    def __init__(self, job: PreparedJob, clock: Clock,
                 driver: Dict[str, _LocalDriverConnections]) -> None:
        self.job_id = job.job_id
        self.job_name = job.job_name
        self.clock = clock
        self.driver = driver
        self.credits = Configuration(job.config).get(CHANNEL_CREDITS)
        self.tasks: Dict[SubtaskId, StreamTask] = {}
        self.metrics = MetricRegistry()  # the job's tasks' (one process: one registry)
        self.events: "queue.Queue[Callable[[], None]]" = queue.Queue()
        self.done = threading.Event()
        self._outcome: Optional[JobOutcome] = None
        self.scheduler = JobScheduler(job.job_id, job.job_name, job.execution_graph(),
                                      job.plan_bytes, self, clock, job.config,
                                      initial_checkpoint=job.restore_checkpoint)
        self._thread = threading.Thread(target=self._loop, name="flowray-local-jobmaster",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        sched = self.scheduler
        sched.start()
        while not sched.is_done:
            try:
                event = self.events.get(timeout=0.02)
                event()
                while True:
                    self.events.get_nowait()()
            except queue.Empty:
                pass
            sched.tick()
        sched.clean_up_storage()
        self._outcome = sched.outcome()
        self.done.set()

    # -- TaskDeployer ------------------------------------------------------------------
    def deploy(self, attempt: int, descriptors: List[TaskDeploymentDescriptor]) -> None:
        wiring = _Wiring(self.credits, self.driver)
        env = _LocalTaskEnvironment(wiring, self.clock,
                                    _Responder(self.events, lambda: self.scheduler, attempt),
                                    self.metrics)
        started = []
        for d in descriptors:
            task = create_stream_task(d, env)
            self.tasks[d.subtask] = task
            started.append(task)
        for task in started:
            threading.Thread(target=self._run_task, args=(task, attempt),
                             name=f"flowray-task-{task.tdd.subtask.key}", daemon=True).start()

    def _run_task(self, task: StreamTask, attempt: int) -> None:
        result = task.run()
        self.events.put(lambda: self.scheduler.on_task_result(attempt, result))

    def cancel_tasks(self, subtasks) -> None:
        for s in subtasks:
            t = self.tasks.get(s)
            if t is not None:
                t.cancel()

    def kill(self, subtasks) -> None:
        self.cancel_tasks(subtasks)  # threads cannot be killed; they are daemons

    def _task(self, subtask: SubtaskId) -> Optional[StreamTask]:
        return self.tasks.get(subtask)

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint,
                location=None) -> None:
        t = self._task(subtask)
        if t is not None:
            t.trigger_checkpoint(checkpoint_id, timestamp_ms, is_savepoint, location)

    def notify_complete(self, subtask, checkpoint_id) -> None:
        t = self._task(subtask)
        if t is not None:
            t.notify_checkpoint_complete(checkpoint_id)

    def notify_aborted(self, subtask, checkpoint_id, reason) -> None:
        t = self._task(subtask)
        if t is not None:
            t.notify_checkpoint_aborted(checkpoint_id)

    def request_loop_counters(self, subtasks, iteration, wave) -> None:
        for s in subtasks:
            t = self._task(s)
            if t is not None:
                t.report_loop_counters(iteration, wave)

    def end_loop(self, subtasks) -> None:
        for s in subtasks:
            t = self._task(s)
            if t is not None:
                t.end_loop()

    # -- JobHandle ---------------------------------------------------------------------
    def status(self) -> JobStatus:
        return self.scheduler.status

    def cancel(self) -> None:
        self.events.put(self.scheduler.cancel)

    def outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        self.done.wait(timeout_s)
        return self._outcome

    def checkpoint_stats(self) -> Dict[str, Any]:
        result: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        if self.done.is_set():
            return self.scheduler.checkpoint_stats()
        self.events.put(lambda: result.put(self.scheduler.checkpoint_stats()))
        try:
            return result.get(timeout=10)
        except queue.Empty:
            return {}

    def stop_sources(self, subtasks, stop_mode: int) -> None:
        for s in subtasks:
            t = self._task(s)
            if t is not None:
                t.stop_source(stop_mode)

    def savepoint(self, target_dir, stop, drain, timeout_s):
        if stop:
            return self._ask(lambda done: self.scheduler.stop_with_savepoint(
                target_dir, drain, done), timeout_s)
        return self._ask(lambda done: self.scheduler.trigger_savepoint(target_dir, done),
                         timeout_s)

    def checkpoint(self, timeout_s):
        return self._ask(self.scheduler.trigger_checkpoint, timeout_s)

    def _ask(self, request: Callable[[Any], None], timeout_s: Optional[float]) -> Any:
        """Run ``request(done)`` in the scheduler thread; what ``done`` was given."""
        result: "queue.Queue[Any]" = queue.Queue()
        self.events.put(lambda: request(lambda path, error: result.put((path, error))))
        try:
            return result.get(timeout=timeout_s)
        except queue.Empty:
            return None, f"no answer after {timeout_s} s"

    logs_here = True

    def restart_events(self, since: int) -> List[Dict[str, Any]]:
        return list(self.scheduler.restart_events[since:])

    def progress(self) -> Dict[str, Any]:
        ms = [t.metrics() for t in list(self.tasks.values())]
        earlier = self.scheduler.counters.earlier(dict(self.scheduler.attempts))
        return {"records_in": earlier["records_in"] + sum(m["records_in"] for m in ms),
                "source_records": earlier["source_records"]
                + sum(m["records_in"] for m in ms if m["is_source"]),
                "checkpoints": self.scheduler.stats.counts().get("completed", 0),
                "restarts": self.scheduler.restarts}


class LocalExecutor(JobExecutor):
    def __init__(self, clock: Optional[Clock] = None) -> None:
        self.clock = clock or SystemClock()

    def submit(self, job: PreparedJob) -> JobClient:
        config = Configuration(job.config)
        apply_in_process(job.config)  # add_python_file & co.
        driver = {eid: _LocalDriverConnections() for eid in job.driver_sinks}
        endpoints = [DriverEndpoint(eid, mode, chans, driver[eid])
                     for eid, (mode, chans) in job.driver_sinks.items()]
        handle = _LocalJob(job, self.clock, driver)
        for ep in endpoints:
            ep.start()
        handle.start()
        client = JobClient(handle, endpoints, config.get(PROGRESS_INTERVAL))
        client.endpoints_by_id = {ep.endpoint_id: ep for ep in endpoints}  # type: ignore[attr-defined]
        return client
