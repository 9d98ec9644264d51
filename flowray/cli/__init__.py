"""The ``flowray`` command line, as Flink's ``flink`` CLI: run a program (attached or
detached), and list, inspect, checkpoint, savepoint, stop and cancel jobs on a Ray cluster.

::

    flowray run [-d] [-p N] [-s SAVEPOINT] [-n] [--conf FILE] [-D key=value ...]
                [-pyfs FILES] [-pyreq FILE] [-pyarch ARCHIVES] [-pyexec PYTHON]
                (script.py | -py script.py | -pym module) [args...]
    flowray list [-r | -s | -a] [-o json]
    flowray info JOB [-o json]
    flowray checkpoints JOB [-n LIMIT] [-o json]
    flowray checkpoint JOB
    flowray savepoint JOB [DIR]
    flowray savepoint -d SAVEPOINT_PATH
    flowray stop JOB [--savepoint-path DIR] [--drain]
    flowray cancel JOB
    flowray logs JOB [-f]
    flowray history [--port P] [--archive-dir DIR ...] [-D key=value ...]

``JOB`` is a job id (or a prefix of at least 4 characters), or a job's name. Every
command that talks to a cluster takes ``--address`` (default ``RAY_ADDRESS``, else the local
cluster that ``ray start --head`` started). Errors end the command with one line and exit
code 1.

On a Ray cluster with a dashboard, ``flowray run`` submits the program through Ray's Job
Submission (its folder uploaded as the job's ``working_dir``, its driver on the cluster,
its output shown here and by ``flowray logs``); with no cluster, or ``--local-driver``, it
runs ``script.py`` with this Python. Either way it hands the program the settings
(``-p`` -> ``parallelism.default``, ``-s`` -> ``execution.savepoint.path``, ``-n`` ->
``execution.savepoint.ignore-unclaimed-state``, ``-d`` -> ``execution.attached=false``,
``-pyfs``/``-pyreq``/``-pyarch``/``-pyexec`` -> ``python.files``/``python.requirements``/
``python.archives``/``python.executable``, ``--address`` -> ``ray.address``, ``-D`` pairs as
they are, over the config file's: ``--conf FILE``, else ``$FLOWRAY_CONF_DIR/config.yaml``)
through the environment: the program's ``StreamExecutionEnvironment.
get_execution_environment()`` starts from them, and what the program sets wins. Detached,
the program returns once its job runs and prints the job id; the job stays in the cluster.

Ray is imported only by the commands that talk to a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import click

from flowray.cli.tables import ENDED, format_job_info, format_job_list

__all__ = ["main", "parse_properties", "client_settings"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CliError(click.ClickException):
    """One line on stderr (``flowray: error: ...``), exit code 1."""

    def __init__(self, message: Any) -> None:
        text = str(message).strip() or type(message).__name__
        super().__init__(text.splitlines()[0])

    def show(self, file: Any = None) -> None:
        click.echo(f"flowray: error: {self.format_message()}", file=file or sys.stderr)


# -- settings for `run` (pure) ---------------------------------------------------------------
def parse_properties(pairs: Sequence[str]) -> Dict[str, str]:
    """``-D key=value`` pairs as a dict (a later pair wins), each key and value checked as
    a flowray configuration setting.

    >>> parse_properties(["parallelism.default=2", "execution.checkpointing.dir=/tmp/ck=1"])
    {'parallelism.default': '2', 'execution.checkpointing.dir': '/tmp/ck=1'}
    >>> parse_properties(["parallelism.default"])
    Traceback (most recent call last):
    ...
    flowray.cli.CliError: -D expects KEY=VALUE, got 'parallelism.default'
    """
    from flowray.common.configuration import Configuration, ConfigurationError

    out: Dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"-D expects KEY=VALUE, got {pair!r}")
        try:
            Configuration().set_string(key, value)
        except ConfigurationError as e:
            raise CliError(e) from None
        out[key] = value
    return out


def _existing_paths(value: str, option: str) -> str:
    """``value``'s comma-separated paths made absolute (a ``#suffix`` kept), each checked."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        path, sep, suffix = item.partition("#")
        if "://" in path:
            raise CliError(f"{option} takes local paths, got {path}: flowray ships the "
                           "files from here")
        if not os.path.exists(path):
            raise CliError(f"{option}: not found: {path}")
        path = os.path.abspath(path)
        out.append(path + sep + suffix)
    return ",".join(out)


