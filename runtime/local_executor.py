"""Runs a job in this process, one thread per subtask, over in-process channels.

For unit tests and debugging (``execution.target: local``): the same tasks, operators and
channel codec as on Ray, without Ray.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .channels import ChannelReader, ChannelWriter, InProcessChannel, InProcessGate, InputGate
from .client import DriverEndpoint, JobClient, JobHandle, JobOutcome, JobStatus
from .clock import Clock, SystemClock
from .config import CHANNEL_CREDITS, PROGRESS_INTERVAL, Configuration
from .execution_graph import SubtaskId
from .executor import JobExecutor, PreparedJob
from .scheduler import Decision, JobRun
from .stream_task import StreamTask, TaskEnvironment, TaskResult, TaskState

__all__ = ["LocalExecutor"]


class _Wiring:
    """All channels of a job, created up front; each end is handed out once."""

    def __init__(self, credits: int) -> None:
        self.credits = credits
        self.channels: Dict[str, InProcessChannel] = {}
        self.lock = threading.Lock()

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


class _LocalTaskEnvironment(TaskEnvironment):
    def __init__(self, wiring: _Wiring, clock: Clock) -> None:
        self.wiring = wiring
        self.clock = clock

    def open_output(self, channel_id: str, consumer: SubtaskId) -> ChannelWriter:
        return self.wiring.channel(channel_id).writer

    def open_inputs(self, channel_ids, should_stop):
        return self.wiring.open_inputs(channel_ids, should_stop)

    def open_driver_channel(self, endpoint_id: str, channel_id: str) -> ChannelWriter:
        return self.wiring.channel(channel_id).writer


class _LocalJobHandle(JobHandle):
    def __init__(self, job: PreparedJob, tasks: Dict[SubtaskId, StreamTask],
                 run: JobRun) -> None:
        self.job_id = job.job_id
        self.job_name = job.job_name
        self.tasks = tasks
        self.run = run
        self.done = threading.Event()
        self.cond = threading.Condition()
        self._outcome: Optional[JobOutcome] = None

    def on_result(self, result: TaskResult) -> None:
        with self.cond:
            decision = self.run.on_result(result)
            if decision is Decision.CANCEL_ALL:
                for t in self.tasks.values():
                    t.cancel()
            elif decision in (Decision.FINISH, Decision.DONE):
                self._outcome = self.run.outcome()
                self.done.set()

    def status(self) -> JobStatus:
        return self.run.status

    def cancel(self) -> None:
        with self.cond:
            decision = self.run.cancel()
            if decision is Decision.CANCEL_ALL:
                for t in self.tasks.values():
                    t.cancel()

    def outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        self.done.wait(timeout_s)
        return self._outcome

    def progress(self) -> Dict[str, Any]:
        ms = [t.metrics() for t in self.tasks.values()]
        return {"records_in": sum(m["records_in"] for m in ms),
                "source_records": sum(m["records_in"] for m in ms if m["is_source"])}


class LocalExecutor(JobExecutor):
    def __init__(self, clock: Optional[Clock] = None) -> None:
        self.clock = clock or SystemClock()

    def submit(self, job: PreparedJob) -> JobClient:
        config = Configuration(job.config)
        wiring = _Wiring(config.get(CHANNEL_CREDITS))
        eg = job.execution_graph()
        env = _LocalTaskEnvironment(wiring, self.clock)
        endpoints = []
        for eid, (mode, chans) in job.driver_sinks.items():
            ep = DriverEndpoint(eid, mode, chans, wiring.open_inputs)
            endpoints.append(ep)
        tasks = {s: StreamTask(eg.deployment_descriptor(s, job.job_id, job.plan_bytes[s.vertex_id],
                                                        job.config), env)
                 for s in eg.subtasks()}
        run = JobRun(job.job_id, job.job_name, tasks, self.clock)
        handle = _LocalJobHandle(job, tasks, run)
        for ep in endpoints:
            ep.start()
        run.deployed()
        for s, task in tasks.items():
            threading.Thread(target=lambda t=task: handle.on_result(t.run()),
                             name=f"flowray-task-{s.key}", daemon=True).start()
        client = JobClient(handle, endpoints, config.get(PROGRESS_INTERVAL))
        client.endpoints_by_id = {ep.endpoint_id: ep for ep in endpoints}  # type: ignore[attr-defined]
        return client
