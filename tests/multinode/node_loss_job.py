"""Run by tests/multinode/test_node_loss.py in a process of its own: a 3-node Ray cluster on
this machine (``ray.cluster_utils.Cluster``), a keyed exactly-once job spread over the
nodes, and a worker node removed mid-job. Prints one JSON line with what happened."""

import json
import os
import sys
import tempfile
from collections import defaultdict
from functools import partial

import ray
from ray.cluster_utils import Cluster

from flowray import Configuration, StreamExecutionEnvironment, WatermarkStrategy
from flowray.datastream import JobExecutionError, RuntimeExecutionMode
from flowray.runtime.execution.cluster import NAMESPACE
from flowray.runtime.execution.storage_reach import StorageNotSharedError
from flowray.testing import (
    PAUSE,
    WAIT_UNTIL,
    RecordOpens,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)

KEYS, N = 5, 3_000


def exactly_once(committed) -> bool:
    """Running sums per key, whatever order the source subtasks interleave in: each key
    has exactly its records' count of distinct sums, ending at its total."""
    by_key = defaultdict(list)
    for key, total in committed:
        by_key[key].append(total)
    for key in range(KEYS):
        sums = by_key.get(key, [])
        mine = [i + 1 for i in range(N) if i % KEYS == key]
        if len(sums) != len(mine) or len(set(sums)) != len(sums) or max(sums) != sum(mine):
            return False
    return set(by_key) == set(range(KEYS))


def per_key(committed) -> dict:
    """For a failure message: per key, (records, distinct sums, last sum, expected)."""
    by_key = defaultdict(list)
    for key, total in committed:
        by_key[key].append(total)
    return {str(k): (len(v), len(set(v)), max(v), sum(i + 1 for i in range(N) if i % KEYS == k))
            for k, v in sorted(by_key.items())}


def refuses_node_local_checkpoints(work: str) -> str:
    """On several nodes a plain checkpoint path not declared shared fails at submission."""
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        # tasks in processes of their own: where Ray places each is what is tested
        "flowray.task-actor-pool.size": 0,
        "execution.checkpointing.dir": os.path.join(work, "local-chk")}))
    env.enable_checkpointing(1000)
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    try:
        env.execute("refused")
    except StorageNotSharedError as e:
        return str(e)
    return ""


class WaitForFile:
    """A map that holds its first record until ``path`` exists, then passes records on."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.released = False

    def __call__(self, x):
        import time
        while not self.released:
            self.released = os.path.exists(self.path)
            if not self.released:
                time.sleep(0.01)
        return x


def task_nodes(client) -> dict:
    """Actor name -> node id of the job's running task actors."""
    nodes = {}
    for name in client.task_actor_names().values():
        actor = ray.get_actor(name, namespace=NAMESPACE)
        nodes[name] = ray.get(actor.address.remote(), timeout=30)["node_id"]
    return nodes


def batch_node_loss(cluster, work: str, attempts: int = 4) -> dict:
    """BATCH, three stages over blocking partitions on shared storage: once the first
    stage finished (its partitions written), a node running second-stage tasks is
    removed; the lost tasks run again elsewhere, read the partitions as they are (the
    producers do not run again) and the final counts are committed once each.

    Ray places the task actors: when no second-stage task landed on a node that can be
    removed (not the head, not the job master's), the job is let finish and run again."""
    spare = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    for attempt in range(attempts):
        outcome = _batch_attempt(cluster, os.path.join(work, f"batch-{attempt}"), spare)
        if outcome["victim_consumers"] or attempt == attempts - 1:
            outcome["attempts"] = attempt + 1
            return outcome


def _batch_attempt(cluster, work: str, spare) -> dict:
    os.makedirs(work, exist_ok=True)
    go = os.path.join(work, "batch-go")
    runs = os.path.join(work, "producer-runs.txt")
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        # tasks in processes of their own: where Ray places each is what is tested
        "flowray.task-actor-pool.size": 0,
        "flowray.blocking-partitions.dir": os.path.join(work, "partitions"),
        "flowray.storage.local-paths-shared": "true",  # one machine: one disk
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 10,
        "restart-strategy.fixed-delay.delay": "500 ms"}))
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(3)
    sink = TransactionalTestingSink(os.path.join(work, "batch-out"))
    words = [f"w{i % 7}" for i in range(7_000)]
    (env.from_collection(words).set_parallelism(1)
        .map(RecordOpens(runs)).name("producer")
        .map(lambda w: (w, 1))
        .key_by(lambda t: t[0])
        .map(WaitForFile(go)).name("consumer")  # holds stage 2 until the node is gone
        .key_by(lambda t: t[0]).sum(1)
        .sink_to(sink))
    client = env.execute_async("batch-node-loss")
    wait_until(lambda: any("/consumer/" in n for n in client.task_actor_names().values()),
               180, "the second stage to start")
    nodes = task_nodes(client)
    master_node = client.get_job_info()["node_id"]
    consumers = {n: node for n, node in nodes.items() if "/consumer/" in n}
    workers = [w for w in cluster.worker_nodes if w.node_id != master_node]
    victim = next((w for w in workers if w.node_id in consumers.values()), None)
    if victim is not None:
        cluster.remove_node(victim)
    open(go, "w").close()
    result = client.wait()
    final = {}
    for word, count in sink.committed():
        final[word] = max(final.get(word, 0), count)
    return {"victim_consumers": sum(1 for v in consumers.values()
                                    if victim is not None and v == victim.node_id),
            "master_node_is_head": master_node == cluster.head_node.node_id,
            "spare_used": spare.node_id in set(nodes.values()),
            "restarts": result.outcome.restarts,
            "producer_runs": sorted(open(runs).read().split()),
            "counts_right": final == {f"w{i}": 1_000 for i in range(7)},
            "committed": len(sink.committed())}


