"""The ``flowray`` command line in a real shell, as a new user would use it, against the
shared local Ray (the commands find it through ``RAY_ADDRESS``, as they would find a
cluster started with ``ray start --head``).

The job (``hold_job.py``) reads numbers up to a ``HOLD()`` and waits there; every step
waits for an event (a marker fired in the fault ledger, a status that ``flowray info``
prints, the committed output), never for time to pass.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from flowray.testing import TestingSource, TransactionalTestingSink, wait_until
from tests.cli import hold_job

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400), pytest.mark.usefixtures("ray_session")]

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold_job.py")
BIN = os.path.dirname(sys.executable)  # where `pip install` put the `flowray` command
PART = hold_job.PART


@pytest.fixture
def shell(tmp_path):
    """Run a command line in bash in a fresh folder, with the venv's commands on PATH and
    RAY_ADDRESS naming the test's Ray; the jobs a test started are gone afterwards."""
    import ray

    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address,
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.pop("FLOWRAY_CLIENT_CONFIG", None)
    cwd = tmp_path / "home"
    cwd.mkdir()
    names = []

    def run(command: str, ok: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=240)
        if ok:
            assert p.returncode == 0, f"$ {command}\n{p.stdout}\n{p.stderr}"
        return p

    run.names = names
    yield run
    # a failed test must not leave a detached job running in the shared Ray
    for actor in ray.util.list_named_actors(all_namespaces=True):
        if actor["namespace"] == "flowray" and actor["name"].endswith("/jobmaster") and \
                any(actor["name"].startswith(n) for n in names):
            try:
                ray.kill(ray.get_actor(actor["name"], namespace="flowray"), no_restart=True)
            except ValueError:
                pass


def _submitted_job_id(p: subprocess.CompletedProcess) -> str:
    m = re.search(r"Job has been submitted with JobID (\w+)", p.stdout)
    assert m, f"no job id in:\n{p.stdout}\n{p.stderr}"
    return m.group(1)


def _savepoint_path(p: subprocess.CompletedProcess) -> str:
    m = re.search(r"Savepoint completed\. Path: (\S+)", p.stdout)
    assert m, f"no savepoint path in:\n{p.stdout}\n{p.stderr}"
    return m.group(1)


def _field(info_text: str, name: str) -> str:
    m = re.search(rf"^{name}:\s+(.*)$", info_text, re.MULTILINE)
    assert m, info_text
    return m.group(1).strip()


def _status(shell, job: str) -> str:
    return _field(shell(f"flowray info {job}").stdout, "Status")


def _worker_logs_contain(text: str) -> bool:
    import ray

    logs = os.path.join(ray._private.worker._global_node.get_session_dir_path(), "logs")
    for name in os.listdir(logs):
        if name.startswith("worker-") and name.endswith(".out"):
            with open(os.path.join(logs, name), errors="replace") as f:
                if text in f.read():
                    return True
    return False


def _new_job(tmp_path, shell):
    """A fresh work folder and job name for hold_job.py, with its fault ledger (to see
    its HOLD() markers fire), its sink and the indices of its markers."""
    work = tmp_path / "work"
    name = f"cli-{uuid.uuid4().hex[:6]}"
    shell.names.append(name)
    ledger = TestingSource([], ledger_dir=str(work / "ledger"))
    return work, name, ledger, TransactionalTestingSink(str(work / "out")), \
        hold_job.hold_indices()


