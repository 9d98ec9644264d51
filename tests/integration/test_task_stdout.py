"""What a user function prints inside a task actor reaches the client's stdout
(``flowray.task-stdout-to-client``, on by default), every line before the job's result."""

import pytest

from flowray import StreamExecutionEnvironment


def _loud(x):
    print(f"saw {x}")
    print("part", end="")
    print("ial")
    return x


@pytest.mark.parametrize("forward", [True, False])
def test_prints_of_user_functions_reach_the_client(ray_session, capfd, forward):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("flowray.task-stdout-to-client", str(forward).lower())
    env.set_parallelism(2)
    env.from_collection(list(range(6))).map(_loud).name("loud").map(lambda x: x)
    capfd.readouterr()
    env.execute("stdout")
    lines = capfd.readouterr().out.splitlines()
    printed = sorted(line for line in lines if line.startswith("saw "))
    if forward:
        assert printed == [f"saw {i}" for i in range(6)]
        assert lines.count("partial") == 6
    else:
        assert printed == []
