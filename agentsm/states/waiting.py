"""WaitingForHuman: ask for a decision on each call that needs approval."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import SUSPEND, RunContext, Suspend
from ..events import Event
from ..types import ApprovalRequest, State


class WaitingForHumanState:
    """Approve, reject (a failed entry the LLM sees) or modify each call; a batch that keeps
    any approved call goes on as a batch. With no decision available, the run suspends."""

    name: ClassVar[str] = State.WaitingForHuman
    emits: ClassVar[frozenset[str]] = frozenset(
        {Event.HumanApproved, Event.HumanModified, Event.HumanRejected, Event.HumanApprovedBatch}
    )

    async def handle(self, ctx: RunContext) -> str | Suspend:
        memory = ctx.memory
        waiting = [c for c in memory.planned_calls if c.id in memory.pending_approval]
        decisions = []
        for call in waiting:
            request = ApprovalRequest(run_id=ctx.run_id, step=memory.step, call=call)
            decision = await ctx.ask_human(request)
            if decision is None:
                return SUSPEND
            decisions.append(decision)
        if decisions:
            ctx.record(f.HumanDecided(decisions=tuple(decisions)))
        memory = ctx.memory
        if not memory.unfinished_calls():
            return Event.HumanRejected
        if memory.parallel:
            return Event.HumanApprovedBatch
        if any(d.verdict == "modified" for d in decisions):
            return Event.HumanModified
        return Event.HumanApproved

    def __repr__(self) -> str:
        return "WaitingForHumanState()"
