"""How long a job takes to start: the wall time from ``execute()`` to the first record at
the sink, for a 4-task job on a warm local Ray (started, and one job run, before timing),
with where the time goes, from the job master's trace.

    source (p=1) -> map (p=2, rebalance) -> sink (p=1): 4 tasks

Phases: ``submit`` (execute() called -> job master's constructor runs: the driver builds
the graphs and Ray starts the master's process), ``plan`` (-> the first task is
deployed), ``actors`` (-> the last task actor's address is back: the task processes
started), ``wire`` (-> the last task was told to run), ``first record`` (-> the sink got
its first record). Medians of ``--rounds`` runs; every run's output is checked.

    python benchmarks/job_start.py [--rounds 7] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flowray import Configuration, StreamExecutionEnvironment
from flowray.datastream.connectors import Sink, SinkWriter

RECORDS = 1000
PHASES = ("submit", "plan", "actors", "wire", "first record")


class _FirstRecordWriter(SinkWriter):
    def __init__(self, path: str) -> None:
        self.path, self.first, self.count = path, None, 0

    def write(self, element):
        self.write_batch([element])

    def write_batch(self, elements):
        if self.first is None:
            self.first = time.time()
            with open(self.path + ".first", "w") as f:   # the driver waits for it
                f.write(repr(self.first))
        self.count += len(elements)

    def flush(self, end_of_input):
        if end_of_input:
            with open(self.path, "w") as f:
                json.dump({"first": self.first, "count": self.count}, f)


class FirstRecordSink(Sink):
    default_name = "First Record Sink"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context):
        return _FirstRecordWriter(os.path.join(self.folder, f"{context.subtask_index}.json"))


def _slow_double(x: int) -> int:
    """1 ms a record: the job runs on for about a second after its first record, while
    the driver reads the job master's trace."""
    time.sleep(0.001)
    return x * 2


def run_once() -> Dict[str, float]:
    folder = tempfile.mkdtemp(prefix="flowray-bench-start-")
    try:
        env = StreamExecutionEnvironment.get_execution_environment(Configuration())
        (env.from_collection(list(range(RECORDS))).rebalance().map(_slow_double)
            .set_parallelism(2).sink_to(FirstRecordSink(folder)).set_parallelism(1))
        t0 = time.time()
        client = env.execute_async("bench-job-start")
        import ray
        master = client.job_master_actor()
        while not any(n.endswith(".first") for n in os.listdir(folder)):
            time.sleep(0.002)
        trace = ray.get(master.recovery_trace.remote(), timeout=30)  # while it runs
        client.wait(timeout_s=120)
        end = time.time()
        outs = [json.load(open(os.path.join(folder, n))) for n in os.listdir(folder)
                if n.endswith(".json")]
        if sum(o["count"] for o in outs) != RECORDS:
            raise SystemExit(f"the sink counted {sum(o['count'] for o in outs)} records, "
                             f"not {RECORDS}")
        first = min(o["first"] for o in outs if o["first"] is not None)
        at = {}
        for t, event, _ in trace:
            at.setdefault(event, []).append(t)
        # (a revision without the master's own mark: its start counts as "submit + plan")
        marks = [t0, min(at.get("master", at["deploy"])), min(at["deploy"]), max(at["address"]),
                 max(at["run"]), first]
        out = {name: b - a for name, a, b in zip(PHASES, marks, marks[1:])}
        out["to first record"] = first - t0
        out["to the end"] = end - t0
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_MEASURE = r"""
import json, sys
sys.path.insert(0, {bench!r})
from job_start import measure
print("RESULT " + json.dumps(measure({rounds})))
"""


def measure(rounds: int) -> Dict[str, List[float]]:
    import logging
    logging.basicConfig(level=logging.WARNING)
    from flowray.runtime.execution.cluster import ensure_ray
    ensure_ray(Configuration())
    run_once()  # warm: Ray's worker pool, the OS's file cache
    runs: Dict[str, List[float]] = {}
    for _ in range(rounds):
        for k, v in run_once().items():
            runs.setdefault(k, []).append(v)
    return runs


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--before", default=None, help="also measure this git revision")
    ap.add_argument("--json", default="benchmarks/results/job_start.json")
    args = ap.parse_args(argv)
    results = {"this tree": measure(args.rounds)}
    if args.before:
        from _revision import env_for, export_revision
        work = tempfile.mkdtemp(prefix="flowray-bench-start-rev-")
        try:
            site = export_revision(args.before, work)
            code = _MEASURE.format(bench=os.path.dirname(os.path.abspath(__file__)),
                                   rounds=args.rounds)
            proc = subprocess.run([sys.executable, "-c", code], env=env_for(site),
                                  capture_output=True, text=True, cwd=tempfile.gettempdir(),
                                  timeout=1800)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                raise SystemExit(f"the --before run failed:\n{proc.stderr[-3000:]}")
            results[args.before] = json.loads(lines[-1][len("RESULT "):])
        finally:
            shutil.rmtree(work, ignore_errors=True)
    names = list(results)
    print(f"\njob start, 4 tasks, warm local Ray; medians of {args.rounds} runs (seconds)\n")
    print(f"{'phase':<18}" + "".join(f"{n:>14}" for n in names))
    for phase in (*PHASES, "to first record", "to the end"):
        row = f"{phase:<18}"
        for n in names:
            v = results[n].get(phase)
            row += f"{statistics.median(v):>14.3f}" if v else f"{'-':>14}"
        print(row)
    med = statistics.median(results["this tree"]["to first record"])
    print(f"\ngoal: execute() to the first record <= 1 s: {med:.2f} s: "
          f"{'met' if med <= 1.0 else 'NOT MET'}")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rounds": args.rounds, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
