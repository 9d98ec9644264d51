"""What a task reports when it fails or declines a checkpoint: pure functions from an
exception (or a barrier handler's abort reason) to the job master's vocabulary.

>>> f = describe_failure("map (1/2)", ValueError("bad record"))
>>> (f.task, f.cause_type, f.message, f.user_code)
('map (1/2)', 'ValueError', 'bad record', False)
>>> class Reason: name = "SUBSUMED_BY_NEWER_BARRIER"
>>> decline_reason(Reason())
'SUBSUMED'
"""

from __future__ import annotations

import traceback
from typing import Any

from flowray.operators.base import UserFunctionError
from flowray.runtime.messages import TaskFailure
from flowray.runtime.network.blocking_partition import PartitionNotFoundError
from flowray.runtime.network.partitioners import KeySelectorError

__all__ = ["describe_failure", "decline_reason"]


def _trace(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def describe_failure(task: str, e: BaseException) -> TaskFailure:
    """The failure of task ``task`` (its display name) that ``e`` ended: user code (an
    operator's function or a key selector) or the runtime; a lost blocking partition names
    its channel (the job master recomputes its producer). ``recoverable`` is False only
    when the exception says so (``e.recoverable = False``)."""
    if isinstance(e, UserFunctionError):
        return TaskFailure(task, e.operator_name, e.cause_type, e.cause_message,
                           e.traceback_text, True, recoverable=getattr(e, "recoverable", True))
    if isinstance(e, KeySelectorError):
        cause = e.cause
        return TaskFailure(task, "key_by key selector", type(cause).__name__, str(cause),
                           _trace(cause), True,
                           recoverable=getattr(cause, "recoverable", True) is not False)
    return TaskFailure(
        task, None, type(e).__name__, str(e), _trace(e), False,
        failed_channel=(e.channel_id or None) if isinstance(e, PartitionNotFoundError) else None,
        recoverable=getattr(e, "recoverable", True) is not False,
    )


def decline_reason(reason: Any) -> str:
    """The coordinator's failure reason for a barrier handler's abort."""
    name = getattr(reason, "name", str(reason))
    return {
        "SUBSUMED_BY_NEWER_BARRIER": "SUBSUMED",
        "CANCELLATION_MARKER": "DECLINED_ON_CANCELLATION",
    }.get(name, "DECLINED")