def client_settings(detached: bool = False, parallelism: Optional[int] = None,
                    savepoint: Optional[str] = None, allow_non_restored: bool = False,
                    properties: Sequence[str] = (), address: Optional[str] = None,
                    *, conf_file: Optional[str] = None, python_files: Optional[str] = None,
                    python_requirements: Optional[str] = None,
                    python_archives: Optional[str] = None,
                    python_executable: Optional[str] = None,
                    environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The settings ``flowray run`` hands the program: the config file's (``conf_file``,
    else ``$FLOWRAY_CONF_DIR/config.yaml``), then ``-D``'s, then the options'; a later
    layer wins.

    >>> client_settings(True, 2, None, False, ["pipeline.name=wc"], "10.0.0.1:6379",
    ...                 environ={})
    {'pipeline.name': 'wc', 'parallelism.default': '2', 'execution.attached': 'false', 'ray.address': '10.0.0.1:6379'}
    >>> client_settings(savepoint="/no/such/savepoint")
    Traceback (most recent call last):
    ...
    flowray.cli.CliError: savepoint path not found: /no/such/savepoint
    """
    from flowray.common.config_file import conf_dir_file, layered, load_config_file
    from flowray.common.configuration import ConfigurationError

    try:
        path = conf_file or conf_dir_file(os.environ if environ is None else environ)
        from_file = load_config_file(path) if path else None
    except ConfigurationError as e:
        raise CliError(e) from None
    settings = parse_properties(properties)
    if parallelism is not None:
        if parallelism < 1:
            raise CliError(f"parallelism must be at least 1, got {parallelism}")
        settings["parallelism.default"] = str(parallelism)
    if savepoint:
        if "://" not in savepoint and not os.path.exists(savepoint):
            raise CliError(f"savepoint path not found: {savepoint}")
        settings["execution.savepoint.path"] = savepoint
    if allow_non_restored:
        settings["execution.savepoint.ignore-unclaimed-state"] = "true"
    if detached:
        settings["execution.attached"] = "false"
    for key, value, option in (("python.files", python_files, "-pyfs"),
                               ("python.requirements", python_requirements, "-pyreq"),
                               ("python.archives", python_archives, "-pyarch")):
        if value:
            settings[key] = _existing_paths(value, option)
    if python_executable:
        settings["python.executable"] = python_executable
    if address:
        settings["ray.address"] = address
    if from_file is None:
        return settings
    return {k: str(v) for k, v in layered(from_file, settings).to_dict().items()}


def _program_paths(python_files: str) -> List[str]:
    """What ``-pyfs`` puts on the program's ``sys.path``: a ``.py`` file's folder, a folder,
    a wheel or zip itself."""
    paths = []
    for item in filter(None, python_files.split(",")):
        if "://" in item:
            continue
        paths.append(os.path.dirname(item) if item.endswith(".py") else item)
    return paths


# -- talking to the cluster ----------------------------------------------------------------
def _connect(address: Optional[str]) -> None:
    import logging

    from flowray.common.logs import configure_logging
    from flowray.runtime.execution.cluster import NoRayClusterError, connect_cluster

    # the commands say what happened themselves: no job summaries from the client
    configure_logging().setLevel(logging.ERROR)
    try:
        connect_cluster(address)
    except NoRayClusterError as e:
        raise CliError(e) from None


def _jobs(address: Optional[str]) -> List[Dict[str, Any]]:
    """The job records the job masters keep in the cluster's GCS, read without joining the
    cluster as a Ray driver: `list`, `info`, `checkpoints`, `ui` and `logs` do not appear
    as jobs on Ray's Jobs page."""
    from flowray.runtime.execution.cluster import NoRayClusterError
    from flowray.runtime.execution.job_store import read_job_records

    try:
        return read_job_records(address)
    except NoRayClusterError as e:
        raise CliError(e) from None


def _record(job: str, address: Optional[str]) -> Dict[str, Any]:
    """The record of the job ``job`` names (an id, an id prefix or a name)."""
    from flowray.runtime.execution.job_directory import JobNotFoundError, find_job

    try:
        return find_job(job, _jobs(address))
    except JobNotFoundError as e:
        raise CliError(e) from None


