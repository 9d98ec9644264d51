"""Execution environments for tests that build or run jobs without Ray."""

from flowray import Configuration, StreamExecutionEnvironment
from flowray.runtime.graph.stream_graph import build_stream_graph


def local_env(parallelism=None, **settings):
    """A new :class:`StreamExecutionEnvironment` whose jobs run on the in-process
    LocalExecutor (threads and in-process channels); ``settings`` are more configuration
    keys and values, ``parallelism`` the default parallelism if given."""
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"execution.target": "local", **settings}))
    if parallelism is not None:
        env.set_parallelism(parallelism)
    return env


def stream_graph_of(env, job_name="test"):
    """The StreamGraph of the program built on ``env`` so far, with its parallelism
    settings (the graphs are built, never run)."""
    return build_stream_graph(env._transformations, job_name, env.get_parallelism(),
                              env.get_max_parallelism())
