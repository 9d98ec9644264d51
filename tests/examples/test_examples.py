"""The programs in examples/ run as their docstrings say (``python examples/NAME.py
[args]``, or ``flowray run ...``) and print what they should.

Each example runs in a subprocess of its own that joins the tests' shared Ray through
``RAY_ADDRESS`` (as a program finds a cluster started with ``ray start --head``) instead of
starting an embedded one: that saves the several seconds a Ray start costs per example.
What an example should print is computed here from its input, independently of the
example's own code (the input itself, when the example generates it, comes from the
example module: ``SAMPLE_CSV``, ``transactions()``).
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_session")]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BIN = os.path.dirname(sys.executable)  # where `pip install` put the `flowray` command


def _env(**settings) -> dict:
    """This process's environment, joining the shared Ray, with flowray ``settings`` (Flink
    keys) handed to the program as ``flowray run -D`` would."""
    import json

    import ray

    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address,
               PYTHONUNBUFFERED="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("FLOWRAY_CLIENT_CONFIG", None)
    if settings:
        env["FLOWRAY_CLIENT_CONFIG"] = json.dumps(settings)
    return env


def run(command: list, cwd: Path, timeout: float = 240, **settings) -> str:
    """Run ``command`` in ``cwd`` against the shared Ray; its stdout (it must succeed)."""
    p = subprocess.run([str(c) for c in command], cwd=cwd, env=_env(**settings),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"$ {' '.join(map(str, command))}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def run_example(name: str, *args, cwd: Path, timeout: float = 240, **settings) -> str:
    return run([sys.executable, EXAMPLES / f"{name}.py", *args], cwd, timeout, **settings)


def load_example(name: str):
    """The example as a module (its ``main()`` does not run)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_ms(text: str) -> int:
    t = datetime.fromisoformat(text)
    return round((t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp() * 1000)


# -- sliding windows over a CSV ------------------------------------------------------------

def expected_sliding_windows(rows, size=10_000, slide=5_000, bound=2_000, lateness=5_000):
    """Flink's event-time sliding windows with allowed lateness, by hand: ``rows`` are
    ``(timestamp ms, sensor, temperature)`` in file order; the watermark after each row is
    the highest timestamp so far - bound - 1. Returns the printed window lines and late
    lines, in the example's order."""
    wm = float("-inf")
    panes, timers, firings, fired = {}, set(), {}, []
    late = []

    def fire(key, start):
        temps = panes[(key, start)]
        firings[(key, start)] = firings.get((key, start), 0) + 1
        fired.append((start, key, firings[(key, start)], len(temps),
                      round(sum(temps) / len(temps), 2), max(temps)))

    def advance(to):
        for key, start in sorted(t for t in timers if t[1] + size - 1 <= to):
            timers.discard((key, start))
            fire(key, start)
        for key, start in [w for w in panes if w[1] + size - 1 + lateness <= to]:
            del panes[(key, start)]
            firings.pop((key, start), None)

    highest = None
    for ts, key, temp in rows:
        last_start = ts - (ts % slide)
        in_a_window = False
        for start in range(last_start, ts - size, -slide):
            end_ts = start + size - 1
            if end_ts + lateness <= wm:
                continue  # the window is gone
            in_a_window = True
            panes.setdefault((key, start), []).append(temp)
            if end_ts <= wm:
                fire(key, start)  # fired already: a late update
            else:
                timers.add((key, start))
        if not in_a_window and ts + lateness <= wm:
            late.append((ts, key, temp))
        if highest is None or ts > highest:
            highest = ts
            wm = highest - bound - 1
            advance(wm)
    advance(float("inf"))
    windows = [f"[{hms(start)}, {hms(start + size)}) {key:9} {count:>5} {mean:>6.2f} "
               f"{top:>6.1f}" + (f"  late update {n - 1}" if n > 1 else "")
               for start, key, n, count, mean, top in sorted(fired)]
    late_lines = [f"late: {hms(ts)} {key} {temp}" for ts, key, temp in sorted(late)]
    return windows, late_lines


def csv_rows(text: str):
    rows = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0] != "event_time":
            rows.append((epoch_ms(fields[0]), fields[1], float(fields[2])))
    return rows


