"""Task actor resources (a slot sharing group's) checked against a Ray cluster's nodes.

A task actor that asks for more than any node has would wait for placement forever (and
fail over at the deploy timeout, again and again); :func:`unplaceable_tasks` finds such
operators before the job starts, so the submission fails naming them.

>>> print(*unplaceable_tasks({"heavy": {"num_cpus": 4.0}}, [{"CPU": 2.0, "memory": 8e9}]))
operator 'heavy' asks Ray for CPU=4 per task actor; no node has that much (the largest has CPU=2)
>>> unplaceable_tasks({"gpu": {"num_gpus": 1.0}}, [{"CPU": 2.0, "GPU": 1.0}])
[]
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

__all__ = ["ray_resource_demand", "unplaceable_tasks"]

_RAY_NAMES = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}


def ray_resource_demand(options: Mapping[str, Any]) -> Dict[str, float]:
    """Ray actor options (``num_cpus``, ``num_gpus``, ``memory``, ``resources``) as the
    resource names a node reports (``CPU``, ``GPU``, ``memory``, custom names)."""
    demand = {_RAY_NAMES[k]: float(v) for k, v in options.items() if k in _RAY_NAMES}
    demand.update({k: float(v) for k, v in (options.get("resources") or {}).items()})
    return {k: v for k, v in demand.items() if v > 0}


def unplaceable_tasks(resources_by_operator: Mapping[str, Mapping[str, Any]],
                      node_resources: Sequence[Mapping[str, float]]) -> List[str]:
    """One message per operator whose task actor fits on none of ``node_resources``
    (each node's total resources)."""
    problems = []
    for operator, options in resources_by_operator.items():
        demand = ray_resource_demand(options)
        if not demand or any(all(node.get(k, 0.0) >= v for k, v in demand.items())
                             for node in node_resources):
            continue
        wanted = ", ".join(f"{k}={v:g}" for k, v in demand.items())
        largest = {k: max((node.get(k, 0.0) for node in node_resources), default=0.0)
                   for k in demand}
        have = ", ".join(f"{k}={v:g}" for k, v in largest.items())
        problems.append(f"operator {operator!r} asks Ray for {wanted} per task actor; no "
                        f"node has that much (the largest has {have})")
    return problems
