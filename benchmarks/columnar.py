"""The columnar path against the row path and the numpy ceiling: a keyed running sum at
parallelism 1, one invocation, rounds alternating, median of ``--rounds``.

    Arrow tables -> key_by(k) -> running sum of v per key (one output per input) -> sink

* ``numpy ceiling``: the same running sums in one process with numpy alone, on keys
  already coded as integers (no flowray, no channels, no key hashing);
* ``flowray columnar``: ``env.from_arrow(...).key_by("k").sum("v")``: record batches of
  ``--batch-rows`` rows through channels as Arrow IPC, vectorized per batch;
* ``flowray rows``: the same stream as named Rows, ``key_by(lambda r: r.k).sum("v")``.

Every run is checked: the number of outputs and each key's last running sum.

    python benchmarks/columnar.py [--records 5000000] [--keys 10000] [--rounds 3]
                                  [--target local|ray] [--skip-rows]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import tempfile
import time
from typing import Any, Dict, List, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flowray import Configuration, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter


class _Writer(SinkWriter):
    """Counts outputs; keeps each key's last running sum (rows), or the record batches,
    written to an Arrow file at the end and checked by the driver after the job."""

    def __init__(self, path: str) -> None:
        self.path, self.count, self.last, self.batches = path, 0, {}, []

    def write(self, element: Any) -> None:
        self.write_batch([element])

    def write_batch(self, elements: List[Any]) -> None:
        last = self.last
        for e in elements:
            if isinstance(e, pa.RecordBatch):
                self.count += e.num_rows
                self.batches.append(e)
            else:
                self.count += 1
                last[e.k] = e.v

    def flush(self, end_of_input: bool) -> None:
        if end_of_input:
            with open(self.path, "wb") as f:
                pickle.dump((self.count, self.last), f)
            if self.batches:
                with pa.OSFile(self.path + ".arrow", "wb") as f:
                    with pa.ipc.new_file(f, self.batches[0].schema) as w:
                        for b in self.batches:
                            w.write_batch(b)


def _last_per_key(path: str) -> Dict[str, int]:
    """Each key's last running sum in an Arrow file of output batches."""
    table = pa.ipc.open_file(pa.memory_map(path)).read_all().combine_chunks()
    enc = pc.dictionary_encode(table.column("k")).combine_chunks()
    codes = enc.indices.to_numpy()
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(enc.dictionary))) - 1
    vs = table.column("v").to_numpy()[order[ends]]
    return dict(zip(enc.dictionary.to_pylist(), vs.tolist()))


class CheckingSink(Sink):
    accepts_record_batches = True
    default_name = "Checking Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context: Any) -> _Writer:
        return _Writer(os.path.join(self.folder, f"{context.subtask_index}.pkl"))


def make_tables(records: int, keys: int, batch_rows: int) -> Tuple[List[Any], Dict[str, int]]:
    rng = np.random.default_rng(42)
    codes = rng.integers(0, keys, records)
    values = rng.integers(0, 100, records)
    names = np.array([f"u{i}" for i in range(keys)], dtype=object)
    tables = [pa.table({"k": pa.array(names[codes[s:s + batch_rows]], pa.string()),
                        "v": pa.array(values[s:s + batch_rows], pa.int64())})
              for s in range(0, records, batch_rows)]
    totals = np.bincount(codes, weights=values, minlength=keys).astype(np.int64)
    expected = {names[i]: int(totals[i]) for i in range(keys) if (codes == i).any()}
    return tables, expected


def numpy_ceiling(tables: List[Any], keys: int) -> float:
    """Running sums per key with numpy only, keys pre-coded: the vectorized ceiling."""
    names = {f"u{i}": i for i in range(keys)}
    coded = [(np.array([names[k] for k in t.column("k").to_pylist()]),
              t.column("v").to_numpy()) for t in tables]
    state = np.zeros(keys, dtype=np.int64)
    t0 = time.perf_counter()
    for codes, values in coded:
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=keys)
        ends = np.cumsum(counts)
        cs = np.cumsum(values[order])
        before = np.where(ends - counts > 0, cs[np.maximum(ends - counts - 1, 0)], 0)
        running = np.empty_like(cs)
        running[order] = cs + np.repeat(state - before, counts)
        state += np.bincount(codes, weights=values, minlength=keys).astype(np.int64)
    return time.perf_counter() - t0


def run_flowray(tables: List[Any], expected: Dict[str, int], columnar: bool, target: str,
                batch_rows: int) -> float:
    folder = tempfile.mkdtemp(prefix="flowray-columnar-bench-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            Configuration({"execution.target": target, "flowray.progress-interval": "0"}))
        env.set_parallelism(1)
        stream = env.from_arrow(tables, batch_rows=batch_rows)
        if columnar:
            stream.key_by("k").sum("v").sink_to(CheckingSink(folder))
        else:
            stream.to_rows().key_by(lambda r: r.k).sum("v").sink_to(CheckingSink(folder))
        t0 = time.perf_counter()
        env.execute("columnar-bench")
        wall = time.perf_counter() - t0
        count, last = 0, {}
        for name in os.listdir(folder):
            if name.endswith(".arrow"):
                last.update(_last_per_key(os.path.join(folder, name)))
                continue
            with open(os.path.join(folder, name), "rb") as f:
                c, part = pickle.load(f)
            count += c
            last.update(part)
        records = sum(t.num_rows for t in tables)
        if count != records or last != expected:
            raise SystemExit(f"wrong result ({'columnar' if columnar else 'rows'}): {count} "
                             f"of {records} outputs, {sum(last.get(k) != v for k, v in expected.items())}"
                             " keys with a wrong total")
        return wall
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=5_000_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-rows", type=int, default=65536)
    p.add_argument("--target", default="local", choices=["local", "ray"])
    p.add_argument("--skip-rows", action="store_true",
                   help="leave out the (slow) row path")
    args = p.parse_args()
    tables, expected = make_tables(args.records, args.keys, args.batch_rows)
    times: Dict[str, List[float]] = {"ceiling": [], "columnar": [], "rows": []}
    for _ in range(args.rounds):  # alternate, so a slow moment hits every line
        times["ceiling"].append(numpy_ceiling(tables, args.keys))
        times["columnar"].append(run_flowray(tables, expected, True, args.target,
                                             args.batch_rows))
        if not args.skip_rows:
            times["rows"].append(run_flowray(tables, expected, False, args.target,
                                             args.batch_rows))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    print(f"\nkeyed running sum, parallelism 1, {args.records:,} records, {args.keys:,} "
          f"keys, batches of {args.batch_rows:,} rows, target {args.target}, median of "
          f"{args.rounds} rounds; every flowray result checked\n")
    print("| pipeline | records/s | vs numpy ceiling | vs flowray rows |")
    print("|---|---|---|---|")
    labels = [("numpy ceiling (one process, keys pre-coded)", "ceiling"),
              ("flowray columnar: from_arrow -> key_by(\"k\").sum(\"v\")", "columnar"),
              ("flowray rows: key_by(lambda r: r.k).sum(\"v\")", "rows")]
    for label, key in labels:
        if key not in med:
            continue
        vs_rows = f"{med['rows'] / med[key]:.2f}x" if "rows" in med else "-"
        print(f"| {label} | {args.records / med[key]:,.0f} | "
              f"{med['ceiling'] / med[key]:.2f}x | {vs_rows} |")
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, f"columnar-{args.target}.json"), "w") as f:
        json.dump({"records": args.records, "keys": args.keys, "batch_rows": args.batch_rows,
                   "seconds": times}, f, indent=2)


if __name__ == "__main__":
    main()
