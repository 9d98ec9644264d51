"""Task-local recovery: restoring RocksDB keyed state from the copy kept on the task's
node vs from checkpoint storage, same state, same run, full and incremental checkpoints.

* restore: one subtask's backend restored from a checkpoint of ``--keys`` keys (no Ray;
  only the restore differs). Each restore is checked (key count and sample values).
* job: a keyed running sum on Ray (p=1, checkpoints every 200 ms) builds ``--job-keys``
  keys, holds, and its keyed task is killed; measured from the kill to the first new
  committed output, with local recovery on and off (runs alternate). Output is checked
  exactly once.

Checkpoint storage here is the local disk (``FsCheckpointStorage`` on a temp folder), the
cheapest storage there is: with S3 or HDFS, reading the files back costs more and the local
copy's advantage grows.

    python benchmarks/local_recovery.py [--keys 1000000] [--job-keys 1000000] [--rounds 3]
                                        [--skip-job]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.runtime.checkpoint.storage import FsCheckpointStorage
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.rocksdb.local_recovery import TaskLocalStateStore

MAXP = 128
RANGE = KeyGroupRange(0, MAXP - 1)


def build_checkpoint(workdir: str, keys: int, incremental: bool) -> tuple:
    """A backend holding ``keys`` keys, checkpointed once; (handle, storage, local dir)."""
    local_dir = os.path.join(workdir, "local")
    backend = RocksDBKeyedStateBackend(RANGE, MAXP, os.path.join(workdir, "first"),
                                       incremental=incremental,
                                       local_store=TaskLocalStateStore(local_dir))
    state = backend.get_partitioned_state(ValueStateDescriptor("total"))
    for i in range(keys):
        backend.set_current_key(f"user-{i}")
        state.update(i)
    storage = FsCheckpointStorage(os.path.join(workdir, "checkpoints"), "job")
    path = f"{storage.checkpoint_dir(1)}/sum-0.keyed"
    handle = backend.snapshot(1).write(storage.write_file, path)
    backend.notify_checkpoint_complete(1)
    backend.dispose()  # as a killed task: the local copy stays
    return handle, storage, local_dir


def restore_once(workdir: str, handle: Any, storage: FsCheckpointStorage, local_dir: str,
                 local: bool, keys: int, n: int) -> float:
    backend = RocksDBKeyedStateBackend(
        RANGE, MAXP, os.path.join(workdir, f"restore-{n}"), incremental=handle is not None
        and hasattr(handle, "shared"),
        local_store=TaskLocalStateStore(local_dir) if local else None)
    t0 = time.perf_counter()
    backend.restore([handle], storage.read_file)
    state = backend.get_partitioned_state(ValueStateDescriptor("total"))
    elapsed = time.perf_counter() - t0
    assert backend.restored_from == ("local" if local else "storage"), backend.restored_from
    for i in (0, keys // 2, keys - 1):
        backend.set_current_key(f"user-{i}")
        assert state.value() == i, (i, state.value())
    assert sum(1 for _ in backend.get_keys("total")) == keys
    backend.dispose()
    return elapsed


def run(keys: int, rounds: int) -> List[Dict[str, Any]]:
    rows = []
    for incremental in (False, True):
        workdir = tempfile.mkdtemp(prefix="flowray-local-recovery-")
        try:
            handle, storage, local_dir = build_checkpoint(workdir, keys, incremental)
            times: Dict[bool, List[float]] = {True: [], False: []}
            n = 0
            for _ in range(rounds):  # alternating
                for local in (False, True):
                    n += 1
                    times[local].append(restore_once(workdir, handle, storage, local_dir,
                                                     local, keys, n))
            remote, local = statistics.median(times[False]), statistics.median(times[True])
            rows.append({"checkpoint": "incremental" if incremental else "full",
                         "keys": keys, "storage_s": remote, "local_s": local,
                         "speedup": remote / local if local else float("inf")})
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return rows


TAIL = 2_000  # records after the kill, ~50 per 50 ms


def run_job(keys: int, incremental: bool, local: bool) -> Dict[str, Any]:
    """One job run; seconds from the kill to the first new committed output."""
    from collections import Counter

    from flowray import Configuration, StreamExecutionEnvironment
    from flowray.common import WatermarkStrategy
    from flowray.testing import (HOLD, PAUSE, FaultInjector, TestingSource,
                                 TransactionalTestingSink)
    from recovery import committed_times

    tmp = tempfile.mkdtemp(prefix="flowray-local-recovery-job-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(Configuration({
            "state.backend.type": "rocksdb",
            "execution.checkpointing.incremental": incremental,
            "state.backend.rocksdb.localdir": os.path.join(tmp, "rocksdb"),
            "execution.checkpointing.local-backup.enabled": local,
            "execution.checkpointing.dir": os.path.join(tmp, "chk"),
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "0 ms"}))
        env.enable_checkpointing(200)
        env.set_parallelism(1)
        items: List[Any] = [(f"user-{i}", 1) for i in range(keys)] + [HOLD()]
        for j in range(TAIL):
            if j % 50 == 0:
                items.append(PAUSE(0.05))
            items.append((f"user-{j}", 1))
        hold_at = keys
        out = os.path.join(tmp, "out")
        sink = TransactionalTestingSink(out)
        source = TestingSource(items, ledger_dir=os.path.join(tmp, "f"))
        (env.from_source(source, WatermarkStrategy.no_watermarks(), "users").uid("users")
         .key_by(lambda t: t[0]).sum(1).name("running sum").uid("sum")
         .sink_to(sink).uid("sink"))
        client = env.execute_async("local-recovery")

        def completed() -> int:
            return client.get_checkpoint_stats()["counts"].get("completed", 0)

        deadline = time.monotonic() + 600
        while hold_at not in source.fired_markers():
            if time.monotonic() > deadline or client.get_job_status().is_globally_terminal_state():
                raise RuntimeError("the job did not reach its HOLD()")
            time.sleep(0.05)
        target = completed() + 2  # a checkpoint taken entirely after the state was built
        while completed() < target:
            time.sleep(0.05)
        seen: Dict[str, float] = {}
        committed_times(out, seen)
        injector = FaultInjector(client)
        victim = injector.subtasks("running sum")[0]
        killed_at = time.monotonic()
        injector.kill(victim)
        before = set(seen)
        recovered_at = None
        while time.monotonic() < killed_at + 300:
            committed_times(out, seen)
            new = [t for n, t in seen.items() if n not in before]
            if new:
                recovered_at = min(new)
                break
            time.sleep(0.005)
        result = client.wait(timeout_s=600)
        want = Counter((f"user-{i}", 1) for i in range(keys))
        want.update((f"user-{j}", 2) for j in range(TAIL))
        exact = Counter(sink.committed()) == want
        restore = result.outcome.checkpoint_stats.get("latest_restore") or {}
        sink.cleanup()
        return {"recovery_s": (recovered_at - killed_at) if recovered_at else float("nan"),
                "restore_ms": restore.get("restore_ms"), "exactly_once": exact,
                "restarts": result.outcome.restarts}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def job_part(keys: int, rounds: int) -> List[Dict[str, Any]]:
    import ray
    logging.getLogger("flowray").setLevel(logging.WARNING)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    rows = []
    try:
        for incremental in (False, True):
            times: Dict[bool, List[float]] = {False: [], True: []}
            exact = True
            for _ in range(rounds):
                for local in (False, True):
                    r = run_job(keys, incremental, local)
                    print(f"  {'incremental' if incremental else 'full'} checkpoints, local "
                          f"recovery {'on' if local else 'off'}: kill -> output "
                          f"{r['recovery_s'] * 1000:,.0f} ms, exactly once: "
                          f"{r['exactly_once']}", flush=True)
                    times[local].append(r["recovery_s"])
                    exact = exact and r["exactly_once"] and r["restarts"] >= 1
            off, on = statistics.median(times[False]), statistics.median(times[True])
            rows.append({"checkpoint": "incremental" if incremental else "full",
                         "keys": keys, "storage_s": off, "local_s": on,
                         "speedup": off / on if on else float("inf"), "exactly_once": exact})
    finally:
        ray.shutdown()
    return rows


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--job-keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-job", action="store_true")
    ap.add_argument("--json", default="benchmarks/results/local_recovery.json")
    args = ap.parse_args(argv)
    rows = run(args.keys, args.rounds)
    job_rows = [] if args.skip_job else job_part(args.job_keys, args.rounds)
    print(f"\nRestore of one subtask's RocksDB state ({args.keys:,} keys), median of "
          f"{args.rounds} alternating rounds")
    print("| checkpoint | from checkpoint storage | from the local copy | local vs storage |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['checkpoint']} | {r['storage_s'] * 1000:,.0f} ms | "
              f"{r['local_s'] * 1000:,.0f} ms | {r['speedup']:.1f}x faster |")
    if job_rows:
        print(f"\nKeyed job on Ray ({args.job_keys:,} keys, p=1): kill -> first new committed "
              f"output, median of {args.rounds} alternating rounds")
        print("| checkpoint | local recovery off (storage) | on (local copy) | on vs off | "
              "exactly once |")
        print("|---|---|---|---|---|")
        for r in job_rows:
            print(f"| {r['checkpoint']} | {r['storage_s'] * 1000:,.0f} ms | "
                  f"{r['local_s'] * 1000:,.0f} ms | {r['speedup']:.1f}x faster | "
                  f"{'yes' if r['exactly_once'] else 'NO'} |")
    if args.json:
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"restore": rows, "job": job_rows}, f, indent=2)


if __name__ == "__main__":
    main()
