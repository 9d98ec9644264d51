"""One shared local Ray for all integration tests (never a cluster per test)."""

import logging

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session():
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, namespace="flowray",
                 logging_level=logging.WARNING)
    yield
    ray.shutdown()


@pytest.fixture
def env(ray_session):
    from flowray import StreamExecutionEnvironment
    return StreamExecutionEnvironment.get_execution_environment()
