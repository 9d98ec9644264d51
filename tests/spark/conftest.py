"""One Spark session (RayDP, on the shared local Ray) for every Spark test."""

import subprocess

import pytest


@pytest.fixture(scope="session")
def spark(ray_session, tmp_path_factory):
    from flowray.spark import get_or_create_spark, stop_spark
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = get_or_create_spark({"spark.sql.shuffle.partitions": "2",
                                   "spark.sql.warehouse.dir": str(warehouse)})
    yield session
    stop_spark()
    leftovers = java_processes()
    assert not leftovers, f"Java processes left after Spark stopped: {leftovers}"


def java_processes():
    out = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if "java" in line.split(None, 1)[-1][:200] and not line.startswith("Z")]
