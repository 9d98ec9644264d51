import logging
import os

import pytest

# keep Ray's unix socket paths short and its output quiet
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_session():
    """One shared local Ray for every test that needs it (never a cluster per test)."""
    import ray
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, namespace="flowray",
                 logging_level=logging.WARNING)
    yield
    ray.shutdown()


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
