"""``flowray run`` on a Ray cluster: the program goes through Ray Job Submission.

The program's folder is uploaded as the job's ``working_dir``, its driver runs on the
cluster (one Ray job, in the dashboard's Jobs tab), and the command follows its output. This
module talks to the cluster without joining it (no ``ray.init``): the cluster's dashboard
address is read from its GCS, and the job API is the dashboard's HTTP API
(``ray.job_submission.JobSubmissionClient``). What to submit is decided by pure functions in
:mod:`flowray.cli.submission_plan`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Callable, Dict, List, Optional

from flowray.runtime.execution.cluster import (
    NoRayClusterError,
    auth_help,
    check_reachable,
    gcs_address,
    gcs_client,
    gcs_error,
    is_auth_error,
    use_token_if_present,
)

__all__ = ["SubmissionTarget", "find_submission_target", "JobSubmissionError",
           "submit_program", "follow_logs", "job_logs", "job_status", "stop_job",
           "quiet_submission_logs"]

#: how long a submission waits for a just-started cluster's job agent
AGENT_WAIT_S = 30.0

#: Ray's GCS key (and namespace) under which the dashboard publishes its address
_DASHBOARD_KV_KEY = b"dashboard"
_DASHBOARD_KV_NAMESPACE = b"dashboard"


class JobSubmissionError(RuntimeError):
    """Ray's Job Submission refused or lost the program (one line, for the CLI)."""


class SubmissionTarget:
    """A cluster that takes Ray Job Submission: its GCS address (``None`` when only the
    dashboard's URL is known) and its dashboard's HTTP URL."""

    def __init__(self, gcs_address: Optional[str], dashboard_url: str) -> None:
        self.gcs_address = gcs_address
        self.dashboard_url = dashboard_url

    def __repr__(self) -> str:
        return f"SubmissionTarget({self.gcs_address!r}, {self.dashboard_url!r})"


def find_submission_target(address: Optional[str]) -> Optional[SubmissionTarget]:
    """The cluster to submit to: ``address`` (a GCS ``host:port``, or the dashboard's
    ``http://host:port``), else ``RAY_ADDRESS``, else the cluster ``ray start`` started on
    this machine. ``None`` when there is no cluster, or it has no dashboard (then the
    program's driver runs where ``flowray run`` runs). Raises :class:`NoRayClusterError`
    when an address was given and nothing answers there, or it refused our token."""
    if address and address.startswith(("http://", "https://")):
        return SubmissionTarget(None, address.rstrip("/"))
    gcs = gcs_address(address)
    if gcs is None:
        return None
    try:
        check_reachable(gcs)
    except NoRayClusterError:
        if address or os.environ.get("RAY_ADDRESS"):
            raise
        return None   # a stale record of a local cluster that has stopped
    try:
        url = gcs_client(gcs).internal_kv_get(_DASHBOARD_KV_KEY, _DASHBOARD_KV_NAMESPACE,
                                              timeout=10)
    except Exception as e:  # noqa: BLE001 - Ray raises several kinds (RpcError, auth...)
        raise gcs_error(gcs, e) from None
    if not url:
        return None
    return SubmissionTarget(gcs, f"http://{url.decode()}")


class _DefaultExcludeNotice(logging.Filter):
    """Drops Ray's one-time notice that a ``__pycache__`` (or ``.git``, ``.venv``...) folder
    of the working dir is no longer uploaded: a change of Ray's default that flowray never
    relied on, and a folder nearly every program's has. Ray's other warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Directory %r is now ignored by default")


_DEFAULT_EXCLUDE_NOTICE = _DefaultExcludeNotice()


def quiet_submission_logs() -> None:
    """Turn down what Ray's job submission client logs on the way (idempotent)."""
    # the package upload's and the log stream's notes ("Uploading package gcs://...",
    # "WebSocket closed") are Ray's INFO, set on these loggers themselves
    for name in ("ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk",
                 "ray._private.runtime_env.packaging"):
        logging.getLogger(name).setLevel(logging.WARNING)
    notices = logging.getLogger("ray._private.runtime_env.working_dir")
    if _DEFAULT_EXCLUDE_NOTICE not in notices.filters:
        notices.addFilter(_DEFAULT_EXCLUDE_NOTICE)


