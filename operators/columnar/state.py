"""Running values of a columnar keyed aggregation, cached in numpy in front of the heap
backend's state table: :class:`RunningValueCache`.

Each key seen gets a slot; a batch reads and writes its keys' values with one numpy gather
and one scatter, and touches Python dicts only for keys it has not seen before (looked up in
the state table, where a restore put them). :meth:`RunningValueCache.flush` writes every
slot's value into the state table; the operator calls it at each checkpoint's synchronous
point, before the backend's snapshot, so checkpoints, restores and rescaling see exactly
the values the per-key state would hold.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from flowray.common.sentinels import MISSING
from flowray.state.key_types import PLAIN_KEY_TYPES, canonical_key

__all__ = ["RunningValueCache"]

_MISSING = MISSING


class RunningValueCache:
    """Slots of ``table``'s values (see the module doc). ``key_group_of(key)`` is the
    key's key group; ``check(key, key_group)`` raises when it is not this subtask's."""

    def __init__(self, table: Any, start: int, key_group_of: Callable[[Any], int],
                 check: Callable[[Any, int], None]) -> None:
        import numpy as np

        self._np = np
        self.table, self.start = table, start
        self.key_group_of, self.check = key_group_of, check
        self.slots: Dict[Any, int] = {}
        self.keys: List[Any] = []
        self.key_groups: List[int] = []
        self.values = np.zeros(1024, dtype=np.int64)
        self.present = np.zeros(1024, dtype=bool)
        #: slots changed since the last flush
        self.dirty = np.zeros(1024, dtype=bool)

    def lookup(self, keys: List[Any], integer: bool) -> Tuple[Any, Any, Any]:
        """(slots, values, present) of ``keys`` (numpy arrays); values are float64 once
        any batch was not ``integer``."""
        np = self._np
        if not integer and self.values.dtype != np.float64:
            self.values = self.values.astype(np.float64)
        slots = list(map(self.slots.get, keys))
        if None in slots:
            for j, s in enumerate(slots):
                if s is None:
                    slots[j] = self._add(keys[j])
        index = np.asarray(slots, dtype=np.int64)
        return index, self.values[index], self.present[index]

    def _add(self, key: Any) -> int:
        kg = self.key_group_of(key)
        self.check(key, kg)
        stored = key if type(key) in PLAIN_KEY_TYPES else canonical_key(key)
        slot = self.slots.get(stored)  # e.g. 1.0 after 1: one key
        if slot is None:
            slot = len(self.keys)
            if slot == len(self.values):
                self.values = self._np.concatenate((self.values,
                                                   self._np.zeros_like(self.values)))
                self.present = self._np.concatenate((self.present,
                                                    self._np.zeros_like(self.present)))
                self.dirty = self._np.concatenate((self.dirty,
                                                  self._np.zeros_like(self.dirty)))
            value = self.table.maps[kg - self.start].get(stored, _MISSING)
            if value is not _MISSING:
                if isinstance(value, float) and self.values.dtype != self._np.float64:
                    self.values = self.values.astype(self._np.float64)
                self.values[slot] = value
                self.present[slot] = True
            self.keys.append(stored)
            self.key_groups.append(kg)
            self.slots[stored] = slot
        self.slots[key] = slot
        return slot

    def store(self, index: Any, finals: Any) -> None:
        """Each key's value after the batch (``finals[j]`` of slot ``index[j]``)."""
        self.values[index] = finals
        self.present[index] = True
        self.dirty[index] = True

    def flush(self) -> None:
        """Every value changed since the last flush into the state table (Python ints or
        floats, as the row path's)."""
        np, maps, start = self._np, self.table.maps, self.start
        # a copy-on-write table: write only into its writable dicts (a pending snapshot
        # may still hold the live ones)
        writable = getattr(self.table, "writable", None)
        changed = np.flatnonzero(self.dirty[:len(self.keys)])
        keys, kgs = self.keys, self.key_groups
        for slot, value in zip(changed.tolist(), self.values[changed].tolist()):
            offset = kgs[slot] - start
            (maps[offset] if writable is None else writable(offset))[keys[slot]] = value
        self.dirty[changed] = False
