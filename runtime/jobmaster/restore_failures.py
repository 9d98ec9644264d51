"""What a failure while restoring a checkpoint means (pure policy).

A task that fails while loading its state fails again on every retry of the same
checkpoint, so the restart strategy alone (exponential delay: unlimited attempts) would
loop forever. :class:`RestoreFailurePolicy` decides instead:

- a damaged or missing checkpoint file (``CorruptedStateError``, ``FileNotFoundError``):
  fall back to the previous retained checkpoint of the job, unless the job's operators
  commit side effects when a checkpoint completes (two-phase-commit sinks, checkpoint
  listeners): the damaged checkpoint's transactions were committed, so replaying from an
  older one would commit records twice. Then, or with nothing older, the job fails with
  the error naming the file (it never starts over);
- a damaged savepoint the job started from: the job fails;
- any other error: restart as usual, but the same error restoring the same checkpoint in
  ``max_repeats`` deployment attempts in a row fails the job with that cause (tasks of one
  attempt failing alike count once).

>>> from flowray.runtime.messages import TaskFailure
>>> damaged = TaskFailure("sum (1/2)", None, "CorruptedStateError", "file x is damaged", "",
...                       False, restoring_checkpoint=7)
>>> policy = RestoreFailurePolicy()
>>> policy.decide(damaged, retained=[5, 7], own=True, commits_on_complete=False)
RestoreDecision(action=<RestoreAction.FALL_BACK: 'FALL_BACK'>, checkpoint_id=7, message='checkpoint 7 cannot be restored (CorruptedStateError: file x is damaged); falling back to checkpoint 5')
>>> policy.decide(damaged, retained=[5, 7], own=True, commits_on_complete=True).action
<RestoreAction.FAIL_JOB: 'FAIL_JOB'>
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from flowray.runtime.messages import TaskFailure

__all__ = ["RestoreAction", "RestoreDecision", "RestoreFailurePolicy", "DAMAGED_STATE_ERRORS"]

#: cause types that mean a checkpoint's files are damaged or gone
DAMAGED_STATE_ERRORS = ("CorruptedStateError", "FileNotFoundError")


class RestoreAction(enum.Enum):
    RESTART = "RESTART"      # as any failure: the restart strategy decides
    FALL_BACK = "FALL_BACK"  # drop the damaged checkpoint, restore the previous one
    FAIL_JOB = "FAIL_JOB"    # nothing can be restored safely


@dataclass(frozen=True)
class RestoreDecision:
    action: RestoreAction
    checkpoint_id: Optional[int] = None
    message: str = ""


class RestoreFailurePolicy:
    """See the module doc. ``max_repeats``: identical restore failures before giving up."""

    def __init__(self, max_repeats: int = 3) -> None:
        self.max_repeats = max_repeats
        self._attempts: Dict[Tuple[int, str, str], Set[int]] = {}

    def decide(self, failure: TaskFailure, retained: List[int], own: bool,
               commits_on_complete: bool, attempt: int = -1) -> RestoreDecision:
        """``failure`` happened while restoring ``failure.restoring_checkpoint`` in
        deployment ``attempt``; ``retained``: the job's own retained checkpoint ids,
        ascending; ``own``: the checkpoint is one of them (not a savepoint the job started
        from)."""
        cid = failure.restoring_checkpoint
        if cid is None:
            return RestoreDecision(RestoreAction.RESTART)
        cause = f"{failure.cause_type}: {failure.message}"
        if failure.cause_type in DAMAGED_STATE_ERRORS:
            if not own:
                return RestoreDecision(RestoreAction.FAIL_JOB, cid,
                                       f"the savepoint the job starts from cannot be "
                                       f"restored ({cause})")
            older = [c for c in retained if c < cid]
            if not older:
                return RestoreDecision(
                    RestoreAction.FAIL_JOB, cid,
                    f"checkpoint {cid} cannot be restored ({cause}) and no older retained "
                    "checkpoint is left to fall back to (execution.checkpointing.num-retained)")
            if commits_on_complete:
                return RestoreDecision(
                    RestoreAction.FAIL_JOB, cid,
                    f"checkpoint {cid} cannot be restored ({cause}); its transactions were "
                    f"committed, so falling back to checkpoint {older[-1]} would commit "
                    "records twice: repair the file or start the job from a savepoint")
            return RestoreDecision(RestoreAction.FALL_BACK, cid,
                                   f"checkpoint {cid} cannot be restored ({cause}); falling "
                                   f"back to checkpoint {older[-1]}")
        key = (cid, failure.cause_type, failure.message)
        attempts = self._attempts.get(key, set())
        self._attempts = {key: attempts}  # in a row: another error starts afresh
        attempts.add(attempt if attempt >= 0 else len(attempts))
        if len(attempts) >= self.max_repeats:
            return RestoreDecision(
                RestoreAction.FAIL_JOB, cid,
                f"restoring checkpoint {cid} failed {len(attempts)} times in a row with the "
                f"same error, giving up: {cause}")
        return RestoreDecision(RestoreAction.RESTART, cid)

    def restored(self) -> None:
        """A restore went through (a task failed later): count afresh."""
        self._attempts.clear()
