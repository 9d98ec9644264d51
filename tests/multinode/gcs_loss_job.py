"""Run by tests/multinode/test_gcs_loss.py in a process of its own: a 3-node Ray cluster on
this machine with GCS fault tolerance (Ray's documented setup: the GCS keeps its tables in
an external Redis, ``RAY_REDIS_ADDRESS``), a keyed exactly-once job spread over the nodes,
and the head's GCS server killed mid-job and started again. Prints one JSON line with
what happened."""

import json
import os
import sys
import tempfile
import uuid

import ray
from ray.cluster_utils import Cluster

from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.job_directory import list_jobs
from flowray.testing import FaultInjector, wait_until
from tests.multinode.node_loss_job import (
    N,
    exactly_once,
    per_key,
    release,
    start_spread_keyed_job,
)
from tests.support.servers import RedisServer


def main(work: str) -> dict:
    redis = RedisServer(os.path.join(work, "redis")).start()
    # read by the head's GCS server when the cluster starts (and when it starts again)
    os.environ["RAY_REDIS_ADDRESS"] = redis.address
    os.environ["RAY_external_storage_namespace"] = uuid.uuid4().hex
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False,
                 include_dashboard=False)
        cluster.wait_for_nodes()
        return _run(cluster, work)
    finally:
        ray.shutdown()
        cluster.shutdown()
        redis.close()


def _run(cluster, work: str) -> dict:
    client, sink, by_node, placements, job_work = start_spread_keyed_job(
        work, "gcs-loss", cluster.worker_nodes)
    committed_before = len(sink.committed())
    checkpoints_before = client.get_checkpoint_stats()["counts"]["completed"]
    cluster.head_node.kill_gcs_server()
    # while the GCS is down, the tasks go on: their channels and the job master's calls
    # to them do not go through it
    cluster.head_node.start_gcs_server()

    def completed() -> int:
        try:
            return client.get_checkpoint_stats()["counts"]["completed"]
        except Exception:  # noqa: BLE001 - the master may be reconnecting to the GCS
            return -1
    wait_until(lambda: completed() >= checkpoints_before + 3 or
               client.get_job_status().is_globally_terminal_state(), 180,
               "checkpoints completing after the GCS came back")
    checkpoints_after = completed()
    # what needs the GCS's tables: the job found by name (named actors), and a task
    # failure recovered (new actors created on the nodes the GCS knows)
    listed = [j["job_id"] for j in list_jobs()]
    FaultInjector(client).kill_random_task()
    release(job_work)  # the sources held until now: the job could not end before the kill
    result = client.wait()
    got = sorted(sink.committed())
    return {"nodes_with_tasks": len(by_node), "placements": placements,
            "committed_before_gcs_loss": committed_before,
            "checkpoints_before_gcs_loss": checkpoints_before,
            "checkpoints_after_gcs_restart": checkpoints_after,
            "job_listed_after_gcs_restart": client.get_job_id() in listed,
            "status": result.outcome.status.value,
            "restarts": result.outcome.restarts,
            "job_master_restarts": result.outcome.job_master_restarts,
            "exactly_once": exactly_once(got), "records": len(got), "expected": N,
            "pending": len(sink.pending()), "per_key": per_key(got)}

if __name__ == "__main__":
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    print("RESULT " + json.dumps(main(work)), flush=True)