def test_detached_run_savepoint_stop_resume_at_another_parallelism_and_cancel(tmp_path, shell):
    work, name, ledger, sink, holds = _new_job(tmp_path, shell)
    job_args = f"{shlex.quote(JOB)} {shlex.quote(str(work))} {name}"
    keep = "-D jobstore.expiration-time=120"  # ended masters leave the shared Ray soon

    # run detached: the command (the submitting process) exits, the job runs on
    p = shell(f"flowray run -d -p 1 {keep} {job_args}")
    first = _submitted_job_id(p)
    wait_until(lambda: holds[0] in ledger.fired_markers(), 120, "the job to reach its HOLD()")
    listed = shell("flowray list").stdout
    line = next(ln for ln in listed.splitlines() if ln.startswith(first))
    assert name in line and "RUNNING" in line and "detached" in line, listed
    info = shell(f"flowray info {first}").stdout
    assert _field(info, "Status") == "RUNNING" and _field(info, "Mode") == "detached"
    web = _field(info, "Web UI")  # the job master's REST API answers there
    assert re.match(r"^http://127\.0\.0\.1:\d+$", web), info
    assert shell(f"flowray ui --no-browser {first}").stdout.strip() == web
    with urllib.request.urlopen(f"{web}/jobs/overview", timeout=10) as resp:
        assert json.loads(resp.read())["jobs"][0]["state"] == "RUNNING"
    assert re.search(r"^\s+Source: numbers.*\s1\s+128$", info, re.MULTILINE), info

    # the program ran as a Ray job (Ray's Job Submission): its output stays there
    sid = re.search(r"as Ray job (flowray-\w+)", p.stdout).group(1)
    dashboard = re.search(r"Ray's Job Submission at (\S+)\)", p.stdout).group(1)
    for job in (first, sid):   # by the flowray job, or by the Ray job
        assert f"Job has been submitted with JobID {first}" in \
            shell(f"flowray logs {job}").stdout

    # a savepoint; the job runs on
    p = shell(f"flowray savepoint {first} {shlex.quote(str(tmp_path / 'savepoints'))}")
    taken = _savepoint_path(p)
    assert os.path.isfile(os.path.join(taken, "_metadata")), taken
    assert _status(shell, first) == "RUNNING"
    assert _field(shell(f"flowray info {first}").stdout, "Latest savepoint").startswith("#")

    # stop with a savepoint, by the job's name: the job finishes, the first part committed
    p = shell(f"flowray stop {name} --savepoint-path {shlex.quote(str(tmp_path / 'stopped'))}")
    stopped = _savepoint_path(p)
    assert os.path.isfile(os.path.join(stopped, "_metadata")) and stopped != taken
    assert f"Job {first} ended FINISHED." in p.stdout, p.stdout
    assert sorted(sink.committed()) == [("n", x) for x in range(PART)]
    assert _status(shell, first) == "FINISHED"  # the ended master still answers

    # run again from the savepoint at parallelism 2: it goes on past the first HOLD()
    p = shell(f"flowray run -d -p 2 -s {shlex.quote(stopped)} {keep} {job_args}")
    second = _submitted_job_id(p)
    assert second != first
    wait_until(lambda: holds[1] in ledger.fired_markers(), 120, "the second HOLD()")
    wait_until(lambda: len(sink.committed()) >= 2 * PART, 120, "the second part committed")
    info = shell(f"flowray info {second}").stdout
    assert _field(info, "Status") == "RUNNING", info
    assert _field(info, "Name") == name, info   # the ended job's name is free at once
    assert re.search(r"^\s+Source: numbers.*\s2\s+128$", info, re.MULTILINE), info
    assert _field(info, "Latest checkpoint").startswith("#"), info
    history = shell(f"flowray checkpoints {second}").stdout
    assert re.search(r"^\s+id\s+status\s+duration", history, re.MULTILINE), history
    assert "COMPLETED" in history, history
    listed = shell("flowray list").stdout
    assert second in listed and first not in listed, listed  # list: running jobs only
    everything = shell("flowray list --all").stdout
    assert first in everything and "FINISHED" in everything, everything

    # cancel
    p = shell(f"flowray cancel {second}")
    assert f"Cancelled job {second}" in p.stdout, p.stdout
    assert _status(shell, second) == "CANCELED"
    committed = Counter(sink.committed())
    assert max(committed.values()) == 1, "a record was committed twice"
    assert sorted(committed) == [("n", x) for x in range(2 * PART)]
    # the read-only commands (list, info, checkpoints, ui, logs) read the job records in
    # the GCS without joining the cluster: none of them is a job on Ray's Jobs page
    from ray.job_submission import JobSubmissionClient
    entrypoints = [j.entrypoint for j in JobSubmissionClient(dashboard).list_jobs()]
    for command in ("flowray list", "flowray info", "flowray checkpoints", "flowray ui",
                    "flowray logs"):
        assert not [e for e in entrypoints if command in (e or "")], entrypoints
    assert [e for e in entrypoints if "flowray cancel" in (e or "")]   # an action joins it
    # print() in a detached job prints in the tasks' own stdout (their Ray worker log)
    wait_until(lambda: _worker_logs_contain(f"{name}:{PART + 100}"), 60,
               "the print() lines in the task's log")


