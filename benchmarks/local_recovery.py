"""Task-local recovery: restoring one subtask's RocksDB keyed state from the copy kept on
its node vs from checkpoint storage, same state, same run, full and incremental
checkpoints (no Ray: the backend's restore is what differs; a job adds the same fixed
costs to both).

Checkpoint storage here is the local disk (``FsCheckpointStorage`` on a temp folder), the
cheapest storage there is: with S3 or HDFS reading the files back costs more and the local
copy's advantage grows. Each restore is checked (key count and a sample of values).

    python benchmarks/local_recovery.py [--keys 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.runtime.checkpoint.storage import FsCheckpointStorage  # noqa: E402
from flowray.state.descriptors import ValueStateDescriptor  # noqa: E402
from flowray.state.key_groups import KeyGroupRange  # noqa: E402
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend  # noqa: E402
from flowray.state.rocksdb.local_recovery import TaskLocalStateStore  # noqa: E402

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


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="benchmarks/results/local_recovery.json")
    args = ap.parse_args(argv)
    rows = run(args.keys, args.rounds)
    print(f"\nRestore of one subtask's RocksDB state ({args.keys:,} keys), median of "
          f"{args.rounds} alternating rounds")
    print("| checkpoint | from checkpoint storage | from the local copy | local vs storage |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['checkpoint']} | {r['storage_s'] * 1000:,.0f} ms | "
              f"{r['local_s'] * 1000:,.0f} ms | {r['speedup']:.1f}x faster |")
    if args.json:
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
