"""The driver's view of a job: status, result, errors, and the records sent to the driver."""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

from flowray.runtime.checkpoint.stats import format_checkpoint_table
from flowray.common.job_client import JobClient as JobClientApi
from flowray.common.job_execution_result import JobExecutionResult as JobExecutionResultApi
from flowray.common.job_status import JobStatus
from flowray.runtime.messages import JobOutcome
from flowray.runtime.network.channel import ChannelClosedError, ChannelReader, InputGate
from flowray.runtime.network.elements import EndOfPartition, RecordBatch

from flowray.common.logs import configure_logging

log = logging.getLogger(__name__)

__all__ = [
    "JobExecutionError",
    "JobExecutionResult",
    "DetachedJobExecutionResult",
    "JobHandle",
    "JobClient",
    "SavepointError",
    "DriverConnections",
    "DriverEndpoint",
    "CollectIterator",
]

SUMMARY_CHECKPOINTS = 5  # checkpoints listed in the log when a job ends


class JobExecutionError(RuntimeError):
    """The job failed. ``operator`` names the operator that raised (if user code did), and
    ``cause_traceback`` is the original traceback from the task."""

    def __init__(self, outcome: JobOutcome) -> None:
        f = outcome.failure
        self.outcome = outcome
        self.operator = f.operator if f else None
        self.task = f.task if f else None
        self.cause_type = f.cause_type if f else None
        self.cause_traceback = f.traceback_text if f else ""
        if f is None:
            msg = f"job {outcome.job_name!r} ended {outcome.status.value}"
        else:
            msg = (
                f"job {outcome.job_name!r} failed: {f.describe()}\n\n"
                f"Original traceback (from the task):\n{f.traceback_text}"
            )
        super().__init__(msg)


class JobExecutionResult(JobExecutionResultApi):
    """A finished job: id, runtime, and what each task did."""

    def __init__(self, outcome: JobOutcome) -> None:
        self.outcome = outcome

    def get_job_id(self) -> str:
        return self.outcome.job_id

    @property
    def job_name(self) -> str:
        return self.outcome.job_name


    def get_net_runtime(self) -> int:
        return int(self.outcome.duration_ms)

    @property
    def task_metrics(self) -> List[Dict[str, Any]]:
        return self.outcome.task_metrics

    @property
    def source_records(self) -> int:
        """Records the sources read, in every attempt (replays after a restore count
        again)."""
        return (sum(m.get("records_in", 0) for m in self.task_metrics if m.get("is_source"))
                + self.outcome.earlier_attempts.get("source_records", 0))

    def get_checkpoint_stats(self) -> Dict[str, Any]:
        return dict(self.outcome.checkpoint_stats)

    def checkpoint_table(self, limit: int = 10) -> str:
        """The newest ``limit`` checkpoints as a text table (see
        :func:`~flowray.runtime.checkpoint.stats.format_checkpoint_table`); empty if the
        job took none."""
        stats = self.outcome.checkpoint_stats
        history = stats.get("history") or []
        return format_checkpoint_table(history, limit, stats.get("task_names")) \
            if history else ""

    def summary(self) -> str:
        o = self.outcome
        tasks = len(o.task_metrics)
        text = (
            f"job {o.job_name!r} {o.status.value} in {o.duration_ms / 1000:.2f} s: "
            f"{self.source_records:,} source records, {tasks} tasks, "
            f"{o.checkpoints} checkpoints, {o.restarts} restarts"
        )
        if o.job_master_restarts:
            text += f", {o.job_master_restarts} job master restarts"
        detail = o.checkpoint_stats.get("summary") if o.checkpoint_stats else None
        if o.checkpoints and detail:
            text += f" ({detail})"
        return text

    def __repr__(self) -> str:
        return f"JobExecutionResult({self.summary()})"


