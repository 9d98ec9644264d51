"""The ``flowray`` command line without Ray: argument and ``-D`` parsing, what ``run`` hands
the program, the program runner's one-line errors, the tables, and finding a job by id or
name (click's ``CliRunner``; the cluster is replaced by a list of job infos)."""

import json
import os
import sys

import pytest
from click.testing import CliRunner

import flowray.cli as cli
from flowray.cli import CliError, client_settings, main, parse_properties
from flowray.cli import program
from flowray.cli.tables import format_job_info, format_job_list, format_table
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.datastream.stream_execution_environment import (
    CLIENT_CONFIG_ENV,
    StreamExecutionEnvironment,
)

JOBS = [
    {"job_id": "4f2a9c0d1e2f", "job_name": "wc", "name": "wc", "status": "FINISHED",
     "detached": True, "start_ms": 1_700_000_000_000, "end_ms": 1_700_000_065_000,
     "parallelism": 1, "checkpoints": {"completed": 4, "failed": 0, "in_progress": 0},
     "restarts": 0, "vertices": [{"name": "Source: words", "parallelism": 1,
                                  "max_parallelism": 128}],
     "latest_checkpoint": {"id": 4, "path": "/ck/4f2a9c0d1e2f/chk-4", "completed_ms": None,
                           "exists": False},
     "latest_savepoint": None, "failure": None, "savepoints_dir": None},
    {"job_id": "77aa00bb11cc", "job_name": "wc", "name": "wc#2", "status": "RUNNING",
     "detached": True, "start_ms": 1_700_000_100_000, "end_ms": None, "parallelism": 2,
     "checkpoints": {"completed": 1}, "restarts": 0, "vertices": [],
     "latest_checkpoint": None, "latest_savepoint": None, "failure": None,
     "savepoints_dir": "/savepoints"},
]


# -- -D and the settings for the program -----------------------------------------------------
def test_properties_are_checked_as_configuration_settings():
    assert parse_properties(["a.b=1"] * 0) == {}
    assert parse_properties(["parallelism.default=2", "parallelism.default=3"]) == \
        {"parallelism.default": "3"}
    assert parse_properties(["execution.checkpointing.dir=s3://b/k=v"]) == \
        {"execution.checkpointing.dir": "s3://b/k=v"}
    for bad, message in [("novalue", "-D expects KEY=VALUE, got 'novalue'"),
                         ("=1", "-D expects KEY=VALUE"),
                         ("no.such.key=1", "unknown configuration key 'no.such.key'"),
                         ("parallelism.default=two", "invalid value 'two'")]:
        with pytest.raises(CliError, match=message):
            parse_properties([bad])


def test_client_settings_map_the_options_to_flink_keys(tmp_path):
    assert client_settings() == {}
    settings = client_settings(True, 4, str(tmp_path), True,
                               ["parallelism.default=1", "pipeline.name=x"], "10.0.0.1:6379")
    assert settings == {"parallelism.default": "4", "pipeline.name": "x",
                        "execution.savepoint.path": str(tmp_path),
                        "execution.savepoint.ignore-unclaimed-state": "true",
                        "execution.attached": "false", "ray.address": "10.0.0.1:6379"}
    assert client_settings(savepoint="s3://bucket/sp-1") == \
        {"execution.savepoint.path": "s3://bucket/sp-1"}  # remote paths are the job's to check
    with pytest.raises(CliError, match="savepoint path not found: /no/such"):
        client_settings(savepoint="/no/such")
    with pytest.raises(CliError, match="parallelism must be at least 1"):
        client_settings(parallelism=0)


@pytest.fixture
def calls(monkeypatch):
    """What ``flowray run`` would start: (command, environment) instead of a process."""
    seen = []

    def fake_call(cmd, env):
        seen.append((cmd, env))
        return 7
    monkeypatch.setattr(cli.subprocess, "call", fake_call)
    monkeypatch.setattr(cli, "_submission_target", lambda address: None)  # no cluster
    return seen


