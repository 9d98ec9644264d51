"""Finding or starting Ray: the driver's Ray, a cluster named by ``ray.address`` /
``RAY_ADDRESS``, or an embedded local Ray sized to the machine. Quiet by default.

An embedded Ray ends with the process that started it, so what must outlive the process
(a detached job, ``execution.attached=false``) and the ``flowray`` command line join a
running cluster instead: the one named, or else the local one ``ray start --head``
started (``ray.init(address="auto")``); with none running they fail with
:class:`NoRayClusterError`, which says how to start one.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

from flowray.common.options import RAY_ADDRESS
from flowray.common.configuration import Configuration

__all__ = ["ensure_ray", "connect_cluster", "NoRayClusterError", "NAMESPACE", "auth_help",
           "check_reachable", "use_token_if_present", "gcs_address", "gcs_client", "gcs_error",
           "is_auth_error"]

NAMESPACE = "flowray"


class NoRayClusterError(ConnectionError):
    """No running Ray cluster to join (a detached job and the CLI need one)."""


class _NotTheTokenAuthNotice(logging.Filter):
    """Drops Ray's notice that a new local cluster has token authentication on (the
    default; nothing for a user to do). Its warning that authentication is off stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled")


_TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def _quiet() -> dict:
    for name in ("ray", "ray.data", "ray._private", "ray.util"):
        logging.getLogger(name).setLevel(logging.WARNING)
    auth = logging.getLogger(_TOKEN_AUTH_LOGGER)
    if not any(isinstance(f, _NotTheTokenAuthNotice) for f in auth.filters):
        auth.addFilter(_NotTheTokenAuthNotice())
    return dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                namespace=NAMESPACE)


def use_token_if_present() -> None:
    """As Ray's own CLI does: with ``RAY_AUTH_MODE`` unset and a token at hand
    (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``), send it to the
    cluster (one whose head has token authentication on refuses clients without it)."""
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    _quiet()   # its notice that token authentication is on is not for users
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def ensure_ray(config: Configuration, cluster_required: bool = False) -> None:
    """Join Ray as configured unless this process already did; with no address configured
    start an embedded local Ray, or (``cluster_required``) join the local cluster."""
    import ray

    if ray.is_initialized():
        return
    address: Optional[str] = config.get(RAY_ADDRESS) or os.environ.get("RAY_ADDRESS")
    if cluster_required:
        connect_cluster(address)
        return
    kwargs = _quiet()
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(**kwargs)


def connect_cluster(address: Optional[str] = None) -> None:
    """Join the running Ray cluster at ``address`` (default: ``RAY_ADDRESS``, else the
    local one); :class:`NoRayClusterError` if there is none."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or "auto"
    if address.startswith(("http://", "https://")):
        raise NoRayClusterError(
            f"{address} is a dashboard's URL, which only `flowray run` and `flowray logs` "
            "take: give the cluster's address instead (HEAD:6379, as `ray start --head` "
            "printed it)")
    _check_reachable(address)
    use_token_if_present()
    try:
        ray.init(address=address, **_quiet())
    except ConnectionError as e:
        if "unauthenticated" in str(e).lower() or "auth" in type(e).__name__.lower():
            raise NoRayClusterError(auth_help(address)) from None
        where = "on this machine" if address == "auto" else f"at {address}"
        raise NoRayClusterError(
            f"no running Ray cluster {where}: start one with `ray start --head` (then "
            f"use --address/RAY_ADDRESS if it is elsewhere) [{_first_line(e)}]") from None


def gcs_address(address: Optional[str]) -> Optional[str]:
    """``address``, else ``RAY_ADDRESS``, else the cluster ``ray start`` started on this
    machine, as ``host:port``; ``None`` when there is none."""
    from ray._private.services import canonicalize_bootstrap_address

    try:
        return canonicalize_bootstrap_address(address or os.environ.get("RAY_ADDRESS"))
    except (ConnectionError, ValueError):
        return None


def gcs_client(gcs: str) -> Any:
    """A client of the GCS at ``gcs`` (reached without joining the cluster as a driver),
    sending our token if we have one."""
    from ray._raylet import GcsClient

    use_token_if_present()
    return GcsClient(address=gcs)


def is_auth_error(e: BaseException) -> bool:
    """Whether the cluster refused us for want of its token."""
    text = str(e).lower()
    return any(w in text for w in ("unauthenticated", "authentication", "auth token",
                                   "permission denied"))


def gcs_error(gcs: str, e: BaseException) -> "NoRayClusterError":
    """The error to raise for ``e``, met talking to the GCS at ``gcs``."""
    if is_auth_error(e):
        return NoRayClusterError(auth_help(gcs))
    return NoRayClusterError(f"cannot read the Ray cluster at {gcs}: {_first_line(e)}")


def auth_help(address: str) -> str:
    """What to say when the cluster at ``address`` refused us: its token is missing."""
    return (f"authentication failed at the Ray cluster {address}: it uses token "
            "authentication; set RAY_AUTH_TOKEN to its token (or RAY_AUTH_TOKEN_PATH to a "
            "file holding it; `ray get-auth-token` on the head node prints it)")


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail at once when nothing listens at ``host:port`` (see :func:`_check_reachable`)."""
    _check_reachable(address, timeout_s)


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail at once when nothing listens at ``host:port`` (Ray would retry for minutes).

    >>> _check_reachable("127.0.0.1:1")
    Traceback (most recent call last):
    ...
    flowray.runtime.execution.cluster.NoRayClusterError: no running Ray cluster at 127.0.0.1:1: start one with `ray start --head` (then use --address/RAY_ADDRESS if it is elsewhere) [Connection refused]
    """
    import socket

    if "://" in address or ":" not in address:  # "auto", ray://..., or no port given
        return
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise NoRayClusterError(
            f"no running Ray cluster at {address}: start one with `ray start --head` (then "
            f"use --address/RAY_ADDRESS if it is elsewhere) [{reason}]") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
