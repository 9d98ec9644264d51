"""What TLS costs on the data plane: the keyed running sum of ``throughput.py`` at
parallelism 2 with its channels over unix sockets (the default on one node), over TCP
(``flowray.channel.same-node: tcp``) and over TCP in TLS (``security.ssl.internal.*``, a
throwaway CA made here), in one invocation, rounds alternating, best round of each.

    python benchmarks/tls.py [--records 2000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)

from throughput import run_flowray  # noqa: E402


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="benchmarks/results/tls.json")
    args = ap.parse_args(argv)

    from flowray.common.configuration import Configuration
    from flowray.runtime.execution.cluster import ensure_ray
    from tests.support.certificates import make_ca, make_leaf

    folder = tempfile.mkdtemp(prefix="flowray-tls-bench-")
    ca_path, ca = make_ca(folder)
    configs: Dict[str, Dict[str, str]] = {
        "unix": {},
        "tcp": {"flowray.channel.same-node": "tcp"},
        "tcp + TLS": {"flowray.channel.same-node": "tcp",
                      "security.ssl.internal.enabled": "true",
                      "security.ssl.internal.keystore": make_leaf(folder, ca),
                      "security.ssl.internal.truststore": ca_path},
    }
    ensure_ray(Configuration())
    best: Dict[str, float] = {}
    for _ in range(args.rounds):
        for name, extra in configs.items():
            r = run_flowray(args.records, args.keys, 2, "socket", 1000, extra)
            if r["count"] != args.records:
                raise RuntimeError(f"{name}: {r['count']} records, expected {args.records}")
            best[name] = max(best.get(name, 0.0), args.records / r["running_s"])
    print(f"\nkeyed running sum, p=2, {args.records:,} records, {args.keys:,} keys; best of "
          f"{args.rounds} rounds\n")
    print(f"{'channels':<12}{'records/s':>14}{'vs unix':>10}")
    rows = []
    for name in configs:
        ratio = best[name] / best["unix"]
        rows.append({"channels": name, "rps": best[name], "vs_unix": ratio})
        print(f"{name:<12}{best[name]:>14,.0f}{ratio:>9.2f}x")
    os.makedirs(os.path.dirname(os.path.join(ROOT, args.json)), exist_ok=True)
    with open(os.path.join(ROOT, args.json), "w") as f:
        json.dump({"records": args.records, "keys": args.keys, "rounds": args.rounds,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