def _find(job: str, address: Optional[str], what: str) -> Tuple[Dict[str, Any], Any]:
    """The job's record and a client re-attached to it (this process joins the cluster:
    for the commands that act on a job); an error if the job ended, naming ``what``."""
    from flowray.runtime.execution.jobs import JobNotFoundError, attach

    info = _record(job, address)
    _running(info, what)
    _connect(address)
    try:
        client = attach(info["job_id"], address)
    except JobNotFoundError as e:
        raise CliError(e) from None
    return info, client


def _running(info: Dict[str, Any], what: str) -> None:
    if info.get("status") in ENDED:
        raise CliError(f"cannot {what}: job {info['job_id']} ({info.get('name')}) has "
                       f"already ended ({info['status']})")


def _savepoint_dir(info: Dict[str, Any], directory: Optional[str], option: str) -> Optional[str]:
    """``directory`` (absolute if local: the job master works elsewhere), or the job's
    ``execution.checkpointing.savepoint-dir``; an error naming ``option`` if neither is there."""
    if directory is None:
        if info.get("savepoints_dir") is None and "savepoints_dir" in info:
            raise CliError(f"no savepoint directory: pass {option}, or run the job with "
                           "-D execution.checkpointing.savepoint-dir=DIR")
        return None
    if "://" in directory:
        return directory
    return os.path.abspath(directory)


address_option = click.option(
    "--address", envvar="RAY_ADDRESS", default=None, metavar="ADDRESS",
    help="Ray cluster to use (default: RAY_ADDRESS, else the local one of `ray start --head`).")


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="flowray", prog_name="flowray")
def main() -> None:
    """flowray: run stream processing jobs on Ray and manage them (as Flink's `flink`)."""


@main.command(context_settings=dict(CONTEXT, ignore_unknown_options=True,
                                    allow_interspersed_args=False))
@click.option("-d", "--detached", is_flag=True,
              help="Return once the job runs; the job outlives this command.")
@click.option("-p", "--parallelism", type=int, default=None,
              help="Default parallelism of the job (parallelism.default).")
@click.option("-s", "--from-savepoint", "savepoint", metavar="PATH", default=None,
              help="Start from this savepoint or retained checkpoint (execution.savepoint.path).")
@click.option("-n", "--allow-non-restored-state", is_flag=True,
              help="Allow savepoint state that no operator claims.")
@click.option("--conf", "conf_file", metavar="FILE", default=None,
              help="A config.yaml (Flink 2's format) the settings start from (default: "
                   "$FLOWRAY_CONF_DIR/config.yaml); -D and the program override it.")
@click.option("-D", "properties", multiple=True, metavar="KEY=VALUE",
              help="A configuration setting (repeatable), e.g. -D execution.checkpointing.dir=/ck.")
@click.option("-py", "--python", "python_file", metavar="FILE", default=None,
              help="The program (a Python file), as Flink's -py; what follows are its ARGS.")
@click.option("-pym", "--pyModule", "python_module", metavar="MODULE", default=None,
              help="The program as a module (python -m MODULE), found on -pyfs or the "
                   "current folder.")
@click.option("-pyfs", "--pyFiles", "python_files", metavar="FILES", default=None,
              help="Python files, packages or wheels (comma-separated) for the workers and "
                   "the program's sys.path (python.files).")
@click.option("-pyreq", "--pyRequirements", "python_requirements", metavar="FILE[#DIR]",
              default=None, help="A requirements file the workers install (python.requirements).")
@click.option("-pyarch", "--pyArchives", "python_archives", metavar="ARCHIVES", default=None,
              help="Zip archives (comma-separated, 'path#target') extracted for the workers "
                   "(python.archives).")
@click.option("-pyexec", "--pyExecutable", "python_executable", metavar="PYTHON", default=None,
              help="The Python interpreter the workers run (python.executable).")
@click.option("--local-driver", is_flag=True,
              help="Run the program's driver here, joined to the cluster, instead of "
                   "submitting it through Ray's Job Submission.")
