"""The Ray executor: submits a job by starting its ``JobMaster`` actor
(:mod:`~flowray.runtime.execution.job_master`), which deploys one ``TaskActor`` per subtask
(:mod:`~flowray.runtime.execution.task_actor`), and hands the driver a ``JobClient``.

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
import tempfile
import time
from typing import Any, Dict, List, Optional

import cloudpickle
import ray
from ray.exceptions import (
    ActorUnavailableError,
    GetTimeoutError,
    RayActorError,
    RayTaskError,
)

from flowray.runtime.network.channel import ChannelReader
from flowray.runtime.execution.python_env import python_runtime_env
from flowray.runtime.execution.task_resources import unplaceable_tasks
from flowray.runtime.execution.client import (
    DriverConnections,
    DriverEndpoint,
    JobClient,
    JobHandle,
)
from flowray.runtime.messages import JobOutcome, JobStatus
from flowray.runtime.execution.cluster import NAMESPACE, ensure_ray
from flowray.runtime.checkpoint.settings import CheckpointSettings
from flowray.common.options import (
    CHANNEL_CREDITS,
    JOB_MASTER_SPARES,
    TASK_STDOUT_TO_CLIENT,
    ATTACHED,
    JOB_MASTER_MAX_RESTARTS,
    PROGRESS_INTERVAL,
    TASK_ACTOR_POOL_MAX_IDLE,
    TASK_ACTOR_POOL_SIZE,
)
from flowray.common.configuration import Configuration
from flowray.runtime.execution.executor import JobExecutor, PreparedJob, driver_channel_id
from flowray.runtime.execution.task_stdout import TASK_STDOUT
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.execution.storage_reach import check_storage_reachable
from flowray.runtime.messages import TaskFailure
from flowray.runtime.network.tls import TlsSettings
from flowray.runtime.network.socket_transport import (
    SocketInputGate,
    SocketListener,
)

from flowray.runtime.execution.actor_names import StoredJob
from flowray.runtime.execution.job_directory import (MASTER_SUFFIX, actor_prefix,
                                                     display_name_for, live_display_names)
from flowray.runtime.execution.job_master import JobMaster
from flowray.runtime.execution.task_actor_pool import driver_pool, driver_pool_name
from flowray.runtime.execution.spare_masters import driver_spares
from flowray.runtime.execution.master_assignment import delete_assignment
from flowray.runtime.execution.standby_actors import kill_quietly
from flowray.runtime.execution.task_actor import TaskActor, _node, actor_name


__all__ = ["JobMaster", "TaskActor", "RayExecutor", "actor_name"]

log = logging.getLogger(__name__)

#: how long a spare job master may take to accept its job (it may still be starting)
SPARE_ASSIGN_TIMEOUT_S = 60.0


class _RayJobHandle(JobHandle):
    """A client's way to its job master. ``ref`` is the driver's ``run`` call of an
    attached job, whose master the handle owns (``release`` kills it); without one (a
    detached job, or a client re-attached from another process, see
    :func:`flowray.runtime.execution.jobs.attach`) the handle polls
    ``await_outcome`` and leaves the master alone."""

    OUTCOME_POLL_S = 30.0

    def __init__(self, job_id: str, job_name: str, master: Any, ref: Any,
                 listeners: List[SocketListener], master_name: str,
                 owns_master: bool = True, actor_pool: Any = None,
                 master_restarts: int = 0) -> None:
        self.job_id = job_id
        self.actor_pool = actor_pool
        #: a restartable master's assignment (a spare's) is deleted on release
        self.master_restarts = master_restarts
        self.job_name = job_name
        self.master = master
        self.ref = ref
        self.listeners = listeners
        self.master_name = master_name
        self.owns_master = owns_master
        self._outcome: Optional[JobOutcome] = None

    def status(self) -> JobStatus:
        """The job's status; FAILED once its job master is gone for good (a slow answer
        is not an answer: the job is taken to run on)."""
        if self._outcome is not None:
            return self._outcome.status
        try:
            return JobStatus(ray.get(self.master.status.remote(), timeout=10))
        except (GetTimeoutError, ActorUnavailableError):  # busy or restarting
            return JobStatus.RUNNING
        except (RayActorError, RayTaskError) as e:
            outcome = self.outcome(0.0) if self.ref is not None else None
            if outcome is None:
                outcome = self._master_gone(e)
            return outcome.status

    def _master_gone(self, e: BaseException) -> JobOutcome:
        self._outcome = JobOutcome(
            self.job_id, self.job_name, JobStatus.FAILED, 0.0,
            TaskFailure("JobMaster", None, type(e).__name__,
                        f"the job master of {self.job_name!r} is gone: {e}", str(e), False))
        return self._outcome

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
            return self._master_gone(e)
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
                return self._master_gone(e)
            if outcome is not None:
                self._outcome = outcome
                return outcome
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def info(self) -> Dict[str, Any]:
        return ray.get(self.master.info.remote(), timeout=30)

    def progress(self) -> Dict[str, Any]:
        return ray.get(self.master.progress.remote(), timeout=10)

    def restart_events(self, since: int) -> List[Dict[str, Any]]:
        return ray.get(self.master.restart_events.remote(since), timeout=10)

    def web_url(self) -> Optional[str]:
        return ray.get(self.master.web_url.remote(), timeout=30)

    def checkpoint_stats(self) -> Dict[str, Any]:
        if self._outcome is not None:
            return dict(self._outcome.checkpoint_stats)
        return ray.get(self.master.checkpoint_stats.remote(), timeout=10)

    def task_actor_names(self) -> Dict[str, str]:
        return ray.get(self.master.task_actor_names.remote(), timeout=10)

    def task_names(self) -> Dict[str, str]:
        return ray.get(self.master.task_names.remote(), timeout=10)

    def savepoint(self, target_dir, stop, drain, timeout_s):
        return tuple(ray.get(self.master.savepoint.remote(target_dir, stop, drain, timeout_s)))

    def checkpoint(self, timeout_s):
        return tuple(ray.get(self.master.checkpoint.remote(timeout_s)))

    def release(self) -> None:
        if self.owns_master:
            try:
                ray.kill(self.master, no_restart=True)
            except Exception:  # noqa: BLE001 - the master may be gone already
                pass
            if self.master_restarts:   # a spare's restartable job's (else there is none)
                try:
                    delete_assignment(self.master._actor_id.hex())
                except Exception:  # noqa: BLE001 - Ray is gone: so is its store
                    pass
        if self.actor_pool is not None:   # a master that died took no actor back
            try:
                self.actor_pool.drop_job.remote(self.job_id)
            except Exception:  # noqa: BLE001 - the pool (so its actors) is gone
                pass
        for listener in self.listeners:
            listener.close()


class _SocketDriverConnections(DriverConnections):
    def __init__(self, listener: SocketListener, allowed: set) -> None:
        self.listener = listener
        self.allowed = allowed
        self.gate = SocketInputGate()

    def poll_new(self, timeout_s: float) -> List[ChannelReader]:
        return self.listener.accept_ready(self.allowed, timeout_s)


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
        tls = TlsSettings.from_config(config)
        if tls is not None:
            tls.check()  # an unusable certificate fails here, naming the file
        if not detached and config.get(TASK_STDOUT_TO_CLIENT):
            job.driver_sinks[TASK_STDOUT] = ("print", [
                driver_channel_id(TASK_STDOUT, SubtaskId(v.id, i))
                for v in job.job_graph.vertices.values() for i in range(v.parallelism)])
        ensure_ray(config, cluster_required=detached)
        check_storage_reachable(config, sum(1 for n in ray.nodes() if n.get("Alive")))
        unplaceable = unplaceable_tasks(
            {v.name: v.resources for v in job.job_graph.vertices.values() if v.resources},
            [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")])
        if unplaceable:  # would wait for placement forever
            raise ValueError("a slot sharing group asks for more than any Ray node has: "
                             + "; ".join(unplaceable))
        listeners: List[SocketListener] = []
        endpoints: List[DriverEndpoint] = []
        driver_addresses: Dict[str, Dict[str, Any]] = {}
        if detached:  # print() sinks print in the tasks' own stdout
            driver_addresses = {eid: {"stdout": True} for eid in job.driver_sinks}
        elif job.driver_sinks:
            node_id, ip = _node()
        for eid, (mode, chans) in (job.driver_sinks.items() if not detached else ()):
            listener = SocketListener(node_id, ip, job.channel_secret, tls=tls,  # per sink
                                      credits=config.get(CHANNEL_CREDITS))
            listeners.append(listener)
            driver_addresses[eid] = listener.address()
            endpoints.append(DriverEndpoint(eid, mode, chans,
                                            _SocketDriverConnections(listener, set(chans))))
        runtime_env = python_runtime_env(job.config)  # add_python_file & co.
        # warm task actors and a spare master of this driver (they die with it, as an
        # attached job does; a detached job and one with its own Python environment start
        # their own)
        pooled = not detached and not runtime_env and config.get(TASK_ACTOR_POOL_SIZE) > 0
        spares = driver_spares() if pooled and config.get(JOB_MASTER_SPARES) else None
        display = display_name_for(job.job_name, live_display_names(
            job.job_name, idle_spares=spares.idle_names() if spares else frozenset()))
        prefix = actor_prefix(display, job.job_id)
        name = f"{prefix}{MASTER_SUFFIX}"
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
        if runtime_env:  # the task actors the master creates inherit it
            options["runtime_env"] = _upload_runtime_env(runtime_env)
        pool = (driver_pool(config.get(TASK_ACTOR_POOL_SIZE),
                            config.get(TASK_ACTOR_POOL_MAX_IDLE),
                            first_tasks=sum(v.parallelism for v in job.job_graph.vertices.values()
                                            if not v.resources))
                if pooled else None)
        submitted_ms = int(time.time() * 1000)
        master = None
        spare = spares.take(restarts) if spares is not None else None
        if spare is not None:
            name, master = spare
            try:
                ray.get(master.assign.remote(job_arg, driver_addresses, prefix, submitted_ms,
                                             display, pool,
                                             driver_pool_name() if pool is not None else None),
                        timeout=SPARE_ASSIGN_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 - dead or failing: the job gets its own
                log.debug("flowray: the spare job master %s could not take job %s: %s",
                          name, job.job_id, e)
                kill_quietly(master)
                master, name = None, f"{prefix}{MASTER_SUFFIX}"
        if master is None:
            master = JobMaster.options(**options).remote(
                job_arg, driver_addresses, prefix, detached, submitted_ms, display, pool)
        if spares is not None:   # the next job's, warm by the time this one has ended
            spares.replenish(restarts)
        for ep in endpoints:
            ep.start()
        if detached:
            # returns once the master runs the job's loop, in a thread of its own
            ray.get(master.start.remote())
            handle = _RayJobHandle(job.job_id, job.job_name, master, None, listeners, name,
                                   owns_master=False)
        else:
            ref = master.run.remote()
            handle = _RayJobHandle(job.job_id, job.job_name, master, ref, listeners, name,
                                   actor_pool=pool, master_restarts=restarts)
        client = JobClient(handle, endpoints, config.get(PROGRESS_INTERVAL), detached=detached)
        client.endpoints_by_id = {ep.endpoint_id: ep for ep in endpoints}  # type: ignore[attr-defined]
        return client


def _upload_runtime_env(env: Dict[str, Any]) -> Dict[str, Any]:
    """``env`` with its local files uploaded to the Ray cluster (``py_modules`` and
    ``working_dir`` become ``gcs://`` URIs): Ray uploads local paths itself only for a
    runtime env given to ``ray.init``, not for one given to an actor. Needs a connected Ray."""
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    env = dict(env)
    scratch = tempfile.mkdtemp(prefix="flowray-runtime-env-")
    env = upload_py_modules_if_needed(env, include_gitignore=False, scratch_dir=scratch)
    env = upload_working_dir_if_needed(env, include_gitignore=False, scratch_dir=scratch)
    return env
