"""What authenticated channels cost: the keyed running sum of ``throughput.py`` on this
tree against the same job on an earlier revision (default: the commit before channels
were authenticated), both transports, parallelism 1 and 2, in one invocation.

Each measurement runs in a fresh process; the earlier revision is exported with
``git archive`` into a folder laid out as the installed package and put first on
``PYTHONPATH`` (the Ray workers that process starts inherit it). Rounds alternate
before/after so that drift on the machine hits both; the best round of each counts.

    python benchmarks/channel_auth.py [--before 5e6d50a] [--records 2000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

from _revision import ROOT, env_for, export_revision

_MEASURE = r"""
import json, sys
sys.path.insert(0, {bench!r})
import ray
from throughput import run_flowray
from flowray.runtime.execution.cluster import ensure_ray
from flowray.common.configuration import Configuration
ensure_ray(Configuration())

@ray.remote(num_cpus=0)
def where():
    import flowray.runtime.network.socket_transport as m
    return m.__file__

r = run_flowray({n}, {keys}, {p}, {transport!r}, 1000)
print("RESULT " + json.dumps({{"rps": {n} / r["running_s"], "count": r["count"],
                              "worker_module": ray.get(where.remote())}}))
"""


def measure(site: Optional[str], n: int, keys: int, p: int, transport: str) -> Dict:
    env = env_for(site)
    code = _MEASURE.format(bench=os.path.join(ROOT, "benchmarks"), n=n, keys=keys, p=p,
                           transport=transport)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, cwd=tempfile.gettempdir(), timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"measurement failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    if result["count"] != n:
        raise RuntimeError(f"wrong record count {result['count']} (expected {n})")
    expected_root = site if site is not None else ROOT
    if not result["worker_module"].startswith(expected_root):
        raise RuntimeError(f"workers ran {result['worker_module']}, not the code under test")
    return result


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="5e6d50a",
                    help="revision to compare with (default: before authenticated channels)")
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transports", default="socket,ray")
    ap.add_argument("--json", default="benchmarks/results/channel_auth.json")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="flowray-before-")
    try:
        site = export_revision(args.before, work)
        configs = [(t, p) for t in args.transports.split(",") for p in (1, 2)]
        best: Dict[str, float] = {}
        for _ in range(args.rounds):
            for t, p in configs:
                for label, where in (("before", site), ("after", None)):
                    rps = measure(where, args.records, args.keys, p, t)["rps"]
                    key = f"{label} {t} p={p}"
                    best[key] = max(best.get(key, 0.0), rps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nkeyed running sum, {args.records:,} records, {args.keys:,} keys; best of "
          f"{args.rounds} rounds; before = {args.before}, after = this tree\n")
    print(f"{'transport':<11}{'p':>3}{'before rec/s':>15}{'after rec/s':>15}{'after/before':>14}")
    rows = []
    for t, p in configs:
        b, a = best[f"before {t} p={p}"], best[f"after {t} p={p}"]
        rows.append({"transport": t, "parallelism": p, "before_rps": b, "after_rps": a,
                     "ratio": a / b})
        print(f"{t:<11}{p:>3}{b:>15,.0f}{a:>15,.0f}{a / b:>13.2f}x")
    os.makedirs(os.path.dirname(os.path.join(ROOT, args.json)), exist_ok=True)
    with open(os.path.join(ROOT, args.json), "w") as f:
        json.dump({"records": args.records, "keys": args.keys, "before": args.before,
                   "rounds": args.rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