def test_run_starts_the_script_with_this_python_and_the_settings(tmp_path, calls):
    script = tmp_path / "job.py"
    script.write_text("")
    result = CliRunner().invoke(main, ["run", "-d", "-p", "2", "-Dpipeline.name=x",
                                       "-D", "execution.checkpointing.interval=1 s",
                                       str(script), "in.txt", "--flag", "-p", "9"])
    assert result.exit_code == 7, result.output  # the program's exit code
    [(cmd, env)] = calls
    assert cmd == [sys.executable, "-m", "flowray.cli.program", str(script),
                   "in.txt", "--flag", "-p", "9"]  # what follows the script is the script's
    assert json.loads(env[CLIENT_CONFIG_ENV]) == {
        "pipeline.name": "x", "execution.checkpointing.interval": "1 s",
        "parallelism.default": "2", "execution.attached": "false"}


@pytest.mark.parametrize("args, message", [
    (["-D", "no.such.key=1"], "unknown configuration key 'no.such.key'"),
    (["-D", "novalue"], "-D expects KEY=VALUE"),
    (["-p", "0"], "parallelism must be at least 1"),
    (["-s", "/no/such/savepoint"], "savepoint path not found: /no/such/savepoint"),
])
def test_run_rejects_bad_options_in_one_line(tmp_path, calls, args, message):
    script = tmp_path / "job.py"
    script.write_text("")
    result = CliRunner().invoke(main, ["run", *args, str(script)])
    assert result.exit_code == 1 and not calls
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flowray: error: ") and message in lines[0], \
        result.stderr


def test_run_names_a_missing_program(calls):
    result = CliRunner().invoke(main, ["run", "no_such_program.py"])
    assert result.exit_code == 1
    assert result.stderr.strip() == "flowray: error: program not found: no_such_program.py"


def test_run_layers_the_config_file_under_d_and_the_options(tmp_path, calls, monkeypatch):
    conf = tmp_path / "conf.yaml"
    conf.write_text("parallelism:\n  default: 8\npipeline.name: file\n"
                    "state.checkpoints.dir: /file-ck\n")
    script = tmp_path / "job.py"
    script.write_text("")
    monkeypatch.delenv("FLOWRAY_CONF_DIR", raising=False)
    result = CliRunner().invoke(main, ["run", "--conf", str(conf), "-p", "2",
                                       "-D", "pipeline.name=cli", str(script)])
    assert result.exit_code == 7, result.output
    settings = json.loads(calls[-1][1][CLIENT_CONFIG_ENV])
    assert settings == {"parallelism.default": "2", "pipeline.name": "cli",
                        "execution.checkpointing.dir": "/file-ck"}
    # FLOWRAY_CONF_DIR is the default file
    (tmp_path / "config.yaml").write_text("pipeline.name: conf-dir\n")
    monkeypatch.setenv("FLOWRAY_CONF_DIR", str(tmp_path))
    assert CliRunner().invoke(main, ["run", str(script)]).exit_code == 7
    assert json.loads(calls[-1][1][CLIENT_CONFIG_ENV]) == {"pipeline.name": "conf-dir"}


def test_run_names_the_file_and_line_of_a_bad_setting(tmp_path, calls):
    conf = tmp_path / "conf.yaml"
    conf.write_text("parallelism.default: 2\nexecution:\n  checkpointing:\n"
                    "    interval: often\n")
    script = tmp_path / "job.py"
    script.write_text("")
    result = CliRunner().invoke(main, ["run", "--conf", str(conf), str(script)])
    assert result.exit_code == 1 and not calls
    assert result.stderr.startswith(f"flowray: error: {conf}, line 4: invalid value 'often' "
                                    "for configuration key 'execution.checkpointing.interval'")


def test_run_takes_flinks_python_options(tmp_path, calls):
    script = tmp_path / "job.py"
    script.write_text("")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helpers.py").write_text("")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("")
    result = CliRunner().invoke(main, [
        "run", "-pyfs", f"{lib / 'helpers.py'},{lib}", "-pyreq", str(reqs),
        "-pyexec", "/usr/bin/python3.11", "-py", str(script), "in.txt", "-p", "9"])
    assert result.exit_code == 7, result.output
    cmd, env = calls[-1]
    assert cmd[3:] == [str(script), "in.txt", "-p", "9"]  # -py: every argument is the program's
    settings = json.loads(env[CLIENT_CONFIG_ENV])
    assert settings == {"python.files": f"{lib / 'helpers.py'},{lib}",
                        "python.requirements": str(reqs),
                        "python.executable": "/usr/bin/python3.11"}
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(lib), str(lib)]
    result = CliRunner().invoke(main, ["run", "-pyfs", str(lib), "-pym", "my.job", "a"])
    assert result.exit_code == 7, result.output
    assert calls[-1][0][3:] == ["-m", "my.job", "a"]