def start_keyed_job(work: str, name: str):
    """The exactly-once keyed job both multinode tests run (parallelism 3, checkpoints
    every 200 ms, about 6 s of input per source subtask): its client and its sink.

    Each source subtask waits a third of the way through its share until the file
    :func:`release_file` names exists (checkpoints go on meanwhile): the job cannot end
    before the test has done its damage, however slow the machine."""
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        # tasks in processes of their own: where Ray places each is what is tested
        "flowray.task-actor-pool.size": 0,
        "execution.checkpointing.dir": os.path.join(work, "chk"),
        "flowray.storage.local-paths-shared": "true",  # one machine: one disk
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 10,
        "restart-strategy.fixed-delay.delay": "500 ms"}))
    env.enable_checkpointing(200)
    env.set_parallelism(3)
    items = []
    for i in range(N):
        if i % 50 == 0:
            items.append(PAUSE(0.1))  # about 6 s of input per source subtask
        if i % 1_000 == 500:  # one in each source subtask's third of the items
            items.append(WAIT_UNTIL(partial(os.path.exists, release_file(work))))
        items.append(i)
    sink = TransactionalTestingSink(os.path.join(work, "out"))
    (env.from_source(TestingSource(items, ledger_dir=os.path.join(work, "faults")),
                     WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda i: (i % KEYS, i + 1))  # positive: running sums are distinct
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink))
    return env.execute_async(name), sink


def release_file(work: str) -> str:
    """The file whose creation lets the sources of :func:`start_keyed_job` read on."""
    return os.path.join(work, "release")


def release(work: str) -> None:
    """Let the sources of the job started in ``work`` read on past their wait."""
    open(release_file(work), "w").close()


def start_spread_keyed_job(work: str, name: str, workers, attempts: int = 4):
    """:func:`start_keyed_job` until Ray placed its six tasks on two nodes or more, some
    on a worker node (the head cannot be removed; now and then Ray placed all on one
    node). Returns its client, its sink, subtask keys by node id, how many placements it
    took, and its work folder (for :func:`release`)."""
    for attempt in range(attempts):
        again = f"-{attempt}" if attempt else ""
        job_work = os.path.join(work, name + again)
        client, sink = start_keyed_job(job_work, name + again)
        wait_until(lambda: len(sink.committed()) > N // 10, 120, "committed output")
        by_node = defaultdict(list)
        for key, node in task_nodes(client).items():
            by_node[node].append(key)
        if len(by_node) >= 2 and any(by_node.get(w.node_id) for w in workers):
            return client, sink, by_node, attempt + 1, job_work
        client.cancel()
        try:
            client.wait()
        except JobExecutionError:  # cancelled on purpose
            pass
    raise AssertionError(f"Ray placed every task of {name!r} on one node, or none on "
                         f"a worker node, {attempts} times")


def main(work: str) -> dict:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False,
             include_dashboard=False)
    cluster.wait_for_nodes()
    refused = refuses_node_local_checkpoints(work)
    client, sink, by_node, placements, job_work = start_spread_keyed_job(work, "node-loss",
                                                                         workers)
    master_node = client.get_job_info()["node_id"]
    candidates = [w for w in workers if by_node.get(w.node_id)]
    victim = next((w for w in candidates if w.node_id != master_node), None) or candidates[0]
    committed_before = len(sink.committed())
    cluster.remove_node(victim)
    release(job_work)
    result = client.wait()
    got = sorted(sink.committed())
    return {"nodes_with_tasks": len(by_node), "tasks_on_victim": len(by_node[victim.node_id]),
            "victim_had_master": victim.node_id == master_node,
            "committed_before_loss": committed_before,
            "restarts": result.outcome.restarts,
            "job_master_restarts": result.outcome.job_master_restarts,
            "exactly_once": exactly_once(got), "records": len(got), "expected": N,
            "pending": len(sink.pending()), "per_key": per_key(got),
            "refused_local_checkpoints": refused, "placements": placements,
            "batch": batch_node_loss(cluster, work)}


if __name__ == "__main__":
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    print("RESULT " + json.dumps(main(work)), flush=True)
    ray.shutdown()