@address_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[SCRIPT] [ARGS]...")
def run(detached: bool, parallelism: Optional[int], savepoint: Optional[str],
        allow_non_restored_state: bool, conf_file: Optional[str], properties: Tuple[str, ...],
        python_file: Optional[str], python_module: Optional[str], python_files: Optional[str],
        python_requirements: Optional[str], python_archives: Optional[str],
        python_executable: Optional[str], local_driver: bool, address: Optional[str],
        args: Tuple[str, ...]) -> None:
    """Run the program SCRIPT (a Python file; or -py FILE, or -pym MODULE) with ARGS.

    On a Ray cluster with a dashboard (--address, RAY_ADDRESS, or the one `ray start`
    started here) the program goes through Ray's Job Submission: its folder is uploaded,
    its driver runs on the cluster (a job in the dashboard's Jobs tab) and this command
    shows its output (later: flowray logs). With no cluster it runs here on an embedded
    local Ray.

    Attached (the default), the command ends with the job; detached (-d), once the job
    runs, printing its id.
    """
    from flowray.datastream.stream_execution_environment import CLIENT_CONFIG_ENV

    if python_file and python_module:
        raise CliError("give the program once: -py FILE or -pym MODULE, not both")
    program: List[str]
    if python_module:
        program = ["-m", python_module, *args]
    else:
        script = python_file or (args[0] if args else None)
        if script is None:
            raise CliError("no program: give SCRIPT, -py FILE or -pym MODULE")
        if not os.path.isfile(script):
            raise CliError(f"program not found: {script}")
        program = [script, *(args if python_file else args[1:])]
    settings = client_settings(detached, parallelism, savepoint, allow_non_restored_state,
                               properties, address, conf_file=conf_file,
                               python_files=python_files,
                               python_requirements=python_requirements,
                               python_archives=python_archives,
                               python_executable=python_executable)
    target = None if local_driver else _submission_target(address)
    if target is not None:
        sys.exit(_run_submitted(target, program, settings, detached))
    env = dict(os.environ)
    env[CLIENT_CONFIG_ENV] = json.dumps(settings)
    if settings.get("python.files"):
        env["PYTHONPATH"] = os.pathsep.join(
            _program_paths(settings["python.files"]) + [p for p in (env.get("PYTHONPATH"),) if p])
    cmd = [sys.executable, "-m", "flowray.cli.program", *program]
    try:
        code = subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def _submission_target(address: Optional[str]) -> Any:
    """The cluster to submit to with Ray's Job Submission, or ``None`` (run here)."""
    from flowray.runtime.execution.cluster import NoRayClusterError
    from flowray.runtime.execution.job_submission import find_submission_target

    try:
        target = find_submission_target(address)
    except NoRayClusterError as e:
        raise CliError(e) from None
    if target is None and (address or os.environ.get("RAY_ADDRESS")):
        click.echo("flowray run: the Ray cluster has no dashboard, which Ray's Job Submission "
                   "needs: the program's driver runs here", err=True)
    return target


def _run_submitted(target: Any, program: List[str], settings: Dict[str, str],
                   detached: bool) -> int:
    """Submit the program, show its output; the exit code (0: it succeeded, or a
    detached job runs)."""
    from flowray.cli.submission_plan import (ProgramOutput, new_submission_id,
                                             plan_submission, submitted_job_id)
    from flowray.runtime.execution.job_submission import (JobSubmissionError, follow_logs,
                                                          job_status, submit_program)

    python = settings.get("python.client.executable") or "python"
    try:
        plan = plan_submission(program, settings, python, new_submission_id(), os.getcwd(),
                               target.gcs_address)
    except ValueError as e:
        raise CliError(e) from None
    sid = plan.submission_id
    output = ProgramOutput(click.echo, lambda line: click.echo(line, err=True))
    started = False

    def on_text(text: str) -> bool:
        output.feed(text)
        return detached and submitted_job_id("".join(output.text)) is not None

    try:
        env_vars = {"PYTHONUNBUFFERED": "1"}
        if os.environ.get("FLOWRAY_TRACEBACK"):   # full tracebacks of flowray's errors
            env_vars["FLOWRAY_TRACEBACK"] = os.environ["FLOWRAY_TRACEBACK"]
        submit_program(target, sid, plan.entrypoint, plan.working_dir, env_vars,
                       {"flowray.program": program[0]})
        started = True
        click.echo(f"Submitted the program as Ray job {sid} (Ray's Job Submission at "
                   f"{target.dashboard_url}); its output follows, and `flowray logs {sid}` "
                   "shows it later.")
        follow_logs(target, sid, on_text)
        output.flush()
        if detached and submitted_job_id("".join(output.text)):
            return 0
        status, message = job_status(target, sid)
    except JobSubmissionError as e:
        raise CliError(e) from None
    except KeyboardInterrupt:
        if started:
            click.echo(f"flowray run: the program runs on in the cluster as Ray job {sid}: "
                       f"`flowray logs {sid} --follow` shows its output, "
                       f"`ray job stop {sid}` stops it", err=True)
        return 130
    if status == "SUCCEEDED":
        return 0
    if not output.errors:
        click.echo(f"flowray: error: Ray job {sid} {status}: {message.strip()}"
                   .splitlines()[0], err=True)
    return 1


