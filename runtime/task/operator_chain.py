"""Wiring one task's chain of operators (Flink's ``OperatorChain``): each operator's
output goes to the operators chained after it (direct calls) and to the record writers of
its network edges, side outputs likewise by tag.

The chain is wired tail-first, so every operator's output exists when it is set up.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from flowray.operators.base import (
    BroadcastingOutput,
    ChainedOutput,
    OperatorContext,
    Output,
    StreamOperator,
)
from flowray.runtime.graph.job_graph import TaskPlan
from flowray.runtime.network.partitioners import RecordWriter
from flowray.runtime.task.environment import _WriterOutput

__all__ = ["wire_operator_chain", "one_output"]


def one_output(outputs: List[Output]) -> Output:
    """One output as it is; several behind a :class:`BroadcastingOutput`."""
    return outputs[0] if len(outputs) == 1 else BroadcastingOutput(outputs)


def wire_operator_chain(plan: TaskPlan, ctx: OperatorContext,
                        record_writers: Dict[str, RecordWriter], clock: Any,
                        local_feedback: Optional[Output] = None
                        ) -> Tuple[List[StreamOperator], StreamOperator]:
    """Set up every operator of ``plan`` with its outputs; (operators head first, head).
    Each record writer learns the name of the operator producing into it. A loop's
    feedback produced in the chain of its own head goes to ``local_feedback``."""
    order = plan.chain_order()
    for node_id in reversed(order):
        op = plan.operators[node_id]
        outputs: List[Output] = [
            ChainedOutput(plan.operators[c]) for c in plan.chained.get(node_id, [])]
        for eid in plan.network_outputs.get(node_id, []):
            outputs.append(_WriterOutput(record_writers[eid], clock))
            record_writers[eid].producer = op.name
        side: Dict[str, List[Output]] = {}
        for tag, c in plan.side_chained.get(node_id, []):
            side.setdefault(tag, []).append(ChainedOutput(plan.operators[c]))
        for tag, eid in plan.side_network_outputs.get(node_id, []):
            side.setdefault(tag, []).append(_WriterOutput(record_writers[eid], clock))
            record_writers[eid].producer = op.name
        for tag in plan.local_feedback.get(node_id, []):
            if local_feedback is None:
                raise RuntimeError(f"{op.name!r} feeds a loop back, but its task is not the "
                                   "loop's head")
            (outputs if tag is None else side.setdefault(tag, [])).append(local_feedback)
        op.setup(ctx, one_output(outputs), {tag: one_output(o) for tag, o in side.items()})
    return [plan.operators[n] for n in order], plan.operators[plan.head]