class DetachedJobExecutionResult(JobExecutionResultApi):
    """What ``execute()`` returns for a detached job (``execution.attached=false``), as
    Flink's: the job id and name; the job runs on in the cluster, so nothing about its
    execution is known here (``flowray info JOB`` tells, or a client re-attached with
    :func:`flowray.runtime.execution.jobs.attach`).

    >>> r = DetachedJobExecutionResult("4f2a9c", "wordcount")
    >>> r.get_job_id(), r.job_name, r.is_job_execution_result()
    ('4f2a9c', 'wordcount', False)
    >>> r.get_net_runtime()
    Traceback (most recent call last):
    ...
    RuntimeError: job 'wordcount' (4f2a9c) was submitted detached: its results are not available here (flowray info 4f2a9c)
    """

    def __init__(self, job_id: str, job_name: str) -> None:
        self._job_id = job_id
        self.job_name = job_name

    def get_job_id(self) -> str:
        return self._job_id

    def is_job_execution_result(self) -> bool:
        return False

    def _unavailable(self) -> RuntimeError:
        return RuntimeError(f"job {self.job_name!r} ({self._job_id}) was submitted detached: "
                            f"its results are not available here (flowray info {self._job_id})")

    def get_net_runtime(self) -> int:
        raise self._unavailable()

    def get_checkpoint_stats(self) -> Dict[str, Any]:
        raise self._unavailable()

    def summary(self) -> str:
        return f"job {self.job_name!r} submitted detached with job id {self._job_id}"

    def __repr__(self) -> str:
        return f"DetachedJobExecutionResult({self._job_id!r}, {self.job_name!r})"


class SavepointError(RuntimeError):
    """A savepoint could not be taken (the message says why); the job runs on, or, if a
    stop-with-savepoint failed after its sources stopped, fails over and runs on."""


class JobHandle:
    """How a client reaches a running job (implemented by each executor)."""

    job_id: str
    job_name: str
    #: the job's scheduler runs in this process, so its log lines are printed here
    logs_here: bool = False

    def status(self) -> JobStatus:
        raise NotImplementedError

    def restart_events(self, since: int) -> List[Dict[str, Any]]:
        """The job's restarts from the ``since``-th on, each explained: ``failure``
        (which task, what exception) and ``decision`` (what restarts, when)."""
        return []

    def cancel(self) -> None:
        raise NotImplementedError

    def outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        """The outcome once the job has ended; ``None`` if still running at the timeout."""
        raise NotImplementedError

    def progress(self) -> Dict[str, Any]:
        return {}

    def checkpoint_stats(self) -> Dict[str, Any]:
        return {}

    def info(self) -> Dict[str, Any]:
        """Job id, name, status, start time, vertices with their parallelism, latest
        checkpoint and savepoint (see ``JobMaster.info``)."""
        return {"job_id": self.job_id, "job_name": self.job_name,
                "status": self.status().value}

    def web_url(self) -> Optional[str]:
        """The job's REST API and web UI (``None``: it has none, as on the local
        executor)."""
        return None

    def savepoint(self, target_dir: Optional[str], stop: bool, drain: bool,
                  timeout_s: Optional[float]) -> "tuple[Optional[str], Optional[str]]":
        """Take a savepoint (``stop``: and stop the job); ``(directory, None)`` or
        ``(None, error)``."""
        raise NotImplementedError

    def checkpoint(self, timeout_s: Optional[float]
                   ) -> "tuple[Optional[str], Optional[str]]":
        """Take a checkpoint now; ``(its chk-<n> directory, None)`` or ``(None, error)``."""
        raise NotImplementedError

    def release(self) -> None:
        pass