output_option = click.option(
    "-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="text for people, json for scripts.")

#: Flink's `flink list`: scheduled jobs have not started running yet
SCHEDULED = ("CREATED",)


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


@main.command(name="list", context_settings=CONTEXT)
@click.option("-r", "--running", is_flag=True, help="Only running jobs (RUNNING, RESTARTING...).")
@click.option("-s", "--scheduled", is_flag=True, help="Only scheduled jobs (CREATED).")
@click.option("-a", "--all", "show_all", is_flag=True,
              help="Also jobs that ended (kept for jobstore.expiration-time).")
@output_option
@address_option
def list_command(running: bool, scheduled: bool, show_all: bool, output: str,
                 address: Optional[str]) -> None:
    """List the jobs on the cluster (running and scheduled ones; -r, -s: only those; -a:
    all, ended ones too)."""
    jobs = _jobs(address)
    if not show_all:
        jobs = [j for j in jobs if j.get("status") not in ENDED and (
            not (running or scheduled)
            or (scheduled and j.get("status") in SCHEDULED)
            or (running and j.get("status") not in SCHEDULED))]
    if output == "json":
        _echo_json(jobs)
        return
    if not jobs:
        click.echo("No jobs." if show_all else
                   "No scheduled jobs." if scheduled and not running else
                   "No running jobs.")
        return
    click.echo(format_job_list(jobs))


@main.command(context_settings=CONTEXT)
@click.argument("job")
@output_option
@address_option
def info(job: str, output: str, address: Optional[str]) -> None:
    """Show a job on the cluster: status, tasks and their parallelism, latest checkpoint and
    savepoint, restarts. (Flink's `flink info` shows a program's plan instead: call
    env.get_execution_plan() in the program for that.)"""
    found = _record(job, address)
    if output == "json":
        _echo_json({k: v for k, v in found.items() if k != "checkpoint_stats"})
        return
    click.echo(format_job_info(found))


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("--no-browser", is_flag=True, help="Only print the URL.")
@address_option
def ui(job: str, no_browser: bool, address: Optional[str]) -> None:
    """Print the job's web UI URL (its REST API's too) and open it in a browser if this
    machine has one."""
    import webbrowser

    found = _record(job, address)
    url = found.get("web_url")
    if not url:
        why = ("it has ended" if found.get("status") in ENDED
               else "its job master could not bind rest.port")
        raise CliError(f"job {found['job_id']} ({found.get('name')}) has no web UI: {why}")
    click.echo(url)
    if found.get("rest_token"):
        click.echo(f"REST token (write endpoints): {found['rest_token']}")
    if not no_browser:
        try:
            webbrowser.get().open(url)
        except webbrowser.Error:
            pass  # no browser here: the URL is printed


@main.command(context_settings=CONTEXT)
@click.option("--port", default=None, metavar="PORT",
              help="Port (or range) to serve on (historyserver.web.port, default 8082; a "
                   "taken port moves on to the next free one).")
@click.option("--archive-dir", "archive_dirs", multiple=True, metavar="DIR",
              help="A directory of job archives (repeatable; default: "
                   "historyserver.archive.fs.dir, else jobmanager.archive.fs.dir).")
@click.option("-D", "properties", multiple=True, metavar="KEY=VALUE",
              help="A configuration setting, e.g. -D historyserver.web.address=0.0.0.0.")
def history(port: Optional[str], archive_dirs: Tuple[str, ...],
            properties: Tuple[str, ...]) -> None:
    """Serve ended jobs' REST API and web UI from the archives their job masters wrote
    (jobmanager.archive.fs.dir), as Flink's HistoryServer; Ctrl-C (or SIGTERM) stops it."""
    import signal
    import threading

    from flowray.common.config_file import conf_dir_file, layered, load_config_file
    from flowray.common.configuration import ConfigurationError
    from flowray.common.options import (HISTORY_ARCHIVE_DIRS, HISTORY_REFRESH_INTERVAL,
                                        HISTORY_WEB_ADDRESS, HISTORY_WEB_PORT,
                                        JOB_ARCHIVE_DIR, ports_of)
    from flowray.runtime.rest.history import HistoryServer

    settings = parse_properties(properties)
    if port is not None:
        settings[HISTORY_WEB_PORT.key] = port
    try:
        path = conf_dir_file()   # Flink's history server reads config.yaml too
        config = layered(load_config_file(path) if path else None, settings)
        ports = ports_of(config.get(HISTORY_WEB_PORT))
    except (ConfigurationError, ValueError) as e:
        raise CliError(e) from None
    dirs = list(archive_dirs) or [
        d.strip() for d in (config.get(HISTORY_ARCHIVE_DIRS) or config.get(JOB_ARCHIVE_DIR)
                            or "").split(",") if d.strip()]
    if not dirs:
        raise CliError("no archive directory: give --archive-dir DIR (where jobs ran with "
                       "-D jobmanager.archive.fs.dir=DIR)")
    server = HistoryServer(dirs, config.get(HISTORY_WEB_ADDRESS), ports,
                           config.get(HISTORY_REFRESH_INTERVAL))
    try:
        server.start()
    except OSError as e:
        raise CliError(e) from None
    click.echo(f"flowray history: {len(server.archives.job_ids())} archived job(s) from "
               f"{', '.join(dirs)} at {server.url}", )
    sys.stdout.flush()
    stop = threading.Event()
    # set explicitly: a process started with SIGINT ignored (by its parent) stops too
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.close()


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many of the newest checkpoints to show.")
@output_option
@address_option
def checkpoints(job: str, limit: int, output: str, address: Optional[str]) -> None:
    """Show a job's checkpoint history."""
    from flowray.runtime.checkpoint.stats import format_checkpoint_table

    found = _record(job, address)
    stats = found.get("checkpoint_stats") or {}
    history = stats.get("history") or []
    if output == "json":
        _echo_json(dict(stats, history=history[-limit:]))
        return
    if not history:
        click.echo(f"No checkpoints yet for job {found['job_id']} ({found['name']}).")
        return
    click.echo(stats.get("summary") or "")
    click.echo(format_checkpoint_table(history, limit, stats.get("task_names")))


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help="Give up waiting after this long (the checkpoint may still complete).")
@address_option
def checkpoint(job: str, timeout: Optional[float], address: Optional[str]) -> None:
    """Trigger a checkpoint of a running job now, as Flink's `flink checkpoint`; prints its
    path once it completes."""
    from flowray.runtime.execution.client import SavepointError

    found, client = _find(job, address, "trigger a checkpoint")
    click.echo(f"Triggering checkpoint for job {found['job_id']} ({found['name']}).")
    try:
        path = client.trigger_checkpoint(timeout_s=timeout)
    except (SavepointError, TimeoutError) as e:
        raise CliError(f"checkpoint failed: {e}") from None
    click.echo(f"Checkpoint completed. Path: {path}")


