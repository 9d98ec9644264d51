"""Where new task actors may go (:class:`NodeBlocklist`): nodes Ray reports dead, and
nodes where this job's tasks were just lost, are avoided for a while, as Flink's
blocklist does. Ray marks a lost node dead only some seconds after its actors died; until
then it may still place new actors there, which never start. Pure logic on the caller's
clock.

>>> b = NodeBlocklist(hold_ms=30_000)
>>> b.block("n2", now_ms=0)
>>> sorted(b.nodes_to_avoid({"n1": True, "n2": True, "n3": False}, now_ms=1_000))
['n2', 'n3']
>>> sorted(b.nodes_to_avoid({"n1": True, "n2": True}, now_ms=31_000))
[]
"""

from __future__ import annotations

from typing import Dict, Set

__all__ = ["NodeBlocklist", "NODE_BLOCK_MS"]

#: how long a node where tasks were lost is avoided: longer than Ray takes to mark a
#: lost node dead (its health checks: about 15 s)
NODE_BLOCK_MS = 30_000


class NodeBlocklist:
    """Nodes to keep new tasks off. Never every live node: when all of them are
    blocked (a one-node cluster whose task was killed), only dead nodes are avoided."""

    def __init__(self, hold_ms: int = NODE_BLOCK_MS) -> None:
        self.hold_ms = hold_ms
        self._until: Dict[str, float] = {}

    def block(self, node_id: str, now_ms: float) -> None:
        if node_id:
            self._until[node_id] = now_ms + self.hold_ms

    def blocked(self, now_ms: float) -> Set[str]:
        self._until = {n: t for n, t in self._until.items() if t > now_ms}
        return set(self._until)

    def nodes_to_avoid(self, alive: Dict[str, bool], now_ms: float) -> Set[str]:
        """``alive``: every node Ray knows, and whether it reports it alive."""
        dead = {n for n, ok in alive.items() if not ok}
        live = {n for n, ok in alive.items() if ok}
        blocked = self.blocked(now_ms) & live
        if live and blocked >= live:
            return dead
        return dead | blocked
