"""Real servers for flowray's connector tests and examples: an Apache Kafka broker (KRaft
mode, jars resolved by Maven from ``tools/kafka/pom.xml``) and a PostgreSQL cluster (Debian's
``postgresql`` package), each on a free loopback port in a temp folder.

Tests get them from session fixtures (``kafka_broker``, ``postgres`` in ``tests/conftest.py``);
a person trying the examples runs ``make kafka`` (``python -m tests.support.servers kafka``),
which keeps a broker on ``127.0.0.1:9092`` in the foreground until Ctrl-C.

Nothing here waits on elapsed time alone: a start polls the server until it answers, up to
a deadline, and fails with the server's own log when it does not.
"""

from __future__ import annotations

import base64
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, List, Optional

__all__ = ["KafkaBroker", "PostgresCluster", "RedisServer", "free_port", "kafka_lib_dir",
           "ensure_kafka_jars", "ServerError"]

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_POM = REPO_ROOT / "tools" / "kafka" / "pom.xml"


class ServerError(RuntimeError):
    """A test server could not be installed or started; the message says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until(ready: Callable[[], bool], timeout_s: float, what: str,
                alive: Callable[[], bool], log: Optional[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if ready():
            return
        if not alive():
            raise ServerError(f"{what} exited while starting{_log_tail(log)}")
        if time.monotonic() > deadline:
            raise ServerError(f"{what} did not become ready in {timeout_s:.0f} s{_log_tail(log)}")
        time.sleep(0.1)


def _log_tail(log: Optional[Path], lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log}:\n" + "\n".join(tail)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


# -- Kafka ------------------------------------------------------------------------------

def kafka_lib_dir() -> Path:
    """Where the broker's jars are cached: ``$FLOWRAY_KAFKA_LIB`` or ``.cache/kafka/lib``."""
    return Path(os.environ.get("FLOWRAY_KAFKA_LIB") or REPO_ROOT / ".cache" / "kafka" / "lib")


def ensure_kafka_jars() -> Path:
    """The folder of the broker's jars, resolved with Maven first if it is empty."""
    lib = kafka_lib_dir()
    if lib.is_dir() and any(lib.glob("kafka_2.13-*.jar")):
        return lib
    if shutil.which("mvn") is None:
        raise ServerError("the Kafka broker's jars are resolved with Maven, and 'mvn' is not "
                          "on PATH (Debian: apt-get install -y maven)")
    tmp = lib.with_name(lib.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    result = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(KAFKA_POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
        capture_output=True, text=True)
    if result.returncode != 0:
        raise ServerError(f"mvn could not resolve the Kafka broker's jars:\n"
                          f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    shutil.rmtree(lib, ignore_errors=True)
    tmp.rename(lib)
    return lib


_LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{log}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: warn
      AppenderRef:
        - ref: file
"""


class KafkaBroker:
    """One Kafka broker and controller in one JVM (KRaft combined mode), on 127.0.0.1.

    ``start()`` formats a fresh log folder and waits until the broker answers;
    ``stop()`` ends the process (SIGTERM, then SIGKILL); ``restart()`` starts it again on
    the same ports and data (a broker outage in the middle of a job).
    """

    def __init__(self, workdir: Optional[str] = None, port: Optional[int] = None,
                 num_partitions: int = 1, quick_start: bool = True) -> None:
        """``quick_start``: the JVM compiles with C1 only (starts in about half the time; what
        tests want); ``False`` for a benchmark, where the broker's own CPU counts."""
        self.quick_start = quick_start
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="flowray-kafka-"))
        self.port = port or free_port()
        self.controller_port = free_port()
        self.num_partitions = num_partitions
        self.process: Optional[subprocess.Popen] = None
        self.log = self.workdir / "broker.log"
        self._formatted = False

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _classpath(self) -> str:
        return str(ensure_kafka_jars()) + "/*"

    def _write_config(self) -> Path:
        props = self.workdir / "server.properties"
        props.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.workdir / 'data'}",
            f"num.partitions={self.num_partitions}",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.flush.interval.messages=9223372036854775807",
            "",
        ]))
        (self.workdir / "log4j2.yaml").write_text(_LOG4J2.format(log=self.log))
        return props

    def _java(self, main: str, *args: str, heap: str = "256m") -> List[str]:
        jit = ["-XX:TieredStopAtLevel=1"] if self.quick_start else []
        return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", *jit,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
                "-cp", self._classpath(), main, *args]

    def start(self, timeout_s: float = 90.0) -> "KafkaBroker":
        if shutil.which("java") is None:
            raise ServerError("the Kafka broker needs Java 17 on PATH")
        props = self._write_config()
        if not self._formatted:
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            # (one form: a random id may start with "-", which the tool's argument
            # parser would take for an option)
            fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format",
                                            f"--cluster-id={cluster_id}", "-c", str(props)),
                                 capture_output=True, text=True)
            if fmt.returncode != 0:
                raise ServerError(f"kafka-storage format failed:\n{fmt.stdout}{fmt.stderr}")
            self._formatted = True
        with open(self.workdir / "stdout.log", "ab") as out:
            self.process = subprocess.Popen(self._java("kafka.Kafka", str(props), heap="768m"),
                                            stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        _wait_until(self._answers, timeout_s, f"Kafka broker on port {self.port}",
                    lambda: self.process is not None and self.process.poll() is None,
                    self.log)
        return self

    def _answers(self) -> bool:
        if not _port_open(self.port):
            return False
        from confluent_kafka.admin import AdminClient
        try:
            md = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(
                timeout=2)
            return bool(md.brokers)
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def stop(self, timeout_s: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL: the broker dies without a clean shutdown."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_topic(self, topic: str, partitions: int = 1, **config: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
        for f in futures.values():
            f.result(30)

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import AdminClient, NewPartitions
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        for f in admin.create_partitions([NewPartitions(topic, total)]).values():
            f.result(30)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- PostgreSQL -------------------------------------------------------------------------

def _pg_bin_dir() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit()
                        else 0)
    if candidates:
        return Path(candidates[-1]).parent
    raise ServerError("PostgreSQL is not installed (no pg_ctl on PATH nor in "
                      "/usr/lib/postgresql/*/bin); `make postgres` installs Debian's "
                      "postgresql package")


class PostgresCluster:
    """A throw-away PostgreSQL cluster (``initdb`` + ``pg_ctl``) on a free loopback port,
    with ``max_prepared_transactions`` for two-phase commit. As root it runs as the
    unprivileged user ``nobody`` (PostgreSQL refuses to run as root)."""

    def __init__(self, workdir: Optional[str] = None, port: Optional[int] = None,
                 max_prepared_transactions: int = 64) -> None:
        self.bin = _pg_bin_dir()
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="flowray-pg-"))
        self.data = self.workdir / "data"
        self.port = port or free_port()
        self.max_prepared_transactions = max_prepared_transactions
        self.log = self.workdir / "postgres.log"
        self._user = "nobody" if os.geteuid() == 0 else None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, args: List[str]) -> subprocess.CompletedProcess:
        if self._user is not None:
            args = ["runuser", "-u", self._user, "--"] + args
        return subprocess.run(args, capture_output=True, text=True, cwd=self.workdir)

    def start(self, timeout_s: float = 60.0) -> "PostgresCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.workdir, entry.pw_uid, entry.pw_gid)
        os.chmod(self.workdir, 0o700)
        if not self.data.exists():
            init = self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                              "--auth=trust", "-E", "UTF8", "--no-sync"])
            if init.returncode != 0:
                raise ServerError(f"initdb failed:\n{init.stdout}{init.stderr}")
        opts = (f"-c port={self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.workdir} "
                f"-c max_prepared_transactions={self.max_prepared_transactions} "
                f"-c max_connections=100 -c fsync=off -c synchronous_commit=off "
                f"-c full_page_writes=off")
        started = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.log), "-o", opts, "-w", "-t", str(int(timeout_s)),
                             "start"])
        if started.returncode != 0:
            raise ServerError(f"pg_ctl start failed:\n{started.stdout}{started.stderr}"
                              f"{_log_tail(self.log)}")
        return self

    def stop(self) -> None:
        if self.data.exists():
            self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                       "stop"])

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- Redis ---------------------------------------------------------------------------------

