"""Run PyFlink's own DataStream examples on flowray and compare with what PyFlink printed.

examples/<name>.py are unmodified copies of PyFlink 2.3.0's examples (Apache-2.0);
expected/<name>.txt is the stdout PyFlink 2.3.0 printed for them (see expected/README.md).
`run_with_flowray(name)` changes only the imports (pyflink -> flowray) and runs the example in
a subprocess; `normalize(output, ordered)` turns either output into the list that is compared.
The Kafka examples (`run_with_flowray(name, kafka=broker)`) also get the test broker's address
instead of `localhost:9092`, lose their `add_jars(...)` call, and find their topic made fresh.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES_DIR = HERE / "examples"
EXPECTED_DIR = HERE / "expected"
REPO_ROOT = HERE.parents[2]

# ordered: PyFlink printed the same lines in the same order on every run and the example
#   sets parallelism 1, so the comparison is a list. Otherwise (default parallelism = number
#   of cores) it is a sorted multiset.
# bounded: False for an example that never ends (random datagen source); it is stopped after
#   run_seconds and only its shape can be checked (see check_streaming_word_count).
EXAMPLES: dict[str, dict] = {
    "basic_operations": {"ordered": True, "bounded": True},
    "event_time_timer": {"ordered": False, "bounded": True},
    "process_json_data": {"ordered": False, "bounded": True},
    "state_access": {"ordered": False, "bounded": True},
    # BATCH mode: PyFlink's order is its sort of the serialized (pickled) keys, an artifact
    # of its sort-based shuffle; the words and counts are compared as a multiset
    "word_count": {"ordered": False, "bounded": True},
    "session_with_dynamic_gap_window": {"ordered": True, "bounded": True},
    "session_with_gap_window": {"ordered": True, "bounded": True},
    "sliding_time_window": {"ordered": True, "bounded": True},
    "tumbling_count_window": {"ordered": True, "bounded": True},
    "tumbling_time_window": {"ordered": True, "bounded": True},
    "streaming_word_count": {"ordered": False, "bounded": False, "run_seconds": 45},
    # Kafka connector examples (connectors/kafka_*.py): `kafka_topics` are made fresh (deleted
    # if present, then created with that many partitions) before the run: the test broker has
    # auto.create.topics.enable=false and the examples expect them to exist. The four *_format
    # examples write 7 (bytearray: 3) records, then print them back with an unbounded
    # KafkaSource, so they never end: `until_printed` stops them as soon as they have printed
    # as many (normalized) lines as expected, or after `run_seconds` with what they printed.
    # Their order is not deterministic (two sink writers at default parallelism share one
    # partition; bytearray came back in another order in PyFlink's second run): multisets.
    "kafka_json_format": {"ordered": False, "bounded": False, "until_printed": True,
                          "run_seconds": 120, "kafka_topics": {"test_json_topic": 1}},
    "kafka_csv_format": {"ordered": False, "bounded": False, "until_printed": True,
                         "run_seconds": 120, "kafka_topics": {"test_csv_topic": 1}},
    # derived: PyFlink 2.3 cannot run it (Flink 2.0 removed the Java AvroRow(De)Serialization-
    # Schema its wrappers call); its 7 record lines are what PyFlink's Row print would show for
    # the records PyFlink wrote (see expected/README.md)
    "kafka_avro_format": {"ordered": False, "bounded": False, "until_printed": True,
                          "run_seconds": 120, "kafka_topics": {"test_avro_topic": 1},
                          "derived": True},
    "kafka_bytearray_format": {"ordered": False, "bounded": False, "until_printed": True,
                               "run_seconds": 120, "kafka_topics": {"test_bytearray_topic": 1}},
    # parallelism 1, write-only, ends by itself; 3 partitions as its banner says
    "kafka_row_field_extractor_example": {"ordered": True, "bounded": True,
                                          "kafka_topics": {"row-extractor-example": 3}},
}

KAFKA_EXAMPLES = [name for name, meta in EXAMPLES.items() if "kafka_topics" in meta]

# Lines that PyFlink's and Apache Beam's own loggers wrote to stdout (the examples call
# logging.basicConfig(stream=sys.stdout, level=INFO)); they are not the example's output.
PYFLINK_LOG_NOISE = (
    re.compile(r"^Using Any for unsupported type: "),
    re.compile(r"^No module named google\.cloud\.bigquery_storage_v1\. "),
    re.compile(r"^PYFLINK_CYTHON_ENABLED: "),
    # flowray's own log lines (the job summary and checkpoint table) when the example sends
    # INFO logging to stdout
    re.compile(r"^flowray: "),
    re.compile(r"^\s+id\s+status\s+duration"),
    re.compile(r"^\s+\d+\s+(COMPLETED|FAILED|IN_PROGRESS)\s"),
    # Ray's raylet tells every driver on a node each time the node's worker processes
    # reach a new high (from 4x its startup concurrency: 8 on 2 cores), whichever job
    # started them: the test session's other jobs share the node
    re.compile(r"^(\x1b\[\d+m)?\(raylet\)(\x1b\[0m)? WARNING: \d+ PYTHON worker processes "
               r"have been started on node"),
)

# "N> " that print() puts before a record when the sink's parallelism is > 1. It is always
# left out of the comparison: PyFlink's own subtask numbers are not reproducible
# (process_json_data printed "1> " in one run and "2> " in the next: the rebalance after the
# parallelism-1 source starts at a random channel) and elsewhere they follow Flink's hashing
# of the pickled key to key groups and the machine's core count.
SUBTASK_PREFIX = re.compile(r"^\d+> ")

_IMPORT_REWRITES = (
    (re.compile(r"^(\s*)from pyflink\.", re.M), r"\1from flowray."),
    (re.compile(r"^(\s*)from pyflink(\s+import\b)", re.M), r"\1from flowray\2"),
    (re.compile(r"^(\s*)import pyflink\b", re.M), r"\1import flowray"),
)


class ExampleFailed(AssertionError):
    def __init__(self, name: str, returncode: int, stdout: str, stderr: str):
        self.name, self.returncode, self.stdout, self.stderr = name, returncode, stdout, stderr
        tail = "\n".join(stderr.strip().splitlines()[-25:])
        super().__init__(f"example {name} exited with {returncode}; stderr ends with:\n{tail}")


def example_source(name: str) -> str:
    return (EXAMPLES_DIR / f"{name}.py").read_text()


def rewrite_imports(source: str) -> str:
    for pattern, replacement in _IMPORT_REWRITES:
        source = pattern.sub(replacement, source)
    return source


def expected_output(name: str) -> str:
    return (EXPECTED_DIR / f"{name}.txt").read_text()


# the examples' bootstrap address, only as a whole string literal: kafka_row_field_extractor_
# example also prints "localhost:9092" in its banner, and that text stays as PyFlink printed it
_BOOTSTRAP_LITERAL = re.compile(r"""(['"])localhost:9092\1""")
# `env.add_jars("file:///path/to/...jar", ...)`, possibly over several lines (kafka_avro_format)
_ADD_JARS_CALL = re.compile(r"^([ \t]*)[\w.]+\.add_jars\([^()]*\)[ \t]*$", re.M)


def rewrite_kafka(source: str, bootstrap_servers: str) -> str:
    """Point the example at ``bootstrap_servers`` and drop its ``add_jars(...)`` call.

    flowray's ``StreamExecutionEnvironment.add_jars`` exists and does nothing (it logs a
    one-time ``flowray: add_jars does nothing here`` warning, which the examples' root logging
    would send to stdout, where PYFLINK_LOG_NOISE drops it); the call is dropped anyway, since
    its paths are placeholders (``file:///path/to/flink-sql-connector-kafka-1.15.0.jar``)."""
    source, n = _BOOTSTRAP_LITERAL.subn(lambda m: m.group(1) + bootstrap_servers + m.group(1),
                                        source)
    if n == 0:
        raise ValueError("the example has no 'localhost:9092' literal to point at the broker")
    return _ADD_JARS_CALL.sub(r"\1pass  # add_jars(...) dropped by the test harness", source)


def fresh_kafka_topic(bootstrap_servers: str, topic: str, partitions: int,
                      timeout_s: float = 60.0) -> None:
    """Delete ``topic`` if it exists (an earlier run's records), then create it anew."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    deadline = time.monotonic() + timeout_s
    if topic in admin.list_topics(timeout=10).topics:
        for f in admin.delete_topics([topic], operation_timeout=30).values():
            f.result(30)
    while True:  # a deleted topic's name is free again once the controller has removed it
        try:
            for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
                f.result(30)
            return
        except KafkaException as e:
            if (e.args[0].code() != e.args[0].TOPIC_ALREADY_EXISTS
                    or time.monotonic() > deadline):
                raise
        time.sleep(0.2)


def run_with_flowray(example_name: str, timeout: float | None = 600, check: bool = True,
                     args: tuple[str, ...] = (), rewrite=None, kafka=None) -> str:
    """Run examples/<example_name>.py with its imports changed to flowray; return its stdout.

    It runs with this interpreter (the repo's .venv) in a fresh temp dir. An unbounded example
    is stopped (SIGINT, then SIGTERM/SIGKILL to its process group) after its run_seconds and
    what it printed until then is returned; one marked ``until_printed`` is stopped as soon as
    it has printed as many lines as expected (counted after ``normalize``). With check, a
    non-zero exit of a bounded example, or of an ``until_printed`` one before it printed them,
    raises ExampleFailed (it carries stdout and stderr).

    A Kafka example needs ``kafka``: the test broker (``KafkaBroker``) or its bootstrap
    address; see ``rewrite_kafka`` and ``fresh_kafka_topic``.
    """
    meta = EXAMPLES.get(example_name, {"bounded": True})
    source = rewrite_imports(example_source(example_name))
    if "kafka_topics" in meta:
        if kafka is None:
            raise ValueError(f"{example_name} needs a Kafka broker: pass kafka=")
        bootstrap = getattr(kafka, "bootstrap_servers", kafka)
        source = rewrite_kafka(source, bootstrap)
        for topic, partitions in meta["kafka_topics"].items():
            fresh_kafka_topic(bootstrap, topic, partitions)
    if rewrite is not None:
        source = rewrite(source)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory(prefix=f"flowray-{example_name}-") as tmp:
        script = Path(tmp) / f"{example_name}.py"
        script.write_text(source)
        proc = subprocess.Popen([sys.executable, str(script), *args], cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        limit = timeout if meta.get("bounded", True) else meta.get("run_seconds", 45)
        if meta.get("until_printed"):
            wanted = len(expected_lines(example_name))
            stdout, stderr, exited = _run_until_printed(proc, wanted, limit)
            if check and exited and proc.returncode != 0 and len(
                    normalize(stdout, ordered=True)) < wanted:
                raise ExampleFailed(example_name, proc.returncode, stdout, stderr)
            return stdout
        try:
            stdout, stderr = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            stdout, stderr = _stop(proc)
            if meta.get("bounded", True):
                raise ExampleFailed(example_name, -1, stdout,
                                    stderr + f"\n[harness] timed out after {limit}s")
            return stdout
    if check and proc.returncode != 0:
        raise ExampleFailed(example_name, proc.returncode, stdout, stderr)
    return stdout


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    """Stop the example and everything it started (its own process group), gently first."""
    for sig, wait in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.communicate()


def _run_until_printed(proc: subprocess.Popen, wanted: int,
                       limit: float) -> tuple[str, str, bool]:
    """Read the example's stdout line by line until it has printed ``wanted`` lines (after
    normalize), it exits, or ``limit`` seconds pass; stop it if it still runs. Returns
    (stdout, stderr, whether it exited by itself)."""
    lines: queue.Queue = queue.Queue()
    out: list[str] = []
    err: list[str] = []

    def pump(stream, sink, q=None):
        for line in stream:
            sink.append(line)
            if q is not None:
                q.put(line)
        if q is not None:
            q.put(None)

    readers = [threading.Thread(target=pump, args=(proc.stdout, out, lines), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
    for r in readers:
        r.start()
    deadline = time.monotonic() + limit
    exited = False
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break  # the bounded wait is over
        if line is None:
            exited = True
            break
        if len(normalize("".join(out), ordered=True)) >= wanted:
            break
    if not exited:
        _signal_group(proc)
    else:
        proc.wait()
    for r in readers:
        r.join(timeout=10)
    return "".join(out), "".join(err), exited


def _signal_group(proc: subprocess.Popen) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to the example's process group, until it exits
    (the pipes are read by other threads, so this only waits for the exit)."""
    for sig, wait in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def normalize(output: str, ordered: bool) -> list[str]:
    """The lines to compare: PyFlink's log noise, blank lines and "N> " prefixes dropped,
    trailing whitespace stripped; sorted when the order is not deterministic."""
    lines = []
    for line in output.splitlines():
        line = line.rstrip()
        if not line or any(p.match(line) for p in PYFLINK_LOG_NOISE):
            continue
        lines.append(SUBTASK_PREFIX.sub("", line, count=1))
    return lines if ordered else sorted(lines)


def expected_lines(name: str) -> list[str]:
    return normalize(expected_output(name), EXAMPLES[name]["ordered"])


def actual_lines(name: str, output: str) -> list[str]:
    return normalize(output, EXAMPLES[name]["ordered"])


_WC_RECORD = re.compile(r"^\((\w+),(\d+)\)$")


def check_streaming_word_count(output: str) -> list[str]:
    """The unbounded example has no fixed output; return what is wrong with its shape: the
    banner first, then records `(word,n)` with word from its list and, per word, n = 1, 2, 3..."""
    problems, counts = [], {}
    lines = normalize(output, ordered=True)
    banner = "Printing result to stdout. Use --output to specify output path."
    if not lines or lines[0] != banner:
        problems.append(f"first line is not the banner: {lines[:1]}")
    words = set(re.search(r"words = \[(.*?)\]", example_source("streaming_word_count"),
                          re.S).group(1).replace('"', "").replace("\n", "").replace(" ", "")
                .split(","))
    for line in lines[1:]:
        m = _WC_RECORD.match(line)
        if not m or m.group(1) not in words:
            problems.append(f"not a (word,count) record: {line!r}")
            continue
        word, n = m.group(1), int(m.group(2))
        if n != counts.get(word, 0) + 1:
            problems.append(f"{line!r}: expected count {counts.get(word, 0) + 1}")
        counts[word] = n
    if not counts:
        problems.append("no records were printed")
    return problems