def test_errors_end_the_command_with_one_line(tmp_path, shell):
    work = shlex.quote(str(tmp_path / "work"))
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        "flowray info nosuchjob": "no job 'nosuchjob'",
        "flowray cancel nosuchjob": "no job 'nosuchjob'",
        f"flowray run -d -s /no/such/path {JOB} {work} x": "savepoint path not found",
        f"flowray run -d -s {shlex.quote(str(empty))} {JOB} {work} x":
            "no savepoint or checkpoint at",
        f"flowray run -d -p 1000 {JOB} {work} x": "exceeds max parallelism 128",
        f"flowray run -d -D no.such.key=1 {JOB} {work} x": "unknown configuration key",
        f"flowray run -d -p 2 -D execution.target=local {JOB} {work} x":
            "execution.attached=false needs execution.target=ray",
    }
    # each command is a process of its own that starts Python and connects to Ray: run
    # them side by side
    with ThreadPoolExecutor(len(cases)) as pool:
        done = dict(zip(cases, pool.map(lambda command: shell(command, ok=False), cases)))
    for command, message in cases.items():
        p = done[command]
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1, f"$ {command}\n{p.stdout}\n{p.stderr}"
        assert lines[0].startswith("flowray") and message in lines[0], lines


def test_a_detached_jobs_master_restarts_and_runs_on_with_no_driver(tmp_path, shell):
    """Nobody waits on a detached job: a restarted job master starts the job's loop
    itself and resumes from the latest checkpoint."""
    import ray

    work, name, ledger, sink, holds = _new_job(tmp_path, shell)
    p = shell(f"flowray run -d -D jobstore.expiration-time=120 "
              f"{shlex.quote(JOB)} {shlex.quote(str(work))} {name}")
    job = _submitted_job_id(p)
    wait_until(lambda: holds[0] in ledger.fired_markers(), 120, "the job to reach its HOLD()")
    wait_until(lambda: len(sink.committed()) == PART, 120, "the first part committed")

    from flowray.runtime.execution.jobs import attach
    ray.kill(attach(job).job_master_actor(), no_restart=False)
    # the restarted master restores the checkpoint taken at the HOLD() and reads on
    wait_until(lambda: holds[1] in ledger.fired_markers(), 120, "the second HOLD()")
    wait_until(lambda: len(sink.committed()) >= 2 * PART, 120, "the second part committed")
    info = shell(f"flowray info {job}").stdout
    assert _field(info, "Status") == "RUNNING", info
    assert _field(info, "Restarts") == "0 (and 1 job master restarts)", info
    shell(f"flowray cancel {job}")
    committed = Counter(sink.committed())
    assert max(committed.values()) == 1, "a record was committed twice"
    assert sorted(committed) == [("n", x) for x in range(2 * PART)]


SUBMITTED = """
import os
import sys

import helper   # next to this file: the uploaded folder is the driver's working folder
from flowray import StreamExecutionEnvironment

print(helper.GREETING, "| under Ray's job supervisor:", "RAY_JOB_CONFIG_JSON_ENV_VAR" in
      os.environ, "| in a copy of the folder:", os.path.dirname(os.path.abspath(__file__)) !=
      sys.argv[1])
env = StreamExecutionEnvironment.get_execution_environment()
tag = sys.argv[2]
env.from_collection([1, 2, 3]).map(lambda x: f"{tag}:{x * 7}").print()
env.execute("submitted")
if sys.argv[2] == "fail":
    raise SystemExit("the program failed after its job")
"""


def test_run_goes_through_ray_job_submission_and_logs_show_the_output(tmp_path, shell):
    from ray.job_submission import JobSubmissionClient

    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "helper.py").write_text("GREETING = 'hello from the uploaded folder'\n")
    (folder / "job.py").write_text(SUBMITTED)
    p = shell(f"flowray run {shlex.quote(str(folder / 'job.py'))} {shlex.quote(str(folder))} ok")
    sid = re.search(r"as Ray job (flowray-\w+) \(Ray's Job Submission at (\S+)\)", p.stdout)
    assert sid, p.stdout
    assert ("hello from the uploaded folder | under Ray's job supervisor: True | in a copy "
            "of the folder: True") in p.stdout, p.stdout
    assert sorted(ln for ln in p.stdout.splitlines() if ln.startswith("ok:")) == \
        ["ok:14", "ok:21", "ok:7"], p.stdout   # what the tasks printed reached the output
    assert "Running entrypoint" not in p.stdout and p.stderr == "", p.stderr
    # the program is a job on Ray's Jobs page, and its output stays there
    info = JobSubmissionClient(sid.group(2)).get_job_info(sid.group(1))
    assert info.status == "SUCCEEDED" and "flowray.cli.program job.py" in info.entrypoint
    logs = shell(f"flowray logs {sid.group(1)}").stdout
    assert "hello from the uploaded folder" in logs and "ok:21" in logs
    # a program that fails: the command fails too, with the program's last words
    p = shell(f"flowray run {shlex.quote(str(folder / 'job.py'))} {shlex.quote(str(folder))} "
              "fail", ok=False)
    assert p.returncode == 1 and "fail:21" in p.stdout
    assert "the program failed after its job" in p.stdout + p.stderr
