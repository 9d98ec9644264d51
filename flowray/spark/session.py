"""Spark on the same Ray cluster, through RayDP: starting it with the settings that make
RayDP work on Java 17, reusing a session that is already running, and stopping it so that
no Java process is left behind.

What each setting is for is in ``docs/spark-on-java17.md`` and docs/spark.md. The
pure part (:func:`spark_settings`, :func:`spark_configs`, :func:`parse_java_version`) is
tested without Spark; :class:`SparkSessionManager` starts and stops the real thing.

>>> settings = spark_settings({"flowray.spark.executor-memory": "2g",
...                            "spark.sql.shuffle.partitions": "4"})
>>> settings.executors, settings.executor_cores, settings.executor_memory
(1, 1, '2g')
>>> conf = spark_configs(settings, log_config_path="/tmp/log4j2.properties")
>>> conf["spark.sql.shuffle.partitions"], conf["spark.ui.showConsoleProgress"]
('4', 'false')
>>> "--add-opens=java.base/java.nio=ALL-UNNAMED" in conf["spark.driver.extraJavaOptions"]
True
>>> parse_java_version('openjdk version "17.0.12" 2024-07-16')
17
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from flowray.spark.options import (
    SPARK_APP_NAME,
    SPARK_ENABLE_HIVE,
    SPARK_EXECUTOR_CORES,
    SPARK_EXECUTOR_MEMORY,
    SPARK_EXECUTORS,
    SPARK_PASSTHROUGH_PREFIX,
)
from flowray.common.configuration import Configuration

__all__ = [
    "get_or_create_spark",
    "stop_spark_session",
    "SparkTableNotFoundError",
    "JAVA_MODULE_OPENINGS",
    "JavaNotFoundError",
    "SparkSettings",
    "SparkSessionManager",
    "spark_settings",
    "spark_configs",
    "spark_java_options",
    "parse_java_version",
    "check_java",
]

log = logging.getLogger(__name__)

#: ``java.base`` packages every Spark JVM must open for RayDP's Spark <-> Ray conversions
JAVA_MODULE_OPENINGS = (
    "java.lang", "java.lang.invoke", "java.io", "java.net", "java.nio", "java.math",
    "java.text", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
    "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar",
)
REQUIRED_JAVA = 17
_JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
                     "spark.ray.raydp_app_master.extraJavaOptions")
_QUIET_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


class JavaNotFoundError(RuntimeError):
    """Java 17 is needed for Spark (through RayDP) and is missing or another version."""


@dataclass(frozen=True)
class SparkSettings:
    """How flowray starts Spark: RayDP's executor shape and the ``spark.*`` passthrough."""

    app_name: str = "flowray"
    executors: int = 1
    executor_cores: int = 1
    executor_memory: str = "1g"
    enable_hive: bool = False
    conf: Mapping[str, str] = field(default_factory=dict)


def spark_settings(config: "Configuration | Mapping[str, Any] | None" = None) -> SparkSettings:
    """The Spark settings in a flowray configuration (``flowray.spark.*`` and every
    ``spark.*`` key, passed through as a string)."""
    conf = config if isinstance(config, Configuration) else Configuration(config or {})
    passthrough = {k: str(v) for k, v in conf.to_dict().items()
                   if k.startswith(SPARK_PASSTHROUGH_PREFIX)}
    return SparkSettings(conf.get(SPARK_APP_NAME), conf.get(SPARK_EXECUTORS),
                         conf.get(SPARK_EXECUTOR_CORES), str(conf.get(SPARK_EXECUTOR_MEMORY)),
                         conf.get(SPARK_ENABLE_HIVE), passthrough)


def spark_java_options() -> str:
    """The JVM options every Spark JVM gets: the module openings RayDP needs on Java 17."""
    opts = ["-XX:+IgnoreUnrecognizedVMOptions"]
    opts += [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in JAVA_MODULE_OPENINGS]
    return " ".join(opts)


def spark_configs(settings: SparkSettings, log_config_path: Optional[str] = None,
                  derby_home: Optional[str] = None) -> Dict[str, str]:
    """The Spark configuration for ``raydp.init_spark``: the user's ``spark.*`` keys, with
    the Java options appended to any the user gave, Ray's log echo from executors off and
    the console progress bar off (unless the user set them)."""
    conf: Dict[str, str] = {
        "spark.executorEnv.RAY_LOG_TO_DRIVER": "0",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
    }
    if log_config_path:  # RayDP points the driver's log4j2 at this file
        conf["spark.log4j.config.file.name"] = log_config_path
    conf.update(settings.conf)
    ours = spark_java_options()
    if derby_home:
        ours += f" -Dderby.system.home={derby_home}"
    for key in _JAVA_OPTION_KEYS:
        theirs = settings.conf.get(key, "").strip()
        conf[key] = f"{ours} {theirs}".strip()
    return conf