@pytest.mark.parametrize("args, message", [
    (["-pyfs", "/no/such/lib.py", "x.py"], "-pyfs: not found: /no/such/lib.py"),
    (["-pyfs", "s3://bucket/lib.zip", "x.py"], "-pyfs takes local paths, got s3://"),
    (["-py", "a.py", "-pym", "m"], "-py FILE or -pym MODULE, not both"),
    ([], "no program: give SCRIPT, -py FILE or -pym MODULE"),
    (["--conf", "/no/such/config.yaml", "x.py"],
     "configuration file not found: /no/such/config.yaml"),
])
def test_run_rejects_a_bad_program_option_in_one_line(tmp_path, calls, args, message):
    (tmp_path / "x.py").write_text("")
    (tmp_path / "a.py").write_text("")
    result = CliRunner().invoke(main, ["run", *[str(tmp_path / a) if a.endswith("x.py") or
                                                a == "a.py" else a for a in args]])
    assert result.exit_code == 1 and not calls, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_the_program_runner_runs_a_module(runner_env, capsys, monkeypatch):
    pkg = runner_env / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text("import sys\nprint('module', __name__, sys.argv[1:])\n")
    monkeypatch.chdir(runner_env)
    assert program.main(["-m", "mypkg.job", "x", "--y"]) == 0
    assert capsys.readouterr().out == "module __main__ ['x', '--y']\n"


def test_a_submission_uploads_the_programs_folder_and_ships_only_whats_inside(tmp_path):
    from flowray.cli.submission_plan import plan_submission

    (tmp_path / "lib").mkdir()
    plan = plan_submission(
        [str(tmp_path / "job.py"), "a b"],
        {"python.files": f"{tmp_path / 'lib'},s3://bucket/x.zip",
         "python.requirements": f"{tmp_path / 'req.txt'}#{tmp_path / 'cache'}",
         "ray.address": "h:6379"}, "/opt/py/bin/python", "flowray-x", "/elsewhere")
    assert plan.working_dir == str(tmp_path)
    assert plan.settings == {"python.files": "lib,s3://bucket/x.zip",
                             "python.requirements": "req.txt#cache",
                             "flowray.submission-id": "flowray-x"}
    assert plan.entrypoint.endswith(
        " /opt/py/bin/python -m flowray.cli.program job.py 'a b'")
    # -pyfs is on the driver's sys.path, as it is when the driver runs here
    assert plan.entrypoint.startswith("PYTHONPATH=lib${PYTHONPATH:+:$PYTHONPATH} ")
    module = plan_submission(["-m", "pkg.job", "x"], {}, "python", "flowray-y", str(tmp_path))
    assert module.working_dir == str(tmp_path)
    assert module.entrypoint.endswith(" python -m flowray.cli.program -m pkg.job x")
    with pytest.raises(ValueError, match=r"-pyfs /opt/lib is outside the program's folder "
                                         r".*move it into that folder, or run with "
                                         r"--local-driver"):
        plan_submission([str(tmp_path / "job.py")], {"python.files": "/opt/lib"}, "python",
                        "flowray-z", "/")


# -- commands against a cluster (replaced by job infos) ------------------------------------
@pytest.fixture
def cluster(monkeypatch):
    """The job records (what the masters keep in the GCS); joining the cluster does
    nothing."""
    monkeypatch.setattr(cli, "_jobs", lambda address: [dict(j) for j in JOBS])
    monkeypatch.setattr(cli, "_connect", lambda address: None)


def test_list_shows_running_jobs_and_all_with_a(cluster):
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["JOB", "ID", "NAME", "STATUS", "START", "TIME", "RUNTIME",
                                "PARALLELISM", "CHECKPOINTS", "MODE", "WEB", "UI"]
    assert len(lines) == 2 and lines[1].startswith("77aa00bb11cc  wc#2  RUNNING")
    result = CliRunner().invoke(main, ["list", "-a"])
    assert [ln.split()[0] for ln in result.stdout.splitlines()[1:]] == \
        ["4f2a9c0d1e2f", "77aa00bb11cc"]