class JobClient(JobClientApi):
    """Handle on a submitted job, as PyFlink's ``JobClient`` (the runtime's implementation
    of :class:`flowray.common.job_client.JobClient`)."""

    def __init__(
        self,
        handle: JobHandle,
        endpoints: List["DriverEndpoint"],
        progress_interval_ms: int = 10_000,
        detached: bool = False,
    ) -> None:
        #: the job runs detached from this process (``execution.attached=false``, or a
        #: client re-attached to a running job): ending this process leaves it running
        self.detached = detached
        self._handle = handle
        self._endpoints = endpoints
        self._progress_interval_s = progress_interval_ms / 1000.0
        self._result: Optional[JobOutcome] = None
        self._final_info: Dict[str, Any] = {}   # get_job_info() once the job ended
        self._restarts_reported = 0   # restarts already told on the console
        self._lock = threading.Lock()
        self._outcome_callbacks: List[Callable[[JobOutcome], None]] = []
        configure_logging()

    def on_outcome(self, callback: "Callable[[JobOutcome], None]") -> None:
        """Call ``callback(outcome)`` in the driver once the job's outcome is known (when
        :meth:`wait` sees it); an exception there fails :meth:`wait`."""
        self._outcome_callbacks.append(callback)

    def get_job_id(self) -> str:
        return self._handle.job_id

    def get_job_name(self) -> str:
        return self._handle.job_name

    def get_web_url(self) -> Optional[str]:
        """The URL of the job's REST API (Flink's paths) and web UI, e.g.
        ``http://127.0.0.1:8081``; ``None`` where the job has none (the local executor, or
        no ``rest.port`` could be bound)."""
        return self._handle.web_url()

    def get_job_info(self) -> Dict[str, Any]:
        """Job id, name, status, start time (``start_ms``), vertices with their
        parallelism, latest checkpoint and savepoint, restarts, failure; after the job
        ended (:meth:`wait` returned or raised), its final info."""
        if self._result is not None:
            return dict(self._final_info)
        return self._handle.info()

    def _info_at_end(self, outcome: JobOutcome) -> Dict[str, Any]:
        """The job's info as it ended, taken before its master goes; what the outcome
        says where the master cannot tell any more."""
        try:
            info = dict(self._handle.info())
        except Exception:  # noqa: BLE001 - the master may be gone already
            info = {"job_id": outcome.job_id, "job_name": outcome.job_name}
        info["status"] = outcome.status.value
        info.setdefault("restarts", outcome.restarts)
        info.setdefault("duration_ms", outcome.duration_ms)
        if outcome.failure is not None:
            info.setdefault("failure", str(outcome.failure))
        return info

    def task_actor_names(self) -> Dict[str, str]:
        """Subtask key -> name of the Ray actor running it in the current attempt (empty
        on the local executor); for fault injection and debugging."""
        names = getattr(self._handle, "task_actor_names", None)
        return names() if names is not None else {}

    def task_names(self) -> Dict[str, str]:
        """Subtask key -> the name of its task (its chained operators' names) in the
        current attempt (empty on the local executor)."""
        names = getattr(self._handle, "task_names", None)
        return names() if names is not None else {}

    def job_master_actor(self) -> Any:
        """The job master's Ray actor handle (``None`` on the local executor)."""
        return getattr(self._handle, "master", None)


    def get_job_status(self) -> JobStatus:
        if self._result is not None:
            return self._result.status
        return self._handle.status()

    def cancel(self) -> None:
        if self._result is None:
            self._handle.cancel()

    def get_checkpoint_stats(self) -> Dict[str, Any]:
        """Checkpoints so far: ``counts`` (triggered, completed, failed, in progress),
        ``history`` (per checkpoint: id, status, duration, size, per-task sync/async/
        alignment times), ``summary`` (one line) and ``restarts``."""
        if self._result is not None:
            return dict(self._result.checkpoint_stats)
        return self._handle.checkpoint_stats()

    def trigger_savepoint(self, savepoint_directory: Optional[str] = None,
                          timeout_s: Optional[float] = None) -> str:
        """Take a savepoint of the running job into a new directory under
        ``savepoint_directory`` (default: ``execution.checkpointing.savepoint-dir``) and return that
        directory once the savepoint is complete; the job runs on. The savepoint is the
        user's: flowray never deletes it, and it can be moved before a restore
        (``execution.savepoint.path``). Raises :class:`SavepointError`."""
        return self._savepoint(savepoint_directory, False, False, timeout_s)

    def stop_with_savepoint(self, savepoint_directory: Optional[str] = None,
                            drain: bool = False, timeout_s: Optional[float] = None) -> str:
        """Stop the job with a final savepoint: sources stop, the savepoint is taken,
        sinks commit, and the job ends FINISHED; returns the savepoint directory.
        ``drain=True`` first ends the input as a bounded source would (the watermark
        goes to the end of time, so windows and timers fire); without it, state stays
        as it was, ready to go on after a restore. Raises :class:`SavepointError` (the
        job then fails over and runs on)."""
        path = self._savepoint(savepoint_directory, True, drain, timeout_s)
        self._wait_outcome(timeout_s)
        return path

    def trigger_checkpoint(self, timeout_s: Optional[float] = None) -> str:
        """Take a checkpoint now, outside the periodic schedule (Flink's manual
        checkpoint), and return its ``chk-<n>`` directory once it completed; it is
        retained and subsumed like the periodic ones. Raises :class:`SavepointError`."""
        if self._result is not None:
            raise SavepointError(f"job {self._handle.job_name!r} has ended "
                                 f"({self._result.status.value})")
        path, error = self._handle.checkpoint(timeout_s)
        if error is not None or path is None:
            raise SavepointError(error or "the checkpoint failed")
        return path

    def _savepoint(self, directory: Optional[str], stop: bool, drain: bool,
                   timeout_s: Optional[float]) -> str:
        if self._result is not None:
            raise SavepointError(f"job {self._handle.job_name!r} has ended "
                                 f"({self._result.status.value})")
        path, error = self._handle.savepoint(directory, stop, drain, timeout_s)
        if error is not None or path is None:
            raise SavepointError(error or "the savepoint failed")
        return path

    def wait(self, timeout_s: Optional[float] = None) -> JobExecutionResult:
        """Block until the job ends; its result, or :class:`JobExecutionError`."""
        outcome = self._wait_outcome(timeout_s)
        if outcome is None:
            raise TimeoutError(f"job {self._handle.job_name!r} still running after {timeout_s} s")
        if outcome.status is not JobStatus.FINISHED:
            raise JobExecutionError(outcome)
        return JobExecutionResult(outcome)

    get_job_execution_result = wait

    def _wait_outcome(self, timeout_s: Optional[float]) -> Optional[JobOutcome]:
        with self._lock:
            if self._result is not None:
                return self._result
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            interval = self._progress_interval_s if self._progress_interval_s > 0 else None
            next_progress = time.monotonic() + (interval or 0.0)
            while True:
                # a restart is told within a second; progress every interval
                step = self.RESTART_REPORT_S
                left = step if deadline is None else min(step, deadline - time.monotonic())
                outcome = self._handle.outcome(max(0.0, left))
                if outcome is not None:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                self._report_restarts()
                if interval is not None and time.monotonic() >= next_progress:
                    next_progress = time.monotonic() + interval
                    self._log_progress()
            for ep in self._endpoints:
                ep.finish(outcome.status is JobStatus.FINISHED)
            self._final_info = self._info_at_end(outcome)
            self._result = outcome
            self._handle.release()
            callbacks, self._outcome_callbacks = self._outcome_callbacks, []
            for callback in callbacks:
                callback(outcome)
            self._log_restarts(outcome.restart_events[self._restarts_reported:])
            level = logging.INFO if outcome.status is JobStatus.FINISHED else logging.WARNING
            result = JobExecutionResult(outcome)
            log.log(level, "flowray: %s", result.summary())
            table = result.checkpoint_table(SUMMARY_CHECKPOINTS)
            if table:
                log.log(level, "flowray: the last checkpoints:\n%s", table)
            return outcome

    #: how often a waiting client asks whether the job restarted
    RESTART_REPORT_S = 1.0

    def _report_restarts(self) -> None:
        try:
            events = self._handle.restart_events(self._restarts_reported)
        except Exception:  # noqa: BLE001 - best effort, as progress (the master may restart)
            return
        self._log_restarts(events)

    def _log_restarts(self, events: List[Dict[str, Any]]) -> None:
        # (a job running in this process logged them itself)
        for event in [] if getattr(self._handle, "logs_here", False) else events:
            log.warning("flowray: job %r restarts: %s; %s", self._handle.job_name,
                        event.get("failure"), event.get("decision"))
        self._restarts_reported += len(events)

    def _log_progress(self) -> None:
        try:
            p = self._handle.progress()
        except Exception:  # noqa: BLE001 - progress is best effort
            return
        if p:
            log.info(
                "flowray: job %r running %.0f s: %s source records, %s records "
                "in tasks, %s checkpoints, %s restarts",
                self._handle.job_name,
                p.get("running_s", 0.0),
                f"{p.get('source_records', 0):,}",
                f"{p.get('records_in', 0):,}",
                p.get("checkpoints", 0),
                p.get("restarts", 0),
            )


