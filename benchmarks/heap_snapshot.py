"""Heap keyed-state snapshots: the old way (serialize everything in the synchronous part)
vs copy-on-write (the synchronous part only holds the key-group dicts; the asynchronous
part serializes), in one invocation. No Ray.

One subtask owning all 128 key groups holds ``N`` keys of value state (str keys, int
values, as benchmarks/state_backends.py) for each ``N`` of ``--keys``. Per round and way
(the ways alternate): the synchronous part is timed (the task is blocked during it); then
the asynchronous part runs in a thread (pickle + write to a file in a temp folder) while
the task thread keeps updating keys in batches of 1,000 records, as a running task would:
we report how long the asynchronous part took, the longest batch during it (how long the
task thread waited for the GIL or for the copies copy-on-write makes), and the update rate
during it relative to the rate with no snapshot pending. The old way's bytes are those of
the code before copy-on-write (kept here, callable); the new way's file is checked byte for
byte against it in round 1, and restored and compared once per size.

Part 2, the per-record cost copy-on-write adds to the heap fast path of
``KeyedStream.reduce`` (``KeyedReduceOperator.process_batch``, running sum of ``(key, x)``
tuples, ``--hot-keys`` keys, batches of 1,000 records with their key groups, as the network
hands them over): the loop before copy-on-write (copied here) vs the current one with no
snapshot pending vs the current one while a snapshot is pending (the first write into each
key group copies its dict), alternating, medians.

    python benchmarks/heap_snapshot.py [--keys 100000 1000000] [--rounds 5]
        [--hot-records 1000000] [--hot-keys 10000]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray.common.clock import ManualClock
from flowray.operators.base import OperatorContext, Output, ProcessingTimeService
from flowray.operators.keyed import KeyedReduceOperator, field_aggregator
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.key_groups import KeyGroupAssigner
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key
from flowray.state.full_snapshot import FORMAT_V1, dumps_state
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange

MAXP = 128
RANGE = KeyGroupRange(0, MAXP - 1)
BATCH = 1000
DESCRIPTOR = ValueStateDescriptor("sum")


def old_way_sync(backend: HeapKeyedStateBackend) -> bytes:
    """The synchronous part before copy-on-write (state/heap_backend.py at 1b9b29a):
    every non-empty key group serialized now (no TTL purges in this benchmark)."""
    groups: Dict[int, Dict[str, Dict[Any, Any]]] = {}
    for name, table in backend._tables.items():
        start = table.key_group_range.start
        for offset, m in enumerate(table.maps):
            if m:
                groups.setdefault(start + offset, {})[name] = m
    kinds = {name: t.kind.value for name, t in backend._tables.items()}
    return dumps_state({"format": FORMAT_V1, "kinds": kinds, "groups": groups})


def file_writer(folder: str) -> Callable[[str, bytes], int]:
    def write_file(path: str, data: bytes) -> int:
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        return len(data)
    return write_file


def load(n: int) -> Tuple[HeapKeyedStateBackend, List[str]]:
    backend = HeapKeyedStateBackend(RANGE, MAXP)
    state = backend.get_partitioned_state(DESCRIPTOR)
    keys = [f"key-{i}" for i in range(n)]
    for i, k in enumerate(keys):
        backend.set_current_key(k)
        state.update(i)
    return backend, keys


def update_batches(backend: HeapKeyedStateBackend, keys: List[str], rng: random.Random,
                   done: threading.Event, min_batches: int) -> Tuple[int, float, float]:
    """Update random keys in batches until ``done`` is set (and at least ``min_batches``
    ran); (records, seconds, longest batch in seconds)."""
    state = backend.get_partitioned_state(DESCRIPTOR)
    set_key, value, update = backend.set_current_key, state.value, state.update
    records, longest, batches = 0, 0.0, 0
    t0 = time.perf_counter()
    while not done.is_set() or batches < min_batches:
        picked = rng.choices(keys, k=BATCH)
        b0 = time.perf_counter()
        for k in picked:
            set_key(k)
            update(value() + 1)
        longest = max(longest, time.perf_counter() - b0)
        records += BATCH
        batches += 1
    return records, time.perf_counter() - t0, longest


def baseline_rate(backend: HeapKeyedStateBackend, keys: List[str], rng: random.Random) -> float:
    done = threading.Event()
    done.set()
    records, seconds, _ = update_batches(backend, keys, rng, done, min_batches=200)
    return records / seconds


def one_round(way: str, backend: HeapKeyedStateBackend, keys: List[str], folder: str,
              cid: int, rng: random.Random) -> Dict[str, Any]:
    write_file = file_writer(folder)
    path = f"chk-{cid}/{way}.keyed"
    gc.collect()
    t0 = time.perf_counter()
    if way == "old":
        data = old_way_sync(backend)
    else:
        writer = backend.snapshot(cid)
    sync_s = time.perf_counter() - t0

    done = threading.Event()
    timing: Dict[str, float] = {}

    def asynchronous() -> None:
        a0 = time.perf_counter()
        try:
            if way == "old":
                write_file(path, data)
            else:
                writer.write(write_file, path)
        finally:
            timing["async_s"] = time.perf_counter() - a0
            done.set()

    t = threading.Thread(target=asynchronous)
    t.start()
    records, seconds, longest = update_batches(backend, keys, rng, done, min_batches=1)
    t.join()
    if way == "new":
        assert backend.pending_snapshots() == 0
    return {"sync_ms": sync_s * 1000, "async_ms": timing["async_s"] * 1000,
            "longest_batch_ms": longest * 1000, "rate": records / seconds, "path": path}


def check_restore(folder: str, path: str, expected_entries: int) -> None:
    restored = HeapKeyedStateBackend(RANGE, MAXP)
    with_root = os.path.join(folder, path)

    class Handle:
        pass

    h = Handle()
    h.path = with_root

    def read(p: str) -> bytes:
        with open(p, "rb") as f:
            return f.read()

    restored.restore([h], read)
    got = sum(1 for _ in restored.get_keys(DESCRIPTOR.name))
    assert got == expected_entries, (got, expected_entries)
    restored.dispose()


def bench_size(n: int, rounds: int, folder: str) -> Dict[str, Any]:
    backend, keys = load(n)
    rng = random.Random(n)
    base = statistics.median(baseline_rate(backend, keys, rng) for _ in range(3))
    rows: Dict[str, List[Dict[str, Any]]] = {"old": [], "new": []}
    cid = 0
    for r in range(rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for way in order:
            cid += 1
            rows[way].append(one_round(way, backend, keys, folder, cid, rng))
        if r == 0:  # the same state in both files? (no update between their sync parts
            # is not guaranteed, so compare a fresh pair taken back to back)
            cid += 1
            old = old_way_sync(backend)
            new_path = f"chk-{cid}/check.keyed"
            backend.snapshot(cid).write(file_writer(folder), new_path)
            with open(os.path.join(folder, new_path), "rb") as f:
                assert f.read() == old, "the copy-on-write file differs from the old one"
            check_restore(folder, new_path, n)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
    backend.dispose()
    out = {"keys": n, "baseline_rate": base}
    for way, rs in rows.items():
        out[way] = {k: statistics.median(r[k] for r in rs)
                    for k in ("sync_ms", "async_ms", "longest_batch_ms", "rate")}
    return out


def report(results: List[Dict[str, Any]], rounds: int) -> None:
    print(f"\nheap snapshot of N keys (value state, str keys, int values, 128 key groups), "
          f"medians of {rounds} alternating rounds")
    print(f"{'keys':>10} {'way':<15}{'sync ms':>9}{'vs old':>8}{'async ms':>10}"
          f"{'vs old':>8}{'longest batch ms':>18}{'rate vs idle':>14}{'task ms lost':>14}"
          f"{'vs old':>8}")
    for res in results:
        old, new = res["old"], res["new"]

        def lost(row: Dict[str, float]) -> float:
            rate = min(row["rate"] / res["baseline_rate"], 1.0)
            return row["sync_ms"] + row["async_ms"] * (1.0 - rate)

        for way, label, row in (("old", "old (eager)", old), ("new", "copy-on-write", new)):
            print(f"{res['keys']:>10,} {label:<15}{row['sync_ms']:>9.2f}"
                  f"{row['sync_ms'] / old['sync_ms']:>7.3f}x{row['async_ms']:>10.1f}"
                  f"{row['async_ms'] / old['async_ms']:>7.2f}x{row['longest_batch_ms']:>18.1f}"
                  f"{row['rate'] / res['baseline_rate']:>13.2f}x{lost(row):>14.1f}"
                  f"{lost(row) / lost(old):>7.2f}x")
    print("\nsync: the task is blocked (snapshot()); async: pickle + file write in a thread "
          "while the task thread updates keys in batches of 1,000; longest batch: the "
          "longest such batch during the async part (GIL waits, copy-on-write copies); "
          "rate vs idle: updates/s during the async part over updates/s with no snapshot "
          "pending; task ms lost: sync + async x (1 - rate vs idle), the processing time a "
          "checkpoint costs the task. The new file equals the old one byte for byte "
          "(checked).")


# ---------------------------------------------------------------------------------------
# part 2: the keyed reduce hot path
# ---------------------------------------------------------------------------------------

_MISSING = object()


def old_reduce_loop(op: KeyedReduceOperator, records: List[Any], key_groups: List[int],
                    timestamps: Any = None) -> None:
    """``KeyedReduceOperator.process_batch``'s heap path before copy-on-write (1b9b29a),
    key groups given."""
    key_of, reduce, maps, start = op._key_of, op._reduce, op._table.maps, op._start
    out: List[Any] = []
    append = out.append
    missing, plain = _MISSING, PLAIN_KEY_TYPES
    for r, kg in zip(records, key_groups):
        k = key_of(r)
        m = maps[kg - start]
        cur = m.get(k, missing)
        if cur is missing and type(k) not in plain:
            k = canonical_key(k)
            cur = m.get(k, missing)
        if cur is not missing:
            r = reduce(cur, r)
        m[k] = r
        append(r)
    op.output.emit(out, timestamps)


class _Discard(Output):
    def emit(self, records: List[Any], timestamps: Any = None) -> None:
        pass


def reduce_operator() -> Tuple[KeyedReduceOperator, HeapKeyedStateBackend]:
    backend = HeapKeyedStateBackend(RANGE, MAXP)
    op = KeyedReduceOperator(field_aggregator("sum", 1), lambda t: t[0])
    ctx = OperatorContext(
        task_name="bench", subtask_index=0, parallelism=1, max_parallelism=MAXP,
        key_group_range=RANGE, processing_time_service=ProcessingTimeService(ManualClock(0)),
        keyed_backend=backend, batch_execution=False, auto_watermark_interval_ms=200)
    op.setup(ctx, _Discard(), {})
    op.open()
    return op, backend


def bench_hot_path(n_records: int, n_keys: int, rounds: int) -> Dict[str, float]:
    """records/s per variant (median over rounds)."""
    assign = KeyGroupAssigner(MAXP)
    keys = [f"k{i}" for i in range(n_keys)]
    groups = {k: assign(k) for k in keys}
    rng = random.Random(7)
    batches = []
    for start in range(0, n_records, BATCH):
        recs = [(k, 1) for k in rng.choices(keys, k=min(BATCH, n_records - start))]
        batches.append((recs, [groups[r[0]] for r in recs]))
    op, backend = reduce_operator()
    op.process_batch(*batches[0])  # every key present, as in a running job
    for k in keys:
        op.process_batch([(k, 1)], [groups[k]])
    rates: Dict[str, List[float]] = {"old": [], "new": [], "new, snapshot pending": []}
    variants = list(rates)
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            writer = backend.snapshot(r) if v == "new, snapshot pending" else None
            run = (lambda recs, kgs: old_reduce_loop(op, recs, kgs)) if v == "old" \
                else op.process_batch
            gc.collect()
            t0 = time.perf_counter()
            for recs, kgs in batches:
                run(recs, kgs)
            rates[v].append(n_records / (time.perf_counter() - t0))
            if writer is not None:
                writer.frozen.release()  # as a finished write does
    backend.dispose()
    return {v: statistics.median(rs) for v, rs in rates.items()}


def report_hot_path(rates: Dict[str, float], n_records: int, n_keys: int, rounds: int) -> None:
    print(f"\nKeyedReduceOperator heap path, running sum, {n_records:,} records, {n_keys:,} "
          f"keys, batches of {BATCH:,}, medians of {rounds} alternating rounds")
    print(f"{'loop':<26}{'records/s':>12}{'vs old':>9}")
    for v, rate in rates.items():
        print(f"{v:<26}{rate:>12,.0f}{rate / rates['old']:>8.3f}x")


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hot-records", type=int, default=1_000_000)
    ap.add_argument("--hot-keys", type=int, default=10_000)
    ap.add_argument("--skip-snapshots", action="store_true")
    args = ap.parse_args(argv)
    if not args.skip_snapshots:
        folder = tempfile.mkdtemp(prefix="flowray-bench-heap-snapshot-")
        try:
            results = [bench_size(n, args.rounds, folder) for n in args.keys]
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        report(results, args.rounds)
    hot_rounds = max(args.rounds, 5)
    report_hot_path(bench_hot_path(args.hot_records, args.hot_keys, hot_rounds),
                    args.hot_records, args.hot_keys, hot_rounds)


if __name__ == "__main__":
    main()
