import contextlib
import logging
import os
import sys

import pytest

from tests.support.servers import free_port

# keep Ray's unix socket paths short and its output quiet
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@contextlib.contextmanager
def _job_agent_port(port: int):
    """ray.init with the node's job agent on ``port`` (`ray start` has
    --dashboard-agent-listen-port; ray.init has no argument for it): on the default port
    52365 another Ray on this machine would leave this one without a job agent, and Ray's
    Job Submission without a place to run programs."""
    from ray._private import parameter

    original = parameter.RayParams.__init__

    def init(self, *args, **kwargs):
        kwargs.setdefault("dashboard_agent_listen_port", port)
        original(self, *args, **kwargs)
    parameter.RayParams.__init__ = init
    try:
        yield
    finally:
        parameter.RayParams.__init__ = original


@pytest.fixture(scope="session")
def ray_session():
    """One shared local Ray for every test that needs it (never a cluster per test). It has
    a dashboard on a free port, as a cluster of `ray start --head` has: `flowray run`
    submits programs to it through Ray's Job Submission. `python` on its PATH is this
    venv's, as on a cluster whose nodes run in the venv flowray is installed in."""
    import ray
    if not ray.is_initialized():
        os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                              os.environ.get("PATH", "")])
        for attempt in range(3):   # a free port may be taken before Ray binds it
            try:
                with _job_agent_port(free_port()):
                    ray.init(include_dashboard=True, dashboard_port=free_port(),
                             log_to_driver=False, namespace="flowray",
                             logging_level=logging.WARNING)
                break
            except ValueError as e:
                if "already occupied" not in str(e) or attempt == 2:
                    raise
                ray.shutdown()
    yield
    ray.shutdown()


def _job_masters():
    """Names of the running flowray job masters on the test session's Ray."""
    import ray
    from flowray.runtime.execution.cluster import NAMESPACE
    from flowray.runtime.execution.job_directory import MASTER_SUFFIX
    if not ray.is_initialized():
        return set()
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a.get("namespace") == NAMESPACE and a["name"].endswith(MASTER_SUFFIX)]
    return set(names)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, "_report_" + report.when, report)
    return report


@pytest.fixture(autouse=True)
def _stop_jobs_a_failed_test_left(request):
    """A Ray test that fails may leave its jobs running (an assertion before the job's
    end): they would take the next tests' CPU. Their job masters are killed (their tasks
    go with them); jobs that were running before the test are left alone."""
    if "ray_session" not in request.fixturenames:
        yield
        return
    before = _job_masters()
    yield
    report = getattr(request.node, "_report_call", None)
    if report is None or not report.failed:
        return
    import ray
    from flowray.runtime.execution.cluster import NAMESPACE
    for name in _job_masters() - before:
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        except Exception:  # noqa: BLE001 - it ended meanwhile
            pass


@pytest.fixture
def env(ray_session):
    from flowray import StreamExecutionEnvironment
    return StreamExecutionEnvironment.get_execution_environment()


@pytest.fixture(scope="session")
def kafka_broker():
    """One real Kafka broker (KRaft, jars from tools/kafka/pom.xml) per test run, on a free
    loopback port. Tests make their own topics (unique names), so they do not interfere."""
    from tests.support.servers import KafkaBroker
    broker = KafkaBroker().start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def postgres():
    """One real PostgreSQL cluster (initdb in a temp folder, max_prepared_transactions > 0)
    per test run, on a free loopback port. Tests make their own tables."""
    from tests.support.servers import PostgresCluster
    cluster = PostgresCluster().start()
    yield cluster
    cluster.close()
