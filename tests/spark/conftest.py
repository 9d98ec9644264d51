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
    from flowray.testing import wait_until
    wait_until(lambda: not java_processes(), 60, "Spark's Java processes to exit")


def java_processes():
    """Live Java processes of Spark or RayDP (zombies waiting to be reaped excluded)."""
    out = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    lines = [line.split(None, 1) for line in out.splitlines()[1:] if line.strip()]
    return [args for stat, *rest in lines if not stat.startswith("Z")
            for args in rest if "java" in args.split(None, 1)[0]
            and ("spark" in args or "raydp" in args)]
