"""Savepoints against checkpoints of the same keyed state, on the heap and on RocksDB.

1,000,000 keys of value state in one subtask owning all 128 key groups. For each backend
the same state is written twice, as a task writes it -- ``snapshot`` (synchronous part)
then ``writer.write`` (asynchronous part):

* a checkpoint: the heap backend's full snapshot; RocksDB's first incremental checkpoint
  (every SST file uploaded to the job's shared folder);
* a savepoint: ``snapshot(savepoint=True)`` into a savepoint directory, always the
  portable full format whatever the backend (what lets a savepoint change backend).

Then each is restored twice into fresh backends: at the same parallelism (one subtask,
all key groups) and rescaled to parallelism 2 (two subtasks, each reading what overlaps
its half of the key groups; the time is both restores one after the other). Every
restore is checked: all keys present, a sample of values equal. Bytes are the files on
disk. The table reports times relative to the checkpoint of the same backend.

    python benchmarks/savepoints.py [--keys 1000000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.runtime.checkpoint.savepoints import SavepointStorage  # noqa: E402
from flowray.runtime.checkpoint.storage import FsCheckpointStorage  # noqa: E402
from flowray.runtime.graph.execution_graph import SubtaskId  # noqa: E402
from flowray.state.descriptors import ValueStateDescriptor  # noqa: E402
from flowray.state.heap_backend import HeapKeyedStateBackend  # noqa: E402
from flowray.state.key_groups import (  # noqa: E402
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend  # noqa: E402

MAXP = 128
SUBTASK = SubtaskId("sum", 0)
BACKENDS = ("heap", "rocksdb")


def make_backend(kind: str, key_groups: KeyGroupRange, workdir: str) -> Any:
    if kind == "heap":
        return HeapKeyedStateBackend(key_groups, MAXP)
    return RocksDBKeyedStateBackend(key_groups, MAXP, workdir, incremental=True)


def load(backend: Any, n_keys: int) -> Dict[str, int]:
    state = backend.get_partitioned_state(ValueStateDescriptor("v"))
    expected = {}
    for i in range(n_keys):
        key = f"key-{i}"
        backend.set_current_key(key)
        state.update(i)
        expected[key] = i
    return expected


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def write(backend: Any, savepoint: bool, root: str) -> Dict[str, Any]:
    """Snapshot and write; time, bytes on disk, handle, reader."""
    if savepoint:
        storage: Any = SavepointStorage(os.path.join(root, "savepoint"))
        where = storage.job_root
    else:
        storage = FsCheckpointStorage(os.path.join(root, "checkpoints"), "job")
        where = storage.job_root
    gc.collect()
    t0 = time.perf_counter()
    writer = backend.snapshot(1, savepoint=savepoint)
    handle = writer.write(storage.write_file, storage.task_state_path(1, SUBTASK, "keyed"))
    if not savepoint:
        backend.notify_checkpoint_complete(1)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "bytes": dir_bytes(where), "handle": handle,
            "read": storage.read_file}


def restore(kind: str, handle: Any, read: Callable[[str], bytes], parallelism: int,
            workdir: str, expected: Dict[str, int], probe: List[str]) -> float:
    """Restore into ``parallelism`` fresh backends one after the other; seconds; checked."""
    total, keys = 0.0, 0
    found: Dict[str, Any] = {}
    for index in range(parallelism):
        kgr = compute_key_group_range_for_operator_index(MAXP, parallelism, index)
        backend = make_backend(kind, kgr, os.path.join(workdir, f"restore-{index}"))
        try:
            gc.collect()
            t0 = time.perf_counter()
            backend.restore([handle], read, claimed=False)
            total += time.perf_counter() - t0
            keys += sum(1 for _ in backend.get_keys("v"))
            state = backend.get_partitioned_state(ValueStateDescriptor("v"))
            for key in probe:
                if assign_to_key_group(key, MAXP) in kgr:
                    backend.set_current_key(key)
                    found[key] = state.value()
        finally:
            backend.dispose()
    if len(found) != len(probe):
        raise AssertionError(f"{kind}: {len(probe) - len(found)} probed keys not found")
    if keys != len(expected):
        raise AssertionError(f"{kind}: restored {keys} keys at parallelism {parallelism}, "
                             f"expected {len(expected)}")
    for key, value in found.items():
        if value != expected[key]:
            raise AssertionError(f"{kind}: {key} restored as {value}, expected "
                                 f"{expected[key]}")
    return total


def run(n_keys: int, rounds: int, seed: int) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    rng = random.Random(seed)
    for kind in BACKENDS:
        for _ in range(rounds):
            root = tempfile.mkdtemp(prefix=f"flowray-bench-savepoints-{kind}-")
            try:
                backend = make_backend(kind, KeyGroupRange(0, MAXP - 1),
                                       os.path.join(root, "live"))
                expected = load(backend, n_keys)
                probe = rng.sample(sorted(expected), 1000)
                for savepoint in (False, True):
                    result = write(backend, savepoint, root)
                    same = restore(kind, result["handle"], result["read"], 1, root,
                                   expected, probe)
                    rescaled = restore(kind, result["handle"], result["read"], 2, root,
                                       expected, probe)
                    rows.append({"backend": kind, "kind": "savepoint" if savepoint
                                 else "checkpoint", "take_s": result["seconds"],
                                 "bytes": result["bytes"], "restore_s": same,
                                 "rescale_s": rescaled})
                backend.dispose()
            finally:
                shutil.rmtree(root, ignore_errors=True)
    return rows


def table(rows: List[Dict[str, Any]], n_keys: int) -> str:
    lines = [f"savepoints vs checkpoints, {n_keys:,} keys of value state, one subtask "
             "(times relative to the checkpoint of the same backend)",
             f"{'backend':<9}{'kind':<12}{'take':>10}{'bytes':>12}{'restore p=1':>14}"
             f"{'restore p=2':>14}"]
    merged: Dict[tuple, Dict[str, float]] = {}
    for r in rows:  # median over rounds
        merged.setdefault((r["backend"], r["kind"]), {k: [] for k in
                                                       ("take_s", "bytes", "restore_s",
                                                        "rescale_s")})
        for k in ("take_s", "bytes", "restore_s", "rescale_s"):
            merged[(r["backend"], r["kind"])][k].append(r[k])
    med = {key: {k: sorted(v)[len(v) // 2] for k, v in vals.items()}
           for key, vals in merged.items()}
    for kind in BACKENDS:
        base = med[(kind, "checkpoint")]
        for what in ("checkpoint", "savepoint"):
            m = med[(kind, what)]
            lines.append(
                f"{kind:<9}{what:<12}{m['take_s']:>8.2f} s{m['bytes'] / 1e6:>9.1f} MB"
                f"{m['restore_s']:>12.2f} s{m['rescale_s']:>12.2f} s"
                + ("" if what == "checkpoint" else
                   f"   ratio take {m['take_s'] / base['take_s']:.2f}x, bytes "
                   f"{m['bytes'] / base['bytes']:.2f}x, restore "
                   f"{m['restore_s'] / base['restore_s']:.2f}x, rescale "
                   f"{m['rescale_s'] / base['rescale_s']:.2f}x"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = run(args.keys, args.rounds, args.seed)
    print(table(rows, args.keys))


if __name__ == "__main__":
    main()
