"""State backends: incremental vs full checkpoints of a large keyed state, and keyed
throughput heap vs RocksDB, in one invocation.

Part 1 (no Ray): 1,000,000 keys of value state in four backends side by side --
RocksDB with incremental checkpoints, RocksDB with full checkpoints (its native format),
RocksDB taking savepoints (the portable format) instead, the heap backend (full snapshots)
-- one subtask owning all 128 key groups. Checkpoint 1 is taken after the
initial load; before every later checkpoint the same randomly chosen 1% of the keys get a
new value in all three backends. Each checkpoint runs as a task runs it: ``snapshot``
(synchronous part), ``writer.write`` to an ``FsCheckpointStorage`` in a temp folder
(asynchronous part), ``notify_checkpoint_complete``. Bytes are those that reached the
storage (file sizes on disk, checked against the handle's ``size``). The previous
``chk-<n>`` folder is deleted after each checkpoint (num-retained 1); shared SST files
stay. At the end the last checkpoint of each backend is restored and compared.

Part 2 (Ray): the keyed running sum of throughput.py / checkpoints.py (source -> map ->
key_by -> sum -> counting sink, exactly-once checkpoint every second) with
``state.backend.type`` hashmap, rocksdb, and rocksdb + ``execution.checkpointing.incremental``, for
each number of keys (``--job-keys``, default 10,000 and 1,000,000) and each parallelism
(``--parallelism``, default 2 and 1); runs alternate over the rounds, every run is checked
against the same per-key sums.

Part 3 (no Ray): ``KeyedReduceOperator`` alone, the same sum over the same keys, on the heap
backend and on RocksDB without and with its write-behind value cache.

    python benchmarks/state_backends.py [--keys 1000000] [--checkpoints 10] [--change 0.01]
        [--records 2000000] [--job-keys 10000 1000000] [--parallelism 2 1] [--rounds 2]
        [--skip-job] [--skip-operator] [--operator-records 1000000]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.runtime.checkpoint.storage import FsCheckpointStorage
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange
from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
from flowray.state.snapshot import IncrementalKeyedStateHandle

MAXP = 128
RANGE = KeyGroupRange(0, MAXP - 1)
SUBTASK = SubtaskId("sum", 0)
MODES = [("rocksdb-incremental", "RocksDB, incremental"),
         ("rocksdb-full", "RocksDB, full"),
         ("rocksdb-savepoint", "RocksDB, savepoints"),
         ("heap-full", "heap, full")]


# ---------------------------------------------------------------------------------------
# part 1: checkpoint size and duration
# ---------------------------------------------------------------------------------------

class CountingStorage:
    """An FsCheckpointStorage whose ``write_file`` remembers what it wrote."""

    def __init__(self, root: str, job_id: str) -> None:
        self.fs = FsCheckpointStorage(root, job_id)
        self.written: List[str] = []

    def write_file(self, path: str, data: bytes) -> int:
        n = self.fs.write_file(path, data)
        self.written.append(path)
        return n

    def take_written_bytes(self) -> tuple:
        """(bytes on disk, files) written since the last call."""
        paths, self.written = self.written, []
        return sum(os.path.getsize(p) for p in paths), len(paths)


def make_backend(mode: str, workdir: str) -> Any:
    if mode == "heap-full":
        return HeapKeyedStateBackend(RANGE, MAXP)
    return RocksDBKeyedStateBackend(RANGE, MAXP, os.path.join(workdir, mode),
                                    incremental=(mode == "rocksdb-incremental"))


def update_keys(backend: Any, keys: List[str], values: List[int]) -> float:
    st = backend.get_partitioned_state(ValueStateDescriptor("v"))
    set_key, update = backend.set_current_key, st.update
    t0 = time.perf_counter()
    for k, v in zip(keys, values):
        set_key(k)
        update(v)
    return time.perf_counter() - t0


def checkpoint(backend: Any, storage: CountingStorage, cid: int,
               savepoint: bool = False) -> Dict[str, Any]:
    gc.collect()
    path = storage.fs.task_state_path(cid, SUBTASK, "keyed")
    t0 = time.perf_counter()
    writer = backend.snapshot(cid, savepoint=savepoint)
    t1 = time.perf_counter()
    handle = writer.write(storage.write_file, path)
    t2 = time.perf_counter()
    backend.notify_checkpoint_complete(cid)
    on_disk, files = storage.take_written_bytes()
    if handle.size != on_disk:
        raise AssertionError(f"checkpoint {cid}: handle.size {handle.size} != "
                             f"{on_disk} bytes written")
    row = {"id": cid, "bytes": on_disk, "files": files, "sync_ms": (t1 - t0) * 1000,
           "async_ms": (t2 - t1) * 1000, "handle": handle}
    if isinstance(handle, IncrementalKeyedStateHandle):
        row["full_size"] = handle.full_size
        row["ssts"] = len(handle.shared)
        row["new_ssts"] = files - len(handle.private)
    else:
        row["full_size"] = handle.size
    if cid > 1:  # num-retained 1: the previous checkpoint's own folder goes
        storage.fs.discard_checkpoint(cid - 1)
    return row


def restore_and_check(mode: str, handle: Any, storage: CountingStorage, workdir: str,
                      expected: Dict[str, int], probe: List[str]) -> bool:
    b = make_backend(mode, os.path.join(workdir, "restore"))
    try:
        b.restore([handle], storage.fs.read_file)
        st = b.get_partitioned_state(ValueStateDescriptor("v"))
        count = sum(1 for _ in b.get_keys("v"))
        ok = count == len(expected)
        for k in probe:
            b.set_current_key(k)
            ok = ok and st.value() == expected[k]
        return ok
    finally:
        b.dispose()


def state_part(n_keys: int, n_checkpoints: int, change: float, seed: int) -> Dict[str, Any]:
    root = tempfile.mkdtemp(prefix="flowray-bench-state-")
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(n_keys)]
    expected = {k: i for i, k in enumerate(keys)}
    backends = {m: make_backend(m, root) for m, _ in MODES}
    storages = {m: CountingStorage(os.path.join(root, "checkpoints"), m) for m, _ in MODES}
    rows: Dict[str, List[dict]] = {m: [] for m, _ in MODES}
    load_s: Dict[str, float] = {}
    update_s: Dict[str, List[float]] = {m: [] for m, _ in MODES}
    try:
        values = list(range(n_keys))
        for m, _ in MODES:
            load_s[m] = update_keys(backends[m], keys, values)
        for m, _ in MODES:
            rows[m].append(checkpoint(backends[m], storages[m], 1, m == "rocksdb-savepoint"))
        n_change = max(1, int(n_keys * change))
        changed_all: List[str] = []
        for cid in range(2, n_checkpoints + 1):
            changed = [keys[i] for i in rng.sample(range(n_keys), n_change)]
            new_values = [cid * n_keys + expected[k] % n_keys for k in changed]
            for k, v in zip(changed, new_values):
                expected[k] = v
            changed_all.extend(changed[:50])
            # alternate the order so no backend always checkpoints first
            order = MODES[cid % len(MODES):] + MODES[:cid % len(MODES)]
            for m, _ in order:
                update_s[m].append(update_keys(backends[m], changed, new_values))
            for m, _ in order:
                rows[m].append(checkpoint(backends[m], storages[m], cid,
                                          m == "rocksdb-savepoint"))
        probe = changed_all[-200:] + rng.sample(keys, 200)
        restored = {m: restore_and_check(m, rows[m][-1]["handle"], storages[m], root,
                                         expected, probe) for m, _ in MODES}
    finally:
        for b in backends.values():
            b.dispose()
        shared = os.path.join(root, "checkpoints", "rocksdb-incremental", "shared")
        shared_bytes = sum(os.path.getsize(os.path.join(shared, f))
                           for f in os.listdir(shared)) if os.path.isdir(shared) else 0
        shutil.rmtree(root, ignore_errors=True)
    for rs in rows.values():
        for r in rs:
            r.pop("handle", None)
    return {"rows": rows, "load_s": load_s, "update_s": update_s, "restored": restored,
            "shared_dir_bytes": shared_bytes}


def med(values: List[float]) -> float:
    return statistics.median(values) if values else float("nan")


def mb(n: float) -> str:
    if n != n:  # nan: no checkpoint
        return "-"
    return f"{n / 1e6:,.2f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} KB"


def report_state(res: Dict[str, Any], n_keys: int, n_checkpoints: int,
                 change: float) -> List[dict]:
    rows = res["rows"]
    print(f"\nkeyed state: {n_keys:,} keys (value state, str keys, int values), "
          f"{n_checkpoints} checkpoints, {change:.0%} of keys changed before each after "
          "the first\n")
    print("per checkpoint, bytes written to the checkpoint storage "
          "(incremental: new SST files / SST files referenced):")
    print(f"{'chk':>4}{'RocksDB incremental':>30}{'RocksDB full':>16}{'savepoint':>14}"
          f"{'heap full':>14}")
    for i in range(n_checkpoints):
        inc, full, sp, heap = (rows[m][i] for m, _ in MODES)
        print(f"{inc['id']:>4}{mb(inc['bytes']):>18} ({inc['new_ssts']:>2}/{inc['ssts']:>2} SST)"
              f"{mb(full['bytes']):>16}{mb(sp['bytes']):>14}{mb(heap['bytes']):>14}")
    base = rows["rocksdb-full"]
    base_bytes = med([r["bytes"] for r in base[1:]])
    base_ms = med([r["sync_ms"] + r["async_ms"] for r in base[1:]])
    print(f"\n{'backend, checkpoints':<24}{'1st ckpt':>12}{'bytes/ckpt p50':>16}"
          f"{'mean':>12}{'max':>12}{'vs full':>9}{'sync p50':>10}{'async p50':>11}"
          f"{'total p50':>11}{'vs full':>9}{'load':>8}{'restore':>9}")
    out = []
    for m, label in MODES:
        rs = rows[m]
        later = rs[1:]
        b = [r["bytes"] for r in later]
        sync = [r["sync_ms"] for r in later]
        asyn = [r["async_ms"] for r in later]
        total = [r["sync_ms"] + r["async_ms"] for r in later]
        row = {"mode": m, "first_bytes": rs[0]["bytes"],
               "first_ms": rs[0]["sync_ms"] + rs[0]["async_ms"],
               "bytes_p50": med(b), "bytes_mean": statistics.mean(b) if b else float("nan"),
               "bytes_max": max(b) if b else float("nan"),
               "bytes_vs_rocksdb_full": med(b) / base_bytes if b else float("nan"),
               "sync_ms_p50": med(sync), "async_ms_p50": med(asyn), "total_ms_p50": med(total),
               "total_vs_rocksdb_full": med(total) / base_ms if total else float("nan"),
               "retained_bytes_last": rs[-1]["full_size"],
               "load_s": res["load_s"][m], "restored_ok": res["restored"][m],
               "checkpoints": [{k: v for k, v in r.items()} for r in rs]}
        out.append(row)
        print(f"{label:<24}{mb(row['first_bytes']):>12}{mb(row['bytes_p50']):>16}"
              f"{mb(row['bytes_mean']):>12}{mb(row['bytes_max']):>12}"
              f"{row['bytes_vs_rocksdb_full']:>8.3f}x{row['sync_ms_p50']:>8.0f}ms"
              f"{row['async_ms_p50']:>9.0f}ms{row['total_ms_p50']:>9.0f}ms"
              f"{row['total_vs_rocksdb_full']:>8.3f}x{row['load_s']:>7.1f}s"
              f"{'  ok' if row['restored_ok'] else '  WRONG':>9}")
    print("\np50/mean/max over checkpoints 2..n; vs full: against RocksDB full checkpoints; "
          "load: writing the initial keys;\nrestore: the last checkpoint restored into a "
          "fresh backend has every key and the latest values.")
    inc = rows["rocksdb-incremental"][-1]
    print(f"incremental: the last checkpoint references {mb(inc['full_size'])} of SST files; "
          f"the shared folder holds {mb(res['shared_dir_bytes'])} (nothing deletes "
          "unreferenced shared files here; the job master does in a job)")
    return out


# ---------------------------------------------------------------------------------------
# part 2: keyed throughput, heap vs RocksDB
# ---------------------------------------------------------------------------------------

JOB_CONFIGS = [("heap (hashmap)", {"state.backend.type": "hashmap"}),
               ("RocksDB, full", {"state.backend.type": "rocksdb"}),
               ("RocksDB, incremental", {"state.backend.type": "rocksdb",
                                         "execution.checkpointing.incremental": True})]


def run_job(n: int, keys: int, backend_conf: Dict[str, Any], interval_ms: int,
            parallelism: int = 2) -> dict:
    """The keyed running sum of checkpoints.py with exactly-once checkpoints, on a backend."""
    from checkpoints import run

    return run(n, keys, "EXACTLY_ONCE", interval_ms,
               extra={**backend_conf, "parallelism.default": parallelism},
               job_name="bench-state-backends")


def job_part(n: int, keys: int, rounds: int, interval_ms: int,
             parallelism: int = 2) -> List[dict]:
    from throughput import expected_sums

    from flowray import Configuration
    from flowray.runtime.execution.cluster import ensure_ray

    ensure_ray(Configuration())
    expected = expected_sums(n, keys)
    results: Dict[str, List[dict]] = {name: [] for name, _ in JOB_CONFIGS}
    for _ in range(rounds):
        for name, conf in JOB_CONFIGS:
            r = run_job(n, keys, conf, interval_ms, parallelism)
            r["correct"] = r["count"] == n and r["sums"] == expected
            results[name].append(r)
    base = med([n / r["running_s"] for r in results[JOB_CONFIGS[0][0]]])
    print(f"\nkeyed running sum, {n:,} records, {keys:,} keys, parallelism {parallelism}, "
          f"exactly-once checkpoint every {interval_ms} ms, {rounds} rounds (median)\n")
    print(f"{'state backend':<24}{'records/s':>12}{'vs heap':>9}{'ckpts':>7}"
          f"{'dur p50':>9}{'sync p50':>10}{'async p50':>11}{'bytes/ckpt':>12}{'correct':>9}")
    rows = []
    for name, conf in JOB_CONFIGS:
        rs = results[name]
        rps = med([n / r["running_s"] for r in rs])
        hist = [h for r in rs for h in r["history"]]
        slowest = lambda f: [max((t.get(f, 0.0) for t in h["tasks"].values()), default=0.0)  # noqa: E731
                             for h in hist]
        row = {"name": name, "config": conf, "keys": keys, "parallelism": parallelism,
               "records_per_s": rps, "vs_heap": rps / base,
               "checkpoints_per_run": len(hist) / len(rs),
               "duration_ms_p50": med([h["duration_ms"] for h in hist]),
               "sync_ms_p50": med(slowest("sync_ms")), "async_ms_p50": med(slowest("async_ms")),
               "state_bytes_p50": med([h["state_size"] for h in hist]),
               "correct": all(r["correct"] for r in rs)}
        rows.append(row)
        ms = lambda v, w, p: f"{v:>{w}.{p}f}" if v == v else f"{'-':>{w}}"  # noqa: E731
        print(f"{name:<24}{rps:>12,.0f}{rps / base:>8.2f}x{row['checkpoints_per_run']:>7.1f}"
              f"{ms(row['duration_ms_p50'], 9, 0)}{ms(row['sync_ms_p50'], 10, 1)}"
              f"{ms(row['async_ms_p50'], 11, 1)}{mb(row['state_bytes_p50']):>12}"
              f"{str(row['correct']):>9}")
    print("\nrecords/s: records / longest task run time; sync/async: slowest task per "
          "checkpoint; bytes/ckpt: bytes the checkpoint wrote (both subtasks)")
    return rows


# ---------------------------------------------------------------------------------------
# part 3: the keyed reduce operator alone (no Ray), heap vs RocksDB
# ---------------------------------------------------------------------------------------

OP_CONFIGS = [("heap", "heap", 0), ("RocksDB, no cache", "rocksdb", 0),
              ("RocksDB, cache 65,536", "rocksdb", 1 << 16)]


def run_operator(kind: str, cache: int, n: int, keys: int, batch: int = 1000) -> float:
    """Records/s of ``KeyedReduceOperator`` (``sum(1)`` of ``(f"k{x % keys}", x)``) fed
    batches of ``batch`` records with their key groups, as a task feeds it."""
    from flowray.common.clock import ManualClock
    from flowray.operators.base import CollectingOutput, OperatorContext, ProcessingTimeService
    from flowray.operators.keyed import KeyedReduceOperator, field_aggregator
    from flowray.state.key_groups import assign_to_key_group

    class Discard(CollectingOutput):
        def emit(self, records: List[Any], timestamps: Any = None) -> None:
            pass

    workdir = tempfile.mkdtemp(prefix="flowray-bench-op-")
    backend = (HeapKeyedStateBackend(RANGE, MAXP) if kind == "heap" else
               RocksDBKeyedStateBackend(RANGE, MAXP, workdir, value_cache_entries=cache))
    ctx = OperatorContext(task_name="sum", subtask_index=0, parallelism=1, max_parallelism=MAXP,
                          key_group_range=RANGE,
                          processing_time_service=ProcessingTimeService(ManualClock(0)),
                          keyed_backend=backend, batch_execution=False,
                          auto_watermark_interval_ms=200)
    op = KeyedReduceOperator(field_aggregator("sum", 1), lambda t: t[0])
    op.setup(ctx, Discard(), {})
    op.open()
    names = [f"k{i}" for i in range(keys)]
    groups = [assign_to_key_group(k, MAXP) for k in names]
    try:
        elapsed = 0.0
        for start in range(0, n, batch):
            xs = range(start, min(n, start + batch))
            records = [(names[x % keys], x) for x in xs]
            kgs = [groups[x % keys] for x in xs]
            t0 = time.perf_counter()
            op.process_batch(records, kgs)
            elapsed += time.perf_counter() - t0
        return n / elapsed
    finally:
        backend.dispose()
        shutil.rmtree(workdir, ignore_errors=True)


def operator_part(n: int, keys: int, rounds: int) -> List[dict]:
    results: Dict[str, List[float]] = {name: [] for name, _, _ in OP_CONFIGS}
    for _ in range(rounds):
        for name, kind, cache in OP_CONFIGS:
            gc.collect()
            results[name].append(run_operator(kind, cache, n, keys))
    base = med(results[OP_CONFIGS[0][0]])
    print(f"\nKeyedReduceOperator alone (sum, no Ray, batches of 1,000), {n:,} records, "
          f"{keys:,} keys, {rounds} rounds (median)\n")
    print(f"{'state backend':<24}{'records/s':>12}{'vs heap':>9}")
    rows = []
    for name, kind, cache in OP_CONFIGS:
        rps = med(results[name])
        rows.append({"name": name, "keys": keys, "cache": cache, "records_per_s": rps,
                     "vs_heap": rps / base})
        print(f"{name:<24}{rps:>12,.0f}{rps / base:>8.2f}x")
    return rows


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys in the state part")
    ap.add_argument("--checkpoints", type=int, default=10)
    ap.add_argument("--change", type=float, default=0.01,
                    help="fraction of keys changed between checkpoints")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--records", type=int, default=2_000_000, help="records in the job part")
    ap.add_argument("--job-keys", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--parallelism", type=int, nargs="+", default=[2, 1],
                    help="parallelism of the job part (each is a table)")
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-state", action="store_true")
    ap.add_argument("--skip-job", action="store_true")
    ap.add_argument("--skip-operator", action="store_true")
    ap.add_argument("--operator-records", type=int, default=1_000_000)
    ap.add_argument("--json", default="benchmarks/results/state_backends.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    out: Dict[str, Any] = {"args": vars(args)}
    ok = True
    if not args.skip_state:
        res = state_part(args.keys, args.checkpoints, args.change, args.seed)
        out["state"] = report_state(res, args.keys, args.checkpoints, args.change)
        ok = ok and all(r["restored_ok"] for r in out["state"])
    if not args.skip_operator:
        out["operator"] = [row for keys in args.job_keys
                           for row in operator_part(max(args.operator_records, 2 * keys), keys,
                                                    args.rounds)]
    if not args.skip_job:
        out["job"] = [row for keys in args.job_keys for p in args.parallelism
                      for row in job_part(args.records, keys, args.rounds, args.interval_ms,
                                          p)]
        ok = ok and all(r["correct"] for r in out["job"])
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    if not ok:
        sys.exit("a restore or a run produced wrong state")


if __name__ == "__main__":
    main()