class DriverConnections:
    """Where a driver endpoint gets its channels: ``poll_new`` returns readers of channels
    that connected since the last call (a restarted task connects again); ``gate`` waits
    on them."""

    gate: InputGate

    def poll_new(self, timeout_s: float) -> List[ChannelReader]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DriverEndpoint:
    """Receives records that sink tasks send to the driver (``print``/``collect``).

    A thread polls the channels; each batch goes to stdout (print) or to a bounded queue
    (collect), so a slow consumer stops the polling and back-pressure reaches the job
    through the channel credits. After a failover the restarted sink tasks connect again
    and their records are delivered too: across restarts print and collect are
    at-least-once (records after the restored checkpoint are sent again).
    """

    def __init__(
        self,
        endpoint_id: str,
        mode: str,
        channel_ids: List[str],
        connections: DriverConnections,
        capacity: int = 16,
    ) -> None:
        self.endpoint_id = endpoint_id
        self.mode = mode
        self.channel_ids = channel_ids
        self.queue: "queue.Queue[Any]" = queue.Queue(maxsize=capacity)
        self._stop = threading.Event()
        self._all_ended = threading.Event()
        self._end_put = False
        self._connections = connections
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(
            target=self._run, name=f"flowray-driver-{mode}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _deliver(self, records: List[Any]) -> None:
        if self.mode == "print":
            sys.stdout.write("".join(f"{r}\n" for r in records))
            sys.stdout.flush()
            return
        while not self._stop.is_set():
            try:
                self.queue.put(records, timeout=0.1)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        conns = self._connections
        latest: Dict[str, ChannelReader] = {}  # newest connection per channel
        open_readers: List[ChannelReader] = []  # every connection not yet at its end
        ended: set = set()  # channels whose newest connection ended
        wanted = set(self.channel_ids)
        try:
            while not self._stop.is_set():
                for r in conns.poll_new(0.0 if open_readers else 0.05):
                    latest[r.channel_id] = r
                    open_readers.append(r)
                    ended.discard(r.channel_id)
                for r in conns.gate.wait(list(open_readers), 0.05) if open_readers else []:
                    try:
                        while True:
                            frame = r.poll()
                            if frame is None:
                                break
                            if type(frame) is RecordBatch:
                                self._deliver(frame.records)
                            elif type(frame) is EndOfPartition:
                                open_readers.remove(r)
                                if latest.get(r.channel_id) is r:
                                    ended.add(r.channel_id)
                                break
                    except ChannelClosedError:
                        # the producer died after sending what was read; its restarted
                        # attempt connects again
                        open_readers.remove(r)
                        r.close()
                if ended >= wanted and not self._all_ended.is_set():
                    self._all_ended.set()
                    self._put_end()
        except BaseException as e:  # noqa: BLE001 - reported to the iterator
            self.error = e
        finally:
            for r in open_readers:
                r.close()
            conns.close()
            if not self._all_ended.is_set():
                self._put_end()

    def _put_end(self) -> None:
        if self.mode == "collect" and not self._end_put:
            self._end_put = True
            while True:
                try:
                    self.queue.put(_END, timeout=0.1)
                    return
                except queue.Full:
                    if self._stop.is_set():
                        try:
                            self.queue.get_nowait()
                        except queue.Empty:
                            pass

    def finish(self, job_succeeded: bool) -> None:
        """The job ended: wait for the records already sent, then stop."""
        if job_succeeded and self._thread.ident is not None:
            self._all_ended.wait(timeout=30)
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)