@main.command(context_settings=CONTEXT)
@click.argument("job", required=False)
@click.argument("directory", required=False, metavar="[DIR]")
@click.option("-d", "--dispose", metavar="SAVEPOINT_PATH", default=None,
              help="Delete this savepoint (its folder and every file in it) instead.")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help="Give up waiting after this long (the savepoint may still complete).")
@address_option
def savepoint(job: Optional[str], directory: Optional[str], dispose: Optional[str],
              timeout: Optional[float], address: Optional[str]) -> None:
    """Take a savepoint of a running JOB into a new folder under DIR (default: the job's
    execution.checkpointing.savepoint-dir); the job runs on. With -d, delete a savepoint."""
    if dispose is not None:
        if job is not None:
            raise CliError("savepoint -d takes the savepoint's path only, not a job")
        _dispose(dispose)
        return
    if job is None:
        raise CliError("give the JOB to take a savepoint of (or -d PATH to delete one)")
    from flowray.runtime.execution.client import SavepointError

    found, client = _find(job, address, "take a savepoint")
    target = _savepoint_dir(found, directory, "DIR")
    click.echo(f"Triggering savepoint for job {found['job_id']} ({found['name']}).")
    try:
        path = client.trigger_savepoint(target, timeout_s=timeout)
    except SavepointError as e:
        raise CliError(f"savepoint failed: {e}") from None
    click.echo(f"Savepoint completed. Path: {path}")
    click.echo("Resume a job from it with: flowray run -s PATH script.py")