def test_list_says_when_there_is_no_job(monkeypatch):
    monkeypatch.setattr(cli, "_jobs", lambda address: [])
    assert CliRunner().invoke(main, ["list"]).stdout == "No running jobs.\n"
    assert CliRunner().invoke(main, ["list", "--all"]).stdout == "No jobs.\n"


def test_info_finds_a_job_by_id_prefix_or_name(cluster, monkeypatch):
    import flowray.runtime.execution.jobs as jobs

    monkeypatch.setattr(jobs, "attach", lambda job, address=None: None)
    for job in ("4f2a9c0d1e2f", "4f2a", "wc#2", "wc"):
        result = CliRunner().invoke(main, ["info", job])
        assert result.exit_code == 0, result.output
    # "wc" names two jobs: the one still running is meant
    assert "Job ID:            77aa00bb11cc" in result.stdout
    result = CliRunner().invoke(main, ["info", "nosuchjob"])
    assert result.exit_code == 1
    assert result.stderr == ("flowray: error: no job 'nosuchjob' on this Ray cluster "
                             "(flowray list -a shows every job)\n")


def test_savepoint_stop_and_cancel_of_an_ended_job_fail_in_one_line(cluster, monkeypatch):
    import flowray.runtime.execution.jobs as jobs

    monkeypatch.setattr(jobs, "attach", lambda job, address=None: None)
    for args in (["savepoint", "4f2a", "/sp"], ["stop", "4f2a"], ["cancel", "4f2a"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1 and \
            "job 4f2a9c0d1e2f (wc) has already ended (FINISHED)" in result.stderr, \
            result.stderr


def test_stop_without_a_directory_needs_the_jobs_savepoints_dir(monkeypatch):
    jobs = [dict(JOBS[1], savepoints_dir=None)]
    monkeypatch.setattr(cli, "_jobs", lambda address: jobs)
    monkeypatch.setattr(cli, "_connect", lambda address: None)
    import flowray.runtime.execution.jobs as jobs_module

    monkeypatch.setattr(jobs_module, "attach", lambda job, address=None: None)
    result = CliRunner().invoke(main, ["stop", "wc#2"])
    assert result.exit_code == 1
    assert result.stderr == ("flowray: error: no savepoint directory: pass --savepoint-path "
                             "DIR, or run the job with -D "
                             "execution.checkpointing.savepoint-dir=DIR\n")


def test_list_filters_running_and_scheduled_and_prints_json(monkeypatch):
    scheduled = dict(JOBS[1], job_id="5c5c5c5c5c5c", name="later", status="CREATED")
    monkeypatch.setattr(cli, "_jobs", lambda address: [dict(j) for j in JOBS] + [scheduled])

    def names(args):
        result = CliRunner().invoke(main, ["list", *args, "-o", "json"])
        assert result.exit_code == 0, result.output
        return [j["name"] for j in json.loads(result.stdout)]
    assert names([]) == ["wc#2", "later"]      # Flink's default: running and scheduled
    assert names(["-r"]) == ["wc#2"]
    assert names(["-s"]) == ["later"]
    assert names(["-a"]) == ["wc", "wc#2", "later"]
    assert CliRunner().invoke(main, ["list", "-s"]).stdout.startswith("JOB ID")


def test_info_and_checkpoints_print_json_for_scripts(monkeypatch):
    # read from the job's record alone: no client attaches, nothing joins the cluster
    stats = {"summary": "s", "history": [{"id": i} for i in range(1, 6)]}
    monkeypatch.setattr(cli, "_jobs", lambda address: [dict(JOBS[1], checkpoint_stats=stats)])
    info = json.loads(CliRunner().invoke(main, ["info", "wc#2", "--output", "json"]).stdout)
    assert info["job_id"] == "77aa00bb11cc" and info["status"] == "RUNNING"
    assert "checkpoint_stats" not in info
    stats = json.loads(CliRunner().invoke(main, ["checkpoints", "wc#2", "-n", "2",
                                                 "-o", "json"]).stdout)
    assert stats["history"] == [{"id": 4}, {"id": 5}] and stats["summary"] == "s"


def test_checkpoint_triggers_one_and_prints_its_path(cluster, monkeypatch):
    import flowray.runtime.execution.jobs as jobs

    class Client:
        def trigger_checkpoint(self, timeout_s=None):
            return "/ck/77aa00bb11cc/chk-9"
    monkeypatch.setattr(jobs, "attach", lambda job, address=None: Client())
    result = CliRunner().invoke(main, ["checkpoint", "wc#2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "Checkpoint completed. Path: /ck/77aa00bb11cc/chk-9"
    result = CliRunner().invoke(main, ["checkpoint", "wc"])   # "wc" ran once and ended...
    assert result.exit_code == 0  # ...but the name also means the running wc#2


def test_savepoint_dispose_deletes_a_savepoint_and_nothing_else(tmp_path):
    from flowray.runtime.checkpoint.completed import CompletedCheckpoint
    from flowray.runtime.checkpoint.savepoints import write_savepoint_metadata
    from flowray.runtime.checkpoint.storage import FsCheckpointStorage

    sp = tmp_path / "savepoint-abc-1"
    sp.mkdir()
    (sp / "state-1").write_bytes(b"x")
    write_savepoint_metadata(CompletedCheckpoint("j", 3, 0, 0, {}, is_savepoint=True), str(sp))
    ck = FsCheckpointStorage(str(tmp_path / "ck"), "j")
    ck.write_metadata(CompletedCheckpoint("j", 2, 0, 0, {}))
    result = CliRunner().invoke(main, ["savepoint", "-d", str(sp / "_metadata")])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Savepoint {sp} disposed.\n" and not sp.exists()
    for path, words in [(str(sp), "_metadata does not exist"),
                        (ck.checkpoint_dir(2), "is a retained checkpoint, not a savepoint")]:
        result = CliRunner().invoke(main, ["savepoint", "-d", path])
        assert result.exit_code == 1 and words in result.stderr, result.stderr
    assert (tmp_path / "ck").exists()
    result = CliRunner().invoke(main, ["savepoint", "wc", "-d", str(sp)])
    assert result.exit_code == 1 and "takes the savepoint's path only" in result.stderr


# -- tables ------------------------------------------------------------------------------------
def test_tables_line_up():
    assert format_table(["A", "LONGER"], [["x", 1], ["yyyy", None]]) == \
        "A     LONGER\nx     1\nyyyy"
    listed = format_job_list(JOBS, now_ms=1_700_000_200_000).splitlines()
    column = listed[0].index("NAME")
    assert listed[1][column:].startswith("wc ") and listed[2][column:].startswith("wc#2 ")
    assert "1m 05s" in listed[1] and "1m 40s" in listed[2]  # ended: its own runtime


def test_info_of_an_ended_job_says_its_checkpoint_is_gone():
    text = format_job_info(JOBS[0])
    assert "Latest checkpoint: #4 at /ck/4f2a9c0d1e2f/chk-4 (completed -; deleted since)" \
        in text
    assert "Ended:" in text and "Runtime:           1m 05s" in text
    failed = format_job_info(dict(JOBS[0], status="FAILED",
                                  failure="ZeroDivisionError in 'map'\ntraceback..."))
    assert "Failure:           ZeroDivisionError in 'map'" in failed
    assert "traceback" not in failed


# -- the program runner ----------------------------------------------------------------------
@pytest.fixture
def runner_env(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("FLOWRAY_TRACEBACK", raising=False)
    return tmp_path


def test_the_program_runs_as_main_with_its_arguments(runner_env, capsys):
    script = runner_env / "prog.py"
    (runner_env / "helper.py").write_text("VALUE = 42\n")
    script.write_text("import sys, helper\n"
                      "if __name__ == '__main__':\n"
                      "    print(sys.argv[1:], helper.VALUE)\n")
    assert program.main([str(script), "a", "-p", "2"]) == 0
    assert capsys.readouterr().out == "['a', '-p', '2'] 42\n"


def test_a_flowray_error_at_submission_is_one_line(runner_env, capsys):
    script = runner_env / "prog.py"
    script.write_text("from flowray import StreamExecutionEnvironment\n"
                      "env = StreamExecutionEnvironment.get_execution_environment()\n"
                      "env.get_configuration().set_string('no.such.key', '1')\n")
    assert program.main([str(script)]) == 1
    err = capsys.readouterr().err
    assert err == "flowray run: error: unknown configuration key 'no.such.key'\n"


def test_the_users_own_errors_keep_their_traceback(runner_env):
    script = runner_env / "prog.py"
    script.write_text("raise ValueError('my own bug')\n")
    with pytest.raises(ValueError, match="my own bug"):
        program.main([str(script)])


def test_the_programs_exit_code_is_kept(runner_env):
    script = runner_env / "prog.py"
    script.write_text("import sys\nsys.exit(3)\n")
    assert program.main([str(script)]) == 3


# -- the program's environment ---------------------------------------------------------------
def test_the_environment_starts_from_the_clis_settings(monkeypatch):
    monkeypatch.setenv(CLIENT_CONFIG_ENV, json.dumps(
        {"parallelism.default": "3", "pipeline.name": "from-cli",
         "execution.attached": "false"}))
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == 3
    assert env.get_configuration().get_string("pipeline.name") == "from-cli"
    # what the program sets itself wins
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("pipeline.name", "from-code"))
    assert env.get_configuration().get_string("pipeline.name") == "from-code"
    assert env.get_parallelism() == 3
    assert env.set_parallelism(5).get_parallelism() == 5


def test_a_broken_client_configuration_is_named(monkeypatch):
    monkeypatch.setenv(CLIENT_CONFIG_ENV, "{not json")
    with pytest.raises(ConfigurationError, match=CLIENT_CONFIG_ENV):
        StreamExecutionEnvironment.get_execution_environment()
    monkeypatch.setenv(CLIENT_CONFIG_ENV, json.dumps({"no.such.key": "1"}))
    with pytest.raises(ConfigurationError, match="no.such.key"):
        StreamExecutionEnvironment.get_execution_environment()


def test_detached_needs_ray_not_the_local_executor(monkeypatch):
    monkeypatch.delenv(CLIENT_CONFIG_ENV, raising=False)
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("execution.target", "local")
        .set_string("execution.attached", "false"))
    env.from_collection([1]).print()
    with pytest.raises(ConfigurationError, match="execution.attached=false needs "
                                                 "execution.target=ray"):
        env.execute()


def test_python_m_flowray_cli_is_the_command():
    import subprocess

    p = subprocess.run([sys.executable, "-m", "flowray.cli", "--help"], capture_output=True,
                       text=True, env=dict(os.environ), timeout=60)
    assert p.returncode == 0 and "savepoint" in p.stdout and "checkpoints" in p.stdout


def test_list_info_and_ui_name_the_web_ui(monkeypatch):
    import webbrowser

    from flowray.runtime.execution import jobs as jobs_module
    running = dict(JOBS[1], web_url="http://127.0.0.1:8082", rest_token="t0k")
    monkeypatch.setattr(cli, "_jobs", lambda address: [dict(JOBS[0]), running])
    monkeypatch.setattr(jobs_module, "attach", lambda job, address=None: None)
    listed = CliRunner().invoke(main, ["list"]).stdout.splitlines()
    assert listed[0].endswith("WEB UI") and listed[1].endswith("http://127.0.0.1:8082")
    info = CliRunner().invoke(main, ["info", "wc#2"]).stdout
    assert "Web UI:            http://127.0.0.1:8082" in info
    assert "REST token:        t0k" in info
    opened = []

    class Browser:
        def open(self, url):
            opened.append(url)

    monkeypatch.setattr(webbrowser, "get", lambda: Browser())
    result = CliRunner().invoke(main, ["ui", "wc#2"])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["http://127.0.0.1:8082",
                                          "REST token (write endpoints): t0k"]
    assert opened == ["http://127.0.0.1:8082"]
    CliRunner().invoke(main, ["ui", "--no-browser", "wc#2"])
    assert opened == ["http://127.0.0.1:8082"]  # not again

    def no_browser():
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert CliRunner().invoke(main, ["ui", "wc#2"]).exit_code == 0  # the URL is printed
    ended = CliRunner().invoke(main, ["ui", "4f2a"])
    assert ended.exit_code != 0 and "has no web UI: it has ended" in ended.output


def test_history_serves_archived_jobs_until_interrupted(tmp_path):
    """``flowray history`` in a real process: it prints its URL, serves the archive's job at
    Flink's paths and the web UI's page, finds a job archived after it started, and ends
    on Ctrl-C (SIGINT)."""
    import dataclasses
    import signal
    import subprocess
    import urllib.request

    from flowray.runtime.rest.history import write_job_archive
    from flowray.testing import wait_until
    from tests.unit.rest.test_flink_shapes import sample_job

    first = dataclasses.replace(sample_job(), job_id="1" * 32, job_name="first",
                                state="FINISHED", end_ms=9_000)
    write_job_archive(str(tmp_path), first)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowray.cli", "history", "--port", "0", "--archive-dir",
         str(tmp_path), "-D", "historyserver.archive.fs.refresh-interval=100 ms"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "1 archived job(s)" in line, (line, proc.stderr.read() if proc.poll() else "")
        url = line.rsplit(" at ", 1)[1].strip()

        def get(path):
            with urllib.request.urlopen(url + path, timeout=10) as resp:
                return resp.read()
        assert b"/app.js" in get("/")
        assert json.loads(get(f"/jobs/{first.job_id}/plan"))["plan"]["name"] == "first"
        write_job_archive(str(tmp_path), dataclasses.replace(first, job_id="2" * 32,
                                                             job_name="second"))
        wait_until(lambda: len(json.loads(get("/jobs/overview"))["jobs"]) == 2, 30,
                   "the second archive served")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


def test_info_explains_each_restart():
    from flowray.cli.tables import format_job_info
    job = {"job_id": "j1", "job_name": "wc", "status": "RUNNING", "restarts": 1,
           "restart_events": [{"time_ms": 0, "failure": "task 'Map (1/2)' failed: "
                               "ValueError: boom",
                               "decision": "restarting 3 of 3 tasks in 100 ms (fixed-delay)"}]}
    text = format_job_info(job, now_ms=0)
    assert text.splitlines()[-2:] == [
        "Restarts:",
        "  -  task 'Map (1/2)' failed: ValueError: boom; restarting 3 of 3 tasks in 100 ms "
        "(fixed-delay)"]


# -- what Ray's submission client logs -------------------------------------------------------
def test_rays_notice_of_an_excluded_pycache_is_dropped_and_its_other_warnings_kept(
        tmp_path, monkeypatch):
    """A program's folder nearly always holds ``__pycache__``: Ray's one-time notice that it
    is not uploaded would be the first line of every ``flowray run``."""
    import logging

    from ray._private.runtime_env import working_dir as ray_working_dir

    from flowray.runtime.execution import job_submission

    (tmp_path / "__pycache__").mkdir()
    monkeypatch.setattr(ray_working_dir, "log_once", lambda key: True)  # every time, here
    notices = logging.getLogger("ray._private.runtime_env.working_dir")
    seen, uploaded = [], []

    class Seen(logging.Handler):   # (Ray's loggers do not propagate to the root's)
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    def upload() -> None:
        ray_working_dir.upload_working_dir_if_needed(
            {"working_dir": str(tmp_path)}, include_gitignore=False,
            upload_fn=lambda path, excludes, is_file=False: uploaded.append(path))

    handler = Seen(logging.WARNING)
    notices.addHandler(handler)
    notices.removeFilter(job_submission._DEFAULT_EXCLUDE_NOTICE)  # as if never submitted
    try:
        upload()   # the notice as Ray gives it (so that the check below can fail)
        assert any("'__pycache__' is now ignored" in m for m in seen), seen
        seen.clear()
        job_submission.quiet_submission_logs()
        job_submission.quiet_submission_logs()   # idempotent: one filter
        upload()
        notices.warning("another warning of Ray's")
        assert seen == ["another warning of Ray's"]
        assert uploaded == [str(tmp_path)] * 2
    finally:
        notices.removeHandler(handler)
        notices.removeFilter(job_submission._DEFAULT_EXCLUDE_NOTICE)
