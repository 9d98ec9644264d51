"""A script that builds transformations and never executes them is warned at exit; one that
executes them, fails, or only shows its plan is not; code outside ``__main__`` never is."""

import subprocess
import sys

import pytest

from flowray.datastream.execute_reminder import never_executed_message
from tests.support.environments import local_env

BUILD = """
from flowray import Configuration, StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment(
    Configuration({"execution.target": "local"}))
env.from_collection([1, 2]).map(lambda x: x + 1).print()
"""


@pytest.mark.parametrize("ending, warned", [
    ("", True),
    ("env.execute()", False),
    ("print(env.get_execution_plan() != '')", False),
    ("raise ValueError('the program failed')", False),
])
def test_a_script_that_never_executes_is_warned_at_exit(tmp_path, ending, warned):
    script = tmp_path / "job.py"
    script.write_text(BUILD + ending + "\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    reminder = "never ran them: call env.execute()"
    assert (reminder in p.stderr) is warned, p.stderr
    if warned:
        assert p.returncode == 0
        assert "flowray: the program defined 3 transformation(s) but never ran them" in p.stderr


def test_environments_outside_main_are_not_watched():
    env = local_env()
    env.from_collection([1]).print()
    from flowray.datastream import execute_reminder

    # a test module is not __main__: nothing is registered for this environment...
    assert not execute_reminder._created_by_main(skip_frames=0)
    assert never_executed_message(env) is not None   # ...which would have been warned