_END = object()


class CollectIterator(Iterator[Any]):
    """Records of ``execute_and_collect``; closing it cancels a job still running."""

    def __init__(
        self, client: JobClient, endpoint: DriverEndpoint, limit: Optional[int] = None
    ) -> None:
        self._client = client
        self._endpoint = endpoint
        self._buffer: List[Any] = []
        self._pos = 0
        self._limit = limit
        self._returned = 0
        self._done = False

    def __iter__(self) -> "CollectIterator":
        return self

    def __next__(self) -> Any:
        if self._limit is not None and self._returned >= self._limit:
            self.close()
            raise StopIteration
        while self._pos >= len(self._buffer):
            if self._done:
                raise StopIteration
            try:
                item = self._endpoint.queue.get(timeout=0.2)
            except queue.Empty:
                status = self._client.get_job_status()
                if status in (JobStatus.FAILED, JobStatus.CANCELED):
                    self._finish()
                continue
            if item is _END:
                self._finish()
                continue
            self._buffer, self._pos = item, 0
        value = self._buffer[self._pos]
        self._pos += 1
        self._returned += 1
        return value

    def next(self) -> Any:
        """The next record (PyFlink's ``CloseableIterator.next``); ``StopIteration`` at
        the end."""
        return self.__next__()

    def _finish(self) -> None:
        self._done = True
        self._client.wait()  # raises JobExecutionError if the job failed
        if self._endpoint.error is not None:
            raise self._endpoint.error

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        if not self._client.get_job_status().is_globally_terminal_state():
            self._client.cancel()
        try:
            self._client.wait()
        except JobExecutionError:
            pass

    def __enter__(self) -> "CollectIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
