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


def endless_numbers_through(mapper, name, **settings):
    """A new environment (on Ray; ``settings``: configuration keys and values) with a job
    that never ends by itself: numbers -> ``mapper`` (named ``name``, its own task) -> a
    sink doing nothing; with a slow ``mapper``, the source is back-pressured. Parallelism 1.
    """
    from flowray.common import WatermarkStrategy
    from flowray.datastream.connectors import NumberSequenceSource
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(settings))
    env.set_parallelism(1)
    (env.from_source(NumberSequenceSource(0, 10**9), WatermarkStrategy.no_watermarks(),
                     "numbers")
     .disable_chaining().map(mapper).name(name).disable_chaining().add_sink(lambda v: None))
    return env