def printed_windows(stdout: str):
    lines = [ln.rstrip() for ln in stdout.splitlines()]
    return ([ln for ln in lines if ln.startswith("[")],
            [ln for ln in lines if ln.startswith("late: ")])


def test_sliding_windows_csv_on_its_sample(tmp_path):
    sample = load_example("sliding_windows_csv").SAMPLE_CSV
    out = run_example("sliding_windows_csv", cwd=tmp_path)
    assert re.search(r"^no CSV given: wrote a sample to \S+readings\.csv$", out, re.M), out
    windows, late = expected_sliding_windows(csv_rows(sample))
    assert printed_windows(out) == (windows, late), out
    # the sample shows every case: on time, late updates, late records
    assert any("late update" in w for w in windows) and len(late) == 2


def test_sliding_windows_csv_on_a_file_given(tmp_path):
    """A CSV of three sensors over four minutes, shuffled locally (some rows late beyond
    the allowed lateness), with a blank line and times without a zone (UTC). The program
    runs on the local executor (``execution.target=local``: the same scheduler and tasks,
    in threads, no Ray): the example has run on Ray in the test before, and this one is
    about the input (a second run on Ray would cost ~6 s more)."""
    rng = random.Random(5)
    start = epoch_ms("2024-06-01T08:00:00")
    rows = [(start + i * 1000 + rng.randint(0, 999), f"s{rng.randint(1, 3)}",
             round(rng.uniform(10, 30), 1)) for i in range(240)]
    for i in range(0, len(rows) - 12, 7):  # move some rows later in the file
        j = i + rng.randint(1, 12)
        rows[i], rows[j] = rows[j], rows[i]
    text = "event_time,sensor,temperature\n\n" + "".join(
        f"{datetime.fromtimestamp(ts / 1000, timezone.utc).replace(tzinfo=None).isoformat()}"
        f",{key},{temp}\n" for ts, key, temp in rows)
    path = tmp_path / "readings.csv"
    path.write_text(text)
    out = run_example("sliding_windows_csv", path, cwd=tmp_path,
                      **{"execution.target": "local"})
    windows, late = expected_sliding_windows(rows)
    assert late and any("late update" in w for w in windows)
    assert printed_windows(out) == (windows, late), out


# -- fraud detection -----------------------------------------------------------------------

def test_fraud_detection(tmp_path):
    txns = load_example("fraud_detection").transactions()  # the example's defaults
    alerts, near_misses = [], 0
    small_until = {}  # account -> the end of the minute after its last small transaction
    for account, ts, amount in txns:
        if account in small_until:
            if amount > 500 and ts <= small_until[account]:
                alerts.append((ts, account, amount))
            elif amount > 500:
                near_misses += 1
            del small_until[account]
        if amount < 1:
            small_until[account] = ts + 60_000
    assert len(alerts) >= 3 and near_misses >= 1  # the input shows both sides of the rule
    expected = [f"ALERT account={a} time={iso(ts)} amount={amount:.2f}"
                for ts, a, amount in sorted(alerts)]
    out = run_example("fraud_detection", cwd=tmp_path)
    assert [ln for ln in out.splitlines() if ln.startswith("ALERT")] == expected, out
    assert f"{len(txns)} transactions, {len(alerts)} alerts" in out


# -- custom source and sink ----------------------------------------------------------------

def test_custom_source_and_sink_exactly_once_across_a_failure(tmp_path):
    out_dir = tmp_path / "out"
    out = run_example("custom_source_sink", out_dir, "--sensors", 3, "--readings", 250,
                      "--fail-after", 200, cwd=tmp_path)
    assert "restarts: 1," in out and "exactly once: yes" in out, out
    visible = [line.rstrip("\n") for f in sorted(out_dir.iterdir())
               if not f.name.startswith(".") for line in f.open()]
    expected = [f"{s},{q},{20 + ((s * 37 + q * 11) % 100) / 10}"
                for s in range(3) for q in range(250)]
    assert Counter(visible) == Counter(expected)


