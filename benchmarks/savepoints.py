"""Savepoints against checkpoints of the same keyed state, on the heap and on RocksDB.

1,000,000 keys of value state in one subtask owning all 128 key groups. For each backend
the same state is written as a task writes it -- ``snapshot`` (synchronous part) then
``writer.write`` (asynchronous part):

* a checkpoint: the heap backend's full snapshot; RocksDB's first incremental checkpoint
  (every SST file uploaded to the job's shared folder);
* a savepoint: ``snapshot(savepoint=True)`` into a savepoint directory, always the
  portable full format whatever the backend (what lets a savepoint change backend); for
  RocksDB twice: ``flowray-keyed-v3`` (raw entries in chunks, the current writer) and
  ``savepoint v2`` (the writer before v3: entry by entry, keys decoded).

Then each is restored into fresh backends of the same kind: at the same parallelism (one
subtask, all key groups) and rescaled to parallelism 2 (two subtasks, each reading what
overlaps its half of the key groups; the time is both restores one after the other); a
RocksDB savepoint also into the heap (changing backend). Every restore is checked: all
keys present, a sample of values equal. Bytes are the files on disk. Medians over rounds;
backends and savepoint variants alternate their order from round to round. The table
reports ratios to the checkpoint of the same backend, and v3 to v2.

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
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.runtime.checkpoint.savepoints import SavepointStorage
from flowray.runtime.checkpoint.storage import FsCheckpointStorage
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend

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


def write(backend: Any, savepoint: bool, root: str,
          format_version: Optional[int] = None) -> Dict[str, Any]:
    """Snapshot and write; time, bytes on disk, handle, reader. ``format_version``: the
    RocksDB full-snapshot writer's (2: the writer before v3)."""
    if savepoint:
        storage: Any = SavepointStorage(os.path.join(root, f"savepoint-v{format_version}"))
        where = storage.job_root
    else:
        storage = FsCheckpointStorage(os.path.join(root, "checkpoints"), "job")
        where = storage.job_root
    gc.collect()
    t0 = time.perf_counter()
    writer = backend.snapshot(1, savepoint=savepoint)
    if format_version is not None:
        writer.format_version = format_version
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


#: what each backend writes: (row name, savepoint, RocksDB full-snapshot format version)
VARIANTS: Dict[str, List[Tuple[str, bool, Optional[int]]]] = {
    "heap": [("checkpoint", False, None), ("savepoint", True, None)],
    "rocksdb": [("checkpoint", False, None), ("savepoint v2", True, 2),
                ("savepoint", True, 3)],
}


def run(n_keys: int, rounds: int, seed: int) -> List[Dict[str, Any]]:
    """``rounds`` rounds; each loads every backend and writes and restores each of its
    variants, in an order that alternates from round to round."""
    rows: List[Dict[str, Any]] = []
    rng = random.Random(seed)
    for r in range(rounds):
        kinds = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        for kind in kinds:
            root = tempfile.mkdtemp(prefix=f"flowray-bench-savepoints-{kind}-")
            try:
                backend = make_backend(kind, KeyGroupRange(0, MAXP - 1),
                                       os.path.join(root, "live"))
                expected = load(backend, n_keys)
                probe = rng.sample(sorted(expected), 1000)
                variants = VARIANTS[kind]
                # the checkpoint first (the incremental one is RocksDB's first), then the
                # savepoints, their order alternating
                variants = variants[:1] + (variants[1:] if r % 2 == 0 else variants[:0:-1])
                for name, savepoint, version in variants:
                    result = write(backend, savepoint, root, version)
                    same = restore(kind, result["handle"], result["read"], 1, root,
                                   expected, probe)
                    rescaled = restore(kind, result["handle"], result["read"], 2, root,
                                       expected, probe)
                    # a RocksDB savepoint restored into the heap (changing backend)
                    to_heap = (restore("heap", result["handle"], result["read"], 1, root,
                                       expected, probe)
                               if savepoint and kind == "rocksdb" else float("nan"))
                    rows.append({"backend": kind, "kind": name, "take_s": result["seconds"],
                                 "bytes": result["bytes"], "restore_s": same,
                                 "rescale_s": rescaled, "heap_s": to_heap})
                backend.dispose()
            finally:
                shutil.rmtree(root, ignore_errors=True)
    return rows


_FIELDS = ("take_s", "bytes", "restore_s", "rescale_s", "heap_s")


def _ratios(m: Dict[str, float], base: Dict[str, float]) -> str:
    return " / ".join(f"{m[k] / base[k]:.2f}x" for k in _FIELDS if base[k] == base[k])


def table(rows: List[Dict[str, Any]], n_keys: int, rounds: int) -> str:
    lines = [f"savepoints vs checkpoints, {n_keys:,} keys of value state, one subtask, "
             f"median of {rounds} round(s); RocksDB 'savepoint v2' is the writer before v3 "
             "(key by key), 'savepoint' the current one",
             f"{'backend':<9}{'kind':<14}{'take':>9}{'bytes':>11}{'restore p=1':>13}"
             f"{'restore p=2':>13}{'into heap':>11}   ratios take / bytes / restore / "
             "rescale (/ into heap)"]
    merged: Dict[tuple, Dict[str, List[float]]] = {}
    for r in rows:
        into = merged.setdefault((r["backend"], r["kind"]), {k: [] for k in _FIELDS})
        for k in _FIELDS:
            into[k].append(r[k])
    med = {key: {k: sorted(v)[len(v) // 2] for k, v in vals.items()}
           for key, vals in merged.items()}
    for kind in BACKENDS:
        base = med[(kind, "checkpoint")]
        for what, _, _ in VARIANTS[kind]:
            m = med[(kind, what)]
            ratios = "" if what == "checkpoint" else f"   vs checkpoint {_ratios(m, base)}"
            if (kind, what) == ("rocksdb", "savepoint"):
                ratios += f"; vs v2 {_ratios(m, med[(kind, 'savepoint v2')])}"
            lines.append((
                f"{kind:<9}{what:<14}{m['take_s']:>7.2f} s{m['bytes'] / 1e6:>8.1f} MB"
                f"{m['restore_s']:>11.2f} s{m['rescale_s']:>11.2f} s"
                + (f"{m['heap_s']:>9.2f} s" if m["heap_s"] == m["heap_s"] else " " * 11)
                + ratios).rstrip())
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = run(args.keys, args.rounds, args.seed)
    print(table(rows, args.keys, args.rounds))


if __name__ == "__main__":
    main()