def _dispose(path: str) -> None:
    from flowray.runtime.checkpoint.savepoints import NotASavepointError, dispose_savepoint

    try:
        where = dispose_savepoint(path)
    except (NotASavepointError, OSError) as e:
        raise CliError(f"cannot dispose: {e}") from None
    click.echo(f"Savepoint {where} disposed.")


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("-p", "--savepoint-path", "directory", metavar="DIR", default=None,
              help="Where the final savepoint goes (default: the job's "
                   "execution.checkpointing.savepoint-dir).")
@click.option("-d", "--drain", is_flag=True,
              help="End the input first, so every window and timer fires.")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help="Give up waiting after this long.")
@address_option
def stop(job: str, directory: Optional[str], drain: bool, timeout: Optional[float],
         address: Optional[str]) -> None:
    """Stop a job with a final savepoint (sources stop, sinks commit, the job FINISHES)."""
    from flowray.runtime.execution.client import SavepointError

    found, client = _find(job, address, "stop it")
    target = _savepoint_dir(found, directory, "--savepoint-path DIR")
    click.echo(f"Suspending job {found['job_id']} ({found['name']})"
               + (" after draining it." if drain else "."))
    try:
        path = client.stop_with_savepoint(target, drain=drain, timeout_s=timeout)
    except SavepointError as e:
        raise CliError(f"stop failed: {e}") from None
    click.echo(f"Savepoint completed. Path: {path}")
    status = client.get_job_status().value
    click.echo(f"Job {found['job_id']} ended {status}.")


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep showing the output until the job ends.")
@address_option
def logs(job: str, follow: bool, address: Optional[str]) -> None:
    """Show the output of a program that `flowray run` submitted through Ray's Job
    Submission (JOB: the flowray job, or the Ray job id `flowray run` printed)."""
    from flowray.runtime.execution.cluster import NoRayClusterError
    from flowray.runtime.execution.job_submission import (JobSubmissionError,
                                                          find_submission_target,
                                                          follow_logs, job_logs, job_status)

    try:
        target = find_submission_target(address)
    except NoRayClusterError as e:
        raise CliError(e) from None
    if target is None:
        raise CliError("no Ray cluster with a dashboard here (give --address or RAY_ADDRESS): "
                       "Ray's Job Submission keeps the programs' output there")
    sid = job
    try:
        job_status(target, job)
    except JobSubmissionError as e:
        raise CliError(e) from None
    except RuntimeError:   # Ray's "job ... does not exist": a flowray job's name or id
        found = _record(job, address)
        sid = found.get("submission_id")
        if not sid:
            raise CliError(
                f"job {found['job_id']} ({found.get('name')}) was not submitted through "
                "Ray's Job Submission: its driver ran where `flowray run` ran "
                "(--local-driver, or a cluster without a dashboard) and printed there; its "
                "tasks' output is in the Ray workers' logs") from None
    try:
        if follow:
            follow_logs(target, sid, lambda text: bool(click.echo(text, nl=False)))
        else:
            click.echo(job_logs(target, sid), nl=False)
    except JobSubmissionError as e:
        raise CliError(e) from None


@main.command(context_settings=CONTEXT)
@click.argument("job")
@click.option("--timeout", type=float, default=120.0, show_default=True, metavar="SECONDS",
              help="How long to wait for the job to be cancelled.")
@address_option
def cancel(job: str, timeout: float, address: Optional[str]) -> None:
    """Cancel a job (no savepoint; its checkpoints are kept as configured)."""
    from flowray.runtime.execution.client import JobExecutionError

    found, client = _find(job, address, "cancel it")
    client.cancel()
    try:
        status = client.wait(timeout).outcome.status.value
    except JobExecutionError as e:
        status = e.outcome.status.value
    except TimeoutError:
        raise CliError(f"job {found['job_id']} was not cancelled after {timeout:g} s "
                       f"(it is {client.get_job_status().value})") from None
    if status == "CANCELED":
        click.echo(f"Cancelled job {found['job_id']} ({found['name']}).")
    else:
        click.echo(f"Job {found['job_id']} ({found['name']}) ended {status} before the "
                   "cancellation.")

