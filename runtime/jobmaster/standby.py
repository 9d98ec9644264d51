"""Warm standby task processes (:class:`StandbyPool`): idle task actors the job master
keeps started so that a failover deploys into a running process instead of waiting for a
new one (Ray starts a Python worker and imports flowray in it: most of a failover's time).

Each standby belongs to a *profile*: the Ray resources of the tasks it may host (a slot
sharing group's ``num_cpus``, ``memory``, GPUs...). Only profiles that reserve nothing get
standbys: an idle actor holding CPUs or GPUs could keep a task of the job from being
placed. A standby also has a thread count (Ray fixes ``max_concurrency`` when it creates
an actor); it hosts only tasks that need no more. Pure logic: the Ray shell creates the
actors, reports them ready (with their node) or lost, and asks :meth:`take` for one.

>>> pool = StandbyPool(size=1)
>>> pool.learn((), threads=9)
>>> [(w.profile, w.threads) for w in pool.wanted()]
[((), 9)]
>>> pool.add("job/standby/0", (), threads=9, handle="h0")
>>> pool.wanted()
[]
>>> pool.on_ready("job/standby/0", node_id="n1")
>>> pool.take((), threads=9, avoid={"n2"}).name
'job/standby/0'
>>> pool.take((), threads=9, avoid=set()) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

__all__ = ["Standby", "StandbyPool", "Wanted", "reserves_nothing", "resource_profile"]

#: a task's Ray resources, hashable (sorted ``(option, repr(value))`` pairs)
Profile = Tuple[Tuple[str, str], ...]


def resource_profile(resources: Mapping[str, Any]) -> Profile:
    """``resources`` (Ray actor options) as a pool key."""
    return tuple(sorted((k, repr(v)) for k, v in resources.items()))


def reserves_nothing(resources: Mapping[str, Any]) -> bool:
    """Whether actors with these options hold no resource while idle."""
    for key, value in resources.items():
        if key == "resources":
            if any(float(v) > 0 for v in (value or {}).values()):
                return False
        elif key in ("num_cpus", "num_gpus", "memory"):
            if float(value or 0) > 0:
                return False
        else:  # an option we do not know: keep no idle actor for it
            return False
    return True


@dataclass
class Standby:
    """One idle task actor: its name, profile, thread count, the shell's handle, and its
    node once it answered (None while it starts)."""

    name: str
    profile: Profile
    threads: int
    handle: Any
    node_id: Optional[str] = None


@dataclass(frozen=True)
class Wanted:
    """A standby the shell should start: its profile and thread count."""

    profile: Profile
    threads: int


class StandbyPool:
    """``size`` standbys per profile the job's tasks use (profiles learned from the
    deployments); 0 keeps none."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"standby task actors must not be negative, got {size}")
        self.size = size
        self._threads: Dict[Profile, int] = {}   # profile -> most threads a task needs
        self._idle: Dict[str, Standby] = {}

    def learn(self, profile: Profile, threads: int) -> None:
        """A task of ``profile`` needing ``threads`` was deployed."""
        self._threads[profile] = max(threads, self._threads.get(profile, 0))

    def wanted(self) -> List[Wanted]:
        """Standbys missing: one entry per actor to start (count those being started)."""
        out = []
        for profile, threads in sorted(self._threads.items()):
            have = sum(1 for s in self._idle.values()
                       if s.profile == profile and s.threads >= threads)
            out.extend(Wanted(profile, threads) for _ in range(max(0, self.size - have)))
        return out

    def add(self, name: str, profile: Profile, threads: int, handle: Any) -> None:
        """A standby is being started."""
        self._idle[name] = Standby(name, profile, threads, handle)

    def on_ready(self, name: str, node_id: str) -> None:
        """The standby's process runs, on ``node_id``."""
        s = self._idle.get(name)
        if s is not None:
            s.node_id = node_id

    def on_lost(self, name: str) -> Optional[Standby]:
        """The standby died (or could not start); it is dropped."""
        return self._idle.pop(name, None)

    def take(self, profile: Profile, threads: int, avoid: Set[str]) -> Optional[Standby]:
        """A standby to host a task (removed from the pool), or None. A running one
        first; one still starting only when no node is to be avoided (its node is not
        known yet). Never one on a node in ``avoid``."""
        fits = [s for s in self._idle.values() if s.profile == profile and s.threads >= threads]
        ready = [s for s in fits if s.node_id is not None and s.node_id not in avoid]
        starting = [s for s in fits if s.node_id is None] if not avoid else []
        for s in ready + starting:
            del self._idle[s.name]
            return s
        return None

    def drain(self) -> List[Standby]:
        """Every standby (the job ended: the shell stops them); the pool is empty after."""
        out, self._idle = list(self._idle.values()), {}
        return out

    def ready_names(self) -> List[str]:
        """The standbys whose process runs, by name."""
        return sorted(s.name for s in self._idle.values() if s.node_id is not None)

    def __len__(self) -> int:
        return len(self._idle)
