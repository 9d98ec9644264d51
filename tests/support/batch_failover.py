"""Issue 32's BATCH scenario, shared by the FileSink and Spark table sink tests.

numbers (p=2) --key_by (blocking)--> consumer (p=2) -> sink

Consumer 0 runs to its end and its sink commits. Then consumer 1, at its first record,
damages its blocking subpartition from producer 0 (truncates or deletes the file) and
fails once. The failover must run producer 0 again for consumer 1, and must not run
consumer 0 again: its sink committed already, and a second run would commit its records
a second time (under new part-file names, so nothing would notice).
"""

from __future__ import annotations

import glob
import json
import os
import urllib.request
from typing import Any, Optional

from flowray.common.files import safe_file_name
from flowray.datastream import MapFunction
from flowray.testing import wait_until

__all__ = ["ConsumerOneFailsAfterConsumerZeroCommitted", "DAMAGES"]

DAMAGES = ("truncate", "delete")


class ConsumerOneFailsAfterConsumerZeroCommitted(MapFunction):
    """Passes records through. Subtask 0 appends a line to ``<ledger>/closed-0`` each time
    it closes (after its sink committed). Subtask 1, the first time it gets a record,
    waits for that line, damages every blocking file from producer 0 to it under
    ``partitions`` (``damage``: truncate or delete) and fails."""

    def __init__(self, ledger: str, partitions: str, damage: str,
                 job_name: Optional[str] = None) -> None:
        """``job_name``: on Ray, consumer 1 also waits until the job master has seen
        consumer 0 finish (its REST API counts the task FINISHED): consumer 0's close
        comes before its result reaches the master, and a failure in between rightly
        runs consumer 0 again, which is not the case this scenario is about."""
        if damage not in DAMAGES:
            raise ValueError(damage)
        self.ledger, self.partitions, self.damage = ledger, partitions, damage
        self.job_name = job_name

    def open(self, runtime_context: Any) -> None:
        self.index = runtime_context.get_index_of_this_subtask()
        self.checked = False

    def map(self, value: Any) -> Any:
        if self.index == 1 and not self.checked:
            self.checked = True
            try:
                os.close(os.open(os.path.join(self.ledger, "failed-1"),
                                 os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return value
            wait_until(lambda: os.path.exists(self.closed_file(self.ledger)), 120,
                       "consumer 0 to commit and close")
            if self.job_name is not None:
                wait_until(lambda: _master_saw_a_consumer_finish(self.job_name), 120,
                           "the job master to see consumer 0 finish")
            damaged = self._damage()
            raise RuntimeError(f"consumer 1 fails after damaging {damaged}")
        return value

    def _damage(self) -> list:
        # every job folder under the partitions root; the blocking file of channel
        # "<edge>/0->1" (producer 0 to consumer 1)
        files = glob.glob(os.path.join(self.partitions, "*",
                                       "*" + safe_file_name("/0->1")))
        assert files, f"no blocking file from producer 0 to consumer 1 in {self.partitions}"
        for path in files:
            if self.damage == "delete":
                os.unlink(path)
            else:
                with open(path, "r+b") as f:
                    f.truncate(os.path.getsize(path) // 2)
        return [os.path.basename(p) for p in files]

    def close(self) -> None:
        if getattr(self, "index", None) == 0:
            with open(self.closed_file(self.ledger), "a") as f:
                f.write("closed\n")

    @staticmethod
    def closed_file(ledger: str) -> str:
        return os.path.join(ledger, "closed-0")

    @classmethod
    def closes_of_consumer_0(cls, ledger: str) -> int:
        with open(cls.closed_file(ledger)) as f:
            return len(f.read().splitlines())


def _master_saw_a_consumer_finish(job_name: str) -> bool:
    """Whether the job master of the running job ``job_name`` counts a subtask of the
    "consumer" task FINISHED, by its REST API (found through the job's record)."""
    from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_list

    for key in _internal_kv_list(b"jobs/", namespace=b"flowray"):
        record = json.loads(_internal_kv_get(key, namespace=b"flowray") or b"{}")
        if record.get("job_name") != job_name or record.get("status") in (
                "FINISHED", "FAILED", "CANCELED") or not record.get("web_url"):
            continue
        with urllib.request.urlopen(f"{record['web_url']}/jobs/{record['job_id']}",
                                    timeout=10) as response:
            job = json.load(response)
        return any("consumer" in v.get("name", "") and
                   (v.get("tasks", {}).get("FINISHED", 0) or
                    v.get("tasks", {}).get("finished", 0)) >= 1
                   for v in job.get("vertices", []))
    return False