# -- job.py under `flowray run -d`, stopped with a savepoint and resumed rescaled ----------

def _job_id(stdout: str) -> str:
    m = re.search(r"Job has been submitted with JobID (\w+)", stdout)
    assert m, stdout
    return m.group(1)


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _written(folder: Path):
    """Every ``(word, count)`` line of the committed part files."""
    return [tuple(line.rstrip("\n").split("\t")) for f in folder.iterdir()
            if not f.name.startswith(".") for line in f.open()]


def test_job_detached_savepoint_and_rescaled_resume(tmp_path):
    """docs/cli.md's ``flowray run -d -p 2 examples/job.py ...`` (with absolute paths, as
    the example asks, and the driver here), stopped with a savepoint while it runs, then
    resumed from it at parallelism 1 (a rescale: the key groups and the file splits of two
    subtasks merge into one); the resumed job goes on counting where the first stopped."""
    import ray

    from flowray.runtime.execution.jobs import attach, list_jobs

    rng = random.Random(3)
    vocabulary = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "melon"]
    lines = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 8)))
             for _ in range(400)]
    folder = tmp_path / "in"  # two files: a split for each of the two source subtasks
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(lines[:200]) + "\n")
    (folder / "b.txt").write_text("\n".join(lines[200:]) + "\n")
    expected = Counter(w for line in lines for w in line.split())
    out = tmp_path / "word-counts"
    # absolute paths, as the example's docstring asks (submitted through Ray's Job
    # Submission, the program runs in a copy of examples/)
    job = [EXAMPLES / "job.py", folder, "--output", out]
    keep = ["-D", "jobstore.expiration-time=60"]  # ended masters leave the shared Ray soon
    # the program's driver runs here, joined to the shared Ray (through Ray's Job Submission
    # each `flowray run` costs ~4 s more: tests/cli covers that path)
    here = ["--local-driver"]
    jobs = []
    try:
        # paced so that it is still running when stopped
        submitted = run(["flowray", "run", *here, "-d", "-p", "2", *keep, *job,
                         "--lines-per-second", "60"], tmp_path)
        first = _job_id(submitted)
        jobs.append(first)
        assert f"word counts go to {out}" in submitted, submitted
        # records reached the sink once its in-progress (hidden) part files appear
        _wait_for(lambda: out.is_dir() and any(out.iterdir()), 120, "the first counts")
        savepoint = attach(first).stop_with_savepoint(str(tmp_path / "savepoints"))
        before = _written(out)
        assert 0 < len(before) < sum(expected.values()), "stopped too late to test a resume"

        second = _job_id(run(["flowray", "run", *here, "-d", "-p", "1", "-s", savepoint, *keep,
                              *job, "--lines-per-second", "0"], tmp_path))
        jobs.append(second)
        client = attach(second)
        assert {v["parallelism"] for v in client.get_job_info()["vertices"]} == {1}
        client.wait(120)
        # state and source positions moved with the savepoint: every running count of
        # every word was written exactly once, over both runs
        written = Counter(_written(out))
        assert written == Counter((w, str(n)) for w, c in expected.items()
                                  for n in range(1, c + 1))
    finally:
        for info in list_jobs():
            if info.get("job_id") in jobs and info.get("master"):
                try:
                    ray.kill(ray.get_actor(info["master"], namespace="flowray"),
                             no_restart=True)
                except ValueError:
                    pass


# -- Kafka ---------------------------------------------------------------------------------

def test_kafka_pipeline(tmp_path, kafka_broker):
    views = 2000
    rng = random.Random(29)  # the example's page views: random.Random(29).choice(PAGES)
    pages = load_example("kafka_pipeline").PAGES
    expected = Counter(rng.choice(pages) for _ in range(views))
    out = run_example("kafka_pipeline", "--bootstrap", kafka_broker.bootstrap_servers,
                      "--views", views, cwd=tmp_path)
    table = {}
    for line in out.splitlines():
        m = re.match(r"^(/\S*)\s+(\d+)\s+(\d+)$", line)
        if m:
            table[m.group(1)] = int(m.group(2))
    assert table == dict(expected), out
    assert "exactly once: yes" in out, out
