"""The REST API, the web UI and the history server (Flink's RestOptions, HistoryServerOptions)."""

from __future__ import annotations

from flowray.common.configuration import (
    parse_duration_ms,
    parse_str,
    register_option,
)
from flowray.common.options.validators import bounded, parse_port_range, show_ms

__all__ = ["REST_PORT", "REST_ADDRESS", "REST_BIND_ADDRESS", "REST_TOKEN", "JOB_ARCHIVE_DIR",
           "HISTORY_ARCHIVE_DIRS", "HISTORY_WEB_PORT", "HISTORY_WEB_ADDRESS",
           "HISTORY_REFRESH_INTERVAL"]


REST_PORT = register_option(
    "rest.port",
    parse_port_range,
    "8081",
    "Port of the job master's REST API and web UI: a port, a range (8081-8090) or a list; "
    "a port that is taken moves on to the next free one after it (0: any free port).",
)

REST_ADDRESS = register_option(
    "rest.address",
    parse_str,
    None,
    "Host name the REST API's URL names (JobClient.get_web_url, the CLI); default: the "
    "bind address, or the node's address when bound to all interfaces.",
)

REST_BIND_ADDRESS = register_option(
    "rest.bind-address",
    parse_str,
    "127.0.0.1",
    "Address the REST server binds. Loopback by default; bound elsewhere, the write "
    "endpoints (cancel, stop, savepoints) need the token (rest.token).",
)

REST_TOKEN = register_option(
    "rest.token",
    parse_str,
    None,
    "Token the REST API's write endpoints require when bound off loopback "
    "(Authorization: Bearer <token>); default: one generated per job, printed by the CLI.",
)

JOB_ARCHIVE_DIR = register_option(
    "jobmanager.archive.fs.dir",
    parse_str,
    None,
    "Directory where a job master archives its job's REST responses when the job ends "
    "(one file per job, as Flink's HistoryServer reads them); `flowray history` serves "
    "them. Unset: nothing is archived.",
)

HISTORY_ARCHIVE_DIRS = register_option(
    "historyserver.archive.fs.dir",
    parse_str,
    None,
    "Comma-separated directories `flowray history` serves ended jobs from; default: "
    "jobmanager.archive.fs.dir.",
)

HISTORY_WEB_PORT = register_option(
    "historyserver.web.port",
    parse_port_range,
    "8082",
    "Port of `flowray history`'s REST API and web UI (a taken port moves on to the next).",
)

HISTORY_WEB_ADDRESS = register_option(
    "historyserver.web.address",
    parse_str,
    "127.0.0.1",
    "Address `flowray history` binds (it serves ended jobs read-only).",
)

HISTORY_REFRESH_INTERVAL = register_option(
    "historyserver.archive.fs.refresh-interval",
    parse_duration_ms,
    10_000,
    "How often `flowray history` looks for newly archived jobs.",
    check=bounded(100, 24 * 3600_000, show_ms),
)