def _client(target: SubmissionTarget):  # -> JobSubmissionClient
    from ray.job_submission import JobSubmissionClient

    use_token_if_present()
    quiet_submission_logs()
    try:
        return JobSubmissionClient(target.dashboard_url)
    except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, auth...
        if is_auth_error(e):
            raise JobSubmissionError(auth_help(target.dashboard_url)) from None
        hint = ""
        if "://127." in target.dashboard_url or "://localhost" in target.dashboard_url:
            hint = (" (the cluster's dashboard listens on loopback, so only on its head node: "
                    "start the head with `ray start --head --dashboard-host=0.0.0.0`, or run "
                    "with --local-driver)")
        raise JobSubmissionError(f"Ray's Job Submission at {target.dashboard_url} did not "
                                 f"answer: {_first_line(e)}{hint}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def submit_program(target: SubmissionTarget, submission_id: str, entrypoint: str,
                   working_dir: str, env_vars: Dict[str, str],
                   metadata: Dict[str, str]) -> str:
    """Submit ``entrypoint`` (a shell command run in the uploaded ``working_dir``) as the
    Ray job ``submission_id``; returns that id."""
    client = _client(target)
    deadline = time.monotonic() + AGENT_WAIT_S
    delay = 0.2
    while True:
        try:
            return client.submit_job(entrypoint=entrypoint, submission_id=submission_id,
                                     runtime_env={"working_dir": working_dir,
                                                  "env_vars": env_vars},
                                     metadata=metadata)
        except Exception as e:  # noqa: BLE001 - Ray's HTTP client raises RuntimeError...
            # a cluster that just started has no job agent yet: Ray says to try again
            if "no available agent" in str(e).lower() and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            hint = ""
            if "no available agent" in str(e).lower():
                hint = (" (no node's job agent answers: another Ray on the head node may "
                        "hold its port; `ray start --dashboard-agent-listen-port` moves it)")
            raise JobSubmissionError(f"Ray's Job Submission refused the program: "
                                     f"{_first_line(e)}{hint}") from None


def follow_logs(target: SubmissionTarget, submission_id: str,
                on_text: Callable[[str], bool]) -> None:
    """Hand the job's output to ``on_text`` as it comes, until the job ends or
    ``on_text`` returns ``True`` (enough seen)."""
    client = _client(target)

    async def tail() -> None:
        async for text in client.tail_job_logs(submission_id):
            if on_text(text):
                return

    try:
        asyncio.run(tail())
    except JobSubmissionError:
        raise
    except Exception as e:  # noqa: BLE001 - the websocket's errors, the HTTP client's
        raise JobSubmissionError(f"lost the output of Ray job {submission_id}: "
                                 f"{_first_line(e)}") from None


def job_logs(target: SubmissionTarget, submission_id: str) -> str:
    """Everything the job printed so far."""
    try:
        return _client(target).get_job_logs(submission_id)
    except JobSubmissionError:
        raise
    except Exception as e:  # noqa: BLE001 - RuntimeError for an unknown id, and more
        raise JobSubmissionError(f"no output of Ray job {submission_id}: "
                                 f"{_first_line(e)}") from None


def job_status(target: SubmissionTarget, submission_id: str) -> List[str]:
    """``[status, message]`` of the Ray job (``SUCCEEDED``, ``FAILED``, ``STOPPED``...)."""
    info = _client(target).get_job_info(submission_id)
    return [str(getattr(info.status, "value", info.status)), info.message or ""]


def stop_job(target: SubmissionTarget, submission_id: str) -> bool:
    """Ask Ray to stop the job's driver (not a flowray cancel)."""
    return bool(_client(target).stop_job(submission_id))