class RedisServer:
    """A throw-away Redis (Debian's ``redis-server``) on a free loopback port, no
    persistence: the store that makes Ray's GCS fault tolerant in the tests."""

    def __init__(self, workdir: Optional[str] = None, port: Optional[int] = None) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise ServerError("redis-server was not found: run `make redis` (Debian's "
                              "redis-server package)")
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="flowray-redis-"))
        self.port = port or free_port()
        self.log = self.workdir / "redis.log"
        self._proc: Optional[subprocess.Popen] = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self, timeout_s: float = 30.0) -> "RedisServer":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.workdir), "--save", "", "--appendonly", "no", "--logfile",
             str(self.log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc = self._proc
        _wait_until(self._answers, timeout_s, "redis-server", lambda: proc.poll() is None,
                    self.log)
        return self

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _serve_forever(server, banner: str) -> None:
    print(banner, flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    try:
        while not stop:
            if getattr(server, "process", None) is not None and server.process.poll() is not None:
                raise ServerError(f"the server exited{_log_tail(server.log)}")
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def main(argv: List[str]) -> int:
    what = argv[0] if argv else ""
    if what == "kafka":
        port = int(os.environ.get("KAFKA_PORT", "9092"))
        broker = KafkaBroker(port=port, num_partitions=int(os.environ.get("KAFKA_PARTITIONS",
                                                                          "1")))
        broker.start()
        _serve_forever(broker, f"Kafka broker (KRaft) on {broker.bootstrap_servers}, data in "
                               f"{broker.workdir}; Ctrl-C stops it")
        return 0
    if what == "postgres":
        port = int(os.environ.get("PG_PORT", "5432"))
        cluster = PostgresCluster(port=port).start()
        _serve_forever(cluster, f"PostgreSQL on {cluster.dsn}; Ctrl-C stops it")
        return 0
    if what == "kafka-jars":
        print(ensure_kafka_jars())
        return 0
    print("usage: python -m tests.support.servers kafka|postgres|kafka-jars", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