def parse_java_version(text: str) -> Optional[int]:
    """The major version in ``java -version`` output (``"1.8.0_x"`` is 8), or None."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java(java: Optional[str] = None) -> str:
    """The path of a Java 17 executable (``JAVA_HOME/bin/java`` or ``java`` on PATH), or
    :class:`JavaNotFoundError` saying what to install."""
    candidates = []
    if java:
        candidates.append(java)
    elif os.environ.get("JAVA_HOME"):
        candidates.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    candidates.append("java")
    hint = ("Spark (through RayDP) needs Java 17: install it (e.g. `apt-get install "
            "openjdk-17-jre-headless`) and put `java` on PATH or set JAVA_HOME")
    for c in candidates:
        path = shutil.which(c)
        if path is None:
            continue
        try:
            out = subprocess.run([path, "-version"], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JavaNotFoundError(f"could not run {path} -version ({e}); {hint}") from e
        version = parse_java_version(out.stderr + out.stdout)
        if version != REQUIRED_JAVA:
            raise JavaNotFoundError(f"{path} is Java {version or 'of unknown version'}; {hint}")
        return path
    raise JavaNotFoundError(f"no Java found (JAVA_HOME unset or wrong, no `java` on PATH); "
                            f"{hint}")


class SparkSessionManager:
    """Starts Spark on Ray through RayDP, or adopts the session already running.

    :meth:`get_or_create` returns the running session if there is one (e.g. started by the
    user with ``raydp.init_spark`` and the options of :func:`spark_configs`): flowray then
    never stops it. Otherwise it starts one and :meth:`stop` (or the end of the process)
    stops it, including PySpark's gateway JVM and the native libraries Spark's JVMs unpack
    under the Ray temp folder.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._owned = False
        self._workdir: Optional[str] = None
        self._ray_tmp_before: Optional[set] = None

    @property
    def owns_session(self) -> bool:
        return self._owned

    def get_or_create(self, config: "Configuration | Mapping[str, Any] | None" = None) -> Any:
        with self._lock:
            running = self._running_session()
            if running is not None:
                return running
            settings = spark_settings(config)
            check_java()
            return self._start(settings, config)

    def _running_session(self) -> Any:
        if self._session is not None and not _is_stopped(self._session):
            return self._session
        try:
            from pyspark.sql import SparkSession
        except ImportError:  # pragma: no cover - a dependency
            return None
        active = SparkSession.getActiveSession()
        if active is not None and not _is_stopped(active):
            self._session, self._owned = active, False
            return active
        return None

    def _start(self, settings: SparkSettings, config: Any) -> Any:
        import raydp

        from flowray.runtime.execution.cluster import ensure_ray

        ensure_ray(config if isinstance(config, Configuration) else Configuration(config or {}))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self._workdir = tempfile.mkdtemp(prefix="flowray-spark-")
        log_path = os.path.join(self._workdir, "log4j2.properties")
        with open(log_path, "w") as f:
            f.write(_QUIET_LOG4J2)
        derby = os.path.join(self._workdir, "derby") if settings.enable_hive else None
        self._ray_tmp_before = _ray_tmp_children()
        log.info("flowray: starting Spark on Ray (%d executor(s) x %d core(s), %s)",
                 settings.executors, settings.executor_cores, settings.executor_memory)
        session = raydp.init_spark(settings.app_name, settings.executors,
                                   settings.executor_cores, settings.executor_memory,
                                   enable_hive=settings.enable_hive,
                                   configs=spark_configs(settings, log_path, derby))
        session.sparkContext.setLogLevel("ERROR")
        self._session, self._owned = session, True
        return session

    def stop(self) -> None:
        """Stop the session if flowray started it (an adopted one is left alone)."""
        with self._lock:
            session, owned = self._session, self._owned
            self._session, self._owned = None, False
            if session is None or not owned:
                return
            import raydp
            from pyspark import SparkContext
            gateway = SparkContext._gateway  # stop_spark may forget it; the JVM lives on
            try:
                raydp.stop_spark()
            finally:
                _shutdown_gateway(gateway)
                _remove_new_ray_tmp_children(self._ray_tmp_before or set())
                if self._workdir:
                    shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None


def _is_stopped(session: Any) -> bool:
    try:
        return session.sparkContext._jsc is None
    except Exception:  # noqa: BLE001 - a half-torn-down session counts as stopped
        return True


def _shutdown_gateway(gateway: Any) -> None:
    """PySpark keeps its gateway JVM until Python exits; end it now."""
    from pyspark import SparkContext

    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - best effort
        pass
    if proc is not None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None


_RAY_TMP = "/tmp/ray"


def _ray_tmp_children() -> set:
    try:
        return set(os.listdir(_RAY_TMP))
    except OSError:
        return set()


def _remove_new_ray_tmp_children(before: set) -> None:
    """Spark's JVMs unpack a native library under ``/tmp/ray/<millis>/`` and never remove
    it: remove the ones that appeared while this session ran."""
    for name in _ray_tmp_children() - before:
        if name.isdigit():
            shutil.rmtree(os.path.join(_RAY_TMP, name), ignore_errors=True)


class SparkTableNotFoundError(LookupError):
    """``env.from_spark("name")`` names a table Spark does not know."""


_manager = SparkSessionManager()


def get_or_create_spark(config: "Configuration | Mapping[str, Any] | None" = None) -> Any:
    """The Spark session (started on Ray through RayDP if none is running)."""
    return _manager.get_or_create(config)


def stop_spark_session() -> None:
    """Stop the Spark session if flowray started it (``flowray.spark.stop_spark`` also
    frees the converted DataFrames' blocks first)."""
    _manager.stop()
