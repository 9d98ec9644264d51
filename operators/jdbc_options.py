"""Options of the JDBC sink, shaped like Flink's ``JdbcConnectionOptions``,
``JdbcExecutionOptions`` and ``JdbcExactlyOnceOptions``; PostgreSQL only, through psycopg 3.

A connection is given by a JDBC URL of PgJDBC's forms or a libpq URL:

* ``jdbc:postgresql://host[:port][,host2[:port2]...]/[database][?param=value&...]``,
  ``jdbc:postgresql:database`` and ``jdbc:postgresql:/`` (local host, port 5432). The
  parameters understood are PgJDBC's ``user``, ``password``, ``ssl`` (``true``: libpq's
  ``sslmode=verify-full``, PgJDBC's default with ssl), ``sslmode``, ``sslrootcert``,
  ``sslcert``, ``sslkey``, ``connectTimeout`` (seconds), ``ApplicationName``,
  ``currentSchema`` and ``options``; any other is refused, naming it. As in PgJDBC, a
  ``user``/``password`` in the URL wins over ``with_user_name``/``with_password``.
* ``postgresql://...`` / ``postgres://...``: handed to libpq as it is (libpq's parameter
  names); ``with_user_name``/``with_password`` fill what it leaves out.

Any other URL or driver name is refused with an error that names it:

>>> options = (JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
...            .with_url("jdbc:postgresql://db.example:5433/shop?ApplicationName=etl")
...            .with_driver_name("org.postgresql.Driver")
...            .with_user_name("writer").with_password("secret")
...            .build())
>>> sorted(options.connection_parameters().items())    # doctest: +NORMALIZE_WHITESPACE
[('application_name', 'etl'), ('connect_timeout', '60'), ('dbname', 'shop'),
 ('host', 'db.example'), ('password', 'secret'), ('port', '5433'), ('user', 'writer')]
>>> options                                        # doctest: +ELLIPSIS
JdbcConnectionOptions(url='jdbc:...', driver='org.postgresql.Driver', user='writer', password=***)
>>> JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:mysql://h/db").build()
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: JdbcConnectionOptions: 'jdbc:mysql://h/db' is a jdbc:mysql URL; ... PostgreSQL only ...

Execution options (Flink's defaults: batches of 5000, no periodic flush, 3 retries):

>>> JdbcExecutionOptions.builder().with_batch_size(500).with_batch_interval_ms(200).build()
JdbcExecutionOptions(batch_size=500, batch_interval_ms=200, max_retries=3)
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional
from urllib.parse import parse_qsl, unquote

__all__ = [
    "JdbcConnectionOptions",
    "JdbcExecutionOptions",
    "JdbcExactlyOnceOptions",
    "SUPPORTED_DRIVER_NAMES",
    "mask_password",
]

#: driver names accepted by ``with_driver_name`` (PgJDBC's class, or psycopg itself)
SUPPORTED_DRIVER_NAMES = ("org.postgresql.Driver", "psycopg", "psycopg3")

#: PgJDBC URL parameter -> libpq connection parameter
_JDBC_PARAMETERS = {
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "connectTimeout": "connect_timeout",
    "ApplicationName": "application_name",
    "options": "options",
}

_SUPPORTED_TEXT = ("use jdbc:postgresql://host:port/database or postgresql://...")


def mask_password(url: str) -> str:
    """``url`` with the password (``user:password@`` or ``password=...``) replaced by ``***``.

    >>> mask_password("postgresql://me:pw@h/db")
    'postgresql://me:***@h/db'
    >>> mask_password("jdbc:postgresql://h/db?password=pw&x=1")
    'jdbc:postgresql://h/db?password=***&x=1'
    """
    url = re.sub(r"(://[^:/@?]*:)[^@/?]*@", r"\1***@", url)
    return re.sub(r"((?:^|[?&\s])password=)[^&\s]*", r"\1***", url, flags=re.IGNORECASE)


def _refuse(url: str, why: str) -> ValueError:
    return ValueError(f"JdbcConnectionOptions: {url!r} {why}; flowray's JDBC connector "
                      f"supports PostgreSQL only (through psycopg 3): {_SUPPORTED_TEXT}")


def _parse_jdbc_url(url: str) -> Dict[str, str]:
    """libpq parameters of a ``jdbc:postgresql:`` URL (PgJDBC's forms)."""
    rest = url[len("jdbc:postgresql:"):]
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
    params: Dict[str, str] = {}
    if rest.startswith("//"):
        netloc, _, path = rest[2:].partition("/")
        hosts, ports = [], []
        for address in filter(None, netloc.split(",")):
            if address.startswith("["):  # [ipv6]:port
                host, _, port = address[1:].partition("]")
                port = port[1:] if port.startswith(":") else ""
            else:
                host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
            if port and not port.isdigit():
                raise ValueError(f"JdbcConnectionOptions: bad port {port!r} in "
                                 f"{mask_password(url)!r}")
            hosts.append(host or "localhost")
            ports.append(port or "5432")
        params["host"] = ",".join(hosts or ["localhost"])
        params["port"] = ",".join(ports or ["5432"])
        database = unquote(path)
    else:  # jdbc:postgresql:database / jdbc:postgresql:/
        params["host"], params["port"] = "localhost", "5432"
        database = unquote(rest.lstrip("/"))
    if database:
        params["dbname"] = database
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "ssl":
            if value.lower() in ("", "true"):
                params.setdefault("sslmode", "verify-full")
            elif value.lower() != "false":
                raise ValueError(f"JdbcConnectionOptions: ssl={value!r} in {mask_password(url)!r} "
                                 f"(true or false)")
        elif key == "currentSchema":
            schema = value.replace("\\", "\\\\").replace(" ", "\\ ")
            params["options"] = (params.get("options", "") + f" -c search_path={schema}").strip()
        elif key in _JDBC_PARAMETERS:
            target = _JDBC_PARAMETERS[key]
            if target == "options" and "options" in params:
                params["options"] = f"{value} {params['options']}"
            else:
                params[target] = value
        else:
            supported = sorted(list(_JDBC_PARAMETERS) + ["ssl", "currentSchema"])
            raise ValueError(f"JdbcConnectionOptions: the URL parameter {key!r} of "
                             f"{mask_password(url)!r} is not supported (supported: "
                             f"{', '.join(supported)})")
    return params


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or not url:
        raise ValueError(f"JdbcConnectionOptions: a JDBC URL is required (with_url), "
                         f"got {url!r}")
    lowered = url.lower()
    if lowered.startswith("jdbc:postgresql:") or lowered.startswith(("postgresql://",
                                                                     "postgres://")):
        return url
    if lowered.startswith("jdbc:"):
        sub = url.split(":", 2)[1] if url.count(":") >= 2 else url[5:]
        raise _refuse(mask_password(url), f"is a jdbc:{sub} URL")
    raise _refuse(mask_password(url), "is not a PostgreSQL URL")


class JdbcConnectionOptions:
    """Where the sink connects: the URL, driver name, user, password, and the timeout of
    a connection check (Flink's ``connectionCheckTimeoutSeconds``, 60 by default: here
    libpq's ``connect_timeout`` when the URL sets none). Build with
    ``JdbcConnectionOptions.JdbcConnectionOptionsBuilder()``. The URL and driver are
    checked when built."""

    def __init__(self, url: str, driver_name: Optional[str] = None,
                 user_name: Optional[str] = None, password: Optional[str] = None,
                 connection_check_timeout_seconds: int = 60) -> None:
        self._url = _check_url(url)
        if driver_name is not None and driver_name not in SUPPORTED_DRIVER_NAMES:
            raise ValueError(
                f"JdbcConnectionOptions: the driver {driver_name!r} is not supported; "
                f"flowray's JDBC connector talks to PostgreSQL only, through psycopg 3 "
                f"(driver name {SUPPORTED_DRIVER_NAMES[0]!r}, or none)")
        if (not isinstance(connection_check_timeout_seconds, int)
                or isinstance(connection_check_timeout_seconds, bool)
                or connection_check_timeout_seconds <= 0):
            raise ValueError(f"JdbcConnectionOptions: the connection check timeout must be "
                             f"a positive number of seconds, got "
                             f"{connection_check_timeout_seconds!r}")
        self._driver_name = driver_name
        self._user_name = user_name
        self._password = password
        self._check_timeout = connection_check_timeout_seconds
        self.connection_parameters()  # a malformed URL fails here, not in a task

    def get_db_url(self) -> str:
        return self._url

    def get_driver_name(self) -> Optional[str]:
        return self._driver_name

    def get_user_name(self) -> Optional[str]:
        return self._user_name

    def get_password(self) -> Optional[str]:
        return self._password

    def get_connection_check_timeout_seconds(self) -> int:
        return self._check_timeout

    def connection_parameters(self) -> Dict[str, str]:
        """The libpq connection parameters (keyword -> value) of these options."""
        url = self._url
        if url.lower().startswith("jdbc:"):
            params = _parse_jdbc_url(url)
        else:
            from psycopg.conninfo import conninfo_to_dict
            try:
                params = {k: str(v) for k, v in conninfo_to_dict(url).items()}
            except Exception as e:  # noqa: BLE001 - psycopg raises several kinds
                raise ValueError(f"JdbcConnectionOptions: cannot parse {self._masked_url()!r}: "
                                 f"{e}") from None
        if self._user_name is not None:
            params.setdefault("user", self._user_name)
        if self._password is not None:
            params.setdefault("password", self._password)
        params.setdefault("connect_timeout", str(self._check_timeout))
        return params

    def describe(self) -> str:
        """Where the options point, for messages (no password)."""
        params = self.connection_parameters()
        return (f"{params.get('host', 'localhost')}:{params.get('port', '5432')}/"
                f"{params.get('dbname', params.get('user', ''))}")

    def _masked_url(self) -> str:
        return mask_password(self._url)

    def __repr__(self) -> str:
        url = self._masked_url()
        extras = "".join([f", driver={self._driver_name!r}" if self._driver_name else "",
                          f", user={self._user_name!r}" if self._user_name else "",
                          ", password=***" if self._password else ""])
        return f"JdbcConnectionOptions(url={url!r}{extras})"

    class JdbcConnectionOptionsBuilder:
        """Builds :class:`JdbcConnectionOptions` (PyFlink's method names)."""

        def __init__(self) -> None:
            self._url: Optional[str] = None
            self._driver_name: Optional[str] = None
            self._user_name: Optional[str] = None
            self._password: Optional[str] = None
            self._check_timeout = 60

        def with_url(self, url: str) -> "JdbcConnectionOptions.JdbcConnectionOptionsBuilder":
            self._url = url
            return self

        def with_driver_name(self, driver_name: str) \
                -> "JdbcConnectionOptions.JdbcConnectionOptionsBuilder":
            self._driver_name = driver_name
            return self

        def with_user_name(self, user_name: str) \
                -> "JdbcConnectionOptions.JdbcConnectionOptionsBuilder":
            self._user_name = user_name
            return self

        def with_password(self, password: str) \
                -> "JdbcConnectionOptions.JdbcConnectionOptionsBuilder":
            self._password = password
            return self

        def with_connection_check_timeout_seconds(self, timeout_seconds: int) \
                -> "JdbcConnectionOptions.JdbcConnectionOptionsBuilder":
            self._check_timeout = timeout_seconds
            return self

        def build(self) -> "JdbcConnectionOptions":
            return JdbcConnectionOptions(self._url, self._driver_name,  # type: ignore[arg-type]
                                         self._user_name, self._password, self._check_timeout)


def _non_negative_int(owner: str, what: str, value: Any, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{owner}: {what} must be an int >= {minimum}, got {value!r}")
    return value


class JdbcExecutionOptions:
    """How rows are sent: ``batch_size`` rows per ``executemany`` (default 5000),
    ``batch_interval_ms`` (default 0: none) after which an at-least-once sink flushes
    what it holds even if the batch is not full, and ``max_retries`` (default 3) of a
    batch that failed on a connection error (at-least-once only; the exactly-once sink
    needs 0, as Flink's). Build with ``JdbcExecutionOptions.builder()``."""

    DEFAULT_BATCH_SIZE = 5000
    DEFAULT_BATCH_INTERVAL_MS = 0
    DEFAULT_MAX_RETRIES = 3

    def __init__(self, batch_interval_ms: int = DEFAULT_BATCH_INTERVAL_MS,
                 batch_size: int = DEFAULT_BATCH_SIZE,
                 max_retries: int = DEFAULT_MAX_RETRIES) -> None:
        owner = "JdbcExecutionOptions"
        self._batch_interval_ms = _non_negative_int(owner, "the batch interval (ms)",
                                                    batch_interval_ms)
        self._batch_size = _non_negative_int(owner, "the batch size", batch_size, 1)
        self._max_retries = _non_negative_int(owner, "max retries", max_retries)

    def get_batch_interval_ms(self) -> int:
        return self._batch_interval_ms

    def get_batch_size(self) -> int:
        return self._batch_size

    def get_max_retries(self) -> int:
        return self._max_retries

    @staticmethod
    def defaults() -> "JdbcExecutionOptions":
        return JdbcExecutionOptions()

    @staticmethod
    def builder() -> "JdbcExecutionOptions.Builder":
        return JdbcExecutionOptions.Builder()

    def __repr__(self) -> str:
        return (f"JdbcExecutionOptions(batch_size={self._batch_size}, "
                f"batch_interval_ms={self._batch_interval_ms}, max_retries={self._max_retries})")

    class Builder:
        """Builds :class:`JdbcExecutionOptions` (PyFlink's method names)."""

        def __init__(self) -> None:
            self._size = JdbcExecutionOptions.DEFAULT_BATCH_SIZE
            self._interval_ms = JdbcExecutionOptions.DEFAULT_BATCH_INTERVAL_MS
            self._max_retries = JdbcExecutionOptions.DEFAULT_MAX_RETRIES

        def with_batch_size(self, size: int) -> "JdbcExecutionOptions.Builder":
            self._size = size
            return self

        def with_batch_interval_ms(self, interval_ms: int) -> "JdbcExecutionOptions.Builder":
            self._interval_ms = interval_ms
            return self

        def with_max_retries(self, max_retries: int) -> "JdbcExecutionOptions.Builder":
            self._max_retries = max_retries
            return self

        def build(self) -> "JdbcExecutionOptions":
            return JdbcExecutionOptions(self._interval_ms, self._size, self._max_retries)


class JdbcExactlyOnceOptions:
    """Options of the exactly-once sink, with the names of Flink's Java class.

    Used: ``max_commit_attempts`` (default 3): attempts of ``COMMIT PREPARED`` on
    connection errors before the task fails (a later restore commits it again);
    ``recovered_and_rollback`` (default ``True``): at start, roll back the prepared
    transactions this sink's subtask left from checkpoints after the restored one (Flink:
    "must be disabled when rescaling"; here rollbacks stay safe when rescaling, see the
    sink's docs).

    Accepted and ignored: ``allow_out_of_order_commits`` (transactions are always
    committed in checkpoint order, and a commit that fails after its attempts fails the
    task, to be committed again on restore), ``timeout_sec`` (PostgreSQL has no timeout for
    prepared transactions) and ``transaction_per_connection`` (each subtask always uses one
    connection with one transaction at a time; ``PREPARE TRANSACTION`` frees the session).

    >>> JdbcExactlyOnceOptions.builder().with_max_commit_attempts(5).build()
    JdbcExactlyOnceOptions(max_commit_attempts=5, recovered_and_rollback=True)
    """

    DEFAULT_MAX_COMMIT_ATTEMPTS = 3

    def __init__(self, recovered_and_rollback: bool = True,
                 max_commit_attempts: int = DEFAULT_MAX_COMMIT_ATTEMPTS,
                 allow_out_of_order_commits: bool = False,
                 timeout_sec: Optional[int] = None,
                 transaction_per_connection: bool = False) -> None:
        self._recovered_and_rollback = bool(recovered_and_rollback)
        self._max_commit_attempts = _non_negative_int(
            "JdbcExactlyOnceOptions", "max commit attempts", max_commit_attempts, 1)
        self._allow_out_of_order_commits = bool(allow_out_of_order_commits)
        if timeout_sec is not None:
            _non_negative_int("JdbcExactlyOnceOptions", "the timeout (s)", timeout_sec, 1)
        self._timeout_sec = timeout_sec
        self._transaction_per_connection = bool(transaction_per_connection)

    def is_recovered_and_rollback(self) -> bool:
        return self._recovered_and_rollback

    def get_max_commit_attempts(self) -> int:
        return self._max_commit_attempts

    def is_allow_out_of_order_commits(self) -> bool:
        return self._allow_out_of_order_commits

    def get_timeout_sec(self) -> Optional[int]:
        return self._timeout_sec

    def is_transaction_per_connection(self) -> bool:
        return self._transaction_per_connection

    @staticmethod
    def defaults() -> "JdbcExactlyOnceOptions":
        return JdbcExactlyOnceOptions()

    @staticmethod
    def builder() -> "JdbcExactlyOnceOptions.Builder":
        return JdbcExactlyOnceOptions.Builder()

    def __repr__(self) -> str:
        return (f"JdbcExactlyOnceOptions(max_commit_attempts={self._max_commit_attempts}, "
                f"recovered_and_rollback={self._recovered_and_rollback})")

    class Builder:
        """Builds :class:`JdbcExactlyOnceOptions` (Flink's method names, snake_case)."""

        def __init__(self) -> None:
            self._kwargs: Dict[str, Any] = {}

        def with_recovered_and_rollback(self, recovered_and_rollback: bool) \
                -> "JdbcExactlyOnceOptions.Builder":
            self._kwargs["recovered_and_rollback"] = recovered_and_rollback
            return self

        def with_max_commit_attempts(self, max_commit_attempts: int) \
                -> "JdbcExactlyOnceOptions.Builder":
            self._kwargs["max_commit_attempts"] = max_commit_attempts
            return self

        def with_allow_out_of_order_commits(self, allow_out_of_order_commits: bool) \
                -> "JdbcExactlyOnceOptions.Builder":
            """Accepted and ignored (commits always run in checkpoint order)."""
            self._kwargs["allow_out_of_order_commits"] = allow_out_of_order_commits
            return self

        def with_timeout_sec(self, timeout_sec: Optional[int]) \
                -> "JdbcExactlyOnceOptions.Builder":
            """Accepted and ignored (prepared transactions have no timeout in PostgreSQL)."""
            self._kwargs["timeout_sec"] = timeout_sec
            return self

        def with_transaction_per_connection(self, transaction_per_connection: bool) \
                -> "JdbcExactlyOnceOptions.Builder":
            """Accepted and ignored (one connection, one transaction at a time, always)."""
            self._kwargs["transaction_per_connection"] = transaction_per_connection
            return self

        def build(self) -> "JdbcExactlyOnceOptions":
            return JdbcExactlyOnceOptions(**self._kwargs)
